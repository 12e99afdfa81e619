package conformance

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"hoist/agents/api"
	"hoist/backends"
	"hoist/backends/offers"
)

// Options configure a conformance run.
type Options struct {
	// Backend is the driver under test, configured against real resources.
	Backend backends.Backend
	// Spec returns the driver-specific part of the i-th instance spec the
	// kit creates (i from 0): the offer to use, the SSH host, extra tags...
	// The kit sets ID and adds its ownership tags. Nil means: the cheapest
	// offer of Offers.
	Spec func(i int) backends.InstanceSpec
	// Capacity is how many instances may exist at once (default 2; the local
	// backend has 1).
	Capacity int
	// Timeout bounds waiting for an instance to run and to terminate
	// (default 2 minutes).
	Timeout time.Duration
	// Poll is the interval between Describe calls while waiting (default
	// 200 ms).
	Poll time.Duration
	// Peer, when set, opens the same driver as a second server would: its
	// own process state, the same backends.Records. The kit checks that
	// the peer lists and describes every instance the first created (never
	// as gone), so several servers on one database agree on what exists.
	Peer func(t *testing.T) backends.Backend
	// Interrupt, when set, reclaims a running spot instance as the
	// provider would (the simulator's spot interruption): the kit then
	// creates an instance from a spot offer (Offers with spot_policy spot)
	// and checks that Describe reports it terminated and Interrupted. On
	// a runner-runtime driver with TaskImage the instance runs a task
	// first (a container cloud reclaims pods, not reservations), which
	// must end as api.ReasonInterrupted.
	// Nil skips the spot checks.
	Interrupt func(t *testing.T, inst backends.Instance)
	// ExternalVolume, when set for a backends.VolumeBackend, creates a
	// volume outside hoist (as a user would in the provider's console) in
	// region, of sizeGB, and returns its provider id for RegisterVolume.
	// Nil skips the registration checks.
	ExternalVolume func(t *testing.T, region string, sizeGB float64) string
	// TaskImage, for a backends.Connector of a RuntimeRunner driver, is
	// an image the provider can run with the runner in it (one with sh):
	// the kit runs a job in a task of it through the connection. Empty
	// skips the runner-runtime checks.
	TaskImage string
	// TaskLeftovers, when set with TaskImage, lists what is left at the
	// provider of inst's tasks (e.g. "pod/x", "secret/y"); after a task's
	// removal the kit waits until it is empty.
	TaskLeftovers func(t *testing.T, inst backends.Instance) []string
}

func (o *Options) defaults() {
	if o.Capacity == 0 {
		o.Capacity = 2
	}
	if o.Timeout == 0 {
		o.Timeout = 2 * time.Minute
	}
	if o.Poll == 0 {
		o.Poll = 200 * time.Millisecond
	}
}

// Run runs the kit as subtests of t. Every instance it creates carries a
// fresh hoist.installation tag and is terminated in t.Cleanup, also on
// failure.
func Run(t *testing.T, opts Options) {
	t.Helper()
	opts.defaults()
	b := opts.Backend
	k := &kit{opts: opts, b: b, run: randomHex(4)}
	k.tags = map[string]string{
		backends.TagInstallation: "conformance-" + k.run,
		backends.TagProject:      "conformance",
		backends.TagResource:     "fleet/conformance",
	}
	t.Cleanup(func() { k.cleanup(t) })

	t.Run("traits", k.traits)
	t.Run("unknown_id", k.unknownID)
	var first backends.Instance
	if !t.Run("create_describe", func(t *testing.T) { first = k.createDescribe(t, 0) }) {
		return
	}
	t.Run("create_reused_id", func(t *testing.T) { k.createReused(t, first) })
	t.Run("offers", k.offers)
	t.Run("connect", func(t *testing.T) { k.connect(t, first) })
	if why := k.checkRunnerOptions(); why == "" {
		t.Run("runner_task", func(t *testing.T) { k.runnerTask(t, first) })
	} else if k.b.Traits().Runtime == backends.RuntimeRunner {
		t.Logf("runner_task skipped: %s", why)
	}
	if vb, ok := b.(backends.VolumeBackend); ok {
		t.Run("volumes", func(t *testing.T) { k.volumes(t, vb, first) })
	}
	created := []backends.Instance{first}
	if opts.Capacity >= 2 {
		t.Run("create_second_concurrently", func(t *testing.T) { created = append(created, k.createConcurrently(t, 1)) })
	}
	t.Run("list_by_tags", func(t *testing.T) { k.list(t, created) })
	if opts.Peer != nil {
		t.Run("peer_sees_instances", func(t *testing.T) { k.peer(t, created) })
	}
	t.Run("terminate_twice", func(t *testing.T) {
		for _, inst := range created {
			k.terminate(t, inst.ID)
		}
	})
	t.Run("gone_after_terminate", func(t *testing.T) { k.gone(t, created) })
	if opts.Interrupt != nil {
		t.Run("spot_interruption", func(t *testing.T) { k.spot(t, 2) })
	}
	if pb, ok := b.(backends.PlacementBackend); ok {
		t.Run("placement_group", func(t *testing.T) { k.placement(t, pb, 3) })
	}
}

