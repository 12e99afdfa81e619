package vm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"hoist/backends"
	"hoist/backends/offers"
	"hoist/backends/sshfleet"
)

// Config configures the engine for one backend entry. A driver's Factory
// fills it from its decoded options and returns New(cfg).
type Config struct {
	// Name is the backend entry's name (backends.Config.Name).
	Name string
	// Type is the catalog's backend name of the provider (aws, gcp,
	// azure): offers are the catalog rows of this backend.
	Type string
	// Provider launches and observes the VMs.
	Provider Provider
	// Regions are the configured regions; offers are narrowed to them (a
	// zone offer such as us-central1-a matches region us-central1). Empty
	// means every region of the catalog.
	Regions []string
	// User is the login user of the image, the user the instance's key is
	// authorized for.
	User string
	// Deps are the factory's dependencies: Records keeps the instance
	// records (with their private keys), Catalog gives the offers, Agents
	// the binaries to deploy, Logger and Now.
	Deps backends.Deps
	// BootTimeout bounds how long a launched VM may take to run and answer
	// over SSH before it is deleted and reported as no capacity; 0 means
	// DefaultBootTimeout.
	BootTimeout time.Duration
	// MaxNameLen is the provider's maximum resource name length (63 for
	// GCP, 64 for Azure VMs, 255 for EC2 Name tags); 0 means
	// DefaultMaxNameLen.
	MaxNameLen int
}

// DefaultBootTimeout is the boot timeout when Config.BootTimeout is 0.
const DefaultBootTimeout = 10 * time.Minute

// drainTimeout bounds the drain of a VM's shim before it is deleted: a VM
// that does not answer is deleted with whatever runs on it.
const drainTimeout = 60 * time.Second

// terminatePoll is how long Terminate asks its caller to wait while a VM is
// going away.
const terminatePoll = 5 * time.Second

// Compile-time guards: the backend New returns for each kind of provider.
var (
	_ backends.Backend          = (*Backend)(nil)
	_ backends.Connector        = (*Backend)(nil)
	_ backends.VolumeBackend    = volumeBackend{}
	_ backends.PlacementBackend = placementBackend{}
	_ backends.VolumeBackend    = fullBackend{}
	_ backends.PlacementBackend = fullBackend{}
)

// Backend is the engine's backends.Backend over a Provider. New returns it
// wrapped so that it also implements backends.VolumeBackend or
// backends.PlacementBackend exactly when the Provider supports them.
type Backend struct {
	cfg   Config
	prov  Provider
	log   *slog.Logger
	now   func() time.Time
	hosts *sshfleet.Backend
	recs  recordStore

	mu    sync.Mutex
	locks map[string]*sync.Mutex
}

// volumeBackend is the backend of a VolumeProvider.
type volumeBackend struct {
	*Backend
	*volumes
}

// placementBackend is the backend of a PlacementProvider.
type placementBackend struct {
	*Backend
	*placements
}

// fullBackend is the backend of a Provider that is both.
type fullBackend struct {
	*Backend
	*volumes
	*placements
}

// New builds the backend of a cloud driver over cfg.Provider. The backend
// implements backends.Connector, and backends.VolumeBackend when the
// Provider is a VolumeProvider, backends.PlacementBackend when it is a
// PlacementProvider. Its SSH takeover keeps its records under the backend
// name <Name>.hosts, volumes under <Name>.volumes and placement groups under
// <Name>.placement.
func New(cfg Config) (backends.Backend, error) {
	b, err := newBackend(cfg)
	if err != nil {
		return nil, err
	}
	vp, vok := cfg.Provider.(VolumeProvider)
	pp, pok := cfg.Provider.(PlacementProvider)
	var v *volumes
	var p *placements
	if vok {
		v = &volumes{b: b, prov: vp, recs: recordStore{backend: cfg.Name + ".volumes", recs: cfg.Deps.Records}}
	}
	if pok {
		p = &placements{b: b, prov: pp, recs: recordStore{backend: cfg.Name + ".placement", recs: cfg.Deps.Records}}
	}
	switch {
	case vok && pok:
		return fullBackend{b, v, p}, nil
	case vok:
		return volumeBackend{b, v}, nil
	case pok:
		return placementBackend{b, p}, nil
	}
	return b, nil
}

