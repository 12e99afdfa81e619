package reconciler

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"hoist/backends"
	"hoist/backends/fake"
	"hoist/backends/offers"
	"hoist/store"
)

// startTask syncs the fixture and runs run name's job until its pump
// follows it on a newly grown instance, which it returns.
func (f *fixture) startTask(name string) store.Instance {
	f.t.Helper()
	if res := f.sync(); res != resultSynced {
		f.t.Fatalf("sync = %s", res)
	}
	inst := f.provision(name)
	f.stepJob(name, store.JobRunning)
	f.reconcileJobs(name) // hands the job to its pump
	return inst
}

// TestWorkers_failedJobRetriesWithBackoffOnTheSameInstance: a task whose
// command exits non-zero fails with its exit code; with retry on error the
// run resubmits after the back-off, and the new submission is placed on the
// idle instance the first one left (no new instance).
func TestWorkers_failedJobRetriesWithBackoffOnTheSameInstance(t *testing.T) {
	f := newFixture(t, map[string]string{
		"fleet.dstack.yml": cloudFleet,
		"task.dstack.yml":  "type: task\nname: flaky\nimage: busybox\ncommands: [echo trying, exit 3]\nretry:\n  on_events: [error]\n  duration: 1h\n",
	})
	be := f.withFakeBackend(fake.Config{})
	inst := f.startTask("flaky")
	f.waitJob("flaky", store.JobTerminating)
	j := f.stepJob("flaky", store.JobFailed)
	if j.TerminationReason != reasonContainerExitedErr || j.ExitCode == nil || *j.ExitCode != 3 {
		t.Fatalf("job failed with %s exit %v, want container_exited_with_error exit 3", j.TerminationReason, j.ExitCode)
	}
	if after := f.reconcileRun("flaky"); after != 15*time.Second || f.run("flaky").Status != store.RunPending {
		t.Fatalf("run = %s, wakes in %s; want pending (retrying) in 15s", f.run("flaky").Status, after)
	}
	f.clock.Advance(15 * time.Second)
	f.reconcileRun("flaky")
	if j := f.job("flaky"); j.SubmissionNum != 1 || j.Status != store.JobSubmitted {
		t.Fatalf("after the back-off the job is submission %d %s, want 1 submitted", j.SubmissionNum, j.Status)
	}
	j = f.stepJob("flaky", store.JobProvisioning)
	if j.InstanceID != inst.ID {
		t.Errorf("retry placed on %s, want the idle instance %s", j.InstanceID, inst.ID)
	}
	f.stepJob("flaky", store.JobRunning)
	f.reconcileJobs("flaky")
	f.waitJob("flaky", store.JobTerminating)
	if j := f.stepJob("flaky", store.JobFailed); f.output(j.ID) != "trying\n" {
		t.Errorf("second submission's output %q", f.output(j.ID))
	}
	if got := be.Instances(); len(got) != 1 {
		t.Errorf("backend instances = %v, want the one instance", got)
	}
}

