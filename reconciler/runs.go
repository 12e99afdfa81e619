package reconciler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"hoist/reconciler/plan"
	"hoist/reconciler/source"
	"hoist/schema"
	"hoist/store"
)

// reconcileRun drives one run: pending (scheduled or waiting to retry) →
// submitted → provisioning → running → terminating → done, failed or
// terminated, deriving the active statuses from its jobs (dstack's src/dstack/_internal/core/models/runs.py).
func (c *Controller) reconcileRun(ctx context.Context, id string) (time.Duration, error) {
	l, ok, err := c.claim(ctx, "runs", id)
	if err != nil || !ok {
		return 0, err
	}
	defer c.release(l)
	ctx, stopKeep := c.keepAlive(ctx, l)
	defer stopKeep()
	run, err := c.st.GetRun(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if store.IsRunFinished(run.Status) {
		return 0, nil
	}
	spec, err := decodeRunSpec(run.Spec)
	if err != nil {
		return 0, err
	}
	if needsTokenizerConfig(spec) && run.Status != store.RunTerminating {
		ok, err := c.completeModel(ctx, l, &run, &spec)
		if err != nil {
			return 0, err
		}
		if !ok { // the run fails: its jobs are stopped next
			c.runs.Add(run.ID)
			return 0, nil
		}
	}
	now := c.now()
	jobs, err := c.st.ListJobs(ctx, run.ID)
	if err != nil {
		return 0, err
	}
	latest := latestSubmissions(jobs)
	prev := run.Status
	if schema.Kind(run.Type) == schema.KindService {
		defer c.nudgeGateway(ctx, spec) // its replicas may have changed
	}

	switch run.Status {
	case store.RunPending:
		if run.NextTriggeredAt.After(now) {
			return run.NextTriggeredAt.Sub(now), nil
		}
		if err := c.createJobs(ctx, &run, spec, nextSubmission(jobs)); err != nil {
			return 0, err
		}
		run.Status, run.StatusMessage, run.NextTriggeredAt = store.RunSubmitted, store.RunSubmitted, time.Time{}
		if err := c.st.UpdateRunLeased(ctx, l, &run); err != nil {
			return 0, err
		}
		c.event(ctx, "run", run.Name, run.ID, "resubmitted", run.Revision,
			fmt.Sprintf("run resubmitted (attempt %d)", run.ResubmissionAttempt))
		return 0, nil

	case store.RunTerminating:
		all := true
		for _, j := range latest {
			if store.IsJobFinished(j.Status) {
				continue
			}
			all = false
			if j.Status != store.JobTerminating {
				if err := c.terminateJob(ctx, j.ID, jobReasonForRun(run.TerminationReason), "run is terminating"); err != nil {
					return 0, err
				}
			}
		}
		// Jobs of older submissions still running (e.g. a replaced replica).
		for _, j := range jobs {
			if !store.IsJobFinished(j.Status) {
				all = false
			}
		}
		if !all {
			return 5 * time.Second, nil
		}
		return 0, c.finishRun(ctx, l, &run, spec, now)
	}

	if len(jobs) == 0 && run.Status == store.RunSubmitted && len(spec.jobNums()) > 0 {
		// A crash between creating the run and its jobs left none; a young
		// run may still be getting them from the sync that created it.
		if age := now.Sub(run.SubmittedAt); age < c.cfg.LeaseFor {
			return c.cfg.LeaseFor - age, nil
		}
		return 0, c.createJobs(ctx, &run, spec, 0)
	}
	var rescale time.Duration // when a service that scales looks at its traffic again
	if schema.Kind(spec.Type) == schema.KindService {
		if latest, rescale, err = c.scaleService(ctx, &run, spec, latest); err != nil {
			return 0, err
		}
	}
	if schema.Kind(spec.Type) == schema.KindWorkflow {
		again, err := c.reconcileWorkflow(ctx, l, &run, &spec, latest)
		if err != nil || again {
			return time.Second, err
		}
	}
	status, term := deriveRunStatus(latest)
	if schema.Kind(spec.Type) == schema.KindWorkflow && status == store.RunSubmitted &&
		slices.ContainsFunc(latest, func(j store.Job) bool { return j.Status == store.JobDone }) {
		status = store.RunRunning // between one stage of the DAG and the next
	}
	if len(latest) == 0 && schema.Kind(spec.Type) == schema.KindService && spec.minReplicas() == 0 {
		// Scaled to zero: the service stays up, a request wakes it.
		status = store.RunRunning
	}
	if term == runReasonJobFailed {
		if failed, ok := firstFailed(latest); ok {
			ev := retryEvent(failed.TerminationReason)
			if ev != "" && spec.retryOn(ev, run.SubmittedAt, now) && !run.RemovedFromGit &&
				schema.Kind(spec.Type) == schema.KindService && otherReplicaAlive(latest, failed) {
				// One replica retries on its own while the others serve
				// (dstack resubmits the replica, not the run).
				return c.retryReplica(ctx, &run, failed, ev, now)
			}
			if ev != "" && spec.retryOn(ev, run.SubmittedAt, now) && !run.RemovedFromGit {
				// Terminate siblings, then resubmit the whole run after the back-off.
				for _, j := range latest {
					if !store.IsJobFinished(j.Status) && j.Status != store.JobTerminating {
						if err := c.terminateJob(ctx, j.ID, reasonTerminatedByServer, "run is retrying"); err != nil {
							return 0, err
						}
					}
				}
				wait := backoffFor(run.ResubmissionAttempt)
				run.Status, run.StatusMessage = store.RunPending, "retrying"
				run.NextTriggeredAt = now.Add(wait)
				run.ResubmissionAttempt++
				if err := c.st.UpdateRunLeased(ctx, l, &run); err != nil {
					return 0, err
				}
				c.event(ctx, "run", run.Name, run.ID, "retrying", run.Revision,
					fmt.Sprintf("job %s failed (%s); retrying on %s in %s", failed.JobName, failed.TerminationReason, ev, wait))
				return wait, nil
			}
			if ev != "" && spec.Retry != nil && spec.retryOn(ev, run.SubmittedAt, run.SubmittedAt) {
				term = runReasonRetryExceeded
			}
		}
	}
	if term == "" && masterDone(spec, latest) {
		// stop_criteria master-done: the master is done, the workers stop.
		term = runReasonAllJobsDone
	}
	if term != "" {
		run.Status, run.TerminationReason, run.StatusMessage = store.RunTerminating, term, "terminating"
		if err := c.st.UpdateRunLeased(ctx, l, &run); err != nil {
			return 0, err
		}
		c.event(ctx, "run", run.Name, run.ID, "terminating", run.Revision, "run terminating: "+term)
		c.runs.Add(run.ID)
		return 0, nil
	}
	msg := status
	if len(latest) == 0 && status == store.RunRunning {
		msg = "scaled to zero"
	}
	if allPulling(latest) {
		msg = "pulling"
	}
	if status == store.RunSubmitted || status == store.RunProvisioning {
		// Say what a waiting job waits for (a fleet's instances, the other
		// nodes of its cluster).
		for _, j := range latest {
			if (j.Status == store.JobSubmitted || j.Status == store.JobProvisioning) && j.StatusMessage != "" {
				msg = j.StatusMessage
				break
			}
		}
	}
	if status != prev || msg != run.StatusMessage {
		run.Status, run.StatusMessage = status, msg
		if status == store.RunProvisioning {
			run.ResubmissionAttempt = 0
		}
		if err := c.st.UpdateRunLeased(ctx, l, &run); err != nil {
			return 0, err
		}
		if status != prev {
			c.event(ctx, "run", run.Name, run.ID, status, run.Revision, "run "+status)
		}
	}
	if status == store.RunRunning && schema.Kind(spec.Type) == schema.KindService {
		// Probes run for as long as the service does: the service proxy
		// routes only to replicas passing them (ServiceRoute). A rolling
		// deployment ends once the new replicas are ready: running, and
		// their probes passed ready_after times in a row.
		ready, wait := c.probeReplicas(ctx, spec, latest)
		older, err := c.olderActiveRun(ctx, &run)
		if err != nil {
			return 0, err
		}
		if older && ready {
			if err := c.retireOlderRuns(ctx, &run); err != nil {
				return 0, err
			}
		}
		return soonest(wait, rescale), nil
	}
	return rescale, nil
}

// soonest returns the shorter of two wake-ups, where 0 means none.
func soonest(a, b time.Duration) time.Duration {
	if a <= 0 || (b > 0 && b < a) {
		return b
	}
	return a
}

// finishRun records a terminating run's final status once all its jobs are
// finished; a scheduled run that was not stopped goes back to pending.
func (c *Controller) finishRun(ctx context.Context, l store.Lease, run *store.Run, spec runSpec, now time.Time) error {
	if spec.Schedule != nil && len(spec.Schedule.Cron) > 0 && !run.RemovedFromGit &&
		run.TerminationReason != runReasonStoppedByUser && run.TerminationReason != runReasonAbortedByUser &&
		run.TerminationReason != reasonTerminatedByServer {
		next, err := nextCron(spec.Schedule.Cron, now)
		if err != nil {
			return err
		}
		run.Status, run.StatusMessage, run.NextTriggeredAt = store.RunPending, "scheduled", next
		run.TerminationReason, run.ResubmissionAttempt = "", 0
		if err := c.st.UpdateRunLeased(ctx, l, run); err != nil {
			return err
		}
		c.event(ctx, "run", run.Name, run.ID, "scheduled", run.Revision, "next run at "+next.Format(time.RFC3339))
		return nil
	}
	run.Status = runFinalStatus(run.TerminationReason)
	if run.TerminationReason != runReasonServerError || run.StatusMessage == "" {
		// A server error's message says what went wrong (completeModel).
		run.StatusMessage = run.Status
	}
	run.FinishedAt = now.UTC()
	if err := c.st.UpdateRunLeased(ctx, l, run); err != nil {
		return err
	}
	msg := "run " + run.Status
	if run.TerminationReason != "" {
		msg += " (" + run.TerminationReason + ")"
	}
	c.event(ctx, "run", run.Name, run.ID, run.Status, run.Revision, msg)
	c.forgetScale(run.ID)
	c.wakeWaitingRuns(ctx, run.Name)
	return nil
}

// wakeWaitingRuns wakes the submitted jobs of newer runs of the same name
// that wait for this one to finish.
func (c *Controller) wakeWaitingRuns(ctx context.Context, name string) {
	runs, err := c.st.ListRuns(ctx, store.RunFilter{Project: c.cfg.Project, Name: name, Active: true})
	if err != nil {
		return
	}
	for _, r := range runs {
		jobs, err := c.st.ListJobs(ctx, r.ID)
		if err != nil {
			continue
		}
		for _, j := range jobs {
			if j.Status == store.JobSubmitted {
				c.jobs.Add(j.ID)
			}
		}
	}
}

// StopRun stops the latest run named name on a user's request: gracefully
// (stopped_by_user), or with abort at once (aborted_by_user, its jobs
// killed without their stop_duration).
func (c *Controller) StopRun(ctx context.Context, name string, abort bool) error {
	if abort {
		return c.stopRunByName(ctx, name, runReasonAbortedByUser, "aborted by user", "", false)
	}
	return c.stopRunByName(ctx, name, runReasonStoppedByUser, "stopped by user", "", false)
}

// RerunRun submits the latest spec of run name again (a task that is done
// stays done until its spec changes or a user asks for this).
func (c *Controller) RerunRun(ctx context.Context, name string) error {
	if err := c.checkDiskSpace(); err != nil {
		return err
	}
	run, err := c.st.GetRunByName(ctx, c.cfg.Project, name)
	if err != nil {
		return err
	}
	if !store.IsRunFinished(run.Status) {
		return fmt.Errorf("run %s is %s: stop it before re-running", name, run.Status)
	}
	spec, err := decodeRunSpec(run.Spec)
	if err != nil {
		return err
	}
	nr := store.Run{
		Project: run.Project, Name: run.Name, Type: run.Type, ResourceKind: run.ResourceKind,
		ResourceName: run.ResourceName, Spec: run.Spec, SpecHash: run.SpecHash, Revision: run.Revision,
		Status: store.RunSubmitted, Priority: run.Priority, RemovedFromGit: run.RemovedFromGit,
	}
	jobs, err := newJobs(&nr, spec, 0)
	if err != nil {
		return err
	}
	if _, err := c.st.CreateRunWithJobs(ctx, &nr, jobs); err != nil {
		return err
	}
	c.event(ctx, "run", nr.Name, nr.ID, "submitted", nr.Revision, "run re-submitted by user")
	for _, j := range jobs {
		c.jobs.Add(j.ID)
	}
	c.runs.Add(nr.ID)
	return nil
}

// SetRunSuspended suspends or resumes the resource of a run: a suspended
// resource is left alone by sync.
func (c *Controller) SetRunSuspended(ctx context.Context, kind, name string, suspended bool) error {
	r, err := c.st.GetResource(ctx, c.cfg.Project, kind, name)
	if err != nil {
		return err
	}
	r.Suspended = suspended
	if err := c.st.UpdateResource(ctx, &r); err != nil {
		return err
	}
	what := "resumed"
	if suspended {
		what = "suspended"
	}
	c.event(ctx, kind, name, r.ID, what, r.AppliedRevision, kind+" "+what)
	if !suspended {
		c.requestSync(true)
	}
	return nil
}

// scaleService keeps a service run at its desired replica count
// (desiredReplicas: replicas.min, or what its traffic asks within the
// range): missing replicas get a submission, replicas above the count are
// scaled down. It returns the latest submissions of the replicas that
// count, and when to look again at the traffic (0: only on a change).
func (c *Controller) scaleService(ctx context.Context, run *store.Run, spec runSpec, latest []store.Job) ([]store.Job, time.Duration, error) {
	alive := 0
	for _, j := range latest {
		if !store.IsJobFinished(j.Status) && j.Status != store.JobTerminating {
			alive++
		}
	}
	want, after := c.desiredReplicas(run, spec, alive)
	have := map[int]bool{}
	next := map[int]int{} // by replica: the submission number a new job takes
	var keep []store.Job
	for _, j := range latest {
		next[j.ReplicaNum] = max(next[j.ReplicaNum], j.SubmissionNum+1)
		if j.ReplicaNum >= want || j.TerminationReason == reasonScaledDown {
			if !store.IsJobFinished(j.Status) && j.Status != store.JobTerminating {
				if err := c.retireReplica(ctx, j.ID, reasonScaledDown, "scaled down to "+strconv.Itoa(want)+" replicas"); err != nil {
					return nil, 0, err
				}
				c.event(ctx, "run", run.Name, run.ID, "scaled_down", run.Revision, "replica "+strconv.Itoa(j.ReplicaNum)+" scaled down")
			}
			continue
		}
		have[j.ReplicaNum] = true
		keep = append(keep, j)
	}
	sub := 0
	for _, j := range latest {
		sub = max(sub, j.SubmissionNum)
	}
	for r := 0; r < want; r++ {
		if have[r] {
			continue
		}
		n := sub
		if s, ok := next[r]; ok {
			n = s // a replica scaled down before comes back as a new submission
		}
		j := store.Job{
			RunID: run.ID, RunName: run.Name, ReplicaNum: r, JobName: fmt.Sprintf("%s-0-%d", run.Name, r),
			SubmissionNum: n, DeploymentNum: run.DeploymentNum, Spec: run.Spec, Status: store.JobSubmitted,
		}
		if err := c.st.CreateJob(ctx, &j); err != nil {
			return nil, 0, err
		}
		c.jobs.Add(j.ID)
		c.event(ctx, "run", run.Name, run.ID, "scaled_up", run.Revision, "replica "+strconv.Itoa(r)+" submitted")
		keep = append(keep, j)
	}
	return keep, after, nil
}

// retireOlderRuns stops the older active runs of a service once its new
// run is running: the end of a rolling deployment.
func (c *Controller) retireOlderRuns(ctx context.Context, run *store.Run) error {
	runs, err := c.st.ListRuns(ctx, store.RunFilter{Project: c.cfg.Project, Name: run.Name, Active: true})
	if err != nil {
		return err
	}
	for i := range runs {
		r := &runs[i]
		if r.ID == run.ID || !r.SubmittedAt.Before(run.SubmittedAt) {
			continue
		}
		if err := c.retireRun(ctx, r.ID, "replaced by a rolling deployment (revision "+short(run.Revision)+")", run.Revision); err != nil {
			return err
		}
	}
	return nil
}

// retireRun stops an older run of a service: its replicas leave the
// routes at once and drain before they stop (retireReplica). The run's
// lease is held meanwhile, so that its worker does not take its
// terminating replicas for failed ones before the run is terminating; when
// another worker holds it, the next reconcile of the new run retires it.
func (c *Controller) retireRun(ctx context.Context, id, msg, rev string) error {
	l, ok, err := c.claim(ctx, "runs", id)
	if err != nil || !ok {
		return err
	}
	defer c.release(l)
	r, err := c.st.GetRun(ctx, id)
	if err != nil {
		return err
	}
	if store.IsRunFinished(r.Status) {
		return nil
	}
	jobs, err := c.st.ListJobs(ctx, r.ID)
	if err != nil {
		return err
	}
	for _, j := range latestSubmissions(jobs) {
		if err := c.retireReplica(ctx, j.ID, reasonTerminatedByServer, msg); err != nil {
			return err
		}
	}
	return c.stopRun(ctx, &r, reasonTerminatedByServer, msg, rev, false)
}

// otherReplicaAlive reports whether a replica other than failed's is still
// up (not failed or stopping).
func otherReplicaAlive(latest []store.Job, failed store.Job) bool {
	for _, j := range latest {
		if j.ReplicaNum != failed.ReplicaNum && !store.IsJobFinished(j.Status) && j.Status != store.JobTerminating {
			return true
		}
	}
	return false
}

// retryReplica submits a failed service replica again once its job has
// finished and the back-off (by its submission number) has passed.
func (c *Controller) retryReplica(ctx context.Context, run *store.Run, failed store.Job, ev string, now time.Time) (time.Duration, error) {
	if !store.IsJobFinished(failed.Status) {
		return 0, nil // finishing the job wakes the run
	}
	wait := backoffFor(failed.SubmissionNum)
	if due := failed.FinishedAt.Add(wait); due.After(now) {
		return due.Sub(now), nil
	}
	j := store.Job{
		RunID: run.ID, RunName: run.Name, JobNum: failed.JobNum, ReplicaNum: failed.ReplicaNum, JobName: failed.JobName,
		SubmissionNum: failed.SubmissionNum + 1, DeploymentNum: run.DeploymentNum, Spec: run.Spec, Status: store.JobSubmitted,
	}
	if err := c.st.CreateJob(ctx, &j); err != nil {
		return 0, err
	}
	c.jobs.Add(j.ID)
	c.event(ctx, "run", run.Name, run.ID, "retrying", run.Revision,
		fmt.Sprintf("replica %d failed (%s); resubmitted on %s after %s", failed.ReplicaNum, failed.TerminationReason, ev, wait))
	return 0, nil
}

func firstFailed(latest []store.Job) (store.Job, bool) {
	for _, j := range latest {
		switch j.Status {
		case store.JobFailed, store.JobAborted, store.JobTerminated, store.JobTerminating:
			if j.TerminationReason != reasonDoneByRunner {
				return j, true
			}
		}
	}
	return store.Job{}, false
}

func allPulling(latest []store.Job) bool {
	if len(latest) == 0 {
		return false
	}
	for _, j := range latest {
		if j.Status != store.JobPulling {
			return false
		}
	}
	return true
}

func nextSubmission(jobs []store.Job) int {
	n := 0
	for _, j := range jobs {
		if j.SubmissionNum+1 > n {
			n = j.SubmissionNum + 1
		}
	}
	return n
}

func (c *Controller) olderActiveRun(ctx context.Context, run *store.Run) (bool, error) {
	runs, err := c.st.ListRuns(ctx, store.RunFilter{Project: c.cfg.Project, Name: run.Name, Active: true})
	if err != nil {
		return false, err
	}
	for _, r := range runs {
		if r.ID != run.ID && r.SubmittedAt.Before(run.SubmittedAt) {
			return true, nil
		}
	}
	return false, nil
}

func (c *Controller) applyRun(ctx context.Context, rev source.Revision, s plan.Step) error {
	switch s.Action {
	case plan.Noop:
		if s.Desired != nil && s.Current != nil && s.Current.File != s.Desired.File {
			_, err := c.upsert(ctx, rev, s)
			return err
		}
		return nil
	case plan.Create:
		if _, err := c.upsert(ctx, rev, s); err != nil {
			return err
		}
		return c.submitRun(ctx, rev, s.Desired, "spec added in "+short(rev.ID))
	case plan.Replace:
		if _, err := c.upsert(ctx, rev, s); err != nil {
			return err
		}
		if s.Current != nil && s.Current.Kind != s.Desired.Kind {
			// A type change: the old kind's row must not outlive it.
			if err := c.st.MarkResourceDeleted(ctx, c.cfg.Project, string(s.Current.Kind), s.Name); err != nil && !errors.Is(err, store.ErrNotFound) {
				return err
			}
		}
		// A rolling deployment keeps the old run serving until the new one
		// runs (the run worker stops it then); anything else stops first.
		if !rolling(s) {
			if err := c.stopRunByName(ctx, s.Name, reasonTerminatedByServer,
				fmt.Sprintf("spec changed in %s (%s)", short(rev.ID), strings.Join(s.Changed, ", ")), rev.ID, false); err != nil {
				return err
			}
		}
		return c.submitRun(ctx, rev, s.Desired, fmt.Sprintf("spec changed in %s: %s", short(rev.ID), strings.Join(s.Changed, ", ")))
	case plan.Update:
		if _, err := c.upsert(ctx, rev, s); err != nil {
			return err
		}
		run, err := c.st.GetRunByName(ctx, c.cfg.Project, s.Name)
		if err != nil {
			return err
		}
		run.Spec, run.SpecHash, run.Revision = s.Desired.JSON, specHash(s.Desired.JSON), rev.ID
		run.DeploymentNum++
		if err := c.st.UpdateRun(ctx, &run); err != nil {
			return err
		}
		c.event(ctx, "run", run.Name, run.ID, "updated", rev.ID,
			fmt.Sprintf("run updated in place; deployment %d; changed fields: %s", run.DeploymentNum, strings.Join(s.Changed, ", ")))
		c.runs.Add(run.ID)
		return nil
	case plan.Delete:
		// Stop first: once the row is marked deleted no later sync plans
		// this delete again, so a crash in between must not skip the stop.
		if err := c.stopRunByName(ctx, s.Name, reasonTerminatedByServer, "spec removed from Git in "+short(rev.ID), rev.ID, true); err != nil {
			return err
		}
		if err := c.st.MarkResourceDeleted(ctx, c.cfg.Project, string(s.Current.Kind), s.Name); err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		return nil
	}
	return nil
}

// submitRun creates a run and its first job submissions for a desired run
// spec, unless an identical submission of this revision already exists
// (level-triggered: re-applying a revision never duplicates runs).
func (c *Controller) submitRun(ctx context.Context, rev source.Revision, d *schema.Resource, why string) error {
	hash := specHash(d.JSON)
	if prev, err := c.st.GetRunByName(ctx, c.cfg.Project, d.Name); err == nil && prev.SpecHash == hash && prev.Revision == rev.ID {
		return nil
	}
	spec, err := decodeRunSpec(d.JSON)
	if err != nil {
		return err
	}
	run := store.Run{
		Project: c.cfg.Project, Name: d.Name, Type: string(d.Kind),
		ResourceKind: string(d.Kind), ResourceName: d.Name,
		Spec: d.JSON, SpecHash: hash, Revision: rev.ID,
		Status: store.RunSubmitted, Priority: spec.Priority,
	}
	if spec.Schedule != nil && len(spec.Schedule.Cron) > 0 {
		next, err := nextCron(spec.Schedule.Cron, c.now())
		if err != nil {
			return err
		}
		run.Status, run.NextTriggeredAt = store.RunPending, next
		run.StatusMessage = "scheduled"
	}
	// The run and its jobs are one write, keyed by revision and spec: a
	// retry (after a crash between writes, or by another server) is a
	// no-op.
	run.SubmitKey = strings.Join([]string{c.cfg.Project, d.Name, rev.ID, hash}, "/")
	var jobs []store.Job
	if run.Status == store.RunSubmitted {
		if jobs, err = newJobs(&run, spec, 0); err != nil {
			return err
		}
	}
	created, err := c.st.CreateRunWithJobs(ctx, &run, jobs)
	if err != nil || !created {
		return err
	}
	c.event(ctx, "run", run.Name, run.ID, "submitted", rev.ID, "run submitted: "+why)
	for _, j := range jobs {
		c.jobs.Add(j.ID)
	}
	c.runs.Add(run.ID)
	return nil
}

// createJobs creates one new submission per job of the run: one per node
// for tasks, replicas.min for services, one for dev environments.
// They are written in one transaction.
func (c *Controller) createJobs(ctx context.Context, run *store.Run, spec runSpec, submission int) error {
	jobs, err := newJobs(run, spec, submission)
	if err != nil {
		return err
	}
	if err := c.st.CreateJobs(ctx, jobs); err != nil {
		return err
	}
	for _, j := range jobs {
		c.jobs.Add(j.ID)
	}
	return nil
}

// newJobs returns the job rows of one submission of run. The master of a
// multi-node run's submission keeps a fresh cluster SSH key for its nodes
// in its provisioning data.
func newJobs(run *store.Run, spec runSpec, submission int) ([]store.Job, error) {
	var jobs []store.Job
	for _, jn := range spec.jobNums() {
		j := store.Job{
			RunID: run.ID, RunName: run.Name, JobNum: jn.job, ReplicaNum: jn.replica,
			JobName:       fmt.Sprintf("%s-%d-%d", run.Name, jn.job, jn.replica),
			SubmissionNum: submission, DeploymentNum: run.DeploymentNum,
			Spec: run.Spec, Status: store.JobSubmitted,
		}
		if jn.job == 0 && spec.multiNode() {
			if err := giveClusterSSHKey(&j); err != nil {
				return nil, err
			}
		}
		jobs = append(jobs, j)
	}
	return jobs, nil
}

// stopRunByName stops the latest run named name (if active) with reason;
// removed marks it removed from Git.
func (c *Controller) stopRunByName(ctx context.Context, name, reason, msg, rev string, removed bool) error {
	run, err := c.st.GetRunByName(ctx, c.cfg.Project, name)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	return c.stopRun(ctx, &run, reason, msg, rev, removed)
}

func (c *Controller) stopRun(ctx context.Context, run *store.Run, reason, msg, rev string, removed bool) error {
	for attempt := 0; ; attempt++ {
		changed := false
		if removed && !run.RemovedFromGit {
			run.RemovedFromGit, changed = true, true
		}
		active := !store.IsRunFinished(run.Status)
		if active && run.Status != store.RunTerminating {
			run.Status, run.TerminationReason, run.StatusMessage = store.RunTerminating, reason, "stopping"
			changed = true
		} else if active && reason == runReasonAbortedByUser && run.TerminationReason != reason {
			// An abort overrides the reason of a run already stopping, as
			// dstack's stop_runs does: its jobs not yet stopping are killed
			// at once and the run ends aborted_by_user.
			run.TerminationReason, changed = reason, true
		}
		if !changed {
			return nil
		}
		err := c.st.UpdateRun(ctx, run)
		if errors.Is(err, store.ErrConflict) && attempt < 5 {
			if *run, err = c.st.GetRun(ctx, run.ID); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		if active {
			c.event(ctx, "run", run.Name, run.ID, "stopping", rev, msg)
		} else {
			c.event(ctx, "run", run.Name, run.ID, "removed", rev, msg)
		}
		c.runs.Add(run.ID)
		return nil
	}
}

// rolling reports whether a replace step is a rolling deployment: a
// service whose previous run is still active.
func rolling(s plan.Step) bool {
	return s.Rolling && s.Current != nil && !s.Current.Finished
}

// runSettled reports whether a resync of the run would find nothing to do
// (read without a lease): a task running with every job of its latest
// submission running, its status and message as reconcileRun would write
// them, and no stop criterion met. Anything else is reconciled.
func (c *Controller) runSettled(ctx context.Context, id string) bool {
	run, err := c.st.GetRun(ctx, id)
	if err != nil || run.Status != store.RunRunning || run.StatusMessage != store.RunRunning ||
		schema.Kind(run.Type) != schema.KindTask {
		return false
	}
	spec, err := decodeRunSpec(run.Spec)
	if err != nil || needsTokenizerConfig(spec) {
		return false
	}
	jobs, err := c.st.ListJobs(ctx, run.ID)
	if err != nil {
		return false
	}
	latest := latestSubmissions(jobs)
	if len(latest) == 0 {
		return false
	}
	for _, j := range latest {
		if j.Status != store.JobRunning {
			return false
		}
	}
	status, term := deriveRunStatus(latest)
	return status == store.RunRunning && term == "" && !masterDone(spec, latest)
}