type kit struct {
	opts Options
	b    backends.Backend
	run  string
	tags map[string]string
	ids  []string
	vols []string // volume ids to delete in cleanup
	pgs  []string // placement group ids to delete in cleanup
}

func randomHex(n int) string {
	buf := make([]byte, n)
	_, _ = rand.Read(buf)
	return hex.EncodeToString(buf)
}

func (k *kit) id(i int) string { return fmt.Sprintf("conf-%s-%d", k.run, i) }

func (k *kit) spec(t *testing.T, i int) backends.InstanceSpec {
	t.Helper()
	var spec backends.InstanceSpec
	if k.opts.Spec != nil {
		spec = k.opts.Spec(i)
	} else {
		all, err := k.b.Offers(t.Context(), offers.Query{})
		if err != nil || len(all) == 0 {
			t.Fatalf("no offer to create from: %v (%d offers)", err, len(all))
		}
		spec.Offer = all[0]
	}
	spec.ID = k.id(i)
	tags := backends.CopyTags(spec.Tags)
	if tags == nil {
		tags = map[string]string{}
	}
	for key, v := range k.tags {
		tags[key] = v
	}
	tags[backends.TagInstance] = spec.ID
	spec.Tags = tags
	return spec
}

func (k *kit) cleanup(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), k.opts.Timeout)
	defer cancel()
	for _, id := range k.ids {
		for ctx.Err() == nil {
			err := k.b.Terminate(ctx, id)
			if err == nil {
				break
			}
			if backends.KindOf(err) == backends.KindStalled {
				t.Errorf("cleanup: terminate %s: %v", id, err)
				break
			}
			time.Sleep(k.opts.Poll)
		}
	}
	if vb, ok := k.b.(backends.VolumeBackend); ok {
		for _, id := range k.vols {
			retry(ctx, k.opts.Poll, func() error { return vb.DeleteVolume(ctx, id) }, func(err error) { t.Errorf("cleanup: delete volume %s: %v", id, err) })
		}
	}
	if pb, ok := k.b.(backends.PlacementBackend); ok {
		for _, id := range k.pgs {
			retry(ctx, k.opts.Poll, func() error { return pb.DeletePlacementGroup(ctx, id) }, func(err error) { t.Errorf("cleanup: delete placement group %s: %v", id, err) })
		}
	}
	left, err := k.b.List(ctx, map[string]string{backends.TagInstallation: k.tags[backends.TagInstallation]})
	if err == nil && len(left) > 0 {
		t.Errorf("cleanup: leaked instances: %v", ids(left))
	}
}

// retry calls f until it returns nil, a stalled error or ctx ends, and
// reports the last error of a failure to fail.
func retry(ctx context.Context, poll time.Duration, f func() error, fail func(error)) {
	for {
		err := f()
		if err == nil {
			return
		}
		if backends.IsStalled(err) || ctx.Err() != nil {
			fail(err)
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(poll):
		}
	}
}

func ids(insts []backends.Instance) []string {
	out := make([]string, len(insts))
	for i, in := range insts {
		out[i] = in.ID
	}
	slices.Sort(out)
	return out
}

