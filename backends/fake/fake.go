package fake

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"hoist/agents/api"
	"hoist/backends"
	"hoist/backends/internal/agentauth"
	"hoist/backends/offers"
)

// DefaultName is the backend's name when Config.Name is empty.
const DefaultName = "fake"

// Config configures a Backend.
type Config struct {
	// Name is the backend's name (DefaultName when empty).
	Name string
	// Offers are what the backend can provision; their Backend is set to
	// Name. Empty means DefaultOffers.
	Offers []offers.Offer
	// Capacity is how many instances may exist at once (0: no limit);
	// Create beyond it fails with backends.ErrNoCapacity.
	Capacity int
	// ProvisionFor is how long (on Now) an instance stays provisioning
	// after Create before Describe reports it running (0: running at once).
	ProvisionFor time.Duration
	// VolumeCreateFor is how long (on Now) a created volume stays
	// "creating" before it is available (0: available at once).
	VolumeCreateFor time.Duration
	// Runtime is the driver's runtime (Traits.Runtime): RuntimeShim when
	// empty; RuntimeRunner makes the fake stand for a backend whose
	// containers run the runner and whose shim API the server answers
	// itself (Kubernetes), behind the same Connector.
	Runtime string
	// Isolated is Traits.Isolated: the driver's jobs cannot reach each
	// other (RunPod and Vast.ai pods).
	Isolated bool
	// VolumeClaims makes AttachVolume answer, as the Kubernetes backend
	// does, with a claim (the volume's provider id) that the task's pod
	// mounts, instead of a device path.
	VolumeClaims bool
	// Service answers HTTP on every port a task publishes while its job
	// runs (nil: 200 "ok" to everything).
	Service http.Handler
	// Logger receives the agents' log; nil discards it.
	Logger *slog.Logger
	// Metrics is what the runners' GET /api/v1/metrics answers (with Time
	// set from Now); nil answers a sample of zeros.
	Metrics func() api.Metrics
	// Now is the clock of provisioning delays; nil means time.Now.
	Now func() time.Time
	// NoInternalIPs makes instances report no internal IP, as a driver
	// that does not know its VMs' private addresses; otherwise instance n
	// (from 1, in creation order) reports 10.0.<n/256>.<n%256>.
	NoInternalIPs bool
}

// DefaultOffers are a small CPU offer and a one-GPU offer in region "loop".
func DefaultOffers() []offers.Offer {
	return []offers.Offer{
		{Instance: "fake-cpu", Region: "loop", CPUs: 4, MemoryGB: 16, DiskGB: 100, Price: 0.10, Availability: offers.AvailabilityAvailable},
		{Instance: "fake-gpu", Region: "loop", CPUs: 16, MemoryGB: 64, DiskGB: 200, GPUCount: 1, GPUName: "A10", GPUMemoryGB: 24, GPUVendor: "nvidia", Price: 1.00, Availability: offers.AvailabilityAvailable},
	}
}

// Backend is the fake driver. It is safe for concurrent use; Close it (or
// Terminate every instance) to stop the agents' servers.
type Backend struct {
	cfg    Config
	offers []offers.Offer

	// tasks counts the tasks created, for the addresses of a runner
	// runtime's containers.
	tasks atomic.Int64

	mu           sync.Mutex
	insts        map[string]*instance
	seq          int
	terminateErr map[string]error
	createErr    error
	listErr      error
	taskErr      map[string]taskError // by image
	noCapacity   map[string]bool      // instance types whose Create has no capacity
	neverBoots   map[string]bool      // instance types whose instances stay provisioning
	bootErr      map[string]error     // instance types whose instances fail to boot
	interrupted  map[string]*instance // reclaimed or lost instances, until terminated
	lost         map[string]bool      // of those, the ones not reclaimed as spot
	groups       map[string]backends.PlacementGroup
	attempts     []backends.InstanceSpec
	vols         map[string]*volume  // by provider id
	gateways     map[string]*Gateway // by instance id (StartGateway)
}

var (
	_ backends.Backend          = (*Backend)(nil)
	_ backends.Connector        = (*Backend)(nil)
	_ backends.PlacementBackend = (*Backend)(nil)
)

