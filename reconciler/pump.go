package reconciler

import (
	"context"
	"errors"
	"sync"
	"time"

	"hoist/agents/api"
	"hoist/store"
)

// logFlushInterval is the least time between two writes of a job's output
// to the store: output that follows a quiet spell is written at once (and
// so reaches the API and the dashboard), output that follows a write waits
// at most this long, batched with what comes meanwhile.
const logFlushInterval = 25 * time.Millisecond

func (c *Controller) pumping(id string) bool {
	c.pumpsMu.Lock()
	defer c.pumpsMu.Unlock()
	_, ok := c.pumps[id]
	return ok
}

// startPump hands a running job to a goroutine that holds its lease, copies
// its output into the store as it is written, and moves the job to
// terminating when it finishes. It returns false when a pump already runs.
func (c *Controller) startPump(ctx context.Context, l store.Lease, job store.Job) bool {
	c.pumpsMu.Lock()
	if _, ok := c.pumps[job.ID]; ok {
		c.pumpsMu.Unlock()
		return false
	}
	pctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, cancel)
	c.pumps[job.ID] = cancel
	c.pumpsMu.Unlock()
	c.pumpWG.Add(1)
	last := l
	go func() {
		defer c.pumpWG.Done()
		defer stop()
		defer func() {
			c.pumpsMu.Lock()
			delete(c.pumps, job.ID)
			c.pumpsMu.Unlock()
			c.release(last)
			if ctx.Err() == nil {
				c.jobs.Add(job.ID)
			}
		}()
		last = c.pump(pctx, l, job)
	}()
	return true
}

func (c *Controller) stopPump(id string) {
	c.pumpsMu.Lock()
	cancel := c.pumps[id]
	c.pumpsMu.Unlock()
	if cancel != nil {
		cancel()
	}
}

func (c *Controller) stopPumps() {
	c.pumpsMu.Lock()
	defer c.pumpsMu.Unlock()
	for _, cancel := range c.pumps {
		cancel()
	}
}

// pump follows one running job until it finishes, ctx ends, or its lease
// is lost: another server took the job over, and this one stops at once.
func (c *Controller) pump(ctx context.Context, l store.Lease, job store.Job) store.Lease {
	log := c.log.With("job", job.JobName)
	keeper := c.st.KeepAlive(ctx, l, c.cfg.LeaseFor)
	defer func() {
		if _, err := keeper.Stop(); errors.Is(err, store.ErrLeaseLost) {
			log.Warn("job lease lost; another server took over")
		}
	}()
	ctx = keeper.Context()
	lease := keeper.Lease
	c.followJob(ctx, job, lease)
	return keeper.Lease()
}

