package reconciler

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"hoist/backends/fake"
	"hoist/backends/offers"
	"hoist/store"
)

// The order of waiting gangs against backends/fake (gangorder.go): a gang
// waiting for a cluster fleet's instances keeps them from jobs submitted
// after it, and is woken, not polled, when one becomes ready or free.

// singleTask is a one-node task of name on fleet cluster, submitted
// after what came before it (the fixture's clock moves on a second).
func (f *fixture) singleTask(name string) {
	f.t.Helper()
	f.clock.Advance(time.Second)
	f.write(name+".dstack.yml", "type: task\nname: "+name+"\nimage: busybox\ncommands: [sleep 1h]\nfleets: [cluster]\nresources: {cpu: 1.., memory: 1GB..}\n")
	f.sync()
}

// setCPUs makes instance id's offer one of cpus CPUs, as if the fleet
// held hosts of different sizes.
func (f *fixture) setCPUs(id string, cpus int) {
	f.t.Helper()
	inst := f.instance(id)
	var o offers.Offer
	if err := json.Unmarshal(inst.Offer, &o); err != nil {
		f.t.Fatal(err)
	}
	o.CPUs = cpus
	inst.Offer, _ = json.Marshal(o)
	if err := f.st.UpdateInstance(f.ctx, &inst); err != nil {
		f.t.Fatal(err)
	}
}

// TestWorkers_laterJobsLeaveAWaitingGangTheInstancesItNeeds: on a cluster
// fleet of two big instances and a small one, a two-node gang of big
// nodes waits while a job holds one big instance; a single-node job
// submitted after it takes the small instance, which the gang cannot
// use, and the next one finds no instance rather than take the free big
// one, saying it is held for the gang; once the first job ends the gang
// gets both big instances.
func TestWorkers_laterJobsLeaveAWaitingGangTheInstancesItNeeds(t *testing.T) {
	f := newFixture(t, map[string]string{
		"fleet.dstack.yml": "type: fleet\nname: cluster\nnodes: 3\nplacement: cluster\n",
	})
	f.withFakeBackend(fake.Config{})
	f.sync()
	insts := f.settle("cluster")
	if len(insts) != 3 {
		t.Fatalf("%d instances, want 3", len(insts))
	}
	f.setCPUs(insts[0].ID, 16)
	f.setCPUs(insts[1].ID, 16)
	f.singleTask("first")
	if j := f.stepJob("first", store.JobProvisioning); j.InstanceID != insts[0].ID {
		t.Fatalf("first on %s, want the first big instance %s", j.InstanceID, insts[0].ID)
	}

	f.clock.Advance(time.Second)
	f.write("task.dstack.yml", gangTask("2")+"resources: {cpu: 8..}\n")
	f.sync()
	f.reconcileMaster("train")
	if m := f.gangJobs("train")[0]; !strings.Contains(m.StatusMessage, "waiting for 2 free instances of fleet cluster (1 free, 0 provisioning, 1 in use)") {
		t.Fatalf("master says %q, want it waiting for the busy big instance", m.StatusMessage)
	}

	// Later jobs: the small instance is not the gang's; the free big one is.
	f.singleTask("small")
	if j := f.stepJob("small", store.JobProvisioning); j.InstanceID != insts[2].ID {
		t.Errorf("small on %q, want the small instance %s, which the gang cannot use", j.InstanceID, insts[2].ID)
	}
	f.singleTask("late")
	f.reconcileJobs("late")
	j := f.job("late")
	if j.InstanceID == insts[1].ID || j.TerminationReason != reasonNoCapacity ||
		!strings.Contains(j.TerminationMessage, "held for multi-node runs submitted earlier: "+insts[1].Name+" for run train") {
		t.Fatalf("late = %s on %q (%s %q), want no capacity, the free big instance held for train", j.Status, j.InstanceID, j.TerminationReason, j.TerminationMessage)
	}

	// The first job ends: the gang gets both big instances.
	f.runnerReports("first", "done", 0)
	f.stepJob("first", store.JobDone)
	f.reconcileMaster("train")
	on := map[string]bool{}
	for _, g := range f.gangJobs("train") {
		if g.Status != store.JobProvisioning {
			t.Fatalf("job %s = %s (%q), want provisioning", g.JobName, g.Status, g.StatusMessage)
		}
		on[g.InstanceID] = true
	}
	if !on[insts[0].ID] || !on[insts[1].ID] {
		t.Errorf("gang on %v, want the two big instances", on)
	}
}

