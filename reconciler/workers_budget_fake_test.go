package reconciler

import (
	"strings"
	"testing"
	"time"

	"hoist/backends"
	"hoist/backends/fake"
	"hoist/backends/offers"
	"hoist/reconciler/plan"
	"hoist/store"
)

// budgetCounter counts Observer.BudgetBlocked calls.
type budgetCounter struct {
	nopObserver
	blocked map[string]int // by kind
}

func (o *budgetCounter) BudgetBlocked(project, kind string) { o.blocked[project+"/"+kind]++ }

// twelveDollars is one offer at $12/h.
var twelveDollars = []offers.Offer{{Instance: "big", Region: "loop", CPUs: 8, MemoryGB: 32, DiskGB: 100, Price: 12}}

// budgetController is a controller on be with budget b and obs (another
// server start, as a changed config needs).
func (f *fixture) budgetController(be *fake.Backend, b plan.Budget, obs Observer) {
	f.t.Helper()
	c, err := New(Config{Now: f.clock.Now, Owner: "test", Budget: b},
		Deps{Store: f.st, Source: f.c.src, Backends: map[string]backends.Backend{"fake": be}, Observer: obs})
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { c.stopPumps(); c.pumpWG.Wait(); c.closeConns() })
	f.c = c
}

// events returns the events of kind about the object named name.
func (f *fixture) eventsOf(kind, name, typ string) []store.Event {
	f.t.Helper()
	es, err := f.st.ListEvents(f.ctx, store.EventFilter{ObjectKind: kind, ObjectName: name, Type: typ})
	if err != nil {
		f.t.Fatal(err)
	}
	return es
}

// TestWorkers_jobWaitsForTheBudget: an instance whose price would take the
// project past its hourly budget, or one asked for once the month's budget
// is spent, is not created: the job stays submitted with a message naming
// the budget, one event and one count per wait however often it is
// retried, and nothing is asked of the backend; a server restarted with a
// budget that allows it provisions the instance.
func TestWorkers_jobWaitsForTheBudget(t *testing.T) {
	for _, tc := range []struct {
		name   string
		budget plan.Budget
		spent  float64 // dollars an earlier instance cost this month
		want   string
	}{
		{name: "over the hourly budget", budget: plan.Budget{MaxPerHour: 10},
			want: "waiting: instance at $12.00/h would take project main to $12.00/h, over its budget of $10.00/h"},
		{name: "month's budget spent", budget: plan.Budget{MaxPerMonth: 50}, spent: 60,
			want: "waiting: project main spent $60.00 of its budget of $50.00 this month"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, map[string]string{
				"fleet.dstack.yml": cloudFleet,
				"task.dstack.yml":  "type: task\nname: train\nimage: busybox\ncommands: [echo hi]\n",
			})
			be := f.withFakeBackend(fake.Config{Offers: twelveDollars})
			if tc.spent > 0 {
				now := f.clock.Now()
				old := &store.Instance{Name: "old-0", Backend: "fake", Price: tc.spent, Status: store.InstanceTerminated,
					StartedAt: now.Add(-time.Hour), FinishedAt: now}
				if now.Add(-time.Hour).Before(monthStart(now)) {
					t.Skip("the fake clock is in the first hour of a month")
				}
				if err := f.st.CreateInstance(f.ctx, old); err != nil {
					t.Fatal(err)
				}
			}
			obs := &budgetCounter{blocked: map[string]int{}}
			f.budgetController(be, tc.budget, obs)
			if res := f.sync(); res != resultSynced {
				t.Fatalf("sync = %s, want synced (no pricer: the plan is not held)", res)
			}
			for range 3 { // retries, as the resync does
				f.reconcileJobs("train")
			}
			j := f.job("train")
			if j.Status != store.JobSubmitted || j.InstanceID != "" || j.StatusMessage != tc.want {
				t.Fatalf("job = %s on %q %q, want submitted on none %q", j.Status, j.InstanceID, j.StatusMessage, tc.want)
			}
			if n := len(f.fleetInstances("cloud")); n != 0 || len(be.Attempts()) != 0 {
				t.Fatalf("%d instances recorded, %d created on the backend; want none", n, len(be.Attempts()))
			}
			waits := 0
			for _, e := range f.eventsOf("job", j.JobName, "waiting") {
				if e.Message == tc.want {
					waits++
				}
			}
			if waits != 1 || obs.blocked["main/job"] != 1 {
				t.Fatalf("%d budget events and %d counts, want 1 each", waits, obs.blocked["main/job"])
			}
			raised := tc.budget
			raised.MaxPerHour *= 2
			raised.MaxPerMonth *= 2
			f.budgetController(be, raised, obs)
			inst := f.provision("train")
			if inst.Status != store.InstanceIdle || inst.Price != 12 || len(be.Attempts()) != 1 {
				t.Fatalf("instance %s at $%v/h, %d created; want one idle at $12/h", inst.Status, inst.Price, len(be.Attempts()))
			}
		})
	}
}

