package reconciler

import (
	"context"
	"fmt"
	"time"

	"hoist/agents/api"
	"hoist/schema"
	"hoist/store"
)

// reasonInactivity is dstack's reason for a dev environment stopped by its
// inactivity_duration.
const reasonInactivity = "inactivity_duration_exceeded"

// checkInactivity stops a running dev environment that has had no SSH
// connection for its run's inactivity_duration, as dstack's
// _terminate_if_inactivity_duration_exceeded does
// (src/dstack/_internal/server/background/pipeline_tasks/jobs_running.py):
// the job is terminated with inactivity_duration_exceeded and dstack's
// message, and its run then ends as dstack ends it (job_failed). The
// duration is read from the run's spec at each check, since it may be
// updated in place. It reports whether it terminated the job.
func (c *Controller) checkInactivity(ctx context.Context, l store.Lease, job store.Job, runner *api.RunnerClient) (bool, error) {
	run, err := c.st.GetRun(ctx, job.RunID)
	if err != nil {
		return false, fmt.Errorf("inactivity: %w", err)
	}
	spec, err := decodeRunSpec(run.Spec)
	if err != nil {
		return false, fmt.Errorf("inactivity: %w", err)
	}
	if schema.Kind(spec.Type) != schema.KindDevEnvironment || spec.InactivityDuration <= 0 {
		return false, nil
	}
	actx, cancel := context.WithTimeout(ctx, agentCallTimeout)
	a, err := runner.SSHActivity(actx)
	cancel()
	if err != nil {
		return false, fmt.Errorf("inactivity: %w", err)
	}
	idle := inactiveFor(a, job.StartedAt, c.now())
	if idle < time.Duration(spec.InactivityDuration)*time.Second {
		return false, nil
	}
	secs := int64(idle / time.Second)
	// dstack's message, word for word.
	msg := fmt.Sprintf("The job was inactive for %d seconds, exceeding the inactivity_duration of %d seconds", secs, spec.InactivityDuration)
	stopped, err := c.terminateIfRunning(ctx, l, job.ID, reasonInactivity, msg)
	if err != nil {
		return false, fmt.Errorf("inactivity: %w", err)
	}
	if stopped {
		c.log.Info("dev environment inactive; terminating", "job", job.JobName, "inactive_s", secs, "inactivity_duration_s", spec.InactivityDuration)
	}
	return stopped, nil
}

// inactiveFor is how long a job has had no SSH connection at now: zero
// while one is open, else the time since the runner's IdleSince, counted
// from no earlier than the job started running on the server's clock (a
// runner whose clock is behind must not stop an environment early).
func inactiveFor(a api.SSHActivity, started, now time.Time) time.Duration {
	if a.Connections > 0 {
		return 0
	}
	since := a.IdleSince
	if since.Before(started) {
		since = started
	}
	return max(now.Sub(since), 0)
}
