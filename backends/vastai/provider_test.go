package vastai

import (
	"errors"
	"net"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"hoist/agents/api"
	"hoist/backends"
	"hoist/backends/internal/drivertest"
	"hoist/backends/offers"
	"hoist/backends/podcloud"
	"hoist/e2e/cloudsim/sim"
	vastsim "hoist/e2e/cloudsim/vastai"
	"hoist/e2e/testenv"
)

func instances(os []offers.Offer) []string {
	var out []string
	for _, o := range os {
		s := o.Instance
		if o.Spot {
			s += "/spot"
		}
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

func TestOffers(t *testing.T) {
	e := startSim(t)
	no := false
	tests := []struct {
		name string
		edit func(*Options)
		q    offers.Query
		want []string
	}{
		{"dstack's filters exclude unreliable and old-CUDA hosts", nil, offers.Query{},
			[]string{"1000001", "1000002", "3090001", "3090001/spot", "4090001", "4090001/spot", "4090002", "4090002/spot"}},
		{"community_cloud false keeps datacenter hosts only", func(o *Options) { o.CommunityCloud = &no }, offers.Query{},
			[]string{"1000001", "1000002", "4090001", "4090001/spot"}},
		{"regions match a geolocation or its country", func(o *Options) { o.Regions = []string{"CA", "Texas, US"} }, offers.Query{},
			[]string{"1000001", "4090001", "4090001/spot", "4090002", "4090002/spot"}},
		{"GPU name", nil, offers.Query{GPUNames: []string{"rtx4090"}},
			[]string{"4090001", "4090001/spot", "4090002", "4090002/spot"}},
		{"GPU name with several Vast.ai spellings", nil, offers.Query{GPUNames: []string{"A100", "H100"}},
			[]string{"1000001", "1000002"}},
		{"GPU count and memory", nil, offers.Query{GPUCount: offers.AtLeast(2), GPUMemory: offers.AtLeast(80)},
			[]string{"1000001", "1000002"}},
		{"CPU, memory and price", nil, offers.Query{CPU: offers.AtMost(8), Memory: offers.AtLeast(30), MaxPrice: 1},
			[]string{"3090001", "3090001/spot", "4090001", "4090001/spot"}},
		{"another vendor has none", nil, offers.Query{GPUVendor: offers.VendorAMD}, nil},
		{"another backend has none", nil, offers.Query{Backends: []string{"runpod"}}, nil},
		{"the type's alias is this backend", nil, offers.Query{Backends: []string{"vast"}, InstanceTypes: []string{"1000001"}}, []string{"1000001"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := e.provider(t, tt.edit)
			tt.q.SpotPolicy = offers.SpotPolicyAuto
			got, err := p.Offers(t.Context(), tt.q)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, instances(got)); diff != "" {
				t.Errorf("offers (-want +got):\n%s", diff)
			}
		})
	}
}

func TestOfferFields(t *testing.T) {
	e := startSim(t)
	p := e.provider(t, nil)
	got, err := p.Offers(t.Context(), offers.Query{GPUNames: []string{"RTX4090"}, GPUCount: offers.Exactly(1), Disk: offers.AtLeast(50), SpotPolicy: offers.SpotPolicyAuto})
	if err != nil {
		t.Fatal(err)
	}
	want := []offers.Offer{
		{Backend: "vastai", Instance: "4090001", Region: "Quebec, CA", Price: 0.40, CPUs: 8, CPUArch: offers.ArchX86,
			MemoryGB: 32, GPUVendor: offers.VendorNVIDIA, GPUName: "RTX4090", GPUCount: 1, GPUMemoryGB: 24, DiskGB: 50,
			Availability: offers.AvailabilityAvailable},
	}
	spot := want[0]
	spot.Spot, spot.Price = true, 0.22
	want = append([]offers.Offer{spot}, want...) // cheapest first
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("offers (-want +got):\n%s", diff)
	}
}

func TestOffersCachedPerRequirements(t *testing.T) {
	e := startSim(t)
	p := e.provider(t, nil)
	calls := func() int { return e.sim.Stats().Calls[vastsim.Name]["bundles"] }
	q1 := offers.Query{GPUNames: []string{"RTX4090"}}
	q2 := offers.Query{GPUNames: []string{"RTX3090"}}
	for _, q := range []offers.Query{q1, q1, q2, q2, q1} {
		if _, err := p.Offers(t.Context(), q); err != nil {
			t.Fatal(err)
		}
	}
	if got := calls(); got != 2 {
		t.Errorf("bundles searched %d times for two distinct requirements, want 2", got)
	}
}

func TestLabelRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		tags map[string]string
	}{
		{"ownership and task tags", testTags("9b1e4a", "3f9c")},
		{"a name other than the task's default", testTags("9b1e4a", "another-task")},
		{"other tags and odd characters", map[string]string{"team": "ml & infra", backends.TagResource: "fleet/a?b=c"}},
		{"no tags", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			label := encodeLabel("hoist-3f9c", tt.tags)
			name, tags := decodeLabel(label)
			if name != "hoist-3f9c" {
				t.Errorf("name %q from %q", name, label)
			}
			if diff := cmp.Diff(tt.tags, tags); diff != "" && len(tt.tags)+len(tags) > 0 {
				t.Errorf("tags from %q (-want +got):\n%s", label, diff)
			}
		})
	}
	if label := encodeLabel("hoist-3f9c", testTags("9b1e4a", "3f9c")); strings.Contains(label, "hoist-") || len(label) > 60 {
		t.Errorf("label %q is %d characters", label, len(label))
	}
}

func TestErrors(t *testing.T) {
	e := startSim(t)
	tests := []struct {
		name  string
		edit  func(*Options)
		fault sim.Faults
		call  func(*Provider) error
		check func(error) bool
	}{
		{"a bad key is stalled", func(o *Options) { o.Creds.APIKey = "wrong" }, sim.Faults{},
			func(p *Provider) error { _, err := p.Offers(t.Context(), offers.Query{}); return err }, backends.IsStalled},
		{"a bad key on create is stalled", func(o *Options) { o.Creds.APIKey = "wrong" }, sim.Faults{},
			func(p *Provider) error { _, err := p.CreatePod(t.Context(), testSpec("4090001", false)); return err }, backends.IsStalled},
		{"throttling and gateway errors are transient", nil, sim.Faults{ErrorRate: 1},
			func(p *Provider) error { _, err := p.ListPods(t.Context(), nil); return err },
			func(err error) bool { return backends.KindOf(err) == backends.KindTransient }},
		{"an unknown instance is not found", nil, sim.Faults{},
			func(p *Provider) error { _, err := p.GetPod(t.Context(), "123"); return err },
			func(err error) bool { return errors.Is(err, backends.ErrNotFound) }},
		{"terminating an unknown instance succeeds", nil, sim.Faults{},
			func(p *Provider) error { return p.TerminatePod(t.Context(), "123") },
			func(err error) bool { return err == nil }},
		{"a catalog row's instance name is no capacity", nil, sim.Faults{},
			func(p *Provider) error {
				_, err := p.CreatePod(t.Context(), testSpec("1x-RTX_4090-32-65536", false))
				return err
			},
			func(err error) bool { return errors.Is(err, backends.ErrNoCapacity) }},
		{"a bid below the minimum is no capacity", nil, sim.Faults{},
			func(p *Provider) error {
				s := testSpec("4090001", true)
				s.Offer.Price = 0.01
				_, err := p.CreatePod(t.Context(), s)
				return err
			},
			func(err error) bool { return errors.Is(err, backends.ErrNoCapacity) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e.sim.SetFaults(tt.fault)
			defer e.sim.SetFaults(sim.Faults{})
			err := tt.call(e.provider(t, tt.edit))
			if !tt.check(err) {
				t.Errorf("error %v (kind %v)", err, backends.KindOf(err))
			}
		})
	}
}

func TestNoCapacity(t *testing.T) {
	e := startSim(t)
	p := e.provider(t, nil)
	e.sim.SetFaults(sim.Faults{Capacity: map[string]int{"4090001": 0}})
	_, err := p.CreatePod(t.Context(), testSpec("4090001", false))
	if !errors.Is(err, backends.ErrNoCapacity) {
		t.Fatalf("create on a full ask: %v, want ErrNoCapacity", err)
	}
	if n := len(e.sim.List(vastsim.Name, vastsim.KindPod)); n != 0 {
		t.Errorf("%d contracts after a refused rental, want none", n)
	}
}

// testSpec is a pod running `sleep 30` on ask.
func testSpec(ask string, spot bool) podcloud.PodSpec {
	return podcloud.PodSpec{
		Name:    "hoist-task-" + ask,
		Offer:   offers.Offer{Backend: "vastai", Instance: ask, Region: "Quebec, CA", Price: 0.40, Spot: spot, DiskGB: 20},
		Image:   testenv.BusyboxImage,
		Command: []string{"/bin/sh", "-c", "sleep 30"},
		Env:     map[string]string{"HOIST_TEST": "1"},
		Ports:   []int{api.PodSSHPort},
		Tags:    testTags("inst-a", "task-"+ask),
	}
}

