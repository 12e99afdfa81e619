package reconciler

import (
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"hoist/agents/api"
	"hoist/backends"
	"hoist/backends/fake"
	"hoist/store"
)

// TestWorkers_anotherServerTakesOverARunningJobAndItsOutputIsStoredOnce:
// when a server stalls past its job lease, another server claims the job,
// the first server's pump stops at its next heartbeat, and the second one
// follows the runner from where the store ends: every line is stored once.
func TestWorkers_anotherServerTakesOverARunningJobAndItsOutputIsStoredOnce(t *testing.T) {
	f := newFixture(t, map[string]string{
		"fleet.dstack.yml": cloudFleet,
		"task.dstack.yml":  "type: task\nname: train\nimage: busybox\ncommands: [echo one, sleep 1500ms, echo two]\n",
	})
	be := f.withFakeBackend(fake.Config{}, func(c *Config) { c.Owner, c.LeaseFor = "a", 600*time.Millisecond })
	a := f.c
	f.startTask("train")
	j := f.job("train")
	waitFor(t, "the first line stored", func() bool { return f.output(j.ID) == "one\n" })
	b := f.controllerOn(be, Config{Owner: "b", Now: f.clock.Now, UnreachableGrace: time.Minute})
	for range 5 { // server a stalled: its lease has expired (a heartbeat may win once)
		f.clock.Advance(time.Hour)
		if _, err := b.reconcileJob(f.ctx, j.ID); err != nil {
			t.Fatal(err)
		}
		if b.pumping(j.ID) {
			break
		}
	}
	if !b.pumping(j.ID) {
		t.Fatal("server b did not take the job over")
	}
	waitFor(t, "server a's pump to stop", func() bool { return !a.pumping(j.ID) })
	f.c = b
	f.waitJob("train", store.JobTerminating)
	if j := f.stepJob("train", store.JobDone); f.output(j.ID) != "one\ntwo\n" {
		t.Errorf("stored output %q, want each line once", f.output(j.ID))
	}
}

// TestWorkers_stoppedRunStopsItsRunnerAndRemovesTheTask: stopping a run
// whose job runs moves the job to terminating; the job worker stops the
// runner with the user's reason, keeps its output and removes the task.
func TestWorkers_stoppedRunStopsItsRunnerAndRemovesTheTask(t *testing.T) {
	f := newFixture(t, map[string]string{
		"fleet.dstack.yml": cloudFleet,
		"task.dstack.yml":  "type: task\nname: train\nimage: busybox\ncommands: [echo working, sleep 1h]\n",
	})
	be := f.withFakeBackend(fake.Config{})
	inst := f.startTask("train")
	j := f.job("train")
	waitFor(t, "the first line stored", func() bool { return f.output(j.ID) == "working\n" })
	if err := f.c.StopRun(f.ctx, "train", false); err != nil {
		t.Fatal(err)
	}
	f.reconcileRun("train")
	j = f.stepJob("train", store.JobTerminated)
	if j.TerminationReason != reasonTerminatedByUser {
		t.Errorf("job terminated for %s, want %s", j.TerminationReason, reasonTerminatedByUser)
	}
	if got := be.Tasks(inst.ID); len(got) != 0 {
		t.Errorf("shim keeps tasks %v, want none", got)
	}
	if out := f.output(j.ID); out != "working\n" {
		t.Errorf("stored output %q", out)
	}
	f.reconcileRun("train")
	if run := f.run("train"); run.Status != store.RunTerminated {
		t.Errorf("run = %s, want terminated", run.Status)
	}
}