// followJob copies a running job's output and records its end, with the
// writes made under lease().
func (c *Controller) followJob(ctx context.Context, job store.Job, lease func() store.Lease) {
	log := c.log.With("job", job.JobName)
	// The metrics collector ends the follow when it terminates the job
	// (utilization_policy): the job worker then stops its runner.
	ctx, stopFollow := context.WithCancel(ctx)
	metricsDone := make(chan struct{})
	go func() {
		defer close(metricsDone)
		if c.collectMetrics(ctx, job, lease) {
			stopFollow()
		}
	}()
	defer func() {
		stopFollow()
		<-metricsDone
	}()

	// The runner is unreachable once it has not been heard from for the
	// grace (heard.go): the watchdog ends wctx, and with it whatever call
	// hangs on a dead link.
	grace := c.cfg.UnreachableGrace
	heard := newLastHeard(c.now)
	wctx, silent := context.WithCancelCause(ctx)
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		watchRunner(wctx, heard, grace, func(pctx context.Context) error {
			_, conn, err := c.shimFor(pctx, job.InstanceID)
			if err != nil {
				return err
			}
			_, err = api.NewRunnerClient(job.RunnerAddr, conn.HTTPClient()).State(pctx)
			return err
		}, func() { silent(errRunnerSilent) })
	}()
	defer func() {
		silent(context.Canceled)
		<-watchDone
	}()
	unreachable := func() {
		if j, gerr := c.st.GetJob(ctx, job.ID); gerr == nil {
			_ = c.setTerminating(ctx, lease(), &j, reasonInstanceUnreachable, "the runner was not heard from for "+grace.String())
		}
		// The instance is checked now rather than at its next poll (up to
		// 30 s away), so that it is marked unreachable before the run's
		// retry looks for a place and does not land on the dead host.
		c.insts.Add(job.InstanceID)
	}

	for ctx.Err() == nil {
		if wctx.Err() != nil {
			unreachable()
			return
		}
		shim, conn, err := c.shimFor(wctx, job.InstanceID)
		var runner *api.RunnerClient
		if err == nil {
			runner = api.NewRunnerClient(job.RunnerAddr, conn.HTTPClient())
			err = c.follow(wctx, &job, runner, heard)
		}
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, store.ErrLogQuota) {
			// The job wrote more than its log quota: stop it, as dstack does.
			if j, gerr := c.st.GetJob(ctx, job.ID); gerr == nil {
				_ = c.setTerminating(ctx, lease(), &j, reasonLogQuota, "the job's output exceeded its log quota")
			}
			return
		}
		if swe := (*storeWriteError)(nil); errors.As(err, &swe) {
			// The store, not the runner, failed (a full disk): the runner
			// keeps the lines; try again without counting it as silent.
			log.Warn("job output not stored; retrying", "error", swe.err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(storeRetryInterval):
			}
			continue
		}
		if err == nil {
			sctx, cancel := context.WithTimeout(wctx, agentCallTimeout)
			st, serr := runner.State(sctx)
			cancel()
			if serr == nil {
				heard.heard()
			}
			if serr == nil && st.Finished() {
				c.jobFinished(ctx, lease(), job.ID, st)
				return
			}
			err = serr
		}
		if err != nil && shim != nil && wctx.Err() == nil {
			// The runner is silent: the shim knows whether its container
			// ended (killed or removed from outside, OOM) and why.
			sctx, cancel := context.WithTimeout(wctx, agentCallTimeout)
			info, terr := shim.GetTask(sctx, job.ShimTaskID)
			cancel()
			if terr == nil && info.Terminated() || errors.Is(terr, api.ErrNotFound) {
				c.taskEnded(ctx, lease(), job.ID, info, terr)
				return
			}
		}
		if err != nil {
			if wctx.Err() != nil || heard.silentFor() > grace {
				unreachable()
				return
			}
			log.Debug("runner unreachable; retrying", "error", err)
			select {
			case <-wctx.Done():
			case <-time.After(time.Second):
			}
		}
	}
}

// storeWriteError is a follow that ended because the store did not take
// the job's output: the runner is fine and keeps the lines.
type storeWriteError struct{ err error }

func (e *storeWriteError) Error() string { return "store job output: " + e.err.Error() }
func (e *storeWriteError) Unwrap() error { return e.err }

// storeRetryInterval is how long a follow waits after the store refused
// the job's output before it tries again.
const storeRetryInterval = 2 * time.Second

// follow copies the job's output into the store until the job finishes.
// Every record received counts as hearing the runner (heard).
func (c *Controller) follow(ctx context.Context, job *store.Job, runner *api.RunnerClient, heard *lastHeard) error {
	_, after, err := c.st.LogSize(ctx, job.ID)
	if err != nil {
		return err
	}
	masker := c.maskFor(ctx, job)
	var (
		mu      sync.Mutex
		pending []store.LogLine
		lastSeq int64 // the runner's sequence number of the last pending line
		flushed = make(chan struct{})
		// kick holds a wake-up for the flusher when lines are pending.
		kick = make(chan struct{}, 1)
	)
	flush := func() error {
		mu.Lock()
		batch, seq := pending, lastSeq
		pending = nil
		mu.Unlock()
		if len(batch) == 0 {
			return nil
		}
		masker.mask(batch)
		_, err := c.st.AppendLogs(context.WithoutCancel(ctx), job.ID, batch)
		if err != nil {
			// Not stored (the write is rolled back whole) and not
			// acknowledged: the next follow resumes after what the store
			// holds, and the runner still has these lines.
			return &storeWriteError{err: c.diskFull(err)}
		}
		c.obs.LogsAppended(job.ID)
		// Stored: the runner may drop its copy (best effort; it keeps
		// unacknowledged output on disk until then).
		actx, cancel := context.WithTimeout(ctx, agentCallTimeout)
		_, _ = runner.Ack(actx, seq)
		cancel()
		return nil
	}
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var ferr error
	go func() {
		defer close(flushed)
		var last time.Time
		for {
			select {
			case <-fctx.Done():
				return
			case <-kick:
			}
			if wait := logFlushInterval - time.Since(last); wait > 0 {
				t := time.NewTimer(wait)
				select {
				case <-fctx.Done():
					t.Stop()
					return
				case <-t.C:
				}
			}
			last = time.Now()
			if err := flush(); err != nil {
				ferr = err
				cancel()
				return
			}
		}
	}()
	err = runner.Follow(fctx, after, func(line api.LogLine) error {
		heard.heard()
		mu.Lock()
		pending = append(pending, store.LogLine{Time: line.Time, Stream: line.Stream, Data: line.Data})
		lastSeq = line.Seq
		mu.Unlock()
		select {
		case kick <- struct{}{}:
		default: // a wake-up is already pending
		}
		return nil
	})
	cancel()
	<-flushed
	if ferr != nil {
		return ferr
	}
	if ferr := flush(); ferr != nil {
		return ferr
	}
	return err
}