func newBackend(cfg Config) (*Backend, error) {
	if cfg.Provider == nil {
		return nil, errors.New("vm: no provider")
	}
	if cfg.Name == "" {
		cfg.Name = cfg.Type
	}
	if cfg.Type == "" {
		return nil, errors.New("vm: no catalog backend type")
	}
	if cfg.Deps.Records == nil {
		return nil, errors.New("vm: records are required")
	}
	if cfg.User == "" {
		return nil, errors.New("vm: no login user")
	}
	if cfg.BootTimeout <= 0 {
		cfg.BootTimeout = DefaultBootTimeout
	}
	if cfg.MaxNameLen <= 0 {
		cfg.MaxNameLen = DefaultMaxNameLen
	}
	log := cfg.Deps.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	now := cfg.Deps.Now
	if now == nil {
		now = time.Now
	}
	hosts, err := sshfleet.New(sshfleet.Config{
		Name: cfg.Name + ".hosts", Records: cfg.Deps.Records, Agents: cfg.Deps.Agents, Logger: log, Now: now,
	})
	if err != nil {
		return nil, fmt.Errorf("vm: %w", err)
	}
	return &Backend{
		cfg: cfg, prov: cfg.Provider, log: log.With("backend", cfg.Name), now: now, hosts: hosts,
		recs: recordStore{backend: cfg.Name, recs: cfg.Deps.Records}, locks: map[string]*sync.Mutex{},
	}, nil
}

// Name returns the backend's name.
func (b *Backend) Name() string { return b.cfg.Name }

// Traits says the backend provisions a VM of its own per instance and runs
// a shim on it.
func (b *Backend) Traits() backends.Traits { return backends.Traits{Runtime: backends.RuntimeShim} }

// Close closes the SSH connections to the VMs; the VMs and their shims keep
// running.
func (b *Backend) Close() error { return b.hosts.Close() }

// lock serializes Create, Describe and Terminate of one instance.
func (b *Backend) lock(id string) func() {
	b.mu.Lock()
	l, ok := b.locks[id]
	if !ok {
		l = &sync.Mutex{}
		b.locks[id] = l
	}
	b.mu.Unlock()
	l.Lock()
	return l.Unlock
}

// Offers returns the catalog's offers of the backend's type in its
// configured regions that match q, cheapest first; none when q names other
// backends only. A server without a
// catalog has none.
func (b *Backend) Offers(ctx context.Context, q offers.Query) ([]offers.Offer, error) {
	if b.cfg.Deps.Catalog == nil {
		return nil, nil
	}
	if len(q.Backends) > 0 && !slices.ContainsFunc(q.Backends, func(n string) bool {
		return strings.EqualFold(n, b.cfg.Name) || strings.EqualFold(n, b.cfg.Type)
	}) {
		return nil, nil
	}
	out := catalogOffers(b.cfg.Deps.Catalog(), b.cfg.Type, b.cfg.Regions, q)
	for i := range out {
		out[i].Backend = b.cfg.Name
	}
	return out, nil
}

// instance returns what the record says of the instance, with status.
func (b *Backend) instance(r *record, status string) backends.Instance {
	return backends.Instance{
		ID: r.ID, Backend: b.cfg.Name, ProviderID: r.Ref, Region: r.Region, Status: status,
		Runtime: backends.RuntimeShim, Offer: r.Offer, Price: r.Offer.Price,
		Tags: backends.CopyTags(r.Tags), CreatedAt: r.CreatedAt, Hostname: r.Address, InternalIP: r.PrivateAddress,
	}
}

