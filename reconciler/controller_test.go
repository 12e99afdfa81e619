package reconciler

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"hoist/agents/api"
	"hoist/schema"
	"hoist/store"
)

const retryTask = `type: task
name: flaky
image: busybox
commands: [exit 1]
retry:
  on_events: [error]
  duration: 10m
`

// TestReconcileRun_retryOnError: a job that exits with an error is
// resubmitted after dstack's back-off (15 s, then 30 s), and once
// retry.duration has passed the run ends failed with retry_limit_exceeded.
func TestReconcileRun_retryOnError(t *testing.T) {
	f := newFixture(t, map[string]string{"flaky.dstack.yml": retryTask})
	if res := f.sync(); res != resultSynced {
		t.Fatalf("sync = %s", res)
	}
	submitted := f.run("flaky").SubmittedAt

	for attempt, wait := range []time.Duration{15 * time.Second, 30 * time.Second} {
		f.runnerReports("flaky", api.JobFailed, 1)
		f.reconcileJobs("flaky") // terminating → failed
		if j := f.jobs(f.run("flaky").ID)[0]; j.Status != store.JobFailed || j.TerminationReason != reasonContainerExitedErr {
			t.Fatalf("attempt %d: job = %s (%s), want failed (container_exited_with_error)", attempt, j.Status, j.TerminationReason)
		}
		after := f.reconcileRun("flaky")
		run := f.run("flaky")
		if run.Status != store.RunPending || run.StatusMessage != "retrying" || after != wait {
			t.Fatalf("attempt %d: run %s (%s), wake in %s; want pending (retrying) in %s", attempt, run.Status, run.StatusMessage, after, wait)
		}
		if run.ResubmissionAttempt != attempt+1 {
			t.Fatalf("resubmission attempt = %d, want %d", run.ResubmissionAttempt, attempt+1)
		}
		// Not yet: the back-off has not elapsed.
		f.clock.Advance(wait - time.Second)
		if after := f.reconcileRun("flaky"); after != time.Second || f.run("flaky").Status != store.RunPending {
			t.Fatalf("attempt %d: before the back-off the run is %s (wake in %s)", attempt, f.run("flaky").Status, after)
		}
		f.clock.Advance(time.Second)
		f.reconcileRun("flaky")
		run = f.run("flaky")
		latest := latestSubmissions(f.jobs(run.ID))
		if run.Status != store.RunSubmitted || len(latest) != 1 || latest[0].SubmissionNum != attempt+1 || latest[0].Status != store.JobSubmitted {
			t.Fatalf("attempt %d: after the back-off run %s, latest jobs %+v; want submitted with submission %d", attempt, run.Status, latest, attempt+1)
		}
	}
	if n := len(f.runs("flaky")); n != 1 {
		t.Fatalf("retries made %d runs, want 1 run with several submissions", n)
	}

	// Past retry.duration the failure is final.
	f.clock.Advance(submitted.Add(10*time.Minute + time.Second).Sub(f.clock.Now()))
	f.runnerReports("flaky", api.JobFailed, 1)
	f.reconcileJobs("flaky")
	f.reconcileRun("flaky")
	run := f.run("flaky")
	if run.Status != store.RunTerminating || run.TerminationReason != runReasonRetryExceeded {
		t.Fatalf("run = %s (%s), want terminating (retry_limit_exceeded)", run.Status, run.TerminationReason)
	}
	f.reconcileRun("flaky")
	if run = f.run("flaky"); run.Status != store.RunFailed {
		t.Fatalf("run = %s, want failed", run.Status)
	}
}

// TestReconcileRun_finalWithoutRetry: an error without a retry policy
// fails the run at once (job_failed), and a done job makes it done.
func TestReconcileRun_finalWithoutRetry(t *testing.T) {
	for _, tc := range []struct {
		name, state    string
		exit           int
		status, reason string
	}{
		{"error fails the run", api.JobFailed, 2, store.RunFailed, runReasonJobFailed},
		{"done finishes it", api.JobDone, 0, store.RunDone, runReasonAllJobsDone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, map[string]string{"once.dstack.yml": "type: task\nname: once\nimage: busybox\ncommands: [x]\n"})
			f.sync()
			f.runnerReports("once", tc.state, tc.exit)
			f.reconcileJobs("once")
			f.reconcileRun("once")
			f.reconcileRun("once")
			run := f.run("once")
			if run.Status != tc.status || run.TerminationReason != tc.reason {
				t.Fatalf("run = %s (%s), want %s (%s)", run.Status, run.TerminationReason, tc.status, tc.reason)
			}
			j := f.jobs(run.ID)[0]
			if j.ExitCode == nil || *j.ExitCode != tc.exit || j.FinishedAt.IsZero() {
				t.Fatalf("job = %+v, want exit %d and a finish time", j, tc.exit)
			}
			// Finished is final: a later pass changes nothing, and the same
			// revision synced again submits nothing.
			f.reconcileRun("once")
			f.sync()
			if rs := f.runs("once"); len(rs) != 1 || rs[0].Status != tc.status {
				t.Fatalf("after re-sync: %d runs, latest %s", len(rs), rs[0].Status)
			}
		})
	}
}