// TestWorkers_noCapacityTriesTheNextOffer: an instance whose offer has no
// capacity ends (no_offers) and the job waiting for it gets an instance
// from the next-cheapest offer; once every offer was tried the job fails
// for want of capacity.
func TestWorkers_noCapacityTriesTheNextOffer(t *testing.T) {
	two := []offers.Offer{
		{Instance: "small", Region: "loop", CPUs: 4, MemoryGB: 16, DiskGB: 100, Price: 0.1},
		{Instance: "large", Region: "loop", CPUs: 8, MemoryGB: 32, DiskGB: 100, Price: 0.2},
	}
	files := map[string]string{
		"fleet.dstack.yml": cloudFleet,
		"task.dstack.yml":  "type: task\nname: train\nimage: busybox\ncommands: [echo hi]\n",
	}
	t.Run("the next offer has capacity", func(t *testing.T) {
		f := newFixture(t, files)
		be := f.withFakeBackend(fake.Config{Offers: two, Capacity: 1})
		if _, err := be.Create(f.ctx, backends.InstanceSpec{ID: "someone-else"}); err != nil {
			t.Fatal(err)
		}
		f.sync()
		first := f.provision("train")
		if first.Status != store.InstanceTerminated || first.TerminationReason != "no_offers" {
			t.Fatalf("first instance = %s (%s), want terminated for no_offers", first.Status, first.TerminationReason)
		}
		if err := be.Terminate(f.ctx, "someone-else"); err != nil {
			t.Fatal(err)
		}
		second := f.provision("train")
		var o offers.Offer
		_ = json.Unmarshal(second.Offer, &o)
		if second.ID == first.ID || second.Status != store.InstanceIdle || o.Instance != "large" {
			t.Fatalf("second instance = %s %s from offer %q, want a new idle instance from offer large", second.ID, second.Status, o.Instance)
		}
		if j := f.stepJob("train", store.JobProvisioning); j.InstanceID != second.ID {
			t.Errorf("job on %s, want %s", j.InstanceID, second.ID)
		}
	})
	t.Run("no offer has capacity", func(t *testing.T) {
		f := newFixture(t, files)
		be := f.withFakeBackend(fake.Config{Offers: two})
		be.SetCreateError(fmt.Errorf("fake: %w", backends.ErrNoCapacity))
		f.sync()
		f.provision("train")
		f.provision("train")
		f.reconcileJobs("train") // every offer tried: terminating
		j := f.stepJob("train", store.JobFailed)
		if j.TerminationReason != reasonNoCapacity || !strings.Contains(j.TerminationMessage, "all 2 fitting offers tried") {
			t.Fatalf("job failed with %s %q, want no capacity after both offers", j.TerminationReason, j.TerminationMessage)
		}
		if len(be.Instances()) != 0 {
			t.Errorf("backend instances = %v, want none", be.Instances())
		}
	})
}

// TestWorkers_jobWaitsWhileItsInstanceProvisions: the instance worker keeps
// a new instance provisioning until the backend reports it running, and
// the job waiting for it is assigned once it is idle.
func TestWorkers_jobWaitsWhileItsInstanceProvisions(t *testing.T) {
	f := newFixture(t, map[string]string{
		"fleet.dstack.yml": cloudFleet,
		"task.dstack.yml":  "type: task\nname: train\nimage: busybox\ncommands: [echo hi]\n",
	})
	f.withFakeBackend(fake.Config{ProvisionFor: time.Minute})
	f.sync()
	f.reconcileJobs("train")
	id := f.job("train").InstanceID
	for range 2 {
		if after := f.reconcileInstance(id); after != 2*time.Second || f.instance(id).Status != store.InstanceProvisioning {
			t.Fatalf("instance = %s, wakes in %s; want provisioning, again in 2s", f.instance(id).Status, after)
		}
		f.reconcileJobs("train")
		if j := f.job("train"); j.Status != store.JobSubmitted || j.StatusMessage != "waiting for instance "+f.instance(id).Name {
			t.Fatalf("job = %s %q, want submitted waiting for its instance", j.Status, j.StatusMessage)
		}
	}
	f.clock.Advance(time.Minute)
	f.reconcileInstance(id)
	if inst := f.instance(id); inst.Status != store.InstanceIdle || inst.StartedAt.IsZero() {
		t.Fatalf("instance = %s (started %s), want idle", inst.Status, inst.StartedAt)
	}
	if j := f.stepJob("train", store.JobProvisioning); j.InstanceID != id {
		t.Errorf("job on %s, want %s", j.InstanceID, id)
	}
}

