package kubernetes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/kubernetes"

	"hoist/backends"
	"hoist/backends/offers"
)

// Compile-time guards: the capabilities this driver has.
var (
	_ backends.Backend       = (*Backend)(nil)
	_ backends.Connector     = (*Backend)(nil)
	_ backends.VolumeBackend = (*Backend)(nil)
)

// Timeouts of the driver's own checks of the cluster.
const (
	// startTimeout bounds the API calls Factory makes.
	startTimeout = 10 * time.Second
	// describeTimeout bounds Describe's check that the API server answers.
	describeTimeout = 5 * time.Second
)

// Backend is the Kubernetes backend: offers are slices of the cluster's
// nodes, an instance is a reservation of one (a record, nothing in the
// cluster), and the tasks of an instance are pods the pod shim creates.
// Use Factory.
type Backend struct {
	name    string
	c       *cluster
	records backends.Records
	price   PriceOptions
	log     *slog.Logger

	// mu serializes Create and the volume record updates of this server,
	// so that concurrent calls on one id agree.
	mu sync.Mutex
	// nsMu guards nsReady: the namespace is checked (and created) once.
	nsMu    sync.Mutex
	nsReady bool
}

// Factory builds the backend from a `kubernetes` config entry; use it in
// cmd/hoist's Registry as "kubernetes". It checks the cluster answers
// with the credentials given (a refusal is an error that needs the user)
// and creates the namespace when missing; a cluster that does not answer
// yet is logged, and checked again before the first object is created.
func Factory(cfg backends.Config, deps backends.Deps) (backends.Backend, error) {
	var o Options
	if err := cfg.Decode(&o); err != nil {
		return nil, err
	}
	s, err := o.resolve()
	if err != nil {
		return nil, backends.Stalled(fmt.Errorf("backend %q (type kubernetes): %w", cfg.BackendName(), err))
	}
	if deps.Records == nil {
		return nil, errors.New("kubernetes backend: records are required")
	}
	b, err := newBackend(cfg.BackendName(), s, deps)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if err := b.ensureNamespace(ctx); err != nil {
		if backends.IsStalled(err) {
			return nil, err
		}
		b.log.Warn("cluster_not_answering", "server", s.rest.Host, "error", err)
	}
	return b, nil
}

// OfferSource returns the live offers of the cluster a `kubernetes` entry
// configures, for `hoist offers --config`: it only reads nodes and pods.
func OfferSource(cfg backends.Config, log *slog.Logger) (offers.Provider, error) {
	var o Options
	if err := cfg.Decode(&o); err != nil {
		return nil, err
	}
	s, err := o.resolve()
	if err != nil {
		return nil, fmt.Errorf("backend %q (type kubernetes): %w", cfg.BackendName(), err)
	}
	return newBackend(cfg.BackendName(), s, backends.Deps{Logger: log})
}

// newBackend returns the backend named name over the resolved settings
// s; deps.Records may be nil only for OfferSource.
func newBackend(name string, s settings, deps backends.Deps) (*Backend, error) {
	log := deps.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	now := deps.Now
	if now == nil {
		now = time.Now
	}
	client, err := kubernetes.NewForConfig(s.rest)
	if err != nil {
		return nil, backends.Stalled(fmt.Errorf("kubernetes backend %q: client: %w", name, err))
	}
	if s.proxyJump {
		log.Info("proxy_jump_not_needed", "reason", "hoist reaches pods through the API server")
	}
	c := &cluster{
		backend: name, region: s.region, namespace: s.namespace, client: client, rest: s.rest,
		agents: deps.Agents, unschedulableTimeout: s.unschedulableTimeout, log: log, now: now,
	}
	return &Backend{name: name, c: c, records: deps.Records, price: s.price, log: log}, nil
}

// Name returns the backend's name.
func (b *Backend) Name() string { return b.name }

// Traits says the driver runs the job's image with hoist-runner as its
// entrypoint (dstack's dockerized=false); it provisions (reserves) from
// offers, which are live (its nodes' free capacity), and its instances are
// no hosts of this server.
func (b *Backend) Traits() backends.Traits {
	return backends.Traits{Runtime: backends.RuntimeRunner, LiveOffers: true}
}