// traits checks that the driver's Traits agree with what it is: a known
// runtime, a Connector when it runs a shim, instance specs with a host
// exactly when it takes over hosts, and the same answer every time.
func (k *kit) traits(t *testing.T) {
	tr := k.b.Traits()
	if tr != k.b.Traits() {
		t.Errorf("Traits changed between calls: %+v, then %+v", tr, k.b.Traits())
	}
	if tr.Runtime != backends.RuntimeShim && tr.Runtime != backends.RuntimeRunner {
		t.Errorf("Traits().Runtime = %q, want %q or %q", tr.Runtime, backends.RuntimeShim, backends.RuntimeRunner)
	}
	if _, ok := k.b.(backends.Connector); tr.Runtime == backends.RuntimeShim && !ok {
		t.Errorf("Traits().Runtime = %q but the driver does not implement backends.Connector: the server could not reach its shims", tr.Runtime)
	}
	var host bool
	if k.opts.Spec != nil {
		host = k.opts.Spec(0).Host != nil
	}
	if tr.TakesOverHosts != host {
		t.Errorf("Traits().TakesOverHosts = %t but the kit's instance specs name a host = %t", tr.TakesOverHosts, host)
	}
}

func (k *kit) unknownID(t *testing.T) {
	id := "conf-unknown-" + k.run
	if err := k.b.Terminate(t.Context(), id); err != nil {
		t.Errorf("Terminate(unknown) = %v, want nil (gone is success)", err)
	}
	if _, err := k.b.Describe(t.Context(), id); !errors.Is(err, backends.ErrNotFound) {
		t.Errorf("Describe(unknown) = %v, want ErrNotFound", err)
	}
}

func (k *kit) checkInstance(t *testing.T, inst backends.Instance, spec backends.InstanceSpec, what string) {
	t.Helper()
	if inst.ID != spec.ID {
		t.Errorf("%s: ID = %q, want %q", what, inst.ID, spec.ID)
	}
	if inst.Backend != k.b.Name() {
		t.Errorf("%s: Backend = %q, want %q", what, inst.Backend, k.b.Name())
	}
	if !backends.MatchTags(inst.Tags, spec.Tags) {
		t.Errorf("%s: tags %v lack %v", what, inst.Tags, spec.Tags)
	}
	switch inst.Status {
	case backends.StatusProvisioning, backends.StatusRunning:
	default:
		t.Errorf("%s: status %q, want provisioning or running", what, inst.Status)
	}
	if want := k.b.Traits().Runtime; inst.Runtime != want {
		t.Errorf("%s: runtime %q, want %q (Traits().Runtime)", what, inst.Runtime, want)
	}
}

func (k *kit) createDescribe(t *testing.T, i int) backends.Instance {
	spec := k.spec(t, i)
	k.ids = append(k.ids, spec.ID)
	inst, err := k.b.Create(t.Context(), spec)
	if err != nil {
		t.Fatalf("Create(%s): %v", spec.ID, err)
	}
	k.checkInstance(t, inst, spec, "Create")
	inst = k.waitRunning(t, spec.ID)
	k.checkInstance(t, inst, spec, "Describe")
	if inst.Offer.Backend != k.b.Name() || inst.Offer.CPUs <= 0 || inst.Offer.MemoryGB <= 0 {
		t.Errorf("Describe: offer not filled in: %+v", inst.Offer)
	}
	return inst
}

// createConcurrently calls Create twice at once with the same new id (two
// workers racing, a retry overlapping a slow first call): both must succeed
// with the same instance, and only one may exist.
func (k *kit) createConcurrently(t *testing.T, i int) backends.Instance {
	spec := k.spec(t, i)
	k.ids = append(k.ids, spec.ID)
	var wg sync.WaitGroup
	var got [2]backends.Instance
	var errs [2]error
	for j := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[j], errs[j] = k.b.Create(t.Context(), spec)
		}()
	}
	wg.Wait()
	for j := range 2 {
		if errs[j] != nil {
			t.Fatalf("concurrent Create %d of %s: %v", j, spec.ID, errs[j])
		}
		k.checkInstance(t, got[j], spec, "concurrent Create")
	}
	if got[0].ProviderID != got[1].ProviderID {
		t.Errorf("concurrent Creates made two instances: %q and %q", got[0].ProviderID, got[1].ProviderID)
	}
	if l, err := k.b.List(t.Context(), map[string]string{backends.TagInstance: spec.ID}); err != nil || len(l) != 1 {
		t.Errorf("List(instance=%s) after concurrent Creates = %v, %v; want exactly one", spec.ID, ids(l), err)
	}
	return k.waitRunning(t, spec.ID)
}

