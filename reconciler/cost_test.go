package reconciler

import (
	"os"
	"slices"
	"testing"

	"hoist/reconciler/plan"
	"hoist/store"
)

// TestPlan_spendNowIsTheInstancesPrice: the plan's spend now is the price
// of the store's billed instances (the figure the overview shows, from
// plan.CostsOf): a fleet in Git carries its instances, idle ones included;
// a run carries the instance it occupies of a fleet no longer in Git; an
// unchanged revision's spend after equals it.
func TestPlan_spendNowIsTheInstancesPrice(t *testing.T) {
	f := newFixture(t, map[string]string{
		"fleet.dstack.yml": fleetAndTask["fleet.dstack.yml"],
		"task.dstack.yml":  fleetAndTask["task.dstack.yml"],
		"pool.dstack.yml":  "type: fleet\nname: pool\nnodes: 0..2\nbackends: [aws]\n",
	}).withSSHBackend()
	if res := f.sync(); res != resultSynced {
		t.Fatalf("sync = %s", res)
	}
	pool, err := f.st.GetFleetByName(f.ctx, store.DefaultProject, "pool")
	if err != nil {
		t.Fatal(err)
	}
	old := store.Fleet{Project: store.DefaultProject, Name: "old", Status: store.FleetTerminating, RemovedFromGit: true, Spec: []byte(`{}`)}
	if err := f.st.CreateFleet(f.ctx, &old); err != nil {
		t.Fatal(err)
	}
	add := func(fleet store.Fleet, num int, status string, price float64) store.Instance {
		i, err := f.c.addFleetInstance(f.ctx, fleet, store.Instance{InstanceNum: num, Backend: "aws", Price: price})
		if err != nil {
			t.Fatal(err)
		}
		i.Status = status
		if err := f.st.UpdateInstance(f.ctx, &i); err != nil {
			t.Fatal(err)
		}
		return i
	}
	add(pool, 0, store.InstanceBusy, 2)
	add(pool, 1, store.InstanceIdle, 1)
	add(pool, 2, store.InstancePending, 8)           // not created yet: free
	add(pool, 3, store.InstanceTerminated, 16)       // gone: free
	draining := add(old, 0, store.InstanceBusy, 0.5) // the task runs there
	j := f.jobs(f.run("train").ID)[0]
	j.InstanceID, j.Status = draining.ID, store.JobRunning
	if err := f.st.UpdateJob(f.ctx, &j); err != nil {
		t.Fatal(err)
	}

	p, err := f.c.PlanFS(f.ctx, os.DirFS(f.dir))
	if err != nil {
		t.Fatal(err)
	}
	insts, err := f.st.ListInstances(f.ctx, store.InfraFilter{Project: store.DefaultProject})
	if err != nil {
		t.Fatal(err)
	}
	var all []plan.Instance
	for _, i := range insts {
		all = append(all, plan.Instance{Status: i.Status, Price: i.Price})
	}
	spend := plan.CostsOf(all).Total
	if spend != 3.5 || p.CostBefore != spend || p.CostAfter != spend || p.Changes() {
		t.Fatalf("spend per hour %v, plan before %v after %v (changes %v); want 3.5 for all and no changes", spend, p.CostBefore, p.CostAfter, p.Changes())
	}
	price := map[string]float64{}
	for _, s := range p.Steps {
		price[s.Name] = s.Current.PricePerHour
	}
	if price["pool"] != 3 || price["gpu-hosts"] != 0 || price["train"] != 0.5 {
		t.Fatalf("current prices = %v, want pool 3, gpu-hosts 0, train 0.5", price)
	}
}

// TestBilledStatuses: the statuses priceCurrent reads are the ones
// plan.Billed counts.
func TestBilledStatuses(t *testing.T) {
	for _, s := range []string{store.InstancePending, store.InstanceProvisioning, store.InstanceIdle,
		store.InstanceBusy, store.InstanceTerminating, store.InstanceTerminated} {
		if plan.Billed(s) != slices.Contains(billedStatuses, s) {
			t.Errorf("status %s: plan.Billed %v, read by priceCurrent %v", s, plan.Billed(s), slices.Contains(billedStatuses, s))
		}
	}
}