// TestReconcileRun_noFleets: with no fleet at all the
// job fails with `no fleets` (dstack's no-capacity), which retry covers.
func TestReconcileRun_noFleets(t *testing.T) {
	f := newFixture(t, map[string]string{
		"a.dstack.yml": "type: task\nname: nofleet\nimage: busybox\ncommands: [x]\n",
		"b.dstack.yml": "type: task\nname: capretry\nimage: busybox\ncommands: [x]\nretry:\n  on_events: [no-capacity]\n  duration: 1h\n",
	})
	f.sync()
	for _, name := range []string{"nofleet", "capretry"} {
		f.reconcileJobs(name) // submitted → terminating (no fleets)
		f.reconcileJobs(name) // terminating → failed
		j := f.jobs(f.run(name).ID)[0]
		if j.Status != store.JobFailed || j.TerminationReason != reasonNoCapacity || j.StatusMessage != "no fleets" {
			t.Fatalf("%s: job = %s (%s, %q), want failed, no capacity, \"no fleets\"", name, j.Status, j.TerminationReason, j.StatusMessage)
		}
		f.reconcileRun(name)
	}
	if run := f.run("nofleet"); run.Status != store.RunTerminating || run.TerminationReason != runReasonJobFailed {
		t.Fatalf("nofleet = %s (%s), want terminating (job_failed)", run.Status, run.TerminationReason)
	}
	if run := f.run("capretry"); run.Status != store.RunPending || !run.NextTriggeredAt.Equal(f.clock.Now().Add(15*time.Second)) {
		t.Fatalf("capretry = %s next %s, want pending in 15s", run.Status, run.NextTriggeredAt)
	}
}

// TestReconcileRun_schedule: a scheduled task waits for
// its cron time, runs, and goes back to pending for the next fire.
func TestReconcileRun_schedule(t *testing.T) {
	f := newFixture(t, map[string]string{"cron.dstack.yml": "type: task\nname: nightly\nimage: busybox\ncommands: [x]\nschedule:\n  cron: \"0 * * * *\"\n"})
	f.sync()
	run := f.run("nightly")
	next := time.Date(2026, 3, 1, 13, 0, 0, 0, time.UTC)
	if run.Status != store.RunPending || !run.NextTriggeredAt.Equal(next) || len(f.jobs(run.ID)) != 0 {
		t.Fatalf("run = %s next %s with %d jobs, want pending until %s without jobs", run.Status, run.NextTriggeredAt, len(f.jobs(run.ID)), next)
	}
	if after := f.reconcileRun("nightly"); after != time.Hour {
		t.Fatalf("pending run wakes in %s, want 1h", after)
	}
	f.clock.Advance(time.Hour)
	f.reconcileRun("nightly")
	if run = f.run("nightly"); run.Status != store.RunSubmitted || len(f.jobs(run.ID)) != 1 {
		t.Fatalf("at the cron time run = %s with %d jobs, want submitted with 1", run.Status, len(f.jobs(run.ID)))
	}
	f.runnerReports("nightly", api.JobDone, 0)
	f.reconcileJobs("nightly")
	f.reconcileRun("nightly") // → terminating (all jobs done)
	f.reconcileRun("nightly") // → pending for the next fire
	run = f.run("nightly")
	if run.Status != store.RunPending || !run.NextTriggeredAt.Equal(next.Add(time.Hour)) || run.TerminationReason != "" {
		t.Fatalf("after a done fire run = %s (%s) next %s, want pending until %s", run.Status, run.TerminationReason, run.NextTriggeredAt, next.Add(time.Hour))
	}
	// Removing the spec stops it for good.
	f.remove("cron.dstack.yml")
	f.sync()
	f.reconcileRun("nightly")
	if run = f.run("nightly"); run.Status != store.RunTerminated || !run.RemovedFromGit {
		t.Fatalf("after removal run = %s removed %v, want terminated and removed from Git", run.Status, run.RemovedFromGit)
	}
}

