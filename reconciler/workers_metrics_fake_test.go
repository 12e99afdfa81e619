package reconciler

import (
	"sync/atomic"
	"testing"
	"time"

	"hoist/agents/api"
	"hoist/backends/fake"
	"hoist/store"
)

// TestWorkers_runningJobMetricsAreCollectedAndAnIdleGPUStopsTheRun: the
// pump of a running job samples its runner every MetricsInterval into the
// store; while its GPU is busy the job runs, and once the GPU stays under
// the run's min_gpu_utilization for time_window (on the fixture's clock)
// the job is terminated with dstack's reason and message, its runner is
// stopped, and its run ends with job_failed.
func TestWorkers_runningJobMetricsAreCollectedAndAnIdleGPUStopsTheRun(t *testing.T) {
	f := newFixture(t, map[string]string{
		"fleet.dstack.yml": cloudFleet,
		"task.dstack.yml": "type: task\nname: train\nimage: busybox\ncommands: [echo training, sleep 1h]\n" +
			"resources: {gpu: 1}\nutilization_policy: {min_gpu_utilization: 20, time_window: 5m}\n",
	})
	var util atomic.Int64
	util.Store(80)
	var cpu atomic.Int64
	f.withFakeBackend(fake.Config{Metrics: func() api.Metrics {
		return api.Metrics{CPUUsageMicros: cpu.Add(1e6), MemoryUsageBytes: 64 << 20, MemoryWorkingSetBytes: 32 << 20,
			GPUs: []api.GPUMetrics{{Index: 0, UtilPercent: float64(util.Load()), MemoryUsedBytes: 1 << 30}}}
	}}, func(c *Config) { c.MetricsInterval = 5 * time.Millisecond })
	f.startTask("train")
	j := f.job("train")
	samples := func() []store.MetricsPoint {
		ps, err := f.st.MetricsPoints(f.ctx, j.ID, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		return ps
	}
	// Busy for ten minutes of the clock: samples pile up, the job runs.
	waitFor(t, "ten minutes of busy samples", func() bool {
		f.clock.Advance(10 * time.Second)
		ps := samples()
		return len(ps) > 0 && ps[len(ps)-1].Time.Sub(ps[0].Time) >= 10*time.Minute
	})
	if ps := samples(); ps[len(ps)-1].GPUs[0].UtilPercent != 80 || ps[len(ps)-1].MemoryWorkingSetBytes != 32<<20 {
		t.Fatalf("last sample %+v", ps[len(ps)-1])
	}
	if j := f.job("train"); j.Status != store.JobRunning {
		t.Fatalf("busy job is %s (%s)", j.Status, j.TerminationReason)
	}
	// Idle: terminated once the window holds only idle samples.
	util.Store(5)
	idleFrom := f.clock.Now()
	waitFor(t, "the idle job to be terminated", func() bool {
		f.clock.Advance(10 * time.Second)
		return f.job("train").Status != store.JobRunning
	})
	j = f.job("train")
	if j.TerminationReason != reasonUtilizationPolicy || j.TerminationMessage != "The job GPU utilization below 20% for 300 seconds" {
		t.Fatalf("job %s %q %q", j.Status, j.TerminationReason, j.TerminationMessage)
	}
	if idle := f.clock.Now().Sub(idleFrom); idle < 5*time.Minute {
		t.Errorf("terminated after %s of idle samples, want at least the 5 min window", idle)
	}
	f.stepJob("train", store.JobTerminated)
	f.reconcileRun("train")
	// As in dstack, a job ended by its utilization policy fails its run.
	if r := f.run("train"); r.TerminationReason != runReasonJobFailed {
		t.Errorf("run %s (%s), want ended with %s", r.Status, r.TerminationReason, runReasonJobFailed)
	}
}
