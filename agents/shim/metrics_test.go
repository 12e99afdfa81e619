package shim_test

import (
	"testing"
	"time"

	"hoist/agents/api"
)

// TestShim_runnerReportsTheContainersCgroupMetrics runs a job that keeps a
// CPU busy in a container limited to 256 MiB and checks what the runner
// reads from the container's own cgroup: CPU time that grows, memory in
// use, the limit, and no GPUs (no nvidia-smi in the image).
func TestShim_runnerReportsTheContainersCgroupMetrics(t *testing.T) {
	e := newEnv(t)
	const limit = 256 << 20
	_, rc := e.runTask(t, api.TaskSpec{ID: "metrics", MemoryBytes: limit})
	ctx := t.Context()
	if err := rc.Submit(ctx, api.JobSpec{Commands: []string{"echo busy; while :; do :; done"}}); err != nil {
		t.Fatalf("Submit: %v", err)
	}
	if _, err := rc.Run(ctx); err != nil {
		t.Fatalf("Run: %v", err)
	}
	t.Cleanup(func() { _, _ = rc.Stop(ctx, time.Second) })
	waitFor(t, rc, "busy")
	first, err := rc.Metrics(ctx)
	if err != nil {
		t.Fatalf("Metrics: %v", err)
	}
	var last api.Metrics
	deadline := time.Now().Add(20 * time.Second)
	for {
		if last, err = rc.Metrics(ctx); err != nil {
			t.Fatalf("Metrics: %v", err)
		}
		if last.CPUUsageMicros > first.CPUUsageMicros+100_000 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("cpu %d → %d µs, memory %d (working set %d) of %d bytes", first.CPUUsageMicros, last.CPUUsageMicros, last.MemoryUsageBytes, last.MemoryWorkingSetBytes, last.MemoryLimitBytes)
	if last.CPUUsageMicros <= first.CPUUsageMicros {
		t.Errorf("CPU usage went from %d to %d µs while a loop spun", first.CPUUsageMicros, last.CPUUsageMicros)
	}
	if last.MemoryUsageBytes <= 0 || last.MemoryWorkingSetBytes <= 0 || last.MemoryWorkingSetBytes > last.MemoryUsageBytes {
		t.Errorf("memory usage %d, working set %d; want 0 < working set <= usage", last.MemoryUsageBytes, last.MemoryWorkingSetBytes)
	}
	if last.MemoryLimitBytes != limit {
		t.Errorf("memory limit = %d, want %d", last.MemoryLimitBytes, limit)
	}
	if len(last.GPUs) != 0 {
		t.Errorf("GPUs = %+v on a host without nvidia-smi", last.GPUs)
	}
}