func (k *kit) waitRunning(t *testing.T, id string) backends.Instance {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), k.opts.Timeout)
	defer cancel()
	for {
		inst, err := k.b.Describe(ctx, id)
		if err != nil {
			t.Fatalf("Describe(%s): %v", id, err)
		}
		if inst.Status == backends.StatusRunning {
			return inst
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s not running after %s: status %q: %s", id, k.opts.Timeout, inst.Status, inst.Message)
		case <-time.After(k.opts.Poll):
		}
	}
}

func (k *kit) createReused(t *testing.T, first backends.Instance) {
	spec := k.spec(t, 0)
	again, err := k.b.Create(t.Context(), spec)
	if err != nil {
		t.Fatalf("Create with a reused id: %v", err)
	}
	if again.ID != first.ID || (first.ProviderID != "" && again.ProviderID != first.ProviderID) {
		t.Errorf("Create with a reused id made another instance: %+v, first %+v", again, first)
	}
	got, err := k.b.List(t.Context(), map[string]string{backends.TagInstance: spec.ID})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 {
		t.Errorf("List(instance=%s) after a reused Create = %v, want exactly one", spec.ID, ids(got))
	}
}

func (k *kit) offers(t *testing.T) {
	ctx := t.Context()
	all, err := k.b.Offers(ctx, offers.Query{})
	if err != nil {
		t.Fatalf("Offers: %v", err)
	}
	if len(all) == 0 {
		t.Fatal("Offers(zero query) is empty")
	}
	maxCPU := 0
	for _, o := range all {
		if o.Backend != k.b.Name() {
			t.Errorf("offer %s: backend %q, want %q", o.Instance, o.Backend, k.b.Name())
		}
		if o.Instance == "" || o.Region == "" {
			t.Errorf("offer %+v: empty instance or region", o)
		}
		if o.CPUs <= 0 || o.MemoryGB <= 0 || o.Price < 0 || o.DiskGB < 0 {
			t.Errorf("offer %s: cpus %d memory %g price %g disk %g", o.Instance, o.CPUs, o.MemoryGB, o.Price, o.DiskGB)
		}
		if (o.GPUCount == 0) != (o.GPUName == "") {
			t.Errorf("offer %s: gpu count %d but name %q", o.Instance, o.GPUCount, o.GPUName)
		}
		switch o.Availability {
		case offers.AvailabilityUnknown, offers.AvailabilityAvailable, offers.AvailabilityIdle,
			offers.AvailabilityBusy, offers.AvailabilityNotAvailable:
		default:
			t.Errorf("offer %s: availability %q", o.Instance, o.Availability)
		}
		maxCPU = max(maxCPU, o.CPUs)
	}
	o := all[0]
	filters := []struct {
		name string
		q    offers.Query
		want bool // whether all[0] must be in the result
	}{
		{"exact cpu and memory", offers.Query{CPU: offers.Exactly(float64(o.CPUs)), Memory: offers.AtMost(o.MemoryGB)}, true},
		{"own backend name", offers.Query{Backends: []string{k.b.Name()}}, true},
		{"more cpus than any offer", offers.Query{CPU: offers.AtLeast(float64(maxCPU + 1))}, false},
		{"more memory than the offer", offers.Query{Memory: offers.AtLeast(o.MemoryGB + 1), CPU: offers.Exactly(float64(o.CPUs)), InstanceTypes: []string{o.Instance}}, false},
		{"another backend", offers.Query{Backends: []string{"no-such-backend"}}, false},
		{"more gpus than any offer", offers.Query{GPUCount: offers.AtLeast(1025)}, false},
	}
	for _, f := range filters {
		got, err := k.b.Offers(ctx, f.q)
		if err != nil {
			t.Errorf("Offers(%s): %v", f.name, err)
			continue
		}
		found := slices.ContainsFunc(got, func(x offers.Offer) bool { return x.Instance == o.Instance && x.Region == o.Region })
		if found != f.want {
			t.Errorf("Offers(%s): offer %s found=%v, want %v", f.name, o.Instance, found, f.want)
		}
		if !f.want && len(offers.Filter(got, f.q)) != len(got) {
			t.Errorf("Offers(%s) returned offers that do not match the query", f.name)
		}
	}
}

