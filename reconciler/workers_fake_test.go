package reconciler

import (
	"strings"
	"testing"
	"time"

	"hoist/backends"
	"hoist/backends/fake"
	"hoist/store"
)

// Tests of the reconciler's workers against backends/fake: instances with an
// in-process shim and runner on the agents' real HTTP APIs, no Docker. The
// test drives the workers step by step; only a running job's pump works on
// its own, as in production.

// cloudFleet is a backend fleet that grows from offers for jobs, up to two
// instances, and reaps them after a minute idle.
const cloudFleet = "type: fleet\nname: cloud\nnodes: 0..2\nidle_duration: 1m\n"

// withFakeBackend gives the controller a fake backend named "fake" on the
// fixture's clock and returns it.
func (f *fixture) withFakeBackend(cfg fake.Config, tune ...func(*Config)) *fake.Backend {
	f.t.Helper()
	if cfg.Now == nil {
		cfg.Now = f.clock.Now
	}
	be := fake.New(cfg)
	f.t.Cleanup(func() { be.Close() })
	cfgC := Config{Now: f.clock.Now, Owner: "test", UnreachableGrace: time.Minute}
	for _, fn := range tune {
		fn(&cfgC)
	}
	f.c = f.controllerOn(be, cfgC)
	return be
}

// controllerOn returns another controller (another server) on the
// fixture's store and source with be as its backend "fake".
func (f *fixture) controllerOn(be *fake.Backend, cfg Config) *Controller {
	f.t.Helper()
	c, err := New(cfg, Deps{Store: f.st, Source: f.c.src, Backends: map[string]backends.Backend{"fake": be}})
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { c.stopPumps(); c.pumpWG.Wait(); c.closeConns() })
	return c
}

// job returns the latest submission of the only job of run name.
func (f *fixture) job(name string) store.Job {
	f.t.Helper()
	latest := latestSubmissions(f.jobs(f.run(name).ID))
	if len(latest) != 1 {
		f.t.Fatalf("run %s has %d latest jobs, want 1", name, len(latest))
	}
	return latest[0]
}

// fleetInstances returns the instances of fleet name, oldest first.
func (f *fixture) fleetInstances(name string) []store.Instance {
	f.t.Helper()
	fl, err := f.st.GetFleetByName(f.ctx, store.DefaultProject, name)
	if err != nil {
		f.t.Fatal(err)
	}
	insts, err := f.st.ListInstances(f.ctx, store.InfraFilter{Project: store.DefaultProject, FleetID: fl.ID})
	if err != nil {
		f.t.Fatal(err)
	}
	return insts
}

// reconcileInstance runs the instance worker once on id.
func (f *fixture) reconcileInstance(id string) time.Duration {
	f.t.Helper()
	after, err := f.c.reconcileInstance(f.ctx, id)
	if err != nil {
		f.t.Fatalf("reconcile instance %s: %v", id, err)
	}
	return after
}

func (f *fixture) instance(id string) store.Instance {
	f.t.Helper()
	inst, err := f.st.GetInstance(f.ctx, id)
	if err != nil {
		f.t.Fatal(err)
	}
	return inst
}

// stepJob runs the job worker on run name's job until it reaches status
// to (waiting while a pump holds a running job), for at most 5 s.
func (f *fixture) stepJob(name string, to string) store.Job {
	f.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		j := f.job(name)
		if j.Status == to {
			return j
		}
		if store.IsJobFinished(j.Status) {
			break
		}
		if j.Status == store.JobRunning && f.c.pumping(j.ID) {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if _, err := f.c.reconcileJob(f.ctx, j.ID); err != nil {
			f.t.Fatalf("reconcile job %s (%s): %v", j.JobName, j.Status, err)
		}
		if f.job(name).Status == j.Status {
			time.Sleep(20 * time.Millisecond) // e.g. a runner not yet known to the connection
		}
	}
	j := f.job(name)
	f.t.Fatalf("job %s is %s (%s %q, %q), want %s", j.JobName, j.Status, j.TerminationReason, j.TerminationMessage, j.StatusMessage, to)
	return j
}

