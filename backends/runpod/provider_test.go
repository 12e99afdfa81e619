package runpod

import (
	"context"
	"errors"
	"net"
	"slices"
	"strconv"
	"testing"
	"time"

	"hoist/backends"
	"hoist/backends/offers"
	"hoist/e2e/cloudsim/sim"
	"hoist/e2e/testenv"
)

func TestProvider_Offers(t *testing.T) {
	e := startSim(t)
	tests := []struct {
		name    string
		edit    func(map[string]any)
		q       offers.Query
		regions []string // the regions the offers must be in, exactly
		spot    bool     // some offer is spot
	}{
		{name: "secure cloud only by default: every listed datacenter",
			edit: func(m map[string]any) { delete(m, "community_cloud") }, regions: []string{"CA-MTL-1", "EU-RO-1", "US-TX-3"}},
		{name: "community cloud adds the countries",
			regions: []string{"CA-MTL-1", "CZ", "EU-RO-1", "US", "US-TX-3"}},
		{name: "configured regions narrow the places",
			edit: func(m map[string]any) { m["regions"] = []string{"CA-MTL-1", "CZ"} }, regions: []string{"CA-MTL-1", "CZ"}},
		{name: "query regions narrow them too",
			q: offers.Query{Regions: []string{"eu-ro-1"}}, regions: []string{"EU-RO-1"}},
		{name: "spot offers when the policy allows them",
			q: offers.Query{Regions: []string{"US-TX-3"}, SpotPolicy: offers.SpotPolicyAuto}, regions: []string{"US-TX-3"}, spot: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := e.provider(t, tt.edit).Offers(t.Context(), tt.q)
			if err != nil {
				t.Fatal(err)
			}
			var regions []string
			spot := false
			for _, o := range got {
				if !slices.Contains(regions, o.Region) {
					regions = append(regions, o.Region)
				}
				spot = spot || o.Spot
				if o.Availability != offers.AvailabilityAvailable || o.GPUCount < 1 || o.Price <= 0 || o.CPUs < 1 || o.GPUName == "" {
					t.Errorf("offer not well formed: %+v", o)
				}
			}
			slices.Sort(regions)
			if !slices.Equal(regions, tt.regions) || spot != tt.spot {
				t.Errorf("regions %v spot %v, want %v %v", regions, spot, tt.regions, tt.spot)
			}
		})
	}
	t.Run("prices and sizes come from the GPU type and its stock", func(t *testing.T) {
		got, err := e.provider(t, nil).Offers(t.Context(), offers.Query{Regions: []string{"US-TX-3"},
			GPUCount: offers.Exactly(2), GPUNames: []string{"A4000"}})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0].Price != 0.5 || got[0].CPUs != 8 || got[0].MemoryGB != 40 || got[0].GPUMemoryGB != 16 ||
			got[0].Instance != "NVIDIA RTX A4000" || got[0].GPUVendor != offers.VendorNVIDIA {
			t.Errorf("offers %+v", got)
		}
	})
	t.Run("one catalog request and one stock request per place", func(t *testing.T) {
		before := e.cloud.Stats().Calls["runpod"]
		if _, err := e.provider(t, func(m map[string]any) { delete(m, "community_cloud") }).Offers(t.Context(), offers.Query{}); err != nil {
			t.Fatal(err)
		}
		after := e.cloud.Stats().Calls["runpod"]
		// The catalog query's first field is countryCodes, the stock
		// query's gpuTypes (the simulator counts calls by first field).
		if n, m := after["countryCodes"]-before["countryCodes"], after["gpuTypes"]-before["gpuTypes"]; n != 1 || m != 3 {
			t.Errorf("%d catalog and %d stock requests, want 1 and 3 (datacenters)", n, m)
		}
	})
	t.Run("a GPU type out of stock is not offered", func(t *testing.T) {
		e.cloud.Faults(sim.Faults{Capacity: map[string]int{"NVIDIA RTX A4000": 0}})
		defer e.cloud.Faults(sim.Faults{})
		got, err := e.provider(t, nil).Offers(t.Context(), offers.Query{})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range got {
			if o.Instance == "NVIDIA RTX A4000" {
				t.Errorf("offered out of stock: %+v", o)
			}
		}
		if len(got) == 0 {
			t.Error("no offers at all")
		}
	})
}