func (k *kit) connect(t *testing.T, inst backends.Instance) {
	c, ok := k.b.(backends.Connector)
	if !ok {
		if inst.Runtime == backends.RuntimeShim {
			t.Error("VM-based backend does not implement backends.Connector")
		}
		t.Skip("container-based backend without a connector")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	conn, err := c.Connect(ctx, inst)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	defer conn.Close()
	h, err := api.NewShimClient(conn.ShimURL(), conn.HTTPClient()).Health(ctx)
	if err != nil {
		t.Fatalf("shim health through the connection: %v", err)
	}
	t.Logf("shim at %s: %+v", conn.ShimURL(), h)
}

// peer checks that a second server's backend, on the same records, lists
// and describes the instances the first created, none of them gone.
func (k *kit) peer(t *testing.T, created []backends.Instance) {
	ctx := t.Context()
	p := k.opts.Peer(t)
	got, err := p.List(ctx, map[string]string{backends.TagInstallation: k.tags[backends.TagInstallation]})
	if err != nil {
		t.Fatal(err)
	}
	if want := ids(created); !slices.Equal(ids(got), want) {
		t.Errorf("peer List(installation) = %v, want %v", ids(got), want)
	}
	for _, inst := range created {
		d, err := p.Describe(ctx, inst.ID)
		if err != nil || d.Status == backends.StatusTerminated || d.ID != inst.ID {
			t.Errorf("peer Describe(%s) = %+v, %v; want the instance, not gone", inst.ID, d, err)
		}
	}
}

func (k *kit) list(t *testing.T, created []backends.Instance) {
	ctx := t.Context()
	got, err := k.b.List(ctx, map[string]string{backends.TagInstallation: k.tags[backends.TagInstallation]})
	if err != nil {
		t.Fatal(err)
	}
	if want := ids(created); !slices.Equal(ids(got), want) {
		t.Errorf("List(installation) = %v, want %v", ids(got), want)
	}
	for _, inst := range got {
		if !backends.MatchTags(inst.Tags, k.tags) || inst.Tags[backends.TagInstance] != inst.ID {
			t.Errorf("listed %s: tags %v", inst.ID, inst.Tags)
		}
	}
	one, err := k.b.List(ctx, map[string]string{backends.TagInstance: created[0].ID})
	if err != nil || len(one) != 1 || one[0].ID != created[0].ID {
		t.Errorf("List(instance=%s) = %v, %v", created[0].ID, ids(one), err)
	}
	none, err := k.b.List(ctx, map[string]string{backends.TagInstallation: "someone-else"})
	if err != nil || len(none) != 0 {
		t.Errorf("List(foreign installation) = %v, %v; want none", ids(none), err)
	}
	everything, err := k.b.List(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, inst := range created {
		if !slices.Contains(ids(everything), inst.ID) {
			t.Errorf("List(no tags) misses %s", inst.ID)
		}
	}
}

// terminate calls Terminate until it returns nil (retrying wait and
// transient kinds), then once more: the second call must be nil at once.
func (k *kit) terminate(t *testing.T, id string) {
	ctx, cancel := context.WithTimeout(t.Context(), k.opts.Timeout)
	defer cancel()
	for {
		err := k.b.Terminate(ctx, id)
		if err == nil {
			break
		}
		if backends.KindOf(err) == backends.KindStalled || ctx.Err() != nil {
			t.Fatalf("Terminate(%s): %v", id, err)
		}
		time.Sleep(k.opts.Poll)
	}
	if err := k.b.Terminate(ctx, id); err != nil {
		t.Errorf("second Terminate(%s) = %v, want nil", id, err)
	}
}

func (k *kit) gone(t *testing.T, created []backends.Instance) {
	for _, inst := range created {
		got, err := k.b.Describe(t.Context(), inst.ID)
		if !errors.Is(err, backends.ErrNotFound) && !(err == nil && got.Status == backends.StatusTerminated) {
			t.Errorf("Describe(%s) after terminate = %+v, %v; want ErrNotFound", inst.ID, got, err)
		}
	}
	left, err := k.b.List(t.Context(), map[string]string{backends.TagInstallation: k.tags[backends.TagInstallation]})
	if err != nil || len(left) != 0 {
		t.Errorf("List after terminate = %v, %v; want none", ids(left), err)
	}
}