// waitJob waits (real time) for the pump to move run name's job to status.
func (f *fixture) waitJob(name, status string) store.Job {
	f.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		j := f.job(name)
		if j.Status == status {
			return j
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("job %s is %s (%s %q), want %s", j.JobName, j.Status, j.TerminationReason, j.TerminationMessage, status)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (f *fixture) output(jobID string) string {
	f.t.Helper()
	lines, err := f.st.ReadLogs(f.ctx, jobID, 0, 1000)
	if err != nil {
		f.t.Fatal(err)
	}
	var b strings.Builder
	for _, l := range lines {
		b.Write(l.Data)
	}
	return b.String()
}

// provision places run name's job: the fleet grows an instance for it, the
// instance worker creates it on the backend, and the job is assigned.
func (f *fixture) provision(name string) store.Instance {
	f.t.Helper()
	f.reconcileJobs(name) // submitted: the fleet grows an instance
	j := f.job(name)
	if j.Status != store.JobSubmitted || j.InstanceID == "" {
		f.t.Fatalf("job = %s on %q (%q %s %q), want submitted waiting for a new instance", j.Status, j.InstanceID, j.StatusMessage, j.TerminationReason, j.TerminationMessage)
	}
	for range 10 {
		if inst := f.instance(j.InstanceID); inst.Status == store.InstanceIdle || inst.Status == store.InstanceTerminated {
			break
		}
		f.reconcileInstance(j.InstanceID)
	}
	return f.instance(j.InstanceID)
}

// TestWorkers_taskRunsOnAGrownInstanceAndItsOutputIsStored: a task on a
// backend fleet of no instances gets one made from the cheapest offer, is
// placed on it, runs through the shim and runner, and its output is stored
// and acknowledged to the runner; the run is done and the instance idle.
func TestWorkers_taskRunsOnAGrownInstanceAndItsOutputIsStored(t *testing.T) {
	f := newFixture(t, map[string]string{
		"fleet.dstack.yml": cloudFleet,
		"task.dstack.yml":  "type: task\nname: train\nimage: busybox\ncommands: [echo hello $HOIST_RUN_NAME, echo bye]\n",
	})
	be := f.withFakeBackend(fake.Config{})
	if res := f.sync(); res != resultSynced {
		t.Fatalf("sync = %s", res)
	}
	inst := f.provision("train")
	if inst.Status != store.InstanceIdle || inst.Backend != "fake" || inst.Price != 0.10 {
		t.Fatalf("instance = %s on %s at $%g, want idle on fake at the cheapest offer's $0.1", inst.Status, inst.Backend, inst.Price)
	}
	if got := be.Instances(); len(got) != 1 || got[0] != inst.ID {
		t.Fatalf("backend instances = %v, want [%s]", got, inst.ID)
	}
	f.stepJob("train", store.JobProvisioning)
	if i := f.instance(inst.ID); i.Status != store.InstanceBusy {
		t.Errorf("instance = %s with a job assigned, want busy", i.Status)
	}
	f.stepJob("train", store.JobPulling)
	j := f.stepJob("train", store.JobRunning)
	if !strings.HasPrefix(j.RunnerAddr, "unix:///") {
		t.Errorf("runner at %s, want its unix socket", j.RunnerAddr)
	}
	f.reconcileJobs("train") // hands the job to its pump
	j = f.waitJob("train", store.JobTerminating)
	if acked, ok := be.Acked(inst.ID, j.ID); !ok || acked != 2 {
		t.Errorf("runner was acknowledged up to %d (task found %v), want both records", acked, ok)
	}
	j = f.stepJob("train", store.JobDone)
	if j.TerminationReason != reasonDoneByRunner || j.ExitCode == nil || *j.ExitCode != 0 {
		t.Errorf("job ended %s with exit %v, want done_by_runner 0", j.TerminationReason, j.ExitCode)
	}
	if out := f.output(j.ID); out != "hello train\nbye\n" {
		t.Errorf("stored output %q", out)
	}
	f.reconcileRun("train") // → terminating
	f.reconcileRun("train") // → done
	if run := f.run("train"); run.Status != store.RunDone {
		t.Errorf("run = %s, want done", run.Status)
	}
	if i := f.instance(inst.ID); i.Status != store.InstanceIdle {
		t.Errorf("instance = %s after the job, want idle", i.Status)
	}
	if len(be.Instances()) != 1 {
		t.Errorf("backend instances = %v, want the idle one kept", be.Instances())
	}
}