// TestWorkers_idleInstanceIsReapedAfterIdleDuration: an instance of a
// backend fleet idle longer than idle_duration, with the fleet above
// nodes.min, terminates; a Terminate error keeps it terminating and shows
// why until the backend lets it go.
func TestWorkers_idleInstanceIsReapedAfterIdleDuration(t *testing.T) {
	f := newFixture(t, map[string]string{
		"fleet.dstack.yml": cloudFleet,
		"task.dstack.yml":  "type: task\nname: train\nimage: busybox\ncommands: [echo hi]\n",
	})
	be := f.withFakeBackend(fake.Config{})
	inst := f.startTask("train")
	f.waitJob("train", store.JobTerminating)
	f.stepJob("train", store.JobDone)
	f.clock.Advance(59 * time.Second)
	if f.reconcileInstance(inst.ID); f.instance(inst.ID).Status != store.InstanceIdle {
		t.Fatalf("instance = %s before idle_duration, want idle", f.instance(inst.ID).Status)
	}
	f.clock.Advance(2 * time.Second)
	f.reconcileInstance(inst.ID)
	if got := f.instance(inst.ID); got.Status != store.InstanceTerminating || got.TerminationReason != "idle_timeout" {
		t.Fatalf("instance = %s (%s), want terminating for idle_timeout", got.Status, got.TerminationReason)
	}
	be.SetTerminateError(inst.ID, backends.Transient(errors.New("fake: the provider is slow")))
	if _, err := f.c.reconcileInstance(f.ctx, inst.ID); err == nil {
		t.Fatal("reconcile instance: no error while Terminate fails")
	}
	if got := f.instance(inst.ID); got.Status != store.InstanceTerminating || got.StatusMessage != "fake: the provider is slow" {
		t.Fatalf("instance = %s %q, want terminating saying why", got.Status, got.StatusMessage)
	}
	be.SetTerminateError(inst.ID, nil)
	f.reconcileInstance(inst.ID)
	if got := f.instance(inst.ID); got.Status != store.InstanceTerminated {
		t.Fatalf("instance = %s, want terminated", got.Status)
	}
	if len(be.Instances()) != 0 {
		t.Errorf("backend instances = %v, want none", be.Instances())
	}
}

// TestWorkers_fleetNodesComeFromOffersAndShrinkToMax: a fleet's nodes get
// instances from the cheapest offer at sync; lowering nodes terminates the
// instances beyond it.
func TestWorkers_fleetNodesComeFromOffersAndShrinkToMax(t *testing.T) {
	f := newFixture(t, map[string]string{"fleet.dstack.yml": "type: fleet\nname: cloud\nnodes: 2\n"})
	be := f.withFakeBackend(fake.Config{})
	f.sync()
	insts := f.fleetInstances("cloud")
	if len(insts) != 2 {
		t.Fatalf("fleet has %d instances, want 2", len(insts))
	}
	for _, i := range insts {
		f.reconcileInstance(i.ID)
		if got := f.instance(i.ID); got.Status != store.InstanceIdle || got.Backend != "fake" {
			t.Fatalf("instance %s = %s on %s, want idle on fake", got.Name, got.Status, got.Backend)
		}
	}
	if len(be.Instances()) != 2 {
		t.Fatalf("backend instances = %v, want 2", be.Instances())
	}
	f.write("fleet.dstack.yml", "type: fleet\nname: cloud\nnodes: 1\n")
	f.sync()
	terminating := 0
	for _, i := range f.fleetInstances("cloud") {
		if i.Status == store.InstanceTerminating {
			terminating++
			f.reconcileInstance(i.ID)
		}
	}
	if terminating != 1 || len(be.Instances()) != 1 {
		t.Fatalf("%d instances terminating, backend keeps %v; want 1 and 1", terminating, be.Instances())
	}
}