// drainLogs copies whatever output is left on the runner (best effort).
func (c *Controller) drainLogs(ctx context.Context, job *store.Job, runner *api.RunnerClient) {
	dctx, cancel := context.WithTimeout(ctx, agentCallTimeout)
	defer cancel()
	_, after, err := c.st.LogSize(dctx, job.ID)
	if err != nil {
		return
	}
	masker := c.maskFor(dctx, job)
	for {
		lines, err := runner.Logs(dctx, after, 10000)
		if err != nil || len(lines) == 0 {
			return
		}
		batch := make([]store.LogLine, 0, len(lines))
		for _, l := range lines {
			if l.Seq <= after {
				continue
			}
			batch = append(batch, store.LogLine{Time: l.Time, Stream: l.Stream, Data: l.Data})
			after = l.Seq
		}
		masker.mask(batch)
		if _, err := c.st.AppendLogs(dctx, job.ID, batch); err != nil {
			return
		}
	}
}

// taskEnded moves a running job whose container ended to terminating, with
// the reason the shim recorded for it (exit code, OOM, removal); terr is the
// shim's ErrNotFound when it no longer knows the task.
func (c *Controller) taskEnded(ctx context.Context, l store.Lease, id string, info api.TaskInfo, terr error) {
	job, err := c.st.GetJob(ctx, id)
	if err != nil || store.IsJobFinished(job.Status) || job.Status == store.JobTerminating {
		return
	}
	if info.Job != nil && info.Job.Finished() {
		// The runner finished the job before its container went.
		c.jobFinished(ctx, l, id, *info.Job)
		return
	}
	reason, msg := taskReason(info)
	if terr != nil {
		reason, msg = reasonContainerExitedErr, "the shim no longer knows the job's container"
	}
	job.ExitCode = info.ExitCode
	job.Status, job.TerminationReason, job.TerminationMessage = store.JobTerminating, reason, msg
	job.StatusMessage = jobStatusMessage(job)
	if err := c.st.UpdateJobLeased(ctx, l, &job); err != nil {
		c.log.Warn("record ended task failed", "job", job.JobName, "error", err)
		return
	}
	c.runs.Add(job.RunID)
}

// jobFinished records the runner's final state and moves the job to
// terminating, from where finishJob cleans up.
func (c *Controller) jobFinished(ctx context.Context, l store.Lease, id string, st api.JobState) {
	job, err := c.st.GetJob(ctx, id)
	if err != nil || store.IsJobFinished(job.Status) || job.Status == store.JobTerminating {
		return
	}
	reason := st.TerminationReason
	switch {
	case st.State == api.JobDone:
		reason = reasonDoneByRunner
	case reason == "" && st.State == api.JobFailed:
		reason = reasonContainerExitedErr
	case reason == "":
		reason = reasonTerminatedByServer
	}
	job.ExitCode = st.ExitCode
	job.Status, job.TerminationReason, job.TerminationMessage = store.JobTerminating, reason, st.TerminationMessage
	job.StatusMessage = jobStatusMessage(job)
	if err := c.st.UpdateJobLeased(ctx, l, &job); err != nil {
		c.log.Warn("record finished job failed", "job", job.JobName, "error", err)
		return
	}
	c.runs.Add(job.RunID)
}
