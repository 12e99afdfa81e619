package lambda

import (
	"fmt"
	"testing"

	"hoist/backends"
	lambdasim "hoist/e2e/cloudsim/lambda"
	"hoist/e2e/cloudsim/sim"
)

// TestFaults_errorRate: with 30 % of the API calls failing (429), retried
// launches give one instance and one SSH key per request, and retried
// deletes leave no instance, key or record.
func TestFaults_errorRate(t *testing.T) {
	env := startSim(t)
	p := env.newTestProvider(t, nil, nil)
	ctx := t.Context()
	env.cloud.Faults(sim.Faults{ErrorRate: 0.3})
	retry := func(what string, fn func() error) {
		t.Helper()
		for attempt := 0; ; attempt++ {
			err := fn()
			if err == nil {
				return
			}
			if backends.KindOf(err) != backends.KindTransient || attempt > 20 {
				t.Fatalf("%s with 30%% errors: %v", what, err)
			}
		}
	}
	var refs []string
	for i := range 10 {
		req := testLaunch(fmt.Sprintf("rate-%d", i), "inst")
		retry("Launch", func() error {
			m, err := p.Launch(ctx, req)
			if err == nil {
				refs = append(refs, m.Ref)
			}
			return err
		})
	}
	live := func(kind string) int {
		n := 0
		for _, r := range env.sim.List(lambdasim.Name, kind) {
			if r.State != sim.StateTerminated && r.State != sim.StateDeleted {
				n++
			}
		}
		return n
	}
	if n, k := live(sim.KindInstance), live(lambdasim.KindSSHKey); n != 10 || k != 10 {
		t.Errorf("%d instances and %d SSH keys for 10 launch requests, want 10 and 10", n, k)
	}
	for _, ref := range refs {
		retry("Delete", func() error { return p.Delete(ctx, ref) })
	}
	st := env.cloud.Stats()
	t.Logf("30%% errors: Lambda calls %v, failed %v", st.Calls[lambdasim.Name], st.Failed[lambdasim.Name])
	env.cloud.Faults(sim.Faults{})
	if n, k := live(sim.KindInstance), live(lambdasim.KindSSHKey); n != 0 || k != 0 {
		t.Errorf("%d instances and %d SSH keys left after the deletes", n, k)
	}
	if recs, _ := p.records(ctx); len(recs) != 0 {
		t.Errorf("records left: %v", recs)
	}
}