// TestWorkers_unreachableInstanceIsMarkedAndSkipped: the instance worker
// marks an instance the backend cannot reach, placement passes it over for
// a new instance, and the mark goes once it answers again.
func TestWorkers_unreachableInstanceIsMarkedAndSkipped(t *testing.T) {
	f := newFixture(t, map[string]string{"fleet.dstack.yml": "type: fleet\nname: cloud\nnodes: 1..2\n"})
	be := f.withFakeBackend(fake.Config{})
	f.sync()
	first := f.fleetInstances("cloud")[0]
	f.reconcileInstance(first.ID)
	be.SetUnreachable(first.ID, true)
	f.reconcileInstance(first.ID)
	if got := f.instance(first.ID); !got.Unreachable || got.Status != store.InstanceIdle {
		t.Fatalf("instance = %s unreachable=%v, want idle and unreachable", got.Status, got.Unreachable)
	}
	f.write("task.dstack.yml", "type: task\nname: train\nimage: busybox\ncommands: [echo hi]\n")
	f.sync()
	second := f.provision("train")
	if second.ID == first.ID || second.Status != store.InstanceIdle {
		t.Fatalf("job waits for %s (%s), want a new instance", second.ID, second.Status)
	}
	be.SetUnreachable(first.ID, false)
	f.reconcileInstance(first.ID)
	if got := f.instance(first.ID); got.Unreachable {
		t.Errorf("instance still unreachable after it answers: %q", got.StatusMessage)
	}
	evs, err := f.st.ListEvents(f.ctx, store.EventFilter{ObjectID: first.ID, Type: "reachability", Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	for _, e := range evs {
		if e.ObjectID == first.ID && e.Type == "reachability" {
			seen = append(seen, e.Message)
		}
	}
	if len(seen) != 2 {
		t.Errorf("reachability events %q, want unreachable and reachable again", seen)
	}
}

// TestWorkers_runnerUnreachablePastGraceFailsTheJob: a running job whose
// instance stops answering is followed for UnreachableGrace and then
// fails as instance_unreachable.
func TestWorkers_runnerUnreachablePastGraceFailsTheJob(t *testing.T) {
	f := newFixture(t, map[string]string{
		"fleet.dstack.yml": cloudFleet,
		"task.dstack.yml":  "type: task\nname: train\nimage: busybox\ncommands: [echo started, sleep 1h]\n",
	})
	be := f.withFakeBackend(fake.Config{})
	inst := f.startTask("train")
	j := f.job("train")
	waitFor(t, "the first output stored", func() bool { return f.output(j.ID) == "started\n" })
	for ready, _ := f.c.insts.Depth(); ready > 0; ready, _ = f.c.insts.Depth() {
		k, _ := f.c.insts.Get(f.ctx) // the fixture steps instances itself
		f.c.insts.Done(k)
	}
	be.SetUnreachable(inst.ID, true)
	time.Sleep(300 * time.Millisecond) // the pump notices
	if got := f.job("train"); got.Status != store.JobRunning {
		t.Fatalf("job = %s right after its instance went silent, want running within the grace", got.Status)
	}
	// Time passes (the pump may notice the silence only now, under load).
	waitFor(t, "the job to fail past the grace", func() bool {
		f.clock.Advance(10 * time.Second)
		return f.job("train").Status == store.JobTerminating
	})
	j = f.job("train")
	if j.TerminationReason != reasonInstanceUnreachable {
		t.Fatalf("job terminating for %s, want %s", j.TerminationReason, reasonInstanceUnreachable)
	}
	// The instance is due for a check at once, so a retry is not placed
	// on it before its next poll marks it unreachable.
	if ready, _ := f.c.insts.Depth(); ready == 0 {
		t.Error("the silent job's instance is not queued for a check")
	}
	f.reconcileInstance(inst.ID)
	if got := f.instance(inst.ID); !got.Unreachable {
		t.Errorf("instance after its check: unreachable %v, want true", got.Unreachable)
	}
}

// waitFor waits (real time, at most 5 s) until cond holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestWorkers_busyInstanceTakesNoSecondJob: an instance of a backend fleet
// runs one job at a time; with the fleet at nodes.max a second job fails
// for want of capacity, saying so, and the first keeps its instance.
func TestWorkers_busyInstanceTakesNoSecondJob(t *testing.T) {
	f := newFixture(t, map[string]string{
		"fleet.dstack.yml":  "type: fleet\nname: cloud\nnodes: 0..1\n",
		"first.dstack.yml":  "type: task\nname: first\nimage: busybox\ncommands: [sleep 1h]\n",
		"second.dstack.yml": "type: task\nname: second\nimage: busybox\ncommands: [echo hi]\n",
	})
	be := f.withFakeBackend(fake.Config{})
	f.sync()
	inst := f.provision("first")
	f.stepJob("first", store.JobProvisioning)
	j := f.stepJob("second", store.JobFailed)
	if j.TerminationReason != reasonNoCapacity || !strings.Contains(j.TerminationMessage, "the fleet is at nodes.max (1)") {
		t.Errorf("second job failed for %s %q, want no capacity at nodes.max", j.TerminationReason, j.TerminationMessage)
	}
	if first := f.job("first"); first.InstanceID != inst.ID || first.Status != store.JobProvisioning {
		t.Errorf("first job = %s on %s, want provisioning on %s", first.Status, first.InstanceID, inst.ID)
	}
	if len(be.Instances()) != 1 {
		t.Errorf("backend instances = %v, want 1", be.Instances())
	}
}