func TestProvider_errors(t *testing.T) {
	e := startSim(t)
	tags := testTags("inst-errors", "t1")
	tests := []struct {
		name   string
		edit   func(map[string]any)
		faults sim.Faults
		call   func(p *Provider) error
		check  func(error) bool
	}{
		{name: "out of stock is no capacity", faults: sim.Faults{Capacity: map[string]int{"NVIDIA RTX A4000": 0}},
			call: func(p *Provider) error {
				_, err := p.CreatePod(t.Context(), testSpec("hoist-nocap", false, tags, "sleep", "30"))
				return err
			},
			check: func(err error) bool { return errors.Is(err, backends.ErrNoCapacity) }},
		{name: "a GPU type not in the datacenter is no capacity",
			call: func(p *Provider) error {
				s := testSpec("hoist-nodc", false, tags, "sleep", "30")
				s.Offer.Instance = "NVIDIA H100 80GB HBM3"
				s.Offer.Region = "EU-RO-1"
				_, err := p.CreatePod(t.Context(), s)
				return err
			},
			check: func(err error) bool { return errors.Is(err, backends.ErrNoCapacity) }},
		{name: "a bad key is stalled", edit: func(m map[string]any) { m["creds"] = map[string]any{"type": "api_key", "api_key": "rpa_wrong"} },
			call:  func(p *Provider) error { _, err := p.ListPods(t.Context(), nil); return err },
			check: backends.IsStalled},
		{name: "a bad key fails the check", edit: func(m map[string]any) { m["creds"] = map[string]any{"api_key": "rpa_wrong"} },
			call:  func(p *Provider) error { return p.Check(t.Context()) },
			check: backends.IsStalled},
		{name: "throttling is transient", faults: sim.Faults{ErrorRate: 1},
			call:  func(p *Provider) error { _, err := p.GetPod(t.Context(), "abc"); return err },
			check: func(err error) bool { return err != nil && backends.KindOf(err) == backends.KindTransient }},
		{name: "an unknown pod is not found",
			call:  func(p *Provider) error { _, err := p.GetPod(t.Context(), "nosuchpod00000"); return err },
			check: func(err error) bool { return errors.Is(err, backends.ErrNotFound) }},
		{name: "terminating an unknown pod is success",
			call:  func(p *Provider) error { return p.TerminatePod(t.Context(), "nosuchpod00000") },
			check: func(err error) bool { return err == nil }},
		{name: "the community cloud needs community_cloud", edit: func(m map[string]any) { delete(m, "community_cloud") },
			call: func(p *Provider) error {
				s := testSpec("hoist-community", false, tags, "sleep", "30")
				s.Offer.Region = "US"
				_, err := p.CreatePod(t.Context(), s)
				return err
			},
			check: backends.IsStalled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e.cloud.Faults(tt.faults)
			defer e.cloud.Faults(sim.Faults{})
			err := tt.call(e.provider(t, tt.edit))
			if !tt.check(err) {
				t.Errorf("err = %v (kind %s)", err, backends.KindOf(err))
			}
		})
	}
}

func TestOptions(t *testing.T) {
	tests := []struct {
		name string
		o    Options
		ok   bool
	}{
		{"creds are required", Options{}, false},
		{"only api_key creds", Options{Creds: &Creds{Type: "oauth", APIKey: "k"}}, false},
		{"an api key", Options{Creds: &Creds{APIKey: "k"}}, true},
		{"a datacenter region", Options{Creds: &Creds{APIKey: "k"}, Regions: []string{"CA-MTL-1"}}, true},
		{"a country needs the community cloud", Options{Creds: &Creds{APIKey: "k"}, Regions: []string{"CA"}}, false},
		{"a country with the community cloud", Options{Creds: &Creds{APIKey: "k"}, Regions: []string{"CA"}, CommunityCloud: true}, true},
		{"regions are upper case", Options{Creds: &Creds{APIKey: "k"}, Regions: []string{"ca-mtl-1"}}, false},
		{"the endpoint is an http URL", Options{Creds: &Creds{APIKey: "k"}, EndpointURL: "ftp://x"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := tt.o.check(); (err == nil) != tt.ok {
				t.Errorf("check = %v, want ok %v", err, tt.ok)
			}
		})
	}
	var o Options
	err := backends.Config{Type: "runpod", Options: []byte(`{"creds":{"api_key":"k"},"community":true}`)}.Decode(&o)
	if err == nil {
		t.Error("an unknown field decoded")
	}
}

