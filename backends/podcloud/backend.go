package podcloud

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"hoist/backends"
	"hoist/backends/offers"
)

// Compile-time guards: the capabilities of a container cloud (volumes.go
// guards the backend of a VolumeProvider).
var (
	_ backends.Backend   = (*Backend)(nil)
	_ backends.Connector = (*Backend)(nil)
)

// pollEvery is how often a task's pod is observed while the server waits
// for it (WaitTask), and how often a starting runner is tried.
const pollEvery = 2 * time.Second

// startTimeout bounds how long a pod may take from accepted to its
// runner answering (pull, start, download of the runner) before its task
// fails.
const startTimeout = 20 * time.Minute

// A Backend is a container cloud driver built on a Provider.
type Backend struct {
	name     string
	kind     string // the provider's name in messages: runpod, vastai
	p        Provider
	records  backends.Records
	download func(taskID, arch string) (string, string, error)
	log      *slog.Logger
	now      func() time.Time

	mu    sync.Mutex // serializes Create and CreateTask's records
	podMu sync.Mutex // serializes the creation of pods (shim.ensurePod)
}

// New returns the backend called name (the server config entry's) of the
// container cloud kind (runpod, vastai) that p speaks to. deps.Records is
// required (instances and tasks are records every server sees), and so is
// deps.RunnerDownload for tasks to start. The backend implements
// backends.VolumeBackend when p is a VolumeProvider.
func New(name, kind string, p Provider, deps backends.Deps) (backends.Backend, error) {
	if deps.Records == nil {
		return nil, fmt.Errorf("%s backend %q: the server keeps no backend records", kind, name)
	}
	log, now := deps.Logger, deps.Now
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if now == nil {
		now = time.Now
	}
	b := &Backend{name: name, kind: kind, p: p, records: deps.Records, download: deps.RunnerDownload, log: log, now: now}
	if vp, ok := p.(VolumeProvider); ok {
		return volumeBackend{b, &volumes{b: b, p: vp}}, nil
	}
	return b, nil
}

// Name returns the backend's name.
func (b *Backend) Name() string { return b.name }

// Traits says the provider runs the job's image and hoist's runner in it
// (dstack's dockerized=false); the backend provisions from its live offers;
// its pods have no network between them, only the port the server reaches
// (dstack runs multi-node jobs on RunPod only through its clusters API,
// createCluster, which hoist does not drive).
func (b *Backend) Traits() backends.Traits {
	return backends.Traits{Runtime: backends.RuntimeRunner, LiveOffers: true, Isolated: true}
}

// Offers returns the provider's live offers for q, as this backend's.
func (b *Backend) Offers(ctx context.Context, q offers.Query) ([]offers.Offer, error) {
	return liveOffers(ctx, b.name, b.p, q)
}

func liveOffers(ctx context.Context, name string, p Provider, q offers.Query) ([]offers.Offer, error) {
	os, err := p.Offers(ctx, q)
	if err != nil {
		return nil, err
	}
	for i := range os {
		os[i].Backend = name
	}
	return os, nil
}

// OfferSource returns p's live offers as those of the backend called name,
// without the rest of a backend (`hoist offers --config`).
func OfferSource(name string, p Provider) offers.Provider { return offerSource{name: name, p: p} }

type offerSource struct {
	name string
	p    Provider
}

func (s offerSource) Name() string { return s.name }

func (s offerSource) Offers(ctx context.Context, q offers.Query) ([]offers.Offer, error) {
	return liveOffers(ctx, s.name, s.p, q)
}

func (b *Backend) instance(r instanceRecord) backends.Instance {
	inst := backends.Instance{
		ID: r.ID, Backend: b.name, Region: r.Offer.Region, Hostname: r.Offer.Instance,
		Status: backends.StatusRunning, Runtime: backends.RuntimeRunner, Offer: r.Offer,
		Price: r.Offer.Price, Arch: offers.GoArch(r.Offer.CPUArch), Tags: backends.CopyTags(r.Tags), CreatedAt: r.CreatedAt,
	}
	if r.Interrupted {
		inst.Status, inst.Interrupted, inst.Message = backends.StatusTerminated, true, r.Message
	}
	return inst
}

