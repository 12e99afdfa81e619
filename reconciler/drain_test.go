package reconciler

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"hoist/backends/fake"
	"hoist/store"
)

// finishDrained runs the job worker on job id until it is finished,
// failing after a bounded number of steps.
func (f *fixture) finishDrained(id string) store.Job {
	f.t.Helper()
	for range 50 {
		if _, err := f.c.reconcileJob(f.ctx, id); err != nil {
			f.t.Fatalf("reconcile job: %v", err)
		}
		j, err := f.st.GetJob(f.ctx, id)
		if err != nil {
			f.t.Fatal(err)
		}
		if store.IsJobFinished(j.Status) {
			return j
		}
		time.Sleep(10 * time.Millisecond)
	}
	f.t.Fatalf("job %s did not finish", id)
	return store.Job{}
}

// TestServices_scaledDownReplicaDrainsBeforeItStops: a replica scaled
// down leaves the service's route at once but keeps running for
// ServiceDrain (its job terminating with RemoveAt), and only then stops.
func TestServices_scaledDownReplicaDrainsBeforeItStops(t *testing.T) {
	f := newFixture(t, map[string]string{
		"fleet.dstack.yml": cloudFleet,
		"web.dstack.yml": "type: service\nname: web\nimage: busybox\nport: 8000\ncommands: [sleep 1h]\nreplicas: 1..2\n" +
			"scaling: {metric: rps, target: 5, scale_up_delay: 60, scale_down_delay: 120}\n",
	})
	tr := &fakeTraffic{}
	f.withFakeBackend(fake.Config{}, func(c *Config) { c.ServiceDrain = 7 * time.Second })
	f.c.traffic = tr
	f.startTask("web")
	f.reconcileRun("web")
	run := f.run("web")
	tr.set(8, f.clock.Now())
	f.reconcileRun("web")
	f.clock.Advance(61 * time.Second)
	tr.set(8, f.clock.Now())
	f.reconcileRun("web")
	js := latestSubmissions(f.jobs(run.ID))
	if len(js) != 2 {
		t.Fatalf("%d replicas, want 2", len(js))
	}
	for _, j := range js {
		for range 50 {
			if j, _ = f.st.GetJob(f.ctx, j.ID); j.Status == store.JobRunning {
				break
			}
			f.reconcileJobs("web")
			for _, inst := range f.fleetInstances("cloud") {
				f.reconcileInstance(inst.ID)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	f.reconcileJobs("web")
	if rt, _ := f.c.ServiceRoute(f.ctx, store.DefaultProject, "web"); len(rt.Replicas) != 2 {
		t.Fatalf("%d ready replicas, want 2", len(rt.Replicas))
	}

	f.clock.Advance(121 * time.Second)
	tr.set(0, f.clock.Now().Add(-121*time.Second))
	f.reconcileRun("web")
	var retired store.Job
	for _, j := range latestSubmissions(f.jobs(run.ID)) {
		if j.ReplicaNum == 1 {
			retired = j
		}
	}
	if retired.Status != store.JobTerminating || retired.TerminationReason != reasonScaledDown || !retired.RemoveAt.Equal(f.clock.Now().Add(7*time.Second)) {
		t.Fatalf("replica 1 %s (%s) remove at %s, want terminating, scaled_down, drained until %s",
			retired.Status, retired.TerminationReason, retired.RemoveAt, f.clock.Now().Add(7*time.Second))
	}
	if rt, _ := f.c.ServiceRoute(f.ctx, store.DefaultProject, "web"); len(rt.Replicas) != 1 || rt.Replicas[0].JobID == retired.ID {
		t.Fatalf("route %+v while replica 1 drains, want only replica 0", rt.Replicas)
	}
	var wait time.Duration
	var err error
	for range 50 { // the replica's pump lets go of its job
		if wait, err = f.c.reconcileJob(f.ctx, retired.ID); err != nil || wait != 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil || wait != 7*time.Second {
		t.Fatalf("job worker on the draining replica: wake in %s (%v), want 7s", wait, err)
	}
	if j, _ := f.st.GetJob(f.ctx, retired.ID); j.Status != store.JobTerminating {
		t.Fatalf("draining replica %s, want still terminating", j.Status)
	}
	f.clock.Advance(7 * time.Second)
	if j := f.finishDrained(retired.ID); j.Status != store.JobTerminated {
		t.Fatalf("drained replica %s, want terminated", j.Status)
	}
}

// TestServices_rollingDeploymentDrainsTheOldReplicas: once the new run's
// replica is ready the old run terminates and leaves the route, its replica
// kept running for ServiceDrain before it stops.
func TestServices_rollingDeploymentDrainsTheOldReplicas(t *testing.T) {
	const svc = "type: service\nname: web\nimage: busybox\nport: 8000\ncommands: [echo %s, sleep 1h]\n"
	f := newFixture(t, map[string]string{"fleet.dstack.yml": cloudFleet, "web.dstack.yml": fmt.Sprintf(svc, "v1")})
	f.withFakeBackend(fake.Config{Service: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})},
		func(c *Config) { c.ServiceDrain = 5 * time.Second })
	f.startTask("web")
	f.reconcileRun("web")
	first := f.run("web")
	oldJob := latestSubmissions(f.jobs(first.ID))[0]
	f.clock.Advance(time.Minute)
	f.write("web.dstack.yml", fmt.Sprintf(svc, "v2"))
	f.sync()
	f.provision("web")
	f.stepJob("web", store.JobRunning)
	f.reconcileJobs("web")
	f.reconcileRun("web")
	if old, _ := f.st.GetRun(f.ctx, first.ID); old.Status != store.RunTerminating {
		t.Fatalf("old run %s once the new replica runs, want terminating", old.Status)
	}
	j, _ := f.st.GetJob(f.ctx, oldJob.ID)
	if j.Status != store.JobTerminating || !j.RemoveAt.Equal(f.clock.Now().Add(5*time.Second)) {
		t.Fatalf("old replica %s remove at %s, want terminating and drained until %s", j.Status, j.RemoveAt, f.clock.Now().Add(5*time.Second))
	}
	rt, err := f.c.ServiceRoute(f.ctx, store.DefaultProject, "web")
	if err != nil || len(rt.Replicas) != 1 || rt.Replicas[0].JobID == oldJob.ID {
		t.Fatalf("route %+v (%v) while the old replica drains, want the new replica only", rt.Replicas, err)
	}
	if _, err := f.c.reconcileRun(f.ctx, first.ID); err != nil {
		t.Fatal(err)
	}
	if old, _ := f.st.GetRun(f.ctx, first.ID); old.Status != store.RunTerminating {
		t.Fatalf("old run %s while its replica drains, want terminating", old.Status)
	}
	f.clock.Advance(5 * time.Second)
	if j := f.finishDrained(oldJob.ID); j.Status != store.JobTerminated {
		t.Fatalf("drained old replica %s, want terminated", j.Status)
	}
	if _, err := f.c.reconcileRun(f.ctx, first.ID); err != nil {
		t.Fatal(err)
	}
	if old, _ := f.st.GetRun(f.ctx, first.ID); old.Status != store.RunTerminated {
		t.Fatalf("old run %s after the drain, want terminated", old.Status)
	}
}