// Create launches the VM of spec (first call) and takes it over as an SSH
// host once it runs (later calls), returning the instance as provisioning
// until its shim answers. It is idempotent on spec.ID: the record (with the
// instance's SSH key) is saved before the launch, and the launch itself is
// idempotent on the id at the provider. A VM that does not run and answer
// within the boot timeout, or that the provider loses while booting, is
// deleted and reported with an error wrapping backends.ErrNoCapacity, so
// that the caller tries the next offer.
func (b *Backend) Create(ctx context.Context, spec backends.InstanceSpec) (backends.Instance, error) {
	if spec.ID == "" {
		return backends.Instance{}, backends.Stalled(errors.New("vm: instance id is required"))
	}
	unlock := b.lock(spec.ID)
	defer unlock()
	r, ok, err := b.recs.get(spec.ID)
	if err != nil {
		return backends.Instance{}, err
	}
	if ok && r.Deleting {
		return b.instance(r, backends.StatusTerminating), backends.Stalled(fmt.Errorf("vm: instance %s is being terminated", spec.ID))
	}
	if !ok {
		if r, err = b.newRecord(spec); err != nil {
			return backends.Instance{}, err
		}
	}
	log := b.log.With("instance", spec.ID)
	if r.Ref == "" {
		if err := b.launch(ctx, r, spec); err != nil {
			return b.instance(r, backends.StatusProvisioning), err
		}
		log.Info("vm_launched", "ref", r.Ref, "instance_type", r.Offer.Instance, "region", r.Region, "spot", r.Offer.Spot)
	}
	m, err := b.prov.Get(ctx, r.Ref)
	gone := errors.Is(err, backends.ErrNotFound)
	if err != nil && !gone {
		return b.instance(r, backends.StatusProvisioning), fmt.Errorf("vm: instance %s: %w", spec.ID, err)
	}
	if gone || m.State == StateGone || m.State == StateStopping || m.Interrupted {
		why := "the provider lost the VM while it booted"
		if m.Interrupted {
			why = "the provider reclaimed the spot VM while it booted"
		}
		if m.Message != "" {
			why += ": " + m.Message
		}
		return b.giveUp(ctx, r, why)
	}
	return b.takeover(ctx, r, m, true)
}

// takeover brings a launched VM m on: while it boots, the instance is
// provisioning; once it runs with an address, the SSH-fleet backend takes it
// over (and again on every call until the shim answers, which makes the
// instance running for good). Past the boot timeout, giveUp (Create) deletes
// the VM and returns an error wrapping backends.ErrNoCapacity; otherwise
// (Describe) the instance stays provisioning with the reason in Message,
// for the next Create to give up.
func (b *Backend) takeover(ctx context.Context, r *record, m Machine, giveUp bool) (backends.Instance, error) {
	log := b.log.With("instance", r.ID)
	late := func(why string) (backends.Instance, error) {
		if giveUp {
			return b.giveUp(ctx, r, why)
		}
		inst := b.instance(r, backends.StatusProvisioning)
		inst.Message = why
		return inst, nil
	}
	if m.Region != "" {
		r.Region = m.Region
	}
	booting := b.now().Sub(r.LaunchedAt)
	if m.State != StateRunning || m.Address == "" {
		if !r.Running && booting > b.cfg.BootTimeout {
			return late(fmt.Sprintf("the VM did not boot within %s (state %s)", b.cfg.BootTimeout, m.State))
		}
		inst := b.instance(r, backends.StatusProvisioning)
		inst.Message = m.Message
		return inst, nil
	}
	if r.Address != m.Address || r.PrivateAddress != m.PrivateAddress {
		r.Address, r.PrivateAddress = m.Address, m.PrivateAddress
		if err := b.recs.save(r); err != nil {
			return b.instance(r, backends.StatusProvisioning), err
		}
	}
	if r.Running {
		// Taken over already (a Create repeated after a restart): the
		// shim answering is enough.
		if hi, err := b.hosts.Describe(ctx, r.ID); err == nil && !hi.Unreachable && hi.Status == backends.StatusRunning {
			return b.merge(r, hi), nil
		}
	}
	hi, herr := b.hosts.Create(ctx, b.hostSpec(r, m))
	if herr == nil && hi.Status == backends.StatusRunning {
		if !r.Running {
			r.Running = true
			if err := b.recs.save(r); err != nil {
				return b.instance(r, backends.StatusProvisioning), err
			}
			log.Info("vm_ready", "ref", r.Ref, "address", r.Address, "boot", booting.Round(time.Millisecond))
		}
		return b.merge(r, hi), nil
	}
	if !r.Running && booting > b.cfg.BootTimeout {
		why := fmt.Sprintf("the VM did not answer over SSH within %s", b.cfg.BootTimeout)
		if herr != nil {
			why += ": " + herr.Error()
		} else if hi.Message != "" {
			why += ": " + hi.Message
		}
		return late(why)
	}
	if herr != nil && (errors.Is(herr, backends.ErrHostKeyMismatch) || r.Running) {
		return b.merge(r, hi), herr
	}
	// Still booting: sshd, Docker or the shim are not up yet.
	inst := b.merge(r, hi)
	inst.Status, inst.Unreachable = backends.StatusProvisioning, false
	if herr != nil {
		inst.Message = "booting: " + herr.Error()
	}
	return inst, nil
}

