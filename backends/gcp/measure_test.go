package gcp

import (
	"fmt"
	"os"
	"sort"
	"sync"
	"testing"
	"time"

	"hoist/backends"
	"hoist/backends/internal/agentbin"
	"hoist/backends/internal/drivertest"
	"hoist/backends/offers"
	"hoist/e2e/cloudsim/sim"
)

// provision creates instances ids through b as the reconciler does (Create
// until it is accepted, then Describe every poll until running), in
// parallel, and returns how long each took from the first Create.
func provision(t *testing.T, b backends.Backend, offer offers.Offer, ids []string, poll time.Duration) []time.Duration {
	t.Helper()
	tags := map[string]string{backends.TagInstallation: "measure", backends.TagProject: "measure"}
	var mu sync.Mutex
	var took []time.Duration
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			spec := backends.InstanceSpec{ID: id, Name: "measure/" + id, Offer: offer, Tags: backends.CopyTags(tags)}
			spec.Tags[backends.TagInstance] = id
			start := time.Now()
			for {
				inst, err := b.Create(t.Context(), spec)
				if err == nil && inst.Status == backends.StatusRunning {
					break
				}
				if err != nil && backends.KindOf(err) != backends.KindTransient {
					t.Errorf("Create %s: %v", id, err)
					return
				}
				if err == nil {
					inst, err = b.Describe(t.Context(), id)
					if err == nil && inst.Status == backends.StatusRunning {
						break
					}
				}
				if time.Since(start) > 2*time.Minute {
					t.Errorf("%s not running after 2m: %+v %v", id, inst, err)
					return
				}
				time.Sleep(poll)
			}
			mu.Lock()
			took = append(took, time.Since(start))
			mu.Unlock()
		}()
	}
	wg.Wait()
	sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
	return took
}

// terminate terminates ids through b until each is gone.
func terminate(t *testing.T, b backends.Backend, ids []string, poll time.Duration) {
	t.Helper()
	for _, id := range ids {
		deadline := time.Now().Add(time.Minute)
		for {
			err := b.Terminate(t.Context(), id)
			if err == nil {
				break
			}
			if time.Now().After(deadline) || backends.IsStalled(err) {
				t.Fatalf("Terminate %s: %v", id, err)
			}
			time.Sleep(poll)
		}
	}
}

func ids(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return out
}

// TestMeasure_provisioning provisions a few instances through the backend
// as the reconciler does and reports the time from Create to running (SSH
// up, shim answering) and the Compute calls per instance. It runs only with
// HOIST_MEASURE=1.
func TestMeasure_provisioning(t *testing.T) {
	if os.Getenv("HOIST_MEASURE") == "" {
		t.Skip("set HOIST_MEASURE=1 to measure")
	}
	const n, poll = 4, time.Second
	env := startSim(t)
	b := env.open(t, drivertest.Records(t))
	all, err := b.Offers(t.Context(), offers.Query{InstanceTypes: []string{"e2-standard-2"}, Regions: []string{"us-central1"}})
	if err != nil || len(all) == 0 {
		t.Fatalf("offers: %v (%d)", err, len(all))
	}
	// The agents are built once per test process; not part of the figures.
	if _, _, err := agentbin.Agents("amd64"); err != nil {
		t.Fatal(err)
	}
	base := env.cloud.Stats().Calls["gcp"]
	names := ids("measure", n)
	took := provision(t, b, all[0], names, poll)
	running := env.cloud.Stats().Calls["gcp"]
	terminate(t, b, names, poll)
	end := env.cloud.Stats().Calls["gcp"]
	t.Logf("create→running (poll %s) for %d instances: %v", poll, n, took)
	t.Logf("Compute calls per instance up to running: %s", drivertest.PerInstance(base, running, n))
	t.Logf("Compute calls per instance, terminate to gone: %s", drivertest.PerInstance(running, end, n))
}

// TestFaults_errorRate: with 30 % of the Compute calls failing (429 and
// 503), instances still come up through the backend, one VM per instance
// (requestIds), and all go on termination.
func TestFaults_errorRate(t *testing.T) {
	const n, poll = 3, 200 * time.Millisecond
	env := startSim(t)
	b := env.open(t, drivertest.Records(t))
	all, err := b.Offers(t.Context(), offers.Query{InstanceTypes: []string{"e2-standard-2"}, Regions: []string{"us-central1"}})
	if err != nil || len(all) == 0 {
		t.Fatalf("offers: %v (%d)", err, len(all))
	}
	if _, _, err := agentbin.Agents("amd64"); err != nil {
		t.Fatal(err)
	}
	env.cloud.Faults(sim.Faults{ErrorRate: 0.3})
	names := ids("faulty", n)
	took := provision(t, b, all[0], names, poll)
	terminate(t, b, names, poll)
	st := env.cloud.Stats()
	t.Logf("30%% errors: create→running %v; Compute calls %v, failed %v", took, st.Calls["gcp"], st.Failed["gcp"])
	var vms []string
	for _, r := range env.sim.List("gcp", sim.KindInstance) {
		vms = append(vms, r.Name)
		if r.State != sim.StateTerminated {
			t.Errorf("VM %s %s after terminate", r.Name, r.State)
		}
	}
	if len(vms) != n {
		t.Errorf("%d VMs for %d instances: %v", len(vms), n, vms)
	}
}