// New returns a fake backend for cfg.
func New(cfg Config) *Backend {
	if cfg.Name == "" {
		cfg.Name = DefaultName
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Runtime == "" {
		cfg.Runtime = backends.RuntimeShim
	}
	if cfg.Service == nil {
		cfg.Service = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	}
	all := cfg.Offers
	if len(all) == 0 {
		all = DefaultOffers()
	}
	all = slices.Clone(all)
	for i := range all {
		all[i].Backend = cfg.Name
	}
	return &Backend{cfg: cfg, offers: all, insts: map[string]*instance{},
		terminateErr: map[string]error{}, taskErr: map[string]taskError{},
		noCapacity: map[string]bool{}, neverBoots: map[string]bool{}, bootErr: map[string]error{},
		interrupted: map[string]*instance{}, lost: map[string]bool{}, groups: map[string]backends.PlacementGroup{}}
}

// Name returns the configured name.
func (b *Backend) Name() string { return b.cfg.Name }

// Traits implements backends.Backend: the fake provisions its instances from
// offers, like a cloud, and runs jobs through a shim (Config.Runtime).
func (b *Backend) Traits() backends.Traits {
	return backends.Traits{Runtime: b.cfg.Runtime, Isolated: b.cfg.Isolated}
}

// Offers returns the configured offers that match q.
func (b *Backend) Offers(_ context.Context, q offers.Query) ([]offers.Offer, error) {
	return offers.Filter(slices.Clone(b.offers), q), nil
}

// Create starts an instance with its own shim. It is idempotent on spec.ID
// and fails with backends.ErrNoCapacity when Capacity instances exist or
// the offer's instance type has none (SetNoCapacity). Called again for an
// instance whose type fails to boot (SetBootFailure), it deletes the
// instance and returns that error, as the cloud engine does after its boot
// timeout; an interrupted instance is reported terminated.
func (b *Backend) Create(_ context.Context, spec backends.InstanceSpec) (backends.Instance, error) {
	if spec.ID == "" {
		return backends.Instance{}, backends.Stalled(errors.New("fake backend: instance id is required"))
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if in, ok := b.insts[spec.ID]; ok {
		if err := b.bootErr[in.offer.Instance]; err != nil {
			delete(b.insts, spec.ID)
			go in.close()
			return backends.Instance{}, err
		}
		return b.describeLocked(in), nil
	}
	if in, ok := b.interrupted[spec.ID]; ok {
		return b.describeLocked(in), nil
	}
	b.attempts = append(b.attempts, spec)
	if b.createErr != nil {
		return backends.Instance{}, b.createErr
	}
	if b.cfg.Capacity > 0 && len(b.insts) >= b.cfg.Capacity {
		return backends.Instance{}, backends.Transient(fmt.Errorf("fake backend: %d instances exist: %w", len(b.insts), backends.ErrNoCapacity))
	}
	offer := spec.Offer
	if offer.Instance == "" {
		offer = b.offers[0]
	}
	offer.Backend = b.cfg.Name
	if b.noCapacity[offer.Instance] {
		return backends.Instance{}, backends.Transient(fmt.Errorf("fake backend: no %s capacity in %s: %w", offer.Instance, offer.Region, backends.ErrNoCapacity))
	}
	if g := spec.PlacementGroup; g != "" {
		if pg, ok := b.groups[g]; !ok || pg.Region != offer.Region {
			return backends.Instance{}, backends.Stalled(fmt.Errorf("fake backend: placement group %q is unknown in region %s", g, offer.Region))
		}
	}
	b.seq++
	in, err := startInstance(b, spec, offer, fmt.Sprintf("fake-%d", b.seq))
	if err != nil {
		return backends.Instance{}, fmt.Errorf("fake backend: %w", err)
	}
	in.spec = spec
	if !b.cfg.NoInternalIPs {
		in.internalIP = fmt.Sprintf("10.0.%d.%d", b.seq/256, b.seq%256)
	}
	b.insts[spec.ID] = in
	return b.describeLocked(in), nil
}

// Describe observes an instance; ErrNotFound when it does not exist.
func (b *Backend) Describe(_ context.Context, id string) (backends.Instance, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	in, ok := b.insts[id]
	if !ok {
		in, ok = b.interrupted[id]
	}
	if !ok {
		return backends.Instance{}, fmt.Errorf("fake instance %s: %w", id, backends.ErrNotFound)
	}
	return b.describeLocked(in), nil
}

func (b *Backend) describeLocked(in *instance) backends.Instance {
	out := backends.Instance{
		ID: in.id, Backend: b.cfg.Name, ProviderID: in.providerID, Region: in.offer.Region,
		Hostname: "127.0.0.1", InternalIP: in.internalIP, Status: backends.StatusRunning, Runtime: b.cfg.Runtime,
		Offer: in.offer, Price: in.offer.Price, Arch: "amd64", Tags: backends.CopyTags(in.tags), CreatedAt: in.created,
	}
	if b.cfg.Now().Before(in.created.Add(b.cfg.ProvisionFor)) || b.neverBoots[in.offer.Instance] {
		out.Status = backends.StatusProvisioning
	}
	if _, ok := b.interrupted[in.id]; ok {
		out.Status, out.Interrupted, out.Message = backends.StatusTerminated, true, "fake instance "+in.id+" was reclaimed (spot interruption)"
		if b.lost[in.id] {
			out.Interrupted, out.Message = false, "fake instance "+in.id+" is gone"
		}
	}
	if in.unreachable.Load() {
		out.Unreachable, out.Message = true, "fake instance "+in.id+" does not answer"
	}
	return out
}

// Terminate removes an instance and stops its agents; gone is success. An
// error set with SetTerminateError is returned instead while it is set.
func (b *Backend) Terminate(_ context.Context, id string) error {
	b.mu.Lock()
	if err := b.terminateErr[id]; err != nil {
		b.mu.Unlock()
		return err
	}
	in, ok := b.insts[id]
	delete(b.insts, id)
	delete(b.interrupted, id)
	delete(b.lost, id)
	gw, gwOK := b.gateways[id]
	delete(b.gateways, id)
	b.mu.Unlock()
	if ok {
		in.close()
	}
	if gwOK {
		gw.stop()
	}
	return nil
}

// List returns the instances carrying all of tags.
func (b *Backend) List(_ context.Context, tags map[string]string) ([]backends.Instance, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.listErr != nil {
		return nil, b.listErr
	}
	var out []backends.Instance
	for _, in := range b.insts {
		if backends.MatchTags(in.tags, tags) {
			out = append(out, b.describeLocked(in))
		}
	}
	slices.SortFunc(out, func(x, y backends.Instance) int { return strings.Compare(x.ID, y.ID) })
	return out, nil
}

// Connect returns a connection to the instance's shim: an HTTP client that
// adds the shim's and the runners' tokens and fails with
// backends.ErrUnreachable while the instance is unreachable.
func (b *Backend) Connect(_ context.Context, inst backends.Instance) (backends.Conn, error) {
	b.mu.Lock()
	in, ok := b.insts[inst.ID]
	b.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("fake instance %s: %w", inst.ID, backends.ErrNotFound)
	}
	if in.unreachable.Load() {
		return nil, backends.Transient(fmt.Errorf("fake instance %s: %w", inst.ID, backends.ErrUnreachable))
	}
	base := &gate{in: in, base: &http.Transport{DialContext: api.UnixDial(nil), DisableKeepAlives: true}}
	hc := &http.Client{Transport: &agentauth.Transport{Base: base, ShimURL: in.shimURL, Token: func() string { return in.token }}}
	return &conn{hc: hc, url: in.shimURL, base: base}, nil
}

// Close terminates every instance.
func (b *Backend) Close() error {
	b.mu.Lock()
	insts, gws := b.insts, b.gateways
	b.insts, b.gateways = map[string]*instance{}, nil
	b.mu.Unlock()
	for _, in := range insts {
		in.close()
	}
	for _, g := range gws {
		g.stop()
	}
	return nil
}

// SetCreateError makes every Create and CreateVolume of a new id fail with
// err (nil: succeed).
func (b *Backend) SetCreateError(err error) {
	b.mu.Lock()
	b.createErr = err
	b.mu.Unlock()
}

// SetListError makes every List, ListVolumes and ListPlacementGroups fail
// with err (nil: succeed), as a provider that cannot be asked.
func (b *Backend) SetListError(err error) {
	b.mu.Lock()
	b.listErr = err
	b.mu.Unlock()
}

// SetNoCapacity makes every Create of a new instance from offers of
// instance type name fail with backends.ErrNoCapacity (none true), or
// succeed again.
func (b *Backend) SetNoCapacity(name string, none bool) {
	b.mu.Lock()
	if none {
		b.noCapacity[name] = true
	} else {
		delete(b.noCapacity, name)
	}
	b.mu.Unlock()
}

// SetNeverBoots makes the instances of instance type name stay
// provisioning (never true) however long they wait, or boot again.
func (b *Backend) SetNeverBoots(name string, never bool) {
	b.mu.Lock()
	if never {
		b.neverBoots[name] = true
	} else {
		delete(b.neverBoots, name)
	}
	b.mu.Unlock()
}

// SetBootFailure makes the instances of instance type name fail to boot:
// the next Create of such an instance deletes it and returns err (a cloud
// engine's "did not boot in time", wrapping backends.ErrNoCapacity); nil
// lets them boot.
func (b *Backend) SetBootFailure(name string, err error) {
	b.mu.Lock()
	if err != nil {
		b.bootErr[name] = err
	} else {
		delete(b.bootErr, name)
	}
	b.mu.Unlock()
}

// Interrupt reclaims an instance as a provider reclaims a spot instance:
// its agents stop, and Describe (and Create of its id) report it
// terminated and interrupted until it is terminated. It reports whether
// the instance existed.
func (b *Backend) Interrupt(id string) bool { return b.takeAway(id, false) }

// Lose makes the provider lose an instance (deleted behind the caller's
// back): like Interrupt, but Describe reports it terminated without
// Interrupted. It reports whether the instance existed.
func (b *Backend) Lose(id string) bool { return b.takeAway(id, true) }

func (b *Backend) takeAway(id string, lost bool) bool {
	b.mu.Lock()
	in, ok := b.insts[id]
	if ok {
		delete(b.insts, id)
		b.interrupted[id] = in
		b.lost[id] = lost
	}
	b.mu.Unlock()
	if ok {
		in.close()
	}
	return ok
}

// Attempts returns the spec of every Create of a new instance id, in order,
// including those that failed: the offers the caller tried.
func (b *Backend) Attempts() []backends.InstanceSpec {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.attempts)
}