// Create reserves spec.Offer: it only records it (the pod is created with
// the task, whose image it runs). It is idempotent on spec.ID.
func (b *Backend) Create(ctx context.Context, spec backends.InstanceSpec) (backends.Instance, error) {
	if spec.ID == "" {
		return backends.Instance{}, backends.Stalled(fmt.Errorf("%s backend %q: instance id is required", b.kind, b.name))
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if r, ok, err := b.instanceRecord(ctx, spec.ID); err != nil {
		return backends.Instance{}, err
	} else if ok {
		return b.instance(r), nil
	}
	o := spec.Offer
	o.Backend = b.name
	r := instanceRecord{ID: spec.ID, Offer: o, Tags: backends.CopyTags(spec.Tags), CreatedAt: b.now().UTC()}
	if err := b.putRecord(ctx, spec.ID, r); err != nil {
		return backends.Instance{}, err
	}
	b.log.Info("instance_reserved", "instance", spec.ID, "offer", o.Instance, "region", o.Region, "gpus", o.GPUCount, "spot", o.Spot)
	return b.instance(r), nil
}

// Describe returns a recorded instance: running, or terminated and
// Interrupted once the provider reclaimed its pod. An instance without a
// record whose pods remain (a leak) is terminating; otherwise ErrNotFound.
func (b *Backend) Describe(ctx context.Context, id string) (backends.Instance, error) {
	r, ok, err := b.instanceRecord(ctx, id)
	if err != nil {
		return backends.Instance{}, err
	}
	if ok {
		return b.instance(r), nil
	}
	leaked, err := b.leakedPods(ctx, map[string]string{backends.TagInstance: id})
	if err != nil {
		return backends.Instance{}, err
	}
	if inst, ok := leaked[id]; ok {
		return inst, nil
	}
	return backends.Instance{}, fmt.Errorf("%s backend %q: instance %s: %w", b.kind, b.name, id, backends.ErrNotFound)
}

// Terminate deletes the pods of the instance's tasks and their records,
// then the instance's record. Gone is success; an instance without a
// record has its leaked pods deleted the same way.
func (b *Backend) Terminate(ctx context.Context, id string) error {
	pods, err := b.p.ListPods(ctx, map[string]string{backends.TagInstance: id})
	if err != nil {
		return err
	}
	for _, p := range pods {
		if err := b.p.TerminatePod(ctx, p.ID); err != nil {
			return err
		}
		b.log.Info("pod_terminated", "instance", id, "pod", p.ID, "name", p.Name)
	}
	_, tasks, err := b.allRecords(ctx)
	if err != nil {
		return err
	}
	for _, t := range tasks {
		if t.Instance != id {
			continue
		}
		if t.PodID != "" {
			if err := b.p.TerminatePod(ctx, t.PodID); err != nil {
				return err
			}
		}
		if err := b.deleteRecord(ctx, taskRecordPrefix+t.ID); err != nil {
			return err
		}
	}
	return b.deleteRecord(ctx, id)
}

// List returns the recorded instances carrying all of tags and, for the
// leak audit, an instance (terminating) for every instance id whose pods
// carry tags but which has no record.
func (b *Backend) List(ctx context.Context, tags map[string]string) ([]backends.Instance, error) {
	insts, _, err := b.allRecords(ctx)
	if err != nil {
		return nil, err
	}
	var out []backends.Instance
	for _, r := range insts {
		if backends.MatchTags(r.Tags, tags) {
			out = append(out, b.instance(r))
		}
	}
	leaked, err := b.leakedPods(ctx, tags)
	if err != nil {
		return nil, err
	}
	for id, inst := range leaked {
		if _, ok := insts[id]; !ok {
			out = append(out, inst)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// leakedPods returns, by instance id, the instances whose pods carry tags
// and an instance tag but have no record: terminating, with the tags read
// from their pods.
func (b *Backend) leakedPods(ctx context.Context, tags map[string]string) (map[string]backends.Instance, error) {
	pods, err := b.p.ListPods(ctx, tags)
	if err != nil {
		return nil, err
	}
	out := map[string]backends.Instance{}
	for _, p := range pods {
		id := p.Tags[backends.TagInstance]
		if id == "" || !backends.MatchTags(p.Tags, tags) {
			continue
		}
		if _, ok := out[id]; ok {
			continue
		}
		if _, ok, err := b.instanceRecord(ctx, id); err != nil {
			return nil, err
		} else if ok {
			continue
		}
		t := backends.CopyTags(p.Tags)
		delete(t, TagTask)
		out[id] = backends.Instance{
			ID: id, Backend: b.name, ProviderID: p.ID, Region: p.Region, Status: backends.StatusTerminating,
			Message: "pods without an instance record", Runtime: backends.RuntimeRunner, Price: p.Price, Tags: t, CreatedAt: p.CreatedAt,
		}
	}
	return out, nil
}

// Connect returns the connection to inst's shim API, answered in this
// process; its HTTP client reaches each task's runner and ports over SSH
// to the task's pod.
func (b *Backend) Connect(ctx context.Context, inst backends.Instance) (backends.Conn, error) {
	r, ok, err := b.instanceRecord(ctx, inst.ID)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("%s backend %q: instance %s: %w", b.kind, b.name, inst.ID, backends.ErrNotFound)
	}
	return newConn(b, r), nil
}

// markInterrupted records that the provider reclaimed a pod of instance
// id, with the provider's message.
func (b *Backend) markInterrupted(ctx context.Context, id, msg string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	r, ok, err := b.instanceRecord(ctx, id)
	if err != nil || !ok || r.Interrupted {
		return err
	}
	r.Interrupted, r.Message = true, msg
	if err := b.putRecord(ctx, id, r); err != nil {
		return err
	}
	b.log.Info("instance_interrupted", "instance", id, "message", msg)
	return nil
}

// isNotFound says whether err is the provider's "no such pod".
func isNotFound(err error) bool { return errors.Is(err, backends.ErrNotFound) }