// ensureNamespace checks once that the namespace exists and creates it
// when missing (dstack does the same). A refusal of the credentials is a
// stalled error; a service account that may not read namespaces is taken
// to have its own.
func (b *Backend) ensureNamespace(ctx context.Context) error {
	b.nsMu.Lock()
	defer b.nsMu.Unlock()
	if b.nsReady {
		return nil
	}
	ns := b.c.namespace
	_, err := b.c.client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	switch {
	case err == nil:
	case apierrors.IsNotFound(err):
		_, err = b.c.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
			Name: ns, Labels: map[string]string{managedByLabel: managedByValue},
		}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return b.apiError("create namespace "+ns, err)
		}
		b.log.Info("namespace_created", "namespace", ns)
		if err := b.waitServiceAccount(ctx); err != nil {
			return err
		}
	case apierrors.IsForbidden(err):
		b.log.Debug("namespace_not_readable", "namespace", ns, "error", err)
	default:
		return b.apiError("namespace "+ns, err)
	}
	b.nsReady = true
	return nil
}

// waitServiceAccount waits until the controller manager has made the new
// namespace's default ServiceAccount: the API server refuses pods until
// then.
func (b *Backend) waitServiceAccount(ctx context.Context) error {
	for {
		_, err := b.c.client.CoreV1().ServiceAccounts(b.c.namespace).Get(ctx, "default", metav1.GetOptions{})
		if err == nil {
			return nil
		}
		if !apierrors.IsNotFound(err) {
			return b.apiError("service account of namespace "+b.c.namespace, err)
		}
		select {
		case <-ctx.Done():
			return backends.Transient(fmt.Errorf("kubernetes backend %q: namespace %s has no default service account yet: %w", b.name, b.c.namespace, ctx.Err()))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// apiError classifies an API error: refused credentials or permissions
// need the user (stalled), anything else is transient.
func (b *Backend) apiError(what string, err error) error {
	err = fmt.Errorf("kubernetes backend %q: %s: %w", b.name, what, err)
	if apierrors.IsUnauthorized(err) || apierrors.IsForbidden(err) || apierrors.IsInvalid(err) {
		return backends.Stalled(err)
	}
	return backends.Transient(err)
}

// record returns the record of instance id; ok is false when there is
// none.
func (b *Backend) record(ctx context.Context, id string) (instanceRecord, bool, error) {
	raw, ok, err := b.records.GetBackendRecord(ctx, b.name, id)
	if err != nil || !ok {
		return instanceRecord{}, false, err
	}
	var r instanceRecord
	if err := json.Unmarshal(raw, &r); err != nil {
		return instanceRecord{}, false, fmt.Errorf("kubernetes backend %q: record of %s: %w", b.name, id, err)
	}
	return r, true, nil
}

func (b *Backend) instance(r instanceRecord) backends.Instance {
	return backends.Instance{
		ID: r.ID, Backend: b.name, Region: b.c.region, Hostname: r.Offer.Instance,
		Status: backends.StatusRunning, Runtime: backends.RuntimeRunner, Offer: r.Offer,
		Price: r.Offer.Price, Arch: offers.GoArch(r.Offer.CPUArch), Tags: backends.CopyTags(r.Tags), CreatedAt: r.CreatedAt,
	}
}

// Create reserves the slice of a node spec.Offer describes: it only
// records it (nothing exists in the cluster until a task runs). It is
// idempotent on spec.ID. A node that is gone is backends.ErrNoCapacity
// (the caller tries another offer).
func (b *Backend) Create(ctx context.Context, spec backends.InstanceSpec) (backends.Instance, error) {
	if spec.ID == "" {
		return backends.Instance{}, backends.Stalled(errors.New("kubernetes backend: instance id is required"))
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if r, ok, err := b.record(ctx, spec.ID); err != nil {
		return backends.Instance{}, backends.Transient(err)
	} else if ok {
		return b.instance(r), nil
	}
	if err := b.ensureNamespace(ctx); err != nil {
		return backends.Instance{}, err
	}
	o := spec.Offer
	o.Backend, o.Region = b.name, b.c.region
	if o.Instance != "" {
		if _, err := b.c.client.CoreV1().Nodes().Get(ctx, o.Instance, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			return backends.Instance{}, fmt.Errorf("kubernetes backend %q: node %s is gone: %w", b.name, o.Instance, backends.ErrNoCapacity)
		} else if err != nil {
			return backends.Instance{}, b.apiError("node "+o.Instance, err)
		}
	}
	r := instanceRecord{ID: spec.ID, Offer: o, Tags: backends.CopyTags(spec.Tags), CreatedAt: b.c.now().UTC()}
	raw, err := json.Marshal(r)
	if err != nil {
		return backends.Instance{}, err
	}
	if err := b.records.PutBackendRecord(ctx, b.name, spec.ID, raw); err != nil {
		return backends.Instance{}, backends.Transient(fmt.Errorf("kubernetes backend %q: record %s: %w", b.name, spec.ID, err))
	}
	b.log.Info("instance_reserved", "instance", spec.ID, "node", o.Instance, "cpus", o.CPUs, "memory_gb", o.MemoryGB, "gpus", o.GPUCount)
	return b.instance(r), nil
}

// Describe returns a recorded instance as running: a reservation lives as
// long as its record; its internal IP is its current pod's (podIPs). When the API server does not answer, the instance
// is Unreachable (with the reason); an instance without a record whose
// pods remain (a leak) is terminating; otherwise ErrNotFound.
func (b *Backend) Describe(ctx context.Context, id string) (backends.Instance, error) {
	r, ok, err := b.record(ctx, id)
	if err != nil {
		return backends.Instance{}, backends.Transient(err)
	}
	if !ok {
		leaked, err := b.leakedPods(ctx, map[string]string{backends.TagInstance: id})
		if err != nil {
			return backends.Instance{}, err
		}
		if inst, ok := leaked[id]; ok {
			return inst, nil
		}
		return backends.Instance{}, fmt.Errorf("kubernetes backend %q: instance %s: %w", b.name, id, backends.ErrNotFound)
	}
	inst := b.instance(r)
	vctx, cancel := context.WithTimeout(ctx, describeTimeout)
	defer cancel()
	if err := b.c.client.Discovery().RESTClient().Get().AbsPath("/version").Do(vctx).Error(); err != nil {
		inst.Unreachable, inst.Message = true, "the cluster's API server does not answer: "+err.Error()
		return inst, nil
	}
	ips, err := b.podIPs(vctx, tasksSelector(id))
	if err != nil {
		b.log.Debug("pod_ips_unknown", "instance", id, "error", err)
	}
	inst.InternalIP = ips[id]
	return inst, nil
}

// podIPs returns, by instance id, the internal IP of the instances whose
// pods sel selects: the IP of the newest pod of its tasks that has one and
// whose task has not ended. The pod is the job's machine: dstack's
// internal_ip of a Kubernetes job is its pod's IP
// (core/backends/kubernetes/compute.py, update_provisioning_data), where
// the other nodes of a cluster reach it over the pod network.
func (b *Backend) podIPs(ctx context.Context, sel string) (map[string]string, error) {
	pods, err := b.c.client.CoreV1().Pods(b.c.namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, b.apiError("list pods", err)
	}
	ips := map[string]string{}
	newest := map[string]time.Time{}
	for i := range pods.Items {
		p := &pods.Items[i]
		id := tagsOf(p.Annotations, p.Labels)[backends.TagInstance]
		ip := podInfo(p, b.c.now(), b.c.unschedulableTimeout).InternalIP
		if id == "" || ip == "" {
			continue
		}
		if t, ok := newest[id]; ok && !p.CreationTimestamp.After(t) {
			continue
		}
		ips[id], newest[id] = ip, p.CreationTimestamp.Time
	}
	return ips, nil
}

// Terminate deletes the pods and secrets of the instance's tasks, then its
// record. While pods are still shutting down it returns an error wrapping
// ErrNotYetTerminated (KindWait). Gone is success; an instance without a
// record has its leaked pods deleted the same way.
func (b *Backend) Terminate(ctx context.Context, id string) error {
	if err := deleteTasks(ctx, b.c, id); err != nil {
		// deleteTasks classifies the wait; anything else is transient.
		return fmt.Errorf("kubernetes backend %q: %w", b.name, err)
	}
	if err := b.records.DeleteBackendRecord(ctx, b.name, id); err != nil {
		return backends.Transient(fmt.Errorf("kubernetes backend %q: record %s: %w", b.name, id, err))
	}
	return nil
}

// List returns the recorded instances carrying all of tags (with their
// current pods' IPs, podIPs), and, for the
// leak audit, an instance (terminating) for every instance id whose pods
// carry tags but which has no record.
func (b *Backend) List(ctx context.Context, tags map[string]string) ([]backends.Instance, error) {
	all, err := b.records.ListBackendRecords(ctx, b.name)
	if err != nil {
		return nil, backends.Transient(fmt.Errorf("kubernetes backend %q: records: %w", b.name, err))
	}
	var ips map[string]string
	if len(all) > 0 {
		if ips, err = b.podIPs(ctx, managedByLabel+"="+managedByValue); err != nil {
			return nil, err
		}
	}
	var out []backends.Instance
	for id, raw := range all {
		var r instanceRecord
		if json.Unmarshal(raw, &r) != nil {
			b.log.Warn("record_unreadable", "instance", id)
			continue
		}
		if backends.MatchTags(r.Tags, tags) {
			inst := b.instance(r)
			inst.InternalIP = ips[id]
			out = append(out, inst)
		}
	}
	leaked, err := b.leakedPods(ctx, tags)
	if err != nil {
		return nil, err
	}
	for id, inst := range leaked {
		if _, ok := all[id]; !ok {
			out = append(out, inst)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// leakedPods returns, by instance id, the instances whose pods carry tags
// and the instance tag but have no record: terminating, with the tags read
// from their pods.
func (b *Backend) leakedPods(ctx context.Context, tags map[string]string) (map[string]backends.Instance, error) {
	sel, err := labels.Parse(tagSelector(tags))
	if err != nil {
		return nil, fmt.Errorf("kubernetes backend %q: selector: %w", b.name, err)
	}
	has, err := labels.NewRequirement(backends.TagInstance, selection.Exists, nil)
	if err != nil {
		return nil, err
	}
	sel = sel.Add(*has)
	pods, err := b.c.client.CoreV1().Pods(b.c.namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return nil, b.apiError("list pods", err)
	}
	out := map[string]backends.Instance{}
	for _, p := range pods.Items {
		t := tagsOf(p.Annotations, p.Labels)
		id := t[backends.TagInstance]
		if id == "" || !backends.MatchTags(t, tags) {
			continue
		}
		if _, ok := out[id]; ok {
			continue
		}
		if _, ok, err := b.record(ctx, id); err != nil {
			return nil, backends.Transient(err)
		} else if ok {
			continue
		}
		out[id] = backends.Instance{
			ID: id, Backend: b.name, Region: b.c.region, Hostname: p.Spec.NodeName, Status: backends.StatusTerminating,
			Message: "pods without an instance record", Runtime: backends.RuntimeRunner, Tags: t, CreatedAt: p.CreationTimestamp.Time,
		}
	}
	return out, nil
}

// Connect returns the connection to the pod shim of inst: the shim API
// answered in this process, runners reached by port-forwards through the
// API server.
func (b *Backend) Connect(ctx context.Context, inst backends.Instance) (backends.Conn, error) {
	r, ok, err := b.record(ctx, inst.ID)
	if err != nil {
		return nil, backends.Transient(err)
	}
	if !ok {
		return nil, fmt.Errorf("kubernetes backend %q: instance %s: %w", b.name, inst.ID, backends.ErrNotFound)
	}
	if err := b.ensureNamespace(ctx); err != nil {
		return nil, err
	}
	return newConn(ctx, b.c, r)
}