func TestProvider_pods(t *testing.T) {
	testenv.Docker(t)
	e := startSim(t)
	p := e.provider(t, nil)
	mine, other := testTags("inst-mine", "t1"), testTags("inst-other", "t2")
	top := t // the first pod stays for the list subtest

	t.Run("create runs the pod with its ports, env and tags", func(t *testing.T) {
		pod, err := p.CreatePod(t.Context(), testSpec("hoist-t1", false, mine, "/bin/sh", "-c", "echo $HELLO; sleep 30"))
		if err != nil {
			t.Fatal(err)
		}
		top.Cleanup(func() { _ = p.TerminatePod(context.Background(), pod.ID) })
		got := waitStatus(t, p, pod.ID, "running")
		host, port, err := net.SplitHostPort(got.Ports[10022])
		if err != nil || net.ParseIP(host) == nil || port != strconv.Itoa(10022) {
			t.Errorf("ports %v", got.Ports)
		}
		if got.Name != "hoist-t1" || got.Tags[backends.TagInstallation] != "inst-mine" || got.Interrupted || got.Price != 0.25 {
			t.Errorf("pod %+v", got)
		}
		res, _ := e.sim.Get("runpod", pod.ID)
		if res.Address != host {
			t.Errorf("pod address %s, runtime ip %s", res.Address, host)
		}
	})
	t.Run("list by tags finds only the pods carrying them", func(t *testing.T) {
		o, err := p.CreatePod(t.Context(), testSpec("hoist-t2", false, other, "sleep", "30"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.TerminatePod(context.Background(), o.ID) })
		for _, tc := range []struct {
			tags map[string]string
			want []string
		}{
			{map[string]string{backends.TagInstallation: "inst-mine"}, []string{"hoist-t1"}},
			{map[string]string{backends.TagInstallation: "inst-other"}, []string{"hoist-t2"}},
			{nil, []string{"hoist-t1", "hoist-t2"}},
			{map[string]string{backends.TagInstallation: "nobody"}, nil},
		} {
			pods, err := p.ListPods(t.Context(), tc.tags)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, pod := range pods {
				names = append(names, pod.Name)
			}
			slices.Sort(names)
			if !slices.Equal(names, tc.want) {
				t.Errorf("ListPods(%v) = %v, want %v", tc.tags, names, tc.want)
			}
		}
	})
	t.Run("terminate twice", func(t *testing.T) {
		pod, err := p.CreatePod(t.Context(), testSpec("hoist-t3", false, mine, "sleep", "30"))
		if err != nil {
			t.Fatal(err)
		}
		for i := range 2 {
			if err := p.TerminatePod(t.Context(), pod.ID); err != nil {
				t.Fatalf("terminate %d: %v", i+1, err)
			}
		}
		if _, err := p.GetPod(t.Context(), pod.ID); !errors.Is(err, backends.ErrNotFound) {
			t.Errorf("terminated pod: %v", err)
		}
	})
	t.Run("registry credentials go through a registry auth deleted with the pod", func(t *testing.T) {
		spec := testSpec("hoist-t6", false, mine, "sleep", "30")
		spec.RegistryUsername, spec.RegistryPassword = "user", "secret"
		pod, err := p.CreatePod(t.Context(), spec)
		if err != nil {
			t.Fatal(err)
		}
		res, _ := e.sim.Get("runpod", pod.ID)
		auth := res.Extra["registry_auth_id"]
		if a, ok := e.sim.Get("runpod", auth); auth == "" || !ok || a.Extra["username"] != "user" || a.State != sim.StateAvailable {
			t.Fatalf("pod's registry auth %q: %+v", auth, a)
		}
		waitStatus(t, p, pod.ID, "running")
		if err := p.TerminatePod(t.Context(), pod.ID); err != nil {
			t.Fatal(err)
		}
		if a, _ := e.sim.Get("runpod", auth); a.State != sim.StateDeleted {
			t.Errorf("registry auth after terminate: %s", a.State)
		}
	})
	t.Run("an interruptible pod reclaimed is interrupted", func(t *testing.T) {
		pod, err := p.CreatePod(t.Context(), testSpec("hoist-t4", true, mine, "sleep", "30"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.TerminatePod(context.Background(), pod.ID) })
		waitStatus(t, p, pod.ID, "running")
		e.cloud.Interrupt(pod.ID)
		got := waitStatus(t, p, pod.ID, "exited")
		if !got.Interrupted || got.Message == "" {
			t.Errorf("reclaimed pod %+v", got)
		}
	})
	t.Run("a pod whose command ended is exited, not interrupted", func(t *testing.T) {
		pod, err := p.CreatePod(t.Context(), testSpec("hoist-t5", false, mine, "/bin/sh", "-c", "exit 3"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.TerminatePod(context.Background(), pod.ID) })
		deadline := time.Now().Add(time.Minute)
		for {
			got, err := p.GetPod(t.Context(), pod.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.Status == "exited" {
				if got.Interrupted {
					t.Errorf("exited pod interrupted: %+v", got)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("pod %+v never exited", got)
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
}