// TestWorkers_fleetNodesWaitForTheBudget: a fleet whose nodes would take
// the project past its budget keeps fewer instances, its status message
// naming the budget (one event and one count per wait); the resync
// provisions them once a restarted server's budget allows it.
func TestWorkers_fleetNodesWaitForTheBudget(t *testing.T) {
	f := newFixture(t, map[string]string{"fleet.dstack.yml": "type: fleet\nname: cloud\nnodes: 1\n"})
	be := f.withFakeBackend(fake.Config{Offers: twelveDollars})
	obs := &budgetCounter{blocked: map[string]int{}}
	f.budgetController(be, plan.Budget{MaxPerHour: 10}, obs)
	f.sync()
	f.c.resync(f.ctx)
	f.c.resync(f.ctx)
	fl, err := f.st.GetFleetByName(f.ctx, store.DefaultProject, "cloud")
	if err != nil {
		t.Fatal(err)
	}
	want := "waiting: instance at $12.00/h would take project main to $12.00/h, over its budget of $10.00/h"
	if fl.StatusMessage != want || len(f.fleetInstances("cloud")) != 0 || len(be.Attempts()) != 0 {
		t.Fatalf("fleet %q with %d instances; want %q and none", fl.StatusMessage, len(f.fleetInstances("cloud")), want)
	}
	if n := len(f.eventsOf("fleet", "cloud", "waiting")); n != 1 || obs.blocked["main/fleet"] != 1 {
		t.Fatalf("%d events and %d counts, want 1 each", n, obs.blocked["main/fleet"])
	}
	f.budgetController(be, plan.Budget{MaxPerHour: 12}, obs)
	f.c.resync(f.ctx)
	insts := f.settle("cloud")
	if len(insts) != 1 || insts[0].Status != store.InstanceIdle {
		t.Fatalf("fleet instances %+v, want one idle", insts)
	}
	if fl, _ := f.st.GetFleetByName(f.ctx, store.DefaultProject, "cloud"); strings.HasPrefix(fl.StatusMessage, budgetPrefix) {
		t.Errorf("fleet still says %q", fl.StatusMessage)
	}
}

// TestWorkers_gangWaitsForTheBudget: a two-node task whose cluster fleet
// would grow by two instances past the project's budget waits whole, its
// master saying so (counted once), rather than failing for want of
// capacity; a budget that allows both provisions the gang.
func TestWorkers_gangWaitsForTheBudget(t *testing.T) {
	f := newFixture(t, map[string]string{
		"fleet.dstack.yml": "type: fleet\nname: cluster\nnodes: 0..2\nplacement: cluster\n",
		"task.dstack.yml":  gangTask("2"),
	})
	be := f.withFakeBackend(fake.Config{Offers: twelveDollars})
	obs := &budgetCounter{blocked: map[string]int{}}
	f.budgetController(be, plan.Budget{MaxPerHour: 20}, obs)
	f.sync()
	for range 3 {
		f.reconcileMaster("train")
	}
	want := "waiting: 2 instances at $24.00/h would take project main to $24.00/h, over its budget of $20.00/h"
	js := f.gangJobs("train")
	if js[0].Status != store.JobSubmitted || js[0].StatusMessage != want {
		t.Fatalf("master = %s %q, want submitted %q", js[0].Status, js[0].StatusMessage, want)
	}
	noneStarted(t, js)
	if len(f.fleetInstances("cluster")) != 0 || len(be.Attempts()) != 0 || obs.blocked["main/job"] != 1 {
		t.Fatalf("%d instances, %d created, %d counts; want none, none, 1", len(f.fleetInstances("cluster")), len(be.Attempts()), obs.blocked["main/job"])
	}
	f.budgetController(be, plan.Budget{MaxPerHour: 24}, obs)
	if insts := f.provisionGang("train"); len(insts) != 2 {
		t.Fatalf("gang instances %+v, want 2", insts)
	}
}