// TestSync_typeChangeConverges: changing a run's type replaces it once; a
// later sync of the same revision leaves the new run alone.
func TestSync_typeChangeConverges(t *testing.T) {
	f := newFixture(t, map[string]string{"x.dstack.yml": "type: task\nname: morph\nimage: busybox\ncommands: [x]\n"})
	f.sync()
	f.write("x.dstack.yml", "type: service\nname: morph\nimage: busybox\nport: 8000\ncommands: [x]\n")
	f.sync()
	svc := f.run("morph")
	if svc.Type != "service" || store.IsRunFinished(svc.Status) || svc.Status == store.RunTerminating {
		t.Fatalf("latest run = %s %s, want an active service", svc.Type, svc.Status)
	}
	for i := 0; i < 2; i++ {
		f.sync()
	}
	if got := f.run("morph"); got.ID != svc.ID || got.Status == store.RunTerminating {
		t.Fatalf("a re-sync of the same revision touched the service: %s %s (was %s)", got.ID, got.Status, svc.ID)
	}
	if _, err := f.st.GetResource(f.ctx, store.DefaultProject, "task", "morph"); err != nil {
		t.Fatal(err)
	}
	rs, err := f.st.ListResources(f.ctx, store.ResourceFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 || rs[0].Kind != "service" {
		t.Fatalf("live resources = %+v, want only service/morph", rs)
	}
}

// TestSync_invalidRevision: a broken spec rejects the whole
// revision with file:line:col errors; the fix syncs.
func TestSync_invalidRevision(t *testing.T) {
	f := newFixture(t, map[string]string{"a.dstack.yml": "type: task\nname: keep\nimage: busybox\ncommands: [x]\n"})
	f.sync()
	good := f.syncState().AppliedSHA
	keep := f.run("keep")
	f.write("a.dstack.yml", "type: task\nname: keep\nimage: busybox\ncommands: [y]\n")
	f.write("b.dstack.yml", "type: task\nname: bad\nimage: busybox\ncomands: [x]\n")
	if res := f.sync(); res != resultInvalid {
		t.Fatalf("sync = %s, want invalid", res)
	}
	st := f.syncState()
	if st.Status != store.SyncInvalid || st.AppliedSHA != good || len(st.Errors) == 0 || !strings.HasPrefix(st.Errors[0], "b.dstack.yml:4:1: ") {
		t.Fatalf("sync state = %+v, want invalid at b.dstack.yml:4:1 with %s still applied", st, good)
	}
	if got := f.run("keep"); got.ID != keep.ID || got.Status != keep.Status {
		t.Fatalf("the valid change of the rejected revision was applied: %+v", got)
	}
	if _, err := f.st.GetRunByName(f.ctx, store.DefaultProject, "bad"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("run bad exists: %v", err)
	}
	f.write("b.dstack.yml", "type: task\nname: bad\nimage: busybox\ncommands: [x]\n")
	if res := f.sync(); res != resultSynced {
		t.Fatalf("sync after the fix = %s", res)
	}
	if got := f.run("keep"); got.ID == keep.ID {
		t.Fatalf("keep was not replaced by the fixed revision")
	}
	f.run("bad")
}

// TestSync_massDeletionHeld: a revision deleting every live run is held;
// nothing stops until it is confirmed.
func TestSync_massDeletionHeld(t *testing.T) {
	f := newFixture(t, map[string]string{
		"a.dstack.yml": "type: task\nname: one\nimage: busybox\ncommands: [x]\n",
		"b.dstack.yml": "type: task\nname: two\nimage: busybox\ncommands: [x]\n",
	})
	f.sync()
	f.remove("a.dstack.yml")
	f.remove("b.dstack.yml")
	f.write("c.dstack.yml", "type: task\nname: three\nimage: busybox\ncommands: [x]\n")
	if res := f.sync(); res != resultHeld {
		t.Fatalf("sync = %s, want held", res)
	}
	st := f.syncState()
	if !st.Held || len(st.HeldReasons) != 1 || len(st.Errors) != 0 || st.AppliedSHA == st.LatestSHA {
		t.Fatalf("sync state = %+v, want one held reason and the old revision applied", st)
	}
	for _, n := range []string{"one", "two"} {
		if r := f.run(n); r.Status != store.RunSubmitted || r.RemovedFromGit {
			t.Fatalf("%s = %s removed %v while the plan is held", n, r.Status, r.RemovedFromGit)
		}
	}
	if _, err := f.st.GetRunByName(f.ctx, store.DefaultProject, "three"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a held revision created run three: %v", err)
	}
	// The confirmation is stored: a second controller on the same store
	// (another server) sees it.
	other, err := New(Config{}, Deps{Store: f.st, Source: f.c.src})
	if err != nil {
		t.Fatal(err)
	}
	if other.isConfirmed(f.ctx, st.LatestSHA) {
		t.Fatal("revision confirmed before anyone confirmed it")
	}
	if err := f.st.ConfirmRevision(f.ctx, store.DefaultProject, st.LatestSHA); err != nil {
		t.Fatal(err)
	}
	if !other.isConfirmed(f.ctx, st.LatestSHA) {
		t.Fatal("another controller on the store does not see the confirmation")
	}
	if res := f.sync(); res != resultSynced {
		t.Fatalf("confirmed sync = %s", res)
	}
	for _, n := range []string{"one", "two"} {
		if r := f.run(n); r.Status != store.RunTerminating || !r.RemovedFromGit {
			t.Fatalf("%s = %s removed %v after confirmation, want terminating and removed", n, r.Status, r.RemovedFromGit)
		}
	}
	f.run("three")
}

// TestSync_restartNoDuplicates: a new controller on the same store syncs
// the same revision without submitting anything again.
func TestSync_restartNoDuplicates(t *testing.T) {
	f := newFixture(t, map[string]string{
		"a.dstack.yml": "type: task\nname: once\nimage: busybox\ncommands: [x]\n",
		"b.dstack.yml": "type: service\nname: web\nimage: busybox\nport: 8000\nreplicas: 2\ncommands: [x]\n",
	})
	f.sync()
	if n := len(f.jobs(f.run("web").ID)); n != 2 {
		t.Fatalf("service with 2 replicas has %d jobs", n)
	}
	f.c = f.newController()
	f.sync()
	f.sync()
	for _, n := range []string{"once", "web"} {
		if rs := f.runs(n); len(rs) != 1 {
			t.Fatalf("%s has %d runs after restart, want 1", n, len(rs))
		}
	}
	// An in-place update keeps the run and bumps its deployment.
	web := f.run("web")
	f.write("b.dstack.yml", "type: service\nname: web\nimage: busybox\nport: 8000\nreplicas: 3\ncommands: [x]\n")
	f.sync()
	if got := f.run("web"); got.ID != web.ID || got.DeploymentNum != web.DeploymentNum+1 {
		t.Fatalf("replicas change: run %s deployment %d, want %s deployment %d", got.ID, got.DeploymentNum, web.ID, web.DeploymentNum+1)
	}
}

// TestResync_queuesEveryActiveJob: the periodic resync re-queues every
// active job, however many there are.
func TestResync_queuesEveryActiveJob(t *testing.T) {
	f := newFixture(t, nil)
	run := store.Run{Name: "many", Type: "task", Status: store.RunRunning, Spec: []byte(`{"type":"task"}`)}
	if err := f.st.CreateRun(f.ctx, &run); err != nil {
		t.Fatal(err)
	}
	const n = 1100
	err := f.st.RunInTx(f.ctx, func(ctx context.Context, tx bun.Tx) error {
		for i := 0; i < n; i++ {
			j := store.Job{ID: fmt.Sprintf("job-%04d", i), RunID: run.ID, RunName: run.Name, JobNum: i, JobName: fmt.Sprintf("many-%d-0", i),
				Status: store.JobRunning, Version: 1, SubmittedAt: f.clock.Now(), CreatedAt: f.clock.Now(), UpdatedAt: f.clock.Now()}
			if _, err := tx.NewInsert().Model(&j).Exec(ctx); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	f.c.resync(f.ctx)
	if got := f.c.jobs.Len(); got != n {
		t.Fatalf("resync queued %d of %d active jobs", got, n)
	}
}

// TestSync_volumeChangesWaitForConfirmation: re-creating a changed volume
// or deleting a removed one waits for confirmation; confirmed, it leaves one
// live volume row.
func TestSync_volumeChangesWaitForConfirmation(t *testing.T) {
	const vol = "type: volume\nname: data\nbackend: aws\nregion: us-east-1\nsize: %dGB\n"
	f := newFixture(t, map[string]string{
		"v.dstack.yml": fmt.Sprintf(vol, 100),
		"t.dstack.yml": "type: task\nname: keep\nimage: busybox\ncommands: [x]\n",
		"u.dstack.yml": "type: task\nname: keep2\nimage: busybox\ncommands: [x]\n",
	})
	f.sync()
	first, err := f.st.GetVolumeByName(f.ctx, store.DefaultProject, "data")
	if err != nil {
		t.Fatal(err)
	}
	f.write("v.dstack.yml", fmt.Sprintf(vol, 200))
	if res := f.sync(); res != resultSynced {
		t.Fatalf("sync = %s", res)
	}
	st := f.syncState()
	if !st.Held || len(st.HeldReasons) != 1 || !strings.HasPrefix(st.HeldReasons[0], "volume data") || len(st.Errors) != 0 {
		t.Fatalf("sync state held %v %q, errors %q, want the volume replace held", st.Held, st.HeldReasons, st.Errors)
	}
	if v, _ := f.st.GetVolumeByName(f.ctx, store.DefaultProject, "data"); v.ID != first.ID {
		t.Fatalf("an unconfirmed replace re-created the volume")
	}
	if err := f.st.ConfirmRevision(f.ctx, store.DefaultProject, st.LatestSHA); err != nil {
		t.Fatal(err)
	}
	f.sync()
	second, err := f.st.GetVolumeByName(f.ctx, store.DefaultProject, "data")
	if err != nil || second.ID == first.ID {
		t.Fatalf("confirmed replace: volume %+v (%v), want a new row", second, err)
	}
	vs, err := f.st.ListVolumes(f.ctx, store.InfraFilter{})
	if err != nil {
		t.Fatal(err)
	}
	live := 0
	for _, v := range vs {
		if !v.Deleted {
			live++
		}
	}
	if live != 1 {
		t.Fatalf("%d live volume rows, want 1", live)
	}
	if st := f.syncState(); len(st.Errors) != 0 || st.Held || len(st.HeldReasons) != 0 {
		t.Fatalf("errors %q, held %q after the confirmed replace", st.Errors, st.HeldReasons)
	}

	// Removing the spec holds the delete until confirmed.
	f.remove("v.dstack.yml")
	f.sync()
	if st := f.syncState(); !st.Held || len(st.HeldReasons) != 1 || !strings.Contains(st.HeldReasons[0], "volume data") {
		t.Fatalf("held reasons = %q, want the volume delete held", st.HeldReasons)
	}
	if _, err := f.st.GetVolumeByName(f.ctx, store.DefaultProject, "data"); err != nil {
		t.Fatalf("an unconfirmed delete removed the volume: %v", err)
	}
	if err := f.st.ConfirmRevision(f.ctx, store.DefaultProject, f.syncState().LatestSHA); err != nil {
		t.Fatal(err)
	}
	f.sync()
	if _, err := f.st.GetVolumeByName(f.ctx, store.DefaultProject, "data"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a confirmed delete left the volume: %v", err)
	}
}

// setRunning marks every unfinished submission of the latest run named name
// running, as the job worker does once the runner took the job.
func (f *fixture) setRunning(name string) {
	f.t.Helper()
	for _, j := range f.jobs(f.run(name).ID) {
		if store.IsJobFinished(j.Status) || j.Status == store.JobTerminating {
			continue
		}
		j.Status = store.JobRunning
		if err := f.st.UpdateJob(f.ctx, &j); err != nil {
			f.t.Fatal(err)
		}
	}
}

// TestReconcileRun_serviceScalingAndRolling: replicas change in place
// (scale down, scale up) without failing the run; a commands change is a
// rolling deployment whose old run stops once the new one runs.
func TestReconcileRun_serviceScalingAndRolling(t *testing.T) {
	const svc = "type: service\nname: web\nimage: busybox\nport: 8000\nreplicas: %d\ncommands: [%s]\n"
	f := newFixture(t, map[string]string{"web.dstack.yml": fmt.Sprintf(svc, 2, "serve")})
	f.sync()
	f.setRunning("web")
	f.reconcileRun("web")
	first := f.run("web")
	if first.Status != store.RunRunning {
		t.Fatalf("run = %s, want running", first.Status)
	}

	// Scale down: replica 1 stops as scaled_down; the run keeps running.
	f.write("web.dstack.yml", fmt.Sprintf(svc, 1, "serve"))
	f.sync()
	f.reconcileRun("web")
	f.clock.Advance(defaultServiceDrain) // it drains first
	f.reconcileJobs("web")               // the scaled-down replica finishes
	f.reconcileRun("web")
	run := f.run("web")
	latest := latestSubmissions(f.jobs(run.ID))
	if run.ID != first.ID || run.Status != store.RunRunning {
		t.Fatalf("after scale-down run %s is %s, want %s running", run.ID, run.Status, first.ID)
	}
	for _, j := range latest {
		if j.ReplicaNum == 1 && (j.Status != store.JobTerminated || j.TerminationReason != reasonScaledDown) {
			t.Fatalf("replica 1 = %s (%s), want terminated (scaled_down)", j.Status, j.TerminationReason)
		}
		if j.ReplicaNum == 0 && j.Status != store.JobRunning {
			t.Fatalf("replica 0 = %s, want running", j.Status)
		}
	}

	// Scale up again: replica 1 gets a new submission.
	f.write("web.dstack.yml", fmt.Sprintf(svc, 2, "serve"))
	f.sync()
	f.reconcileRun("web")
	submitted := 0
	for _, j := range latestSubmissions(f.jobs(run.ID)) {
		if j.ReplicaNum == 1 && j.Status == store.JobSubmitted {
			submitted++
		}
	}
	if run = f.run("web"); submitted != 1 || run.Status != store.RunRunning {
		t.Fatalf("after scale-up: %d new submissions of replica 1, run %s; want 1 and running", submitted, run.Status)
	}
	f.setRunning("web")

	// Rolling deployment: the old run serves until the new one runs.
	f.clock.Advance(time.Minute)
	f.write("web.dstack.yml", fmt.Sprintf(svc, 2, "serve --v2"))
	f.sync()
	if old, err := f.st.GetRun(f.ctx, first.ID); err != nil || old.Status != store.RunRunning {
		t.Fatalf("old run = %s (%v) right after the commit, want still running", old.Status, err)
	}
	next := f.run("web")
	if next.ID == first.ID {
		t.Fatalf("commands change did not submit a new run")
	}
	f.setRunning("web")
	f.reconcileRun("web")
	if old, _ := f.st.GetRun(f.ctx, first.ID); old.Status != store.RunTerminating || old.TerminationReason != reasonTerminatedByServer {
		t.Fatalf("old run = %s (%s) once the new one runs, want terminating", old.Status, old.TerminationReason)
	}
}

// TestReconcileJob_timeouts: a job stuck provisioning past the timeout
// fails (waiting_instance_limit_exceeded, which retry counts as an error);
// a terminating job whose instance cannot be reached is retried for the
// grace period, then finished without cleanup.
func TestReconcileJob_timeouts(t *testing.T) {
	f := newFixture(t, map[string]string{"a.dstack.yml": "type: task\nname: stuck\nimage: busybox\ncommands: [x]\n"})
	f.sync()
	j := f.jobs(f.run("stuck").ID)[0]
	j.Status, j.InstanceID = store.JobProvisioning, "gone-instance"
	if err := f.st.UpdateJob(f.ctx, &j); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(provisioningTimeout + time.Second)
	if _, err := f.c.reconcileJob(f.ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	j, _ = f.st.GetJob(f.ctx, j.ID)
	if j.Status != store.JobTerminating || j.TerminationReason != reasonWaitingInstance {
		t.Fatalf("job = %s (%s), want terminating (%s)", j.Status, j.TerminationReason, reasonWaitingInstance)
	}
	if retryEvent(j.TerminationReason) != "error" {
		t.Fatalf("a provisioning timeout is not retryable as an error")
	}

	// The instance is unreachable: cleanup is retried within the grace...
	j.ShimTaskID = j.ID
	if err := f.st.UpdateJob(f.ctx, &j); err != nil {
		t.Fatal(err)
	}
	if _, err := f.c.reconcileJob(f.ctx, j.ID); err == nil {
		t.Fatalf("finishing a job on an unreachable instance succeeded within the grace period")
	}
	if j, _ = f.st.GetJob(f.ctx, j.ID); j.Status != store.JobTerminating {
		t.Fatalf("job = %s within the grace, want terminating", j.Status)
	}
	// ...and the job is finished without it afterwards.
	f.clock.Advance(unreachableGrace + time.Second)
	if _, err := f.c.reconcileJob(f.ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	if j, _ = f.st.GetJob(f.ctx, j.ID); j.Status != store.JobFailed || j.FinishedAt.IsZero() {
		t.Fatalf("job = %s after the grace, want failed with a finish time", j.Status)
	}
	f.reconcileRun("stuck")
	f.reconcileRun("stuck")
	if run := f.run("stuck"); run.Status != store.RunFailed || run.TerminationReason != runReasonJobFailed {
		t.Fatalf("run = %s (%s), want failed (job_failed)", run.Status, run.TerminationReason)
	}
}

// TestStopAndRerun: a user's stop terminates the run (stopped_by_user →
// terminated) and a re-run submits the same spec again as a new run.
func TestStopAndRerun(t *testing.T) {
	f := newFixture(t, map[string]string{"a.dstack.yml": "type: task\nname: job\nimage: busybox\ncommands: [x]\n"})
	f.sync()
	if err := f.c.RerunRun(f.ctx, "job"); err == nil {
		t.Fatal("re-running an active run was accepted")
	}
	if err := f.c.StopRun(f.ctx, "job", false); err != nil {
		t.Fatal(err)
	}
	f.reconcileRun("job") // jobs → terminating
	f.reconcileJobs("job")
	f.reconcileRun("job")
	first := f.run("job")
	if first.Status != store.RunTerminated || first.TerminationReason != runReasonStoppedByUser {
		t.Fatalf("stopped run = %s (%s), want terminated (stopped_by_user)", first.Status, first.TerminationReason)
	}
	if j := f.jobs(first.ID)[0]; j.Status != store.JobTerminated || j.TerminationReason != reasonTerminatedByUser {
		t.Fatalf("job = %s (%s), want terminated (terminated_by_user)", j.Status, j.TerminationReason)
	}
	// A stopped run stays stopped across syncs of the same revision.
	f.sync()
	if got := f.run("job"); got.ID != first.ID {
		t.Fatalf("sync resubmitted a run the user stopped")
	}
	if err := f.c.RerunRun(f.ctx, "job"); err != nil {
		t.Fatal(err)
	}
	if got := f.run("job"); got.ID == first.ID || got.Status != store.RunSubmitted || got.SpecHash != first.SpecHash {
		t.Fatalf("re-run = %+v, want a new submitted run of the same spec", got)
	}
}

// TestSync_doneTaskStaysDone: a done task is not run again when its file is
// rewritten with the same meaning (or moved), only when its normalized spec
// changes.
func TestSync_doneTaskStaysDone(t *testing.T) {
	f := newFixture(t, map[string]string{"a.dstack.yml": "type: task\nname: once\nimage: busybox\ncommands: [x]\nenv:\n  A: \"1\"\n"})
	f.sync()
	f.runnerReports("once", api.JobDone, 0)
	f.reconcileJobs("once")
	f.reconcileRun("once")
	f.reconcileRun("once")
	done := f.run("once")
	if done.Status != store.RunDone {
		t.Fatalf("run = %s, want done", done.Status)
	}
	f.remove("a.dstack.yml")
	f.write("b.dstack.yml", "name: once\nenv: [A=1]\ncommands:\n  - x\nimage: busybox\ntype: task\n")
	if res := f.sync(); res != resultSynced {
		t.Fatalf("sync = %s", res)
	}
	if got := f.run("once"); got.ID != done.ID || got.Status != store.RunDone {
		t.Fatalf("a respelled, moved spec re-ran the task: %s %s", got.ID, got.Status)
	}
	if r, err := f.st.GetResource(f.ctx, store.DefaultProject, "task", "once"); err != nil || r.File != "b.dstack.yml" {
		t.Fatalf("resource file = %q (%v), want b.dstack.yml", r.File, err)
	}
	f.write("b.dstack.yml", "name: once\nenv: [A=2]\ncommands:\n  - x\nimage: busybox\ntype: task\n")
	f.sync()
	if got := f.run("once"); got.ID == done.ID || got.Status != store.RunSubmitted {
		t.Fatalf("a changed spec did not run the task again: %s %s", got.ID, got.Status)
	}
}

// TestSync_resumesAfterCrashBeforeSubmit: a crash between recording a run
// spec and submitting its run leaves a resource row without a run; the
// next sync of the same revision submits it (level-triggered).
func TestSync_resumesAfterCrashBeforeSubmit(t *testing.T) {
	const spec = "type: task\nname: lost\nimage: busybox\ncommands: [x]\n"
	f := newFixture(t, map[string]string{"a.dstack.yml": spec})
	desired, err := schema.Load(os.DirFS(f.dir))
	if err != nil {
		t.Fatal(err)
	}
	d := desired.Resources[0]
	if _, err := f.st.UpsertResource(f.ctx, store.Resource{Kind: string(d.Kind), Name: d.Name, Spec: d.JSON, SpecHash: specHash(d.JSON), File: d.File}); err != nil {
		t.Fatal(err)
	}
	f.sync()
	if rs := f.runs("lost"); len(rs) != 1 || rs[0].Status != store.RunSubmitted {
		t.Fatalf("runs of lost = %+v, want one submitted run", rs)
	}
	f.sync()
	if rs := f.runs("lost"); len(rs) != 1 {
		t.Fatalf("a second sync submitted again: %d runs", len(rs))
	}
}

// TestSync_resumesAfterCrashBeforeReplace: a crash after recording a
// changed run spec but before replacing its run leaves the old run live;
// the next sync of the same revision replaces it.
func TestSync_resumesAfterCrashBeforeReplace(t *testing.T) {
	f := newFixture(t, map[string]string{"a.dstack.yml": "type: task\nname: half\nimage: busybox\ncommands: [one]\n"})
	f.sync()
	old := f.run("half")
	f.write("a.dstack.yml", "type: task\nname: half\nimage: busybox\ncommands: [two]\n")
	desired, err := schema.Load(os.DirFS(f.dir))
	if err != nil {
		t.Fatal(err)
	}
	d := desired.Resources[0]
	if _, err := f.st.UpsertResource(f.ctx, store.Resource{Kind: string(d.Kind), Name: d.Name, Spec: d.JSON, SpecHash: specHash(d.JSON), File: d.File}); err != nil {
		t.Fatal(err)
	}
	f.sync()
	got := f.run("half")
	if got.ID == old.ID || got.SpecHash != specHash(d.JSON) {
		t.Fatalf("latest run %s has spec %s, want a new run of the changed spec", got.ID, got.SpecHash)
	}
	if o, _ := f.st.GetRun(f.ctx, old.ID); o.Status != store.RunTerminating {
		t.Fatalf("old run = %s, want terminating", o.Status)
	}
}

// TestReconcileRun_submittedWithoutJobs: a crash between creating a run and
// its jobs leaves a submitted run without jobs; once it is older than a
// lease (the creating sync is surely gone), the run worker creates them.
func TestReconcileRun_submittedWithoutJobs(t *testing.T) {
	f := newFixture(t, nil)
	run := store.Run{Name: "bare", Type: "task", Status: store.RunSubmitted,
		Spec: []byte(`{"type":"task","name":"bare","image":"busybox","commands":["x"]}`)}
	if err := f.st.CreateRun(f.ctx, &run); err != nil {
		t.Fatal(err)
	}
	if after := f.reconcileRun("bare"); after != 30*time.Second || len(f.jobs(run.ID)) != 0 {
		t.Fatalf("a young run without jobs got jobs or no re-check (in %s)", after)
	}
	f.clock.Advance(30 * time.Second)
	f.reconcileRun("bare")
	if js := f.jobs(run.ID); len(js) != 1 || js[0].Status != store.JobSubmitted {
		t.Fatalf("jobs = %+v, want one submitted job", js)
	}
	f.reconcileRun("bare")
	if js := f.jobs(run.ID); len(js) != 1 {
		t.Fatalf("a second pass created more jobs: %d", len(js))
	}
}

// TestSync_eventsCarryTheRevision: applying, rejecting and holding a
// revision, and the run transitions it causes, are events naming it.
func TestSync_eventsCarryTheRevision(t *testing.T) {
	f := newFixture(t, map[string]string{
		"a.dstack.yml": "type: task\nname: ev1\nimage: busybox\ncommands: [x]\n",
		"b.dstack.yml": "type: task\nname: ev2\nimage: busybox\ncommands: [x]\n",
	})
	f.sync()
	applied := f.syncState().AppliedSHA
	f.write("c.dstack.yml", "type: task\nname: ev3\nimage: busybox\ncomands: [x]\n")
	f.sync()
	rejected := f.syncState().LatestSHA
	f.remove("c.dstack.yml")
	f.remove("a.dstack.yml")
	f.remove("b.dstack.yml")
	f.sync()
	held := f.syncState().LatestSHA
	for _, tc := range []struct {
		rev, kind, typ, name string
	}{
		{applied, "revision", "applied", ""},
		{applied, "run", "submitted", "ev1"},
		{applied, "run", "submitted", "ev2"},
		{rejected, "revision", "rejected", ""},
		{held, "revision", "held", ""},
	} {
		evs, err := f.st.ListEvents(f.ctx, store.EventFilter{Revision: tc.rev, ObjectKind: tc.kind, Type: tc.typ, ObjectName: tc.name})
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) != 1 {
			t.Errorf("%d %s %s %s events of revision %.12s, want 1", len(evs), tc.kind, tc.name, tc.typ, tc.rev)
		}
	}
	// Syncing the held revision again records no second event.
	f.sync()
	if evs, _ := f.st.ListEvents(f.ctx, store.EventFilter{Revision: held, Type: "held"}); len(evs) != 1 {
		t.Errorf("%d held events after a second sync, want 1", len(evs))
	}
}

// TestSync_suspend: while sync is suspended (globally or for one resource)
// changes wait, removal included; resuming applies them.
func TestSync_suspend(t *testing.T) {
	f := newFixture(t, map[string]string{
		"a.dstack.yml": "type: task\nname: sa\nimage: busybox\ncommands: [x]\n",
		"b.dstack.yml": "type: task\nname: sb\nimage: busybox\ncommands: [x]\n",
		"c.dstack.yml": "type: task\nname: sc\nimage: busybox\ncommands: [x]\n",
	})
	f.sync()
	sa, sb := f.run("sa"), f.run("sb")

	// Globally: nothing changes, the newest revision is still recorded.
	if err := f.c.SetSuspended(f.ctx, true); err != nil {
		t.Fatal(err)
	}
	f.write("a.dstack.yml", "type: task\nname: sa\nimage: busybox\ncommands: [y]\n")
	if res := f.sync(); res != resultUnchanged {
		t.Fatalf("suspended sync = %s", res)
	}
	if st := f.syncState(); st.LatestSHA == st.AppliedSHA || f.run("sa").ID != sa.ID {
		t.Fatalf("a suspended sync applied the change (state %+v)", st)
	}
	if err := f.c.SetSuspended(f.ctx, false); err != nil {
		t.Fatal(err)
	}
	f.sync()
	if f.run("sa").ID == sa.ID {
		t.Fatalf("resuming did not apply the change")
	}

	// One resource: its change and its removal wait for it.
	if err := f.c.SetRunSuspended(f.ctx, "task", "sb", true); err != nil {
		t.Fatal(err)
	}
	f.write("b.dstack.yml", "type: task\nname: sb\nimage: busybox\ncommands: [y]\n")
	f.sync()
	if got := f.run("sb"); got.ID != sb.ID || got.Status == store.RunTerminating {
		t.Fatalf("a suspended run was replaced: %+v", got)
	}
	f.remove("b.dstack.yml")
	f.sync()
	if got := f.run("sb"); got.Status == store.RunTerminating || got.RemovedFromGit {
		t.Fatalf("a suspended run was stopped when its spec left Git: %+v", got)
	}
	if err := f.c.SetRunSuspended(f.ctx, "task", "sb", false); err != nil {
		t.Fatal(err)
	}
	f.sync()
	if got := f.run("sb"); got.Status != store.RunTerminating || !got.RemovedFromGit {
		t.Fatalf("after resume the removed run is %s (removed %v), want terminating and removed", got.Status, got.RemovedFromGit)
	}
}

// TestReconcileRun_serviceReplicaRetry: a failed replica of a service with
// retry is resubmitted on its own after the back-off while the other
// replica keeps serving; the run stays running.
func TestReconcileRun_serviceReplicaRetry(t *testing.T) {
	f := newFixture(t, map[string]string{"web.dstack.yml": "type: service\nname: web\nimage: busybox\nport: 8000\nreplicas: 2\ncommands: [serve]\nretry:\n  on_events: [error]\n  duration: 1h\n"})
	f.sync()
	f.setRunning("web")
	f.reconcileRun("web")
	run := f.run("web")
	var r1 store.Job
	for _, j := range f.jobs(run.ID) {
		if j.ReplicaNum == 1 {
			r1 = j
		}
	}
	l, ok, err := f.c.claim(f.ctx, "jobs", r1.ID)
	if err != nil || !ok {
		t.Fatalf("claim: %v %v", ok, err)
	}
	exit := 1
	f.c.jobFinished(f.ctx, l, r1.ID, api.JobState{State: api.JobFailed, ExitCode: &exit})
	f.c.release(l)
	if _, err := f.c.reconcileJob(f.ctx, r1.ID); err != nil { // terminating → failed
		t.Fatal(err)
	}
	if after := f.reconcileRun("web"); after != 15*time.Second {
		t.Fatalf("replica retry wakes in %s, want the 15s back-off", after)
	}
	f.clock.Advance(15 * time.Second)
	f.reconcileRun("web")
	run = f.run("web")
	latest := latestSubmissions(f.jobs(run.ID))
	byReplica := map[int]store.Job{}
	for _, j := range latest {
		byReplica[j.ReplicaNum] = j
	}
	if run.Status != store.RunRunning || byReplica[0].Status != store.JobRunning ||
		byReplica[1].Status != store.JobSubmitted || byReplica[1].SubmissionNum != 1 {
		t.Fatalf("run %s, replicas %+v; want running, replica 0 running, replica 1 resubmitted (#1)", run.Status, byReplica)
	}
}

// TestStopRun_abortEndsTheRunAbortedByUser: an abort ends the run
// terminated with reason aborted_by_user and its job aborted; an abort of a
// run already stopping overrides the stop's reason, as dstack's stop_runs
// does.
func TestStopRun_abortEndsTheRunAbortedByUser(t *testing.T) {
	for _, stopFirst := range []bool{false, true} {
		t.Run(fmt.Sprintf("stopped first %v", stopFirst), func(t *testing.T) {
			f := newFixture(t, map[string]string{"a.dstack.yml": "type: task\nname: job\nimage: busybox\ncommands: [x]\n"})
			f.sync()
			if stopFirst {
				if err := f.c.StopRun(f.ctx, "job", false); err != nil {
					t.Fatal(err)
				}
			}
			if err := f.c.StopRun(f.ctx, "job", true); err != nil {
				t.Fatal(err)
			}
			f.reconcileRun("job") // jobs → terminating
			f.reconcileJobs("job")
			f.reconcileRun("job")
			run := f.run("job")
			if run.Status != store.RunTerminated || run.TerminationReason != runReasonAbortedByUser {
				t.Fatalf("aborted run = %s (%s), want terminated (aborted_by_user)", run.Status, run.TerminationReason)
			}
			if j := f.jobs(run.ID)[0]; j.Status != store.JobAborted || j.TerminationReason != reasonAbortedByUser {
				t.Fatalf("job = %s (%s), want aborted (aborted_by_user)", j.Status, j.TerminationReason)
			}
		})
	}
}

// TestStopGrace_abortedJobsGetNone: the grace a terminating job gets is
// its stop_duration capped at 10 s, and none when its user aborted it.
func TestStopGrace_abortedJobsGetNone(t *testing.T) {
	for _, tc := range []struct {
		name   string
		reason string
		stop   int64
		want   time.Duration
	}{
		{"stop_duration is the grace", reasonTerminatedByUser, 3, 3 * time.Second},
		{"unset stop_duration is 10 s", reasonTerminatedByUser, 0, 10 * time.Second},
		{"a longer stop_duration is capped", reasonTerminatedByServer, 60, 10 * time.Second},
		{"an aborted job gets none", reasonAbortedByUser, 10, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var spec runSpec
			spec.StopDuration = tc.stop
			if got := stopGrace(store.Job{TerminationReason: tc.reason}, spec); got != tc.want {
				t.Errorf("grace %s, want %s", got, tc.want)
			}
		})
	}
}

// A resync of a task whose jobs all run finds nothing to do: the run worker
// neither claims it (two writes) nor tells the web of a change; any other
// state is reconciled.
func TestRunSettled_onlyARunningTaskWithEveryJobRunning(t *testing.T) {
	f := newFixture(t, map[string]string{"flaky.dstack.yml": retryTask})
	if res := f.sync(); res != resultSynced {
		t.Fatalf("sync = %s", res)
	}
	id := f.run("flaky").ID
	if f.c.runSettled(f.ctx, id) {
		t.Fatal("a submitted run is settled")
	}
	for _, j := range latestSubmissions(f.jobs(id)) {
		j.Status = store.JobRunning
		if err := f.st.UpdateJob(f.ctx, &j); err != nil {
			t.Fatal(err)
		}
	}
	if f.c.runSettled(f.ctx, id) {
		t.Fatal("a run whose status is not yet running is settled")
	}
	f.reconcileRun("flaky") // → running
	if run := f.run("flaky"); run.Status != store.RunRunning || !f.c.runSettled(f.ctx, id) {
		t.Fatalf("run %s (%s) with every job running is not settled", run.Status, run.StatusMessage)
	}
	// What reconcileRun writes for a settled run: nothing.
	before := f.run("flaky")
	f.reconcileRun("flaky")
	if after := f.run("flaky"); after.Status != before.Status || after.StatusMessage != before.StatusMessage || after.UpdatedAt != before.UpdatedAt {
		t.Fatalf("reconciling a settled run changed it: %+v → %+v", before, after)
	}
	run := f.run("flaky")
	run.Status = store.RunTerminating
	if err := f.st.UpdateRun(f.ctx, &run); err != nil {
		t.Fatal(err)
	}
	if f.c.runSettled(f.ctx, id) {
		t.Fatal("a terminating run is settled")
	}
}