// TestWorkers_higherPriorityGangGoesFirst: a gang of a higher priority
// than a single-node job submitted before it still goes first: the job
// leaves it the free instance.
func TestWorkers_higherPriorityGangGoesFirst(t *testing.T) {
	f := newFixture(t, map[string]string{
		"fleet.dstack.yml": "type: fleet\nname: cluster\nnodes: 2\nplacement: cluster\n",
	})
	f.withFakeBackend(fake.Config{})
	f.sync()
	insts := f.settle("cluster")
	f.singleTask("first")
	f.stepJob("first", store.JobProvisioning)
	f.singleTask("late")
	f.clock.Advance(time.Second)
	f.write("task.dstack.yml", gangTask("2")+"priority: 10\n")
	f.sync()
	f.reconcileMaster("train")
	f.reconcileJobs("late")
	j := f.job("late")
	if j.TerminationReason != reasonNoCapacity || !strings.Contains(j.TerminationMessage, "for run train") {
		t.Fatalf("late (priority 0) = %s on %q (%s %q), want no capacity, the free instance held for the priority-10 gang",
			j.Status, j.InstanceID, j.TerminationReason, j.TerminationMessage)
	}
	for _, i := range insts {
		if i.ID == j.InstanceID {
			t.Errorf("late placed on %s", i.Name)
		}
	}
}

// runJobWorkers runs the controller's job workers (as Run does) until the
// test ends. The fixture's clock does not move, so a job that asked to be
// looked at again later (a poll) never is: only a wake-up reaches it.
// The jobs queued so far are dropped first, unprocessed.
func (f *fixture) runJobWorkers() {
	f.t.Helper()
	for {
		ctx, cancel := context.WithTimeout(f.ctx, 50*time.Millisecond)
		id, ok := f.c.jobs.Get(ctx)
		cancel()
		if !ok {
			break
		}
		f.c.jobs.Done(id)
	}
	ctx, cancel := context.WithCancel(f.ctx)
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() { f.c.work(ctx, "jobs", f.c.jobs, f.c.jobPumped, f.c.reconcileJob) })
	}
	f.t.Cleanup(func() { cancel(); wg.Wait() })
}

// waitGangPlaced waits (real time, the fake clock standing still) for
// every job of run name's gang to be past submitted.
func (f *fixture) waitGangPlaced(name string) {
	f.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		placed := true
		for _, j := range f.gangJobs(name) {
			placed = placed && j.Status != store.JobSubmitted
		}
		if placed {
			return
		}
		if time.Now().After(deadline) {
			m := f.gangJobs(name)[0]
			f.t.Fatalf("gang %s not placed: master %s (%q)", name, m.Status, m.StatusMessage)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestWorkers_gangIsWokenWhenItsFleetsInstanceIsFreeOrReady: a gang
// waiting for a busy instance is placed by the job workers as soon as
// the instance's job ends, and a gang holding instances on their way is
// placed as soon as the last is ready, both with the clock standing
// still: the instance woke the gang's master, no poll did.
func TestWorkers_gangIsWokenWhenItsFleetsInstanceIsFreeOrReady(t *testing.T) {
	t.Run("instance free", func(t *testing.T) {
		f := newFixture(t, map[string]string{
			"fleet.dstack.yml": "type: fleet\nname: cluster\nnodes: 2\nplacement: cluster\n",
		})
		f.withFakeBackend(fake.Config{})
		f.sync()
		f.settle("cluster")
		f.singleTask("other")
		f.stepJob("other", store.JobProvisioning)
		f.write("task.dstack.yml", gangTask("2"))
		f.sync()
		f.reconcileMaster("train")
		noneStarted(t, f.gangJobs("train"))
		f.runJobWorkers()
		f.runnerReports("other", "done", 0)
		f.stepJob("other", store.JobDone)
		f.waitGangPlaced("train")
	})
	t.Run("instance ready", func(t *testing.T) {
		f := newFixture(t, map[string]string{
			"fleet.dstack.yml": "type: fleet\nname: cluster\nnodes: 3\nplacement: cluster\n",
			"task.dstack.yml":  gangTask("3"),
		})
		f.withFakeBackend(fake.Config{})
		f.sync()
		insts := f.fleetInstances("cluster")
		f.reconcileInstance(insts[0].ID)
		f.reconcileInstance(insts[1].ID)
		f.reconcileMaster("train")
		if m := f.gangJobs("train")[0]; m.InstanceID == "" || !strings.Contains(m.StatusMessage, "2 of 3 ready") {
			t.Fatalf("master on %q says %q, want it holding the instances, 2 of 3 ready", m.InstanceID, m.StatusMessage)
		}
		f.runJobWorkers()
		for range 10 {
			if f.instance(insts[2].ID).Status == store.InstanceIdle {
				break
			}
			f.reconcileInstance(insts[2].ID)
		}
		f.waitGangPlaced("train")
	})
}