// Spec returns the spec an existing instance was created with.
func (b *Backend) Spec(id string) (backends.InstanceSpec, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	in, ok := b.insts[id]
	if !ok {
		return backends.InstanceSpec{}, false
	}
	return in.spec, true
}

// CreatePlacementGroup implements backends.PlacementBackend: it records a
// group, idempotent on spec.ID.
func (b *Backend) CreatePlacementGroup(_ context.Context, spec backends.PlacementGroupSpec) (backends.PlacementGroup, error) {
	if spec.ID == "" || spec.Region == "" {
		return backends.PlacementGroup{}, backends.Stalled(errors.New("fake backend: placement group id and region are required"))
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if g, ok := b.groups[spec.ID]; ok {
		return g, nil
	}
	b.seq++
	tags := backends.CopyTags(spec.Tags)
	if tags == nil {
		tags = map[string]string{}
	}
	tags[backends.TagPlacementGroup] = spec.ID
	g := backends.PlacementGroup{ID: spec.ID, ProviderID: fmt.Sprintf("fake-pg-%d", b.seq), Region: spec.Region, Tags: tags, CreatedAt: b.cfg.Now()}
	b.groups[spec.ID] = g
	return g, nil
}

// ListPlacementGroups implements backends.PlacementBackend: the groups
// carrying all of tags (the leak audit).
func (b *Backend) ListPlacementGroups(_ context.Context, tags map[string]string) ([]backends.PlacementGroup, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.listErr != nil {
		return nil, b.listErr
	}
	var out []backends.PlacementGroup
	for _, g := range b.groups {
		if backends.MatchTags(g.Tags, tags) {
			g.Tags = backends.CopyTags(g.Tags)
			out = append(out, g)
		}
	}
	slices.SortFunc(out, func(x, y backends.PlacementGroup) int { return strings.Compare(x.ID, y.ID) })
	return out, nil
}

// LeakPlacementGroup makes a placement group as a create whose answer
// hoist lost leaves it: at the provider, carrying tags and the
// backends.TagPlacementGroup tag id, created now.
func (b *Backend) LeakPlacementGroup(id, region string, tags map[string]string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.seq++
	t := backends.CopyTags(tags)
	if t == nil {
		t = map[string]string{}
	}
	t[backends.TagPlacementGroup] = id
	b.groups[id] = backends.PlacementGroup{ID: id, ProviderID: fmt.Sprintf("fake-pg-%d", b.seq), Region: region, Tags: t, CreatedAt: b.cfg.Now()}
}

// DeletePlacementGroup implements backends.PlacementBackend: gone is
// success; a group an instance is still in gives a wait
// (backends.ErrNotYetTerminated), as a provider refuses to delete it.
func (b *Backend) DeletePlacementGroup(_ context.Context, id string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, in := range b.insts {
		if in.spec.PlacementGroup == id {
			return backends.Wait(fmt.Errorf("fake placement group %s: instance %s is in it: %w", id, in.id, backends.ErrNotYetTerminated), time.Second)
		}
	}
	delete(b.groups, id)
	return nil
}

// PlacementGroups returns the existing placement groups, by id.
func (b *Backend) PlacementGroups() []backends.PlacementGroup {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]backends.PlacementGroup, 0, len(b.groups))
	for _, g := range b.groups {
		out = append(out, g)
	}
	slices.SortFunc(out, func(x, y backends.PlacementGroup) int { return strings.Compare(x.ID, y.ID) })
	return out
}

