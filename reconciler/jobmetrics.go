package reconciler

import (
	"context"
	"fmt"
	"time"

	"hoist/agents/api"
	"hoist/schema"
	"hoist/store"
)

// metricsKeep is how long a running job's samples are kept: dstack's
// SERVER_METRICS_RUNNING_TTL_SECONDS default (one hour). A run with a longer
// utilization_policy time_window keeps that window and a minute more.
const metricsKeep = time.Hour

// utilizationSlack is how late the oldest sample of the window may be before
// the utilization check waits for more: dstack's one minute ("assuming that
// metrics collection interval less than 1 minute",
// src/dstack/_internal/server/background/tasks/process_running_jobs.py).
const utilizationSlack = time.Minute

// collectMetrics samples a running job's resource use from its runner every
// MetricsInterval until ctx ends, keeping a window of samples in the store
// and applying the run's utilization_policy to it; a dev environment's SSH
// activity is checked at the same pace (checkInactivity). It returns true
// when it terminated the job.
func (c *Controller) collectMetrics(ctx context.Context, job store.Job, lease func() store.Lease) bool {
	spec, err := decodeRunSpec(job.Spec)
	if err != nil {
		c.log.Warn("job metrics: decode job spec failed", "job", job.JobName, "error", err)
		return false
	}
	devEnv := schema.Kind(spec.Type) == schema.KindDevEnvironment
	t := time.NewTimer(c.cfg.MetricsInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
		t.Reset(c.cfg.MetricsInterval)
		_, conn, err := c.shimFor(ctx, job.InstanceID)
		if err != nil {
			continue
		}
		runner := api.NewRunnerClient(job.RunnerAddr, conn.HTTPClient())
		sctx, cancel := context.WithTimeout(ctx, agentCallTimeout)
		m, err := runner.Metrics(sctx)
		cancel()
		if err != nil {
			c.log.Debug("job metrics: sample failed", "job", job.JobName, "error", err)
		} else if stop, err := c.recordMetrics(ctx, lease(), job, spec, m); err != nil {
			c.log.Warn("job metrics: record failed", "job", job.JobName, "error", err)
		} else if stop {
			return true
		}
		if !devEnv {
			continue
		}
		if stop, err := c.checkInactivity(ctx, lease(), job, runner); err != nil {
			c.log.Debug("job inactivity: check failed", "job", job.JobName, "error", err)
		} else if stop {
			return true
		}
	}
}

// recordMetrics stores one sample of a running job, trims its window, and
// terminates the job when its utilization_policy says so; it reports
// whether it did.
func (c *Controller) recordMetrics(ctx context.Context, l store.Lease, job store.Job, spec runSpec, m api.Metrics) (bool, error) {
	now := c.now()
	keep := metricsKeep
	policy := spec.UtilizationPolicy
	if policy != nil {
		keep = max(keep, time.Duration(policy.TimeWindow)*time.Second+utilizationSlack)
	}
	p := store.MetricsPoint{JobID: job.ID, Time: now, CPUUsageMicros: m.CPUUsageMicros, MemoryUsageBytes: m.MemoryUsageBytes,
		MemoryWorkingSetBytes: m.MemoryWorkingSetBytes, MemoryLimitBytes: m.MemoryLimitBytes}
	for _, g := range m.GPUs {
		p.GPUs = append(p.GPUs, store.GPUSample{Index: g.Index, MemoryUsedBytes: g.MemoryUsedBytes, UtilPercent: g.UtilPercent})
	}
	if err := c.st.AddMetricsPoint(ctx, p, now.Add(-keep)); err != nil {
		return false, err
	}
	if policy == nil {
		return false, nil
	}
	window := time.Duration(policy.TimeWindow) * time.Second
	points, err := c.st.MetricsPoints(ctx, job.ID, now.Add(-window))
	if err != nil {
		return false, err
	}
	if !underUtilized(points, *policy, now) {
		return false, nil
	}
	// dstack's message, word for word.
	msg := fmt.Sprintf("The job GPU utilization below %d%% for %d seconds", policy.MinGPUUtilization, policy.TimeWindow)
	stopped, err := c.terminateIfRunning(ctx, l, job.ID, reasonUtilizationPolicy, msg)
	if err != nil {
		return false, fmt.Errorf("utilization policy: %w", err)
	}
	if stopped {
		c.log.Info("job under its utilization policy; terminating", "job", job.JobName,
			"min_gpu_utilization", policy.MinGPUUtilization, "time_window_s", policy.TimeWindow)
	}
	return stopped, nil
}

// terminateIfRunning terminates the job with id for reason, as the job's
// current row says, if it is still running (a check from outside the job
// worker may find it already ended), and wakes the job worker; it reports
// whether it did.
func (c *Controller) terminateIfRunning(ctx context.Context, l store.Lease, id, reason, msg string) (bool, error) {
	cur, err := c.st.GetJob(ctx, id)
	if err != nil {
		return false, err
	}
	if cur.Status != store.JobRunning {
		return false, nil
	}
	if err := c.setTerminating(ctx, l, &cur, reason, msg); err != nil {
		return false, err
	}
	c.jobs.Add(id)
	return true, nil
}

// underUtilized applies a utilization_policy to a job's samples of the last
// time_window (oldest first) as dstack's _check_gpu_utilization does: when
// the window has GPU samples and the oldest of them is no later than a
// minute after the window's start, the job is under-utilized if any one GPU
// stayed below min_gpu_utilization in every sample. A job without GPU
// samples (a host without GPUs, or without nvidia-smi, amd-smi and
// rocm-smi) never is.
func underUtilized(points []store.MetricsPoint, policy schema.UtilizationPolicy, now time.Time) bool {
	after := now.Add(-time.Duration(policy.TimeWindow) * time.Second)
	var series map[int][]float64
	var oldest time.Time
	for _, p := range points {
		if p.Time.Before(after) || len(p.GPUs) == 0 {
			continue
		}
		if series == nil {
			series, oldest = map[int][]float64{}, p.Time
		}
		for _, g := range p.GPUs {
			series[g.Index] = append(series[g.Index], g.UtilPercent)
		}
	}
	if series == nil || oldest.After(after.Add(utilizationSlack)) {
		return false // started recently: not enough samples
	}
	for _, utils := range series {
		low := true
		for _, u := range utils {
			if u >= float64(policy.MinGPUUtilization) {
				low = false
				break
			}
		}
		if low {
			return true
		}
	}
	return false
}
