package aws

import (
	"errors"
	"testing"

	"hoist/backends"
	"hoist/backends/vm"
	"hoist/e2e/cloudsim/sim"
)

// TestFaults_capacity: EC2's InsufficientInstanceCapacity, as the SDK
// returns it from the simulator, is ErrNoCapacity, and comes at once (the
// SDK does not retry it).
func TestFaults_capacity(t *testing.T) {
	env := startSim(t)
	p := env.newTestProvider(t, nil)
	env.cloud.Faults(sim.Faults{Capacity: map[string]int{"t3.micro": 0}})
	before := env.cloud.Stats().Calls["aws"]["RunInstances"]
	_, err := p.Launch(t.Context(), launchRequest("cap-1"))
	if code(err) != "InsufficientInstanceCapacity" || !errors.Is(err, backends.ErrNoCapacity) {
		t.Fatalf("Launch = %v, want InsufficientInstanceCapacity as ErrNoCapacity", err)
	}
	if n := env.cloud.Stats().Calls["aws"]["RunInstances"] - before; n != 1 {
		t.Errorf("RunInstances called %d times, want 1 (no retry of a capacity error)", n)
	}
	// Another type still launches.
	req := launchRequest("cap-2")
	req.Offer.Instance = "t3.small"
	if _, err := p.Launch(t.Context(), req); err != nil {
		t.Errorf("Launch t3.small = %v", err)
	}
}

// TestFaults_throttling: with every call throttled (RequestLimitExceeded,
// 503) the SDK retries and then gives up with a transient error; with 30 %
// of the calls failing, the SDK's retries hide most of them.
func TestFaults_throttling(t *testing.T) {
	env := startSim(t)
	p := env.newTestProvider(t, nil)
	env.cloud.Faults(sim.Faults{ErrorRate: 1})
	_, err := p.Get(t.Context(), "us-east-1/i-0123456789abcdef0")
	if code(err) != "RequestLimitExceeded" || backends.KindOf(err) != backends.KindTransient || errors.Is(err, backends.ErrNotFound) {
		t.Fatalf("Get while throttled = %v (kind %s), want a transient RequestLimitExceeded", err, backends.KindOf(err))
	}
	_, err = p.Launch(t.Context(), launchRequest("thr-1"))
	if code(err) != "RequestLimitExceeded" || backends.KindOf(err) != backends.KindTransient || errors.Is(err, backends.ErrNoCapacity) {
		t.Fatalf("Launch while throttled = %v (kind %s), want a transient RequestLimitExceeded", err, backends.KindOf(err))
	}

	env.cloud.Faults(sim.Faults{ErrorRate: 0.3})
	var launched, failed int
	for i := range 10 {
		req := launchRequest("thr-" + string(rune('a'+i)))
		for attempt := 0; ; attempt++ {
			m, err := p.Launch(t.Context(), req)
			if err == nil {
				launched++
				if m.State != vm.StatePending && m.State != vm.StateRunning {
					t.Errorf("Launch = %+v", m)
				}
				break
			}
			failed++
			if backends.KindOf(err) != backends.KindTransient || attempt > 5 {
				t.Fatalf("Launch with 30%% errors = %v", err)
			}
		}
	}
	st := env.cloud.Stats()
	t.Logf("30%% errors: %d launched, %d Launch calls failed after the SDK's retries; EC2 calls %v, failed %v", launched, failed, st.Calls["aws"], st.Failed["aws"])
	// The same client tokens: one instance each, however many retries.
	var n int
	for _, r := range env.sim.List("aws", sim.KindInstance) {
		if r.Tags["hoist.installation"] == "test-inst" {
			n++
		}
	}
	if n != 10 {
		t.Errorf("%d instances for 10 launch requests, want 10", n)
	}
}

// TestFaults_mixed: with 30 % of the calls failing in every way EC2 fails
// (server errors, throttling, capacity, timeouts and answers lost after
// the call was carried out), retried Launches end with exactly one
// instance per launch request: the client token makes a RunInstances whose
// answer was lost return the instance it made.
func TestFaults_mixed(t *testing.T) {
	env := startSim(t)
	p := env.newTestProvider(t, nil)
	env.cloud.Faults(sim.Faults{ErrorRate: 0.3, HoldMS: 100, ErrorKinds: map[sim.Fault]float64{
		sim.FaultTransient: 1, sim.FaultThrottle: 1, sim.FaultCapacity: 1, sim.FaultTimeout: 1, sim.FaultLost: 1,
	}})
	kinds := map[string]int{}
	for i := range 8 {
		req := launchRequest("mix-" + string(rune('a'+i)))
		for attempt := 0; ; attempt++ {
			_, err := p.Launch(t.Context(), req)
			if err == nil {
				break
			}
			switch {
			case errors.Is(err, backends.ErrNoCapacity):
				kinds["no_capacity"]++
			case backends.KindOf(err) == backends.KindTransient:
				kinds["transient"]++
			default:
				t.Fatalf("Launch = %v (kind %s), want transient or no capacity", err, backends.KindOf(err))
			}
			if attempt > 20 {
				t.Fatalf("Launch %s failed %d times: %v", req.ID, attempt, err)
			}
		}
	}
	per := map[string]int{}
	for _, r := range env.sim.List("aws", sim.KindInstance) {
		if r.Tags["hoist.installation"] == "test-inst" {
			per[r.Extra["client_token"]]++
		}
	}
	if len(per) != 8 {
		t.Errorf("instances for %d client tokens, want 8: %v", len(per), per)
	}
	for tok, n := range per {
		if n != 1 {
			t.Errorf("client token %s made %d instances, want 1", tok, n)
		}
	}
	st := env.cloud.Stats()
	t.Logf("Launch errors after the SDK's retries: %v; EC2 calls %v, failed by kind %v", kinds, st.Calls["aws"], st.FailedByKind["aws"])
}