// newRecord makes the record of a new instance, with its own SSH key, and
// saves it before anything is launched.
func (b *Backend) newRecord(spec backends.InstanceSpec) (*record, error) {
	priv, pub, err := newKey("hoist-" + spec.ID)
	if err != nil {
		return nil, fmt.Errorf("vm: instance %s: %w", spec.ID, err)
	}
	tags := backends.CopyTags(spec.Tags)
	if tags == nil {
		tags = map[string]string{}
	}
	tags[backends.TagInstance] = spec.ID
	r := &record{
		ID: spec.ID, Name: ResourceName(spec.Name, spec.ID, b.cfg.MaxNameLen), Offer: spec.Offer, Region: spec.Offer.Region,
		User: b.cfg.User, PrivateKey: priv, PublicKey: pub, Tags: tags, CreatedAt: b.now().UTC(),
	}
	r.Offer.Backend = b.cfg.Name
	if err := b.recs.save(r); err != nil {
		return nil, err
	}
	return r, nil
}

// launch asks the provider for the record's VM and records its ref. A launch
// the provider refuses for good (no capacity, bad configuration) forgets the
// record; a transient failure keeps it for the next Create to retry with the
// same key and id.
func (b *Backend) launch(ctx context.Context, r *record, spec backends.InstanceSpec) error {
	req := LaunchRequest{
		ID: r.ID, Name: r.Name, Offer: r.Offer, User: r.User, PublicKey: r.PublicKey,
		UserData: cloudConfig(append([]string{r.PublicKey}, spec.SSHPublicKeys...)), Tags: backends.CopyTags(r.Tags),
		Gateway: spec.Gateway,
	}
	if spec.PlacementGroup != "" {
		ref, err := placementRef(r.ID, b.cfg, spec.PlacementGroup)
		if err != nil {
			return err
		}
		req.PlacementGroup = ref
	}
	m, err := b.prov.Launch(ctx, req)
	if err != nil {
		if errors.Is(err, backends.ErrNoCapacity) || backends.IsStalled(err) {
			if derr := b.recs.remove(r.ID); derr != nil {
				b.log.Warn("record_remove_failed", "instance", r.ID, "error", derr)
			}
		}
		return fmt.Errorf("vm: launch %s (%s in %s): %w", r.ID, r.Offer.Instance, r.Offer.Region, err)
	}
	r.Ref, r.LaunchedAt = m.Ref, b.now().UTC()
	if m.Region != "" {
		r.Region = m.Region
	}
	return b.recs.save(r)
}

// placementRef returns the provider's ref of hoist's placement group id,
// from the records its PlacementBackend keeps.
func placementRef(instance string, cfg Config, group string) (string, error) {
	st := recordStore{backend: cfg.Name + ".placement", recs: cfg.Deps.Records}
	g, ok, err := st.getGroup(group)
	if err != nil {
		return "", err
	}
	if !ok || g.Ref == "" {
		return "", backends.Stalled(fmt.Errorf("vm: instance %s: placement group %s: %w", instance, group, backends.ErrNotFound))
	}
	return g.Ref, nil
}

// giveUp deletes the VM of an instance that did not come up, forgets it and
// returns an error wrapping backends.ErrNoCapacity. When the delete fails,
// that error is returned instead, so that the caller calls Create again.
func (b *Backend) giveUp(ctx context.Context, r *record, why string) (backends.Instance, error) {
	b.log.Warn("vm_abandoned", "instance", r.ID, "ref", r.Ref, "reason", why)
	if err := b.prov.Delete(ctx, r.Ref); err != nil && !errors.Is(err, backends.ErrNotFound) {
		return b.instance(r, backends.StatusProvisioning), fmt.Errorf("vm: instance %s: %s; deleting the VM failed: %w", r.ID, why, err)
	}
	if err := b.forget(r.ID); err != nil {
		return b.instance(r, backends.StatusTerminating), err
	}
	return b.instance(r, backends.StatusTerminated), fmt.Errorf("vm: instance %s: %s: %w", r.ID, why, backends.ErrNoCapacity)
}

// forget removes the instance's records (the takeover's and the engine's).
func (b *Backend) forget(id string) error {
	if err := b.hosts.Forget(id); err != nil {
		return err
	}
	return b.recs.remove(id)
}

// hostSpec is the SSH-fleet spec that takes the running VM m over.
func (b *Backend) hostSpec(r *record, m Machine) backends.InstanceSpec {
	host, port := m.Address, 22
	if h, p, err := net.SplitHostPort(m.Address); err == nil {
		if n, err := strconv.Atoi(p); err == nil {
			host, port = h, n
		}
	}
	return backends.InstanceSpec{
		ID: r.ID, Name: r.Name, Offer: r.Offer, Tags: backends.CopyTags(r.Tags),
		Host: &backends.SSHHost{Hostname: host, Port: port, User: r.User, PrivateKey: r.PrivateKey, HostKeys: m.HostKeys},
	}
}