func TestPodLifecycle(t *testing.T) {
	testenv.Docker(t)
	e := startSim(t)
	p := e.provider(t, nil)
	ctx := t.Context()

	pod, err := p.CreatePod(ctx, testSpec("4090001", false))
	if err != nil {
		t.Fatal(err)
	}
	other := testSpec("3090001", false)
	other.Tags = testTags("inst-b", "task-other")
	pod2, err := p.CreatePod(ctx, other)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("create then get shows it running with 10022 mapped", func(t *testing.T) {
		got := waitPod(t, p, pod.ID, "running", func(p podcloud.Pod) bool { return p.Status != podcloud.PodStarting })
		if got.Status != podcloud.PodRunning {
			t.Fatalf("pod %+v, want running", got)
		}
		addr := got.Ports[api.PodSSHPort]
		host, port, err := net.SplitHostPort(addr)
		if err != nil || !strings.HasPrefix(host, "127.77.") || port != "10022" {
			t.Errorf("port %d at %q, want 127.77.x.y:10022", api.PodSSHPort, addr)
		}
		if got.Name != "hoist-task-4090001" || !backends.MatchTags(got.Tags, testTags("inst-a", "task-4090001")) {
			t.Errorf("name %q tags %v", got.Name, got.Tags)
		}
	})
	t.Run("list by label tags", func(t *testing.T) {
		for _, tc := range []struct {
			tags map[string]string
			want []string
		}{
			{nil, []string{pod.ID, pod2.ID}},
			{map[string]string{backends.TagInstallation: "inst-a"}, []string{pod.ID}},
			{map[string]string{podcloud.TagTask: "task-other"}, []string{pod2.ID}},
			{map[string]string{backends.TagInstallation: "inst-c"}, nil},
		} {
			pods, err := p.ListPods(ctx, tc.tags)
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, q := range pods {
				ids = append(ids, q.ID)
			}
			slices.Sort(ids)
			slices.Sort(tc.want)
			if diff := cmp.Diff(tc.want, ids); diff != "" {
				t.Errorf("list %v (-want +got):\n%s", tc.tags, diff)
			}
		}
	})
	t.Run("terminate twice", func(t *testing.T) {
		for i := range 2 {
			if err := p.TerminatePod(ctx, pod.ID); err != nil {
				t.Fatalf("terminate %d: %v", i+1, err)
			}
		}
		if _, err := p.GetPod(ctx, pod.ID); !errors.Is(err, backends.ErrNotFound) {
			t.Errorf("get after terminate: %v, want ErrNotFound", err)
		}
		if err := p.TerminatePod(ctx, pod2.ID); err != nil {
			t.Fatal(err)
		}
	})
}

func TestBidOutbidIsInterrupted(t *testing.T) {
	testenv.Docker(t)
	e := startSim(t)
	p := e.provider(t, nil)
	spec := testSpec("4090001", true)
	spec.Offer.Price = 0.22
	pod, err := p.CreatePod(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	defer p.TerminatePod(t.Context(), pod.ID)
	waitPod(t, p, pod.ID, "running", func(p podcloud.Pod) bool { return p.Status == podcloud.PodRunning })
	e.cloud.Interrupt(pod.ID)
	got, err := p.GetPod(t.Context(), pod.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != podcloud.PodExited || !got.Interrupted {
		t.Errorf("outbid pod %+v, want exited and interrupted", got)
	}
}

func TestFactoryConfig(t *testing.T) {
	e := startSim(t)
	tests := []struct {
		name    string
		edit    func(map[string]any)
		wantErr string
	}{
		{"the simulator's entry opens", nil, ""},
		{"an unknown field is an error", func(o map[string]any) { o["zone"] = "x" }, "unknown field"},
		{"creds are required", func(o map[string]any) { delete(o, "creds") }, "creds is required"},
		{"another creds type is refused", func(o map[string]any) { o["creds"] = map[string]any{"type": "oauth", "api_key": "k"} }, "not supported"},
		{"a refused key fails the backend", func(o map[string]any) { o["creds"] = map[string]any{"type": "api_key", "api_key": "wrong"} }, "checking the API key"},
		{"a bad endpoint_url is an error", func(o map[string]any) { o["endpoint_url"] = "ftp://x" }, "endpoint_url"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			deps := drivertest.Deps(t, drivertest.Records(t))
			b, err := Factory(e.config(t, tt.edit), deps)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatal(err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("error %v, want one with %q", err, tt.wantErr)
			case err == nil && b.Name() != "vastai":
				t.Errorf("name %q", b.Name())
			}
		})
	}
	o := e.options(t, func(o *Options) { o.CommunityCloud = nil })
	p, err := NewProvider(o, nil, nil)
	if err != nil || !p.community {
		t.Errorf("community_cloud unset: community %v, %v; want true (dstack's default)", p != nil && p.community, err)
	}
}

// TestLeftoverContractDestroyed checks the cleanup of a contract that a
// refused rental returned anyway (dstack's compute.py): it is destroyed,
// through throttling.
func TestLeftoverContractDestroyed(t *testing.T) {
	testenv.Docker(t)
	e := startSim(t)
	p := e.provider(t, nil)
	pod, err := p.CreatePod(t.Context(), testSpec("4090001", false))
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	e.sim.SetFaults(sim.Faults{ErrorRate: 0.5})
	defer e.sim.SetFaults(sim.Faults{})
	for range 5 { // the 502s end the retries; a few tries get through
		p.destroyLeftover(t.Context(), pod.ID)
		calls++
		if r, _ := e.sim.Get(vastsim.Name, pod.ID); r.State == sim.StateTerminated {
			return
		}
	}
	t.Errorf("contract %s not destroyed after %d cleanups", pod.ID, calls)
}
