package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestMetrics_runningJobReportsItsUsage: a real `hoist serve` samples a
// running job's container (real Docker) through its runner: the run API
// carries its CPU and memory samples, /metrics exports hoist_job_* series,
// and the run page draws the charts without JavaScript.
func TestMetrics_runningJobReportsItsUsage(t *testing.T) {
	r := newRepo(t)
	r.write("busy.dstack.yml", task("busy", "  - echo spinning\n  - while :; do :; done\n"))
	sha := r.commit("add busy")
	s := startServer(t, r.dir, "--metrics-interval", "300ms")
	s.waitRun("busy", sha, "running", 60*time.Second)

	type sample struct {
		CPUPercent     float64 `json:"cpu_percent"`
		WorkingSet     int64   `json:"memory_working_set_bytes"`
		CPUUsageSecond float64 `json:"cpu_usage_seconds"`
	}
	var last sample
	var n int
	waitFor(t, 30*time.Second, func() string { return fmt.Sprintf("busy CPU samples in the run API (%d, last %+v)", n, last) }, func() bool {
		var run struct {
			Jobs []struct {
				Metrics []sample `json:"metrics"`
			} `json:"jobs"`
		}
		if s.getJSON("/api/v1/runs/busy", &run) != 200 || len(run.Jobs) == 0 {
			return false
		}
		ms := run.Jobs[0].Metrics
		n = len(ms)
		if n < 3 {
			return false
		}
		last = ms[n-1]
		return last.CPUPercent > 20 && last.WorkingSet > 0
	})
	t.Logf("%d samples; last: %.0f%% CPU, %.1f s CPU, working set %d bytes", n, last.CPUPercent, last.CPUUsageSecond, last.WorkingSet)

	code, body := s.do("GET", "/metrics", nil)
	if code != 200 {
		t.Fatalf("GET /metrics: %d", code)
	}
	for _, want := range []string{`hoist_job_cpu_usage_seconds_total{job="busy-0-0",project="main",run="busy"}`, `hoist_job_memory_working_set_bytes{job="busy-0-0",project="main",run="busy"}`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	code, page := s.do("GET", "/runs/busy", nil)
	if code != 200 || strings.Count(string(page), `data-testid="usage-chart"`) != 2 {
		t.Errorf("run page: %d with %d usage charts, want CPU and memory (no GPU here)", code, strings.Count(string(page), `data-testid="usage-chart"`))
	}
}