// merge returns the instance the takeover observed, as the engine's: the
// offer, price, region and tags are the VM's, not the host's measurements.
func (b *Backend) merge(r *record, hi backends.Instance) backends.Instance {
	inst := b.instance(r, hi.Status)
	if inst.Status == "" {
		inst.Status = backends.StatusProvisioning
	}
	inst.Message, inst.Unreachable, inst.Arch, inst.HostKey = hi.Message, hi.Unreachable, hi.Arch, hi.HostKey
	if hi.Hostname != "" {
		inst.Hostname = hi.Hostname
	}
	return inst
}

// Describe observes the VM's shim through the SSH takeover and, unless the
// shim answers, the VM at the provider (a spot VM at the provider first) (taking a VM that runs but was not
// yet taken over on, as Create does, without giving it up). A VM the provider
// reclaimed (spot) or lost comes back as StatusTerminated, with Interrupted
// set for a reclaimed spot VM. An instance with no record is an error
// wrapping backends.ErrNotFound.
func (b *Backend) Describe(ctx context.Context, id string) (backends.Instance, error) {
	unlock := b.lock(id)
	defer unlock()
	r, ok, err := b.recs.get(id)
	if err != nil {
		return backends.Instance{}, err
	}
	if !ok {
		return backends.Instance{}, fmt.Errorf("vm: instance %s: %w", id, backends.ErrNotFound)
	}
	if r.Ref == "" {
		return b.instance(r, backends.StatusProvisioning), nil
	}
	var hi backends.Instance
	herr := fmt.Errorf("vm: instance %s: not taken over: %w", id, backends.ErrNotFound)
	// A spot VM is asked at the provider first: the provider may be
	// reclaiming it while its shim still answers (EC2 gives a two-minute
	// notice), and a shim restarted on a VM that is going away would hide
	// the interruption.
	spot := r.Offer.Spot
	if r.Running && !r.Deleting && !spot {
		// A VM whose shim answers runs: no provider call is needed (a VM
		// deleted at the provider stops answering first).
		hi, herr = b.hosts.Describe(ctx, id)
		if herr == nil && !hi.Unreachable && hi.Status == backends.StatusRunning {
			return b.merge(r, hi), nil
		}
	}
	m, err := b.prov.Get(ctx, r.Ref)
	gone := errors.Is(err, backends.ErrNotFound)
	if err != nil && !gone {
		return b.instance(r, backends.StatusProvisioning), fmt.Errorf("vm: instance %s: %w", id, err)
	}
	switch {
	case gone || m.State == StateGone || m.Interrupted:
		inst := b.instance(r, backends.StatusTerminated)
		inst.Interrupted, inst.Message = m.Interrupted, m.Message
		if inst.Message == "" {
			inst.Message = "the VM is gone"
			if m.Interrupted {
				inst.Message = "the provider reclaimed the spot VM"
			}
		}
		return inst, nil
	case r.Deleting || m.State == StateStopping:
		inst := b.instance(r, backends.StatusTerminating)
		inst.Message = m.Message
		return inst, nil
	case m.State != StateRunning || !r.Running:
		return b.takeover(ctx, r, m, false)
	}
	if spot && !r.Deleting {
		hi, herr = b.hosts.Describe(ctx, id)
	}
	if errors.Is(herr, backends.ErrNotFound) {
		return b.instance(r, backends.StatusProvisioning), nil
	}
	return b.merge(r, hi), herr
}

// Connect returns a connection to the instance's shim through its SSH
// takeover.
func (b *Backend) Connect(ctx context.Context, inst backends.Instance) (backends.Conn, error) {
	return b.hosts.Connect(ctx, inst)
}

