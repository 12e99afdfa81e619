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
	// Service answers HTTP on every port a task publishes while its job
	// runs (nil: 200 "ok" to everything).
	Service http.Handler
	// Logger receives the agents' log; nil discards it.
	Logger *slog.Logger
	// Now is the clock of provisioning delays; nil means time.Now.
	Now func() time.Time
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

	mu           sync.Mutex
	insts        map[string]*instance
	seq          int
	terminateErr map[string]error
	createErr    error
	pullErr      map[string]string
}

var (
	_ backends.Backend   = (*Backend)(nil)
	_ backends.Connector = (*Backend)(nil)
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
		terminateErr: map[string]error{}, pullErr: map[string]string{}}
}

// Name returns the configured name.
func (b *Backend) Name() string { return b.cfg.Name }

// Traits implements backends.Backend: the fake provisions its instances from
// offers, like a cloud, and runs jobs through a shim.
func (b *Backend) Traits() backends.Traits {
	return backends.Traits{Runtime: backends.RuntimeShim}
}

// Offers returns the configured offers that match q.
func (b *Backend) Offers(_ context.Context, q offers.Query) ([]offers.Offer, error) {
	return offers.Filter(slices.Clone(b.offers), q), nil
}

// Create starts an instance with its own shim. It is idempotent on spec.ID
// and fails with backends.ErrNoCapacity when Capacity instances exist.
func (b *Backend) Create(_ context.Context, spec backends.InstanceSpec) (backends.Instance, error) {
	if spec.ID == "" {
		return backends.Instance{}, backends.Stalled(errors.New("fake backend: instance id is required"))
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if in, ok := b.insts[spec.ID]; ok {
		return b.describeLocked(in), nil
	}
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
	b.seq++
	in, err := startInstance(b, spec, offer, fmt.Sprintf("fake-%d", b.seq))
	if err != nil {
		return backends.Instance{}, fmt.Errorf("fake backend: %w", err)
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
		return backends.Instance{}, fmt.Errorf("fake instance %s: %w", id, backends.ErrNotFound)
	}
	return b.describeLocked(in), nil
}

func (b *Backend) describeLocked(in *instance) backends.Instance {
	out := backends.Instance{
		ID: in.id, Backend: b.cfg.Name, ProviderID: in.providerID, Region: in.offer.Region,
		Hostname: "127.0.0.1", Status: backends.StatusRunning, Runtime: backends.RuntimeShim,
		Offer: in.offer, Price: in.offer.Price, Arch: "amd64", Tags: backends.CopyTags(in.tags), CreatedAt: in.created,
	}
	if b.cfg.Now().Before(in.created.Add(b.cfg.ProvisionFor)) {
		out.Status = backends.StatusProvisioning
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
	b.mu.Unlock()
	if ok {
		in.close()
	}
	return nil
}

// List returns the instances carrying all of tags.
func (b *Backend) List(_ context.Context, tags map[string]string) ([]backends.Instance, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
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
	insts := b.insts
	b.insts = map[string]*instance{}
	b.mu.Unlock()
	for _, in := range insts {
		in.close()
	}
	return nil
}

// SetCreateError makes every Create of a new id fail with err (nil: succeed).
func (b *Backend) SetCreateError(err error) {
	b.mu.Lock()
	b.createErr = err
	b.mu.Unlock()
}

// SetPullError makes every task of image end at once as image_pull_error
// with message, as a shim whose registry refuses the image reports it
// ("" lets the image pull again).
func (b *Backend) SetPullError(image, message string) {
	b.mu.Lock()
	if message == "" {
		delete(b.pullErr, image)
	} else {
		b.pullErr[image] = message
	}
	b.mu.Unlock()
}

func (b *Backend) pullError(image string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.pullErr[image]
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