// SetPullError makes every task of image end at once as image_pull_error
// with message, as a shim whose registry refuses the image reports it
// ("" lets the image pull again).
func (b *Backend) SetPullError(image, message string) {
	b.SetTaskError(image, api.ReasonImagePullError, message)
}

// SetTaskError makes every task of image end before its container starts,
// with the termination reason and message a shim gives (for example
// api.ReasonNoCapacity, as the Kubernetes backend's pod shim reports a pod
// left unschedulable); "" lets the image's tasks start again.
func (b *Backend) SetTaskError(image, reason, message string) {
	b.mu.Lock()
	if message == "" {
		delete(b.taskErr, image)
	} else {
		b.taskErr[image] = taskError{reason, message}
	}
	b.mu.Unlock()
}

// taskError is how the tasks of an image end (SetTaskError).
type taskError struct{ reason, message string }

func (b *Backend) taskError(image string) (taskError, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.taskErr[image]
	return e, ok
}

// SetTerminateError makes Terminate(id) fail with err until it is set to nil.
func (b *Backend) SetTerminateError(id string, err error) {
	b.mu.Lock()
	if err == nil {
		delete(b.terminateErr, id)
	} else {
		b.terminateErr[id] = err
	}
	b.mu.Unlock()
}

// SetUnreachable makes the instance unreachable (Describe reports it, open
// connections to its agents drop and every new request through a Conn fails
// with backends.ErrUnreachable) or reachable again. It reports whether the
// instance exists.
func (b *Backend) SetUnreachable(id string, unreachable bool) bool {
	in := b.instance(id)
	if in != nil {
		in.unreachable.Store(unreachable)
		if unreachable {
			in.dropConnections()
		}
	}
	return in != nil
}

