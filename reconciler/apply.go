package reconciler

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"hoist/reconciler/plan"
	"hoist/reconciler/source"
	"hoist/schema"
	"hoist/store"
)

// apply carries out a plan's steps in order against the store's
// desired-state rows and wakes the workers that converge them. Held steps
// are skipped.
func (c *Controller) apply(ctx context.Context, rev source.Revision, p plan.Plan) error {
	for _, s := range p.Steps {
		if s.Held {
			continue
		}
		var err error
		switch {
		case s.Kind.IsRun():
			err = c.applyRun(ctx, rev, s)
		default:
			err = c.applyInfra(ctx, rev, s)
		}
		if err != nil {
			return fmt.Errorf("apply %s %s (%s): %w", s.Kind, s.Name, s.Action, err)
		}
	}
	return nil
}

// upsert records a step's desired spec as the resource's applied spec.
func (c *Controller) upsert(ctx context.Context, rev source.Revision, s plan.Step) (store.Resource, error) {
	r, err := c.st.UpsertResource(ctx, store.Resource{
		Project: c.cfg.Project, Kind: string(s.Kind), Name: s.Name,
		Spec: s.Desired.JSON, SpecHash: specHash(s.Desired.JSON), File: s.Desired.File, Revision: rev.ID,
	})
	if err != nil {
		return r, err
	}
	if r.AppliedRevision != rev.ID {
		r.AppliedRevision = rev.ID
		if err := c.st.UpdateResource(ctx, &r); err != nil && !errors.Is(err, store.ErrConflict) {
			return r, err
		}
	}
	return r, nil
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
		jobs = newJobs(&run, spec, 0)
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
	jobs := newJobs(run, spec, submission)
	if err := c.st.CreateJobs(ctx, jobs); err != nil {
		return err
	}
	for _, j := range jobs {
		c.jobs.Add(j.ID)
	}
	return nil
}

// newJobs returns the job rows of one submission of run.
func newJobs(run *store.Run, spec runSpec, submission int) []store.Job {
	var jobs []store.Job
	for _, jn := range spec.jobNums() {
		jobs = append(jobs, store.Job{
			RunID: run.ID, RunName: run.Name, JobNum: jn.job, ReplicaNum: jn.replica,
			JobName:       fmt.Sprintf("%s-%d-%d", run.Name, jn.job, jn.replica),
			SubmissionNum: submission, DeploymentNum: run.DeploymentNum,
			Spec: run.Spec, Status: store.JobSubmitted,
		})
	}
	return jobs
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

// specHash is the hash a spec is stored with, to tell whether the desired
// spec changed without reading the stored one back.
func specHash(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}