// TestWorkers_idleInstanceSweepsDanglingTasks: a task the shim keeps for a
// job the store does not know (a crash between recording a job's end and
// removing its container) is removed when the instance worker looks.
func TestWorkers_idleInstanceSweepsDanglingTasks(t *testing.T) {
	f := newFixture(t, map[string]string{"fleet.dstack.yml": "type: fleet\nname: cloud\nnodes: 1\n"})
	be := f.withFakeBackend(fake.Config{})
	f.sync()
	inst := f.fleetInstances("cloud")[0]
	f.reconcileInstance(inst.ID)
	shim, _, err := f.c.shimFor(f.ctx, inst.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := shim.CreateTask(f.ctx, api.TaskSpec{ID: "left-behind", Image: "busybox"}); err != nil {
		t.Fatal(err)
	}
	f.reconcileInstance(inst.ID)
	if got := be.Tasks(inst.ID); len(got) != 0 {
		t.Errorf("shim keeps tasks %v after the sweep, want none", got)
	}
}

// TestWorkers_containerLostEndsTheJob: a running job whose container goes
// away behind the server's back (its runner vanishes, the shim reports
// container_lost) ends as container_exited_with_error with the exit code.
func TestWorkers_containerLostEndsTheJob(t *testing.T) {
	f := newFixture(t, map[string]string{
		"fleet.dstack.yml": cloudFleet,
		"task.dstack.yml":  "type: task\nname: train\nimage: busybox\ncommands: [sleep 1h]\n",
	})
	be := f.withFakeBackend(fake.Config{})
	inst := f.startTask("train")
	j := f.job("train")
	// Someone removes the container behind the server's back.
	if !be.LoseTask(inst.ID, j.ShimTaskID) {
		t.Fatal("no task to lose")
	}
	j = f.waitJob("train", store.JobTerminating)
	if j.TerminationReason != reasonContainerExitedErr || j.ExitCode == nil || *j.ExitCode != 137 {
		t.Errorf("job terminating for %s %q exit %v, want %s exit 137", j.TerminationReason, j.TerminationMessage, j.ExitCode, reasonContainerExitedErr)
	}
}

// TestWorkers_rollingDeploymentWaitsForTheNewReplicasProbes: a service's
// new run retires the old one only once its replica passes its HTTP probe,
// sent to the port the fake runner publishes for the service: on the
// instance's loopback (a docker shim), or at the address the task names
// (PortMapping.Addr, the Kubernetes pod shim's port-forward).
func TestWorkers_rollingDeploymentWaitsForTheNewReplicasProbes(t *testing.T) {
	for _, runtime := range []string{backends.RuntimeShim, backends.RuntimeRunner} {
		t.Run(runtime, func(t *testing.T) { rollingDeploymentWaitsForProbes(t, runtime) })
	}
}

func rollingDeploymentWaitsForProbes(t *testing.T, runtime string) {
	const svc = "type: service\nname: web\nimage: busybox\nport: 8000\ncommands: [echo %s, sleep 1h]\n" +
		"probes:\n  - type: http\n    url: /health\n    ready_after: 1\n"
	f := newFixture(t, map[string]string{
		"fleet.dstack.yml": cloudFleet,
		"web.dstack.yml":   fmt.Sprintf(svc, "v1"),
	})
	var healthy atomic.Bool
	var probed atomic.Int32
	f.withFakeBackend(fake.Config{Runtime: runtime, Service: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" {
			probed.Add(1)
		}
		if !healthy.Load() {
			http.Error(w, "starting", http.StatusServiceUnavailable)
		}
	})})
	f.startTask("web")
	f.reconcileRun("web")
	first := f.run("web")
	if first.Status != store.RunRunning {
		t.Fatalf("first run = %s, want running", first.Status)
	}
	f.clock.Advance(time.Minute)
	f.write("web.dstack.yml", fmt.Sprintf(svc, "v2"))
	f.sync()
	if f.run("web").ID == first.ID {
		t.Fatal("the change did not submit a new run")
	}
	f.provision("web")
	f.stepJob("web", store.JobRunning)
	f.reconcileJobs("web")
	if after := f.reconcileRun("web"); after <= 0 || probed.Load() == 0 {
		t.Fatalf("new run wakes in %s after %d probes, want a probe and a wake-up", after, probed.Load())
	}
	if old, _ := f.st.GetRun(f.ctx, first.ID); old.Status != store.RunRunning {
		t.Fatalf("old run = %s while the new replica fails its probe, want running", old.Status)
	}
	healthy.Store(true)
	f.reconcileRun("web")
	if old, _ := f.st.GetRun(f.ctx, first.ID); old.Status != store.RunTerminating {
		t.Fatalf("old run = %s once the new replica passes its probe, want terminating", old.Status)
	}
}