// SetRunnersSilent makes the runners of the instance's tasks hold every
// request until the caller gives up (silent true), or answer again. The
// shim keeps answering. It reports whether the instance exists.
func (b *Backend) SetRunnersSilent(id string, silent bool) bool {
	in := b.instance(id)
	if in != nil {
		in.silent.Store(silent)
	}
	return in != nil
}

// Instances returns the ids of the existing instances, sorted.
func (b *Backend) Instances() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]string, 0, len(b.insts))
	for id := range b.insts {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// LoseTask ends a task as if its container were removed from outside: the
// runner vanishes without recording an end, and the shim reports the task
// terminated as container_lost with exit code 137. It reports whether the
// task existed.
func (b *Backend) LoseTask(instance, task string) bool {
	in := b.instance(instance)
	if in == nil {
		return false
	}
	in.mu.Lock()
	t, ok := in.tasks[task]
	if ok && !t.info.Terminated() {
		code := 137
		t.info.Status, t.info.ExitCode, t.info.Updated = api.TaskTerminated, &code, b.cfg.Now()
		t.info.TerminationReason, t.info.TerminationMessage = api.ReasonContainerLost, "the container is gone"
		in.notifyLocked()
	}
	in.mu.Unlock()
	if ok {
		t.runner.vanish()
	}
	return ok
}

// Tasks returns the ids of the tasks the shim of instance keeps, sorted.
func (b *Backend) Tasks(instance string) []string {
	in := b.instance(instance)
	if in == nil {
		return nil
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	out := make([]string, 0, len(in.tasks))
	for id := range in.tasks {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// TaskSpec returns the spec the shim of instance was given for task, and
// whether it keeps that task.
func (b *Backend) TaskSpec(instance, task string) (api.TaskSpec, bool) {
	in := b.instance(instance)
	if in == nil {
		return api.TaskSpec{}, false
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	t, ok := in.tasks[task]
	if !ok {
		return api.TaskSpec{}, false
	}
	return t.spec, true
}

// Acked returns the last log sequence number the server acknowledged to the
// runner of task (job) id on instance, and whether that task exists.
func (b *Backend) Acked(instance, task string) (int64, bool) {
	in := b.instance(instance)
	if in == nil {
		return 0, false
	}
	r := in.runner(task)
	if r == nil {
		return 0, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.firstSeq - 1, true
}

// JobSpec returns the job spec the runner of task (job) id on instance
// was submitted, and whether it was.
func (b *Backend) JobSpec(instance, task string) (api.JobSpec, bool) {
	in := b.instance(instance)
	if in == nil {
		return api.JobSpec{}, false
	}
	r := in.runner(task)
	if r == nil {
		return api.JobSpec{}, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.spec == nil {
		return api.JobSpec{}, false
	}
	return *r.spec, true
}

// SetSSHConnections sets the number of SSH connections the runner of task
// (job) id on instance reports open; when it drops to zero, the runner is
// idle from now (Config.Now). It reports whether the task exists.
func (b *Backend) SetSSHConnections(instance, task string, n int) bool {
	in := b.instance(instance)
	if in == nil {
		return false
	}
	r := in.runner(task)
	if r == nil {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if n == 0 && r.sshConns > 0 {
		r.idleSince = b.cfg.Now()
	}
	r.sshConns = n
	return true
}

func (b *Backend) instance(id string) *instance {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.insts[id]
}

// conn is a backends.Conn to one fake instance.
type conn struct {
	hc   *http.Client
	url  string
	base *gate
}

func (c *conn) HTTPClient() *http.Client { return c.hc }
func (c *conn) ShimURL() string          { return c.url }
func (c *conn) Close() error {
	c.base.closed.Store(true)
	c.base.base.CloseIdleConnections()
	return nil
}

// gate sends requests on loopback unless the instance is unreachable or
// the connection closed.
type gate struct {
	in     *instance
	base   *http.Transport
	closed atomic.Bool
}

func (g *gate) RoundTrip(req *http.Request) (*http.Response, error) {
	if g.closed.Load() {
		return nil, errors.New("fake connection closed")
	}
	if g.in.unreachable.Load() || g.in.gone.Load() {
		return nil, fmt.Errorf("fake instance %s: %w", g.in.id, backends.ErrUnreachable)
	}
	return g.base.RoundTrip(req)
}