// Terminate drains the VM's shim (bounded: a VM that does not answer is
// deleted with whatever runs on it), asks the provider to delete the VM and
// returns an error wrapping backends.ErrNotYetTerminated (KindWait) until
// the provider no longer shows it; then the records go and it returns nil.
// An instance without a record (a leak the audit found) is looked up by its
// backends.TagInstance tag.
func (b *Backend) Terminate(ctx context.Context, id string) error {
	unlock := b.lock(id)
	defer unlock()
	r, ok, err := b.recs.get(id)
	if err != nil {
		return err
	}
	if !ok || r.Ref == "" {
		return b.terminateByTag(ctx, id, ok)
	}
	log := b.log.With("instance", id, "ref", r.Ref)
	if !r.Deleting {
		if r.Running {
			dctx, cancel := context.WithTimeout(ctx, drainTimeout)
			if err := b.hosts.Terminate(dctx, id); err != nil {
				log.Warn("vm_drain_failed", "error", err)
			}
			cancel()
		}
		if err := b.hosts.Forget(id); err != nil {
			return err
		}
		if err := b.prov.Delete(ctx, r.Ref); err != nil && !errors.Is(err, backends.ErrNotFound) {
			return fmt.Errorf("vm: terminate %s: %w", id, err)
		}
		r.Deleting = true
		if err := b.recs.save(r); err != nil {
			return err
		}
		log.Info("vm_deleting")
	}
	m, err := b.prov.Get(ctx, r.Ref)
	if err != nil && !errors.Is(err, backends.ErrNotFound) {
		return fmt.Errorf("vm: terminate %s: %w", id, err)
	}
	if err == nil && m.State != StateGone {
		if m.State == StateRunning || m.State == StatePending {
			// A delete the provider lost (or one sent while it still
			// launched): ask again.
			if err := b.prov.Delete(ctx, r.Ref); err != nil && !errors.Is(err, backends.ErrNotFound) {
				return fmt.Errorf("vm: terminate %s: %w", id, err)
			}
		}
		return backends.Wait(fmt.Errorf("vm: instance %s: VM %s is %s: %w", id, r.Ref, m.State, backends.ErrNotYetTerminated), terminatePoll)
	}
	if err := b.recs.remove(id); err != nil {
		return err
	}
	log.Info("vm_terminated")
	return nil
}

// terminateByTag deletes the VMs tagged with instance id that no record
// names (a leak, or a launch whose answer was lost) and returns nil once
// none is left.
func (b *Backend) terminateByTag(ctx context.Context, id string, recorded bool) error {
	ms, err := b.prov.List(ctx, map[string]string{backends.TagInstance: id})
	if err != nil {
		return fmt.Errorf("vm: terminate %s: %w", id, err)
	}
	var left []string
	for _, m := range ms {
		if m.State == StateGone {
			continue
		}
		left = append(left, m.Ref)
		if m.State != StateStopping {
			if err := b.prov.Delete(ctx, m.Ref); err != nil && !errors.Is(err, backends.ErrNotFound) {
				return fmt.Errorf("vm: terminate %s: %w", id, err)
			}
			b.log.Info("vm_deleting", "instance", id, "ref", m.Ref, "recorded", recorded)
		}
	}
	if len(left) > 0 {
		return backends.Wait(fmt.Errorf("vm: instance %s: VMs %s going: %w", id, strings.Join(left, ", "), backends.ErrNotYetTerminated), terminatePoll)
	}
	if err := b.hosts.Forget(id); err != nil {
		return err
	}
	if recorded {
		return b.recs.remove(id)
	}
	return nil
}

// List returns the VMs the provider shows with all of tags (the leak
// audit), whatever the records say; VMs already gone are left out.
func (b *Backend) List(ctx context.Context, tags map[string]string) ([]backends.Instance, error) {
	ms, err := b.prov.List(ctx, tags)
	if err != nil {
		return nil, fmt.Errorf("vm: list: %w", err)
	}
	out := make([]backends.Instance, 0, len(ms))
	for _, m := range ms {
		if m.State == StateGone {
			continue
		}
		id := m.Tags[backends.TagInstance]
		if id == "" {
			continue // not hoist's: every VM the engine launches carries its id
		}
		status := backends.StatusProvisioning
		switch m.State {
		case StateRunning:
			status = backends.StatusRunning
		case StateStopping:
			status = backends.StatusTerminating
		}
		out = append(out, backends.Instance{
			ID: id, Backend: b.cfg.Name, ProviderID: m.Ref, Region: m.Region, Hostname: m.Address, InternalIP: m.PrivateAddress,
			Status: status, Message: m.Message, Interrupted: m.Interrupted, Runtime: backends.RuntimeShim,
			Offer: offers.Offer{Backend: b.cfg.Name, Instance: m.InstanceType, Region: m.Region},
			Tags:  backends.CopyTags(m.Tags), CreatedAt: m.CreatedAt,
		})
	}
	return out, nil
}
