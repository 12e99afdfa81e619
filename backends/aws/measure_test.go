package aws

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
	"hoist/backends/vm"
	"hoist/e2e/cloudsim/sim"
)

// TestMeasure_provisioning provisions instances through the backend as the
// reconciler does (Create until accepted, Describe every second until
// running, Terminate until gone) and reports the time from Create to
// running (SSH up, shim answering) and the EC2 calls per instance: 4
// instances without faults, then 10 with 30 % of the API calls failing. It
// runs only with HOIST_MEASURE=1.
func TestMeasure_provisioning(t *testing.T) {
	if os.Getenv("HOIST_MEASURE") == "" {
		t.Skip("set HOIST_MEASURE=1 to measure")
	}
	env := startSim(t)
	b := env.open(t, drivertest.Records(t))
	all, err := b.Offers(t.Context(), offers.Query{InstanceTypes: []string{"t3.micro"}, Regions: []string{"us-east-1"}})
	if err != nil || len(all) == 0 {
		t.Fatalf("offers: %v (%d)", err, len(all))
	}
	// The agents are built once per test process; not part of the figures.
	if _, _, err := agentbin.Agents("amd64"); err != nil {
		t.Fatal(err)
	}
	for _, round := range []struct {
		n         int
		errorRate float64
	}{{4, 0}, {10, 0.3}} {
		env.cloud.Faults(sim.Faults{ErrorRate: round.errorRate})
		measure(t, env, b, all[0], round.n, round.errorRate)
	}
	env.cloud.Faults(sim.Faults{})
}

// TestMeasure_launch50 launches 50 VMs with 30 % of the API calls failing
// at the provider level (Launch until accepted, Get every second until the
// VM runs, Delete until gone: no SSH takeover) and reports the time and the
// EC2 calls per instance. It runs only with HOIST_MEASURE=1.
func TestMeasure_launch50(t *testing.T) {
	if os.Getenv("HOIST_MEASURE") == "" {
		t.Skip("set HOIST_MEASURE=1 to measure")
	}
	const n, poll = 50, time.Second
	env := startSim(t)
	p := env.newTestProvider(t, nil)
	env.cloud.Faults(sim.Faults{ErrorRate: 0.3})
	base := env.cloud.Stats()
	start := time.Now()
	refs := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := launchRequest(fmt.Sprintf("m50-%d", i))
			for {
				m, err := p.Launch(t.Context(), req)
				if err == nil {
					refs[i] = m.Ref
					break
				}
				if backends.KindOf(err) != backends.KindTransient || time.Since(start) > 3*time.Minute {
					t.Errorf("Launch %d: %v", i, err)
					return
				}
				time.Sleep(poll)
			}
			for {
				m, err := p.Get(t.Context(), refs[i])
				if err == nil && m.State == vm.StateRunning {
					return
				}
				if time.Since(start) > 3*time.Minute {
					t.Errorf("%s not running: %+v %v", refs[i], m, err)
					return
				}
				time.Sleep(poll)
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	running := env.cloud.Stats()
	for _, r := range refs {
		for r != "" {
			if err := p.Delete(t.Context(), r); err == nil {
				break
			}
			time.Sleep(poll)
		}
	}
	// Gone before the simulator stops (its shutdown timers write state).
	env.cloud.Faults(sim.Faults{})
	for _, r := range refs {
		if r != "" {
			waitState(t, p, r, vm.StateGone)
		}
	}
	t.Logf("%d VMs, 30%% errors: all running after %s (poll %s)", n, took.Round(100*time.Millisecond), poll)
	t.Logf("EC2 calls per VM: %s", drivertest.PerInstance(base.Calls["aws"], running.Calls["aws"], n))
	t.Logf("of which failed on purpose: %s", drivertest.PerInstance(base.Failed["aws"], running.Failed["aws"], n))
}

func measure(t *testing.T, env *simEnv, b backends.Backend, offer offers.Offer, n int, errorRate float64) {
	const poll = time.Second
	name := fmt.Sprintf("%d instances, %.0f%% errors", n, errorRate*100)
	base := env.cloud.Stats()
	tags := map[string]string{backends.TagInstallation: "measure", backends.TagProject: "measure"}
	var mu sync.Mutex
	var took []time.Duration
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("measure-%.0f-%d", errorRate*100, i)
			spec := backends.InstanceSpec{ID: id, Name: "measure/" + id, Offer: offer, Tags: backends.CopyTags(tags)}
			spec.Tags[backends.TagInstance] = id
			begin := time.Now()
			for {
				if _, err := b.Create(t.Context(), spec); err == nil {
					break
				} else if backends.KindOf(err) == backends.KindStalled || time.Since(begin) > 2*time.Minute {
					t.Errorf("Create %s: %v", id, err)
					return
				}
				time.Sleep(poll)
			}
			for {
				inst, err := b.Describe(t.Context(), id)
				if err == nil && inst.Status == backends.StatusRunning {
					break
				}
				if time.Since(begin) > 3*time.Minute {
					t.Errorf("%s not running after 3m: %+v %v", id, inst, err)
					return
				}
				time.Sleep(poll)
			}
			mu.Lock()
			took = append(took, time.Since(begin))
			mu.Unlock()
		}()
	}
	wg.Wait()
	all := time.Since(start)
	running := env.cloud.Stats()
	for i := range n {
		id := fmt.Sprintf("measure-%.0f-%d", errorRate*100, i)
		deadline := time.Now().Add(2 * time.Minute)
		for {
			err := b.Terminate(t.Context(), id)
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("Terminate %s: %v", id, err)
			}
			time.Sleep(poll)
		}
	}
	end := env.cloud.Stats()
	sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
	t.Logf("%s: all running after %s; create→running (poll %s): %v", name, all.Round(100*time.Millisecond), poll, took)
	t.Logf("%s: EC2 calls per instance up to running: %s", name, drivertest.PerInstance(base.Calls["aws"], running.Calls["aws"], n))
	t.Logf("%s: of which failed on purpose: %s", name, drivertest.PerInstance(base.Failed["aws"], running.Failed["aws"], n))
	t.Logf("%s: EC2 calls per instance, terminate to gone: %s", name, drivertest.PerInstance(running.Calls["aws"], end.Calls["aws"], n))
}
