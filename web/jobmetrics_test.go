package web

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

// fakeJobMetrics holds samples by job id.
type fakeJobMetrics map[string][]MetricsPoint

func (f fakeJobMetrics) JobMetrics(_ context.Context, id string) ([]MetricsPoint, error) {
	return append([]MetricsPoint(nil), f[id]...), nil
}

func (f fakeJobMetrics) LatestJobMetrics(context.Context) ([]MetricsPoint, error) {
	ps := f["job-w0"]
	if len(ps) == 0 {
		return nil, errors.New("no samples")
	}
	p := ps[len(ps)-1]
	p.RunName, p.JobName = "web", "web-0-0"
	return []MetricsPoint{p}, nil
}

// gpuSamples are three samples ten seconds apart of a job using half a
// core and two GPUs.
func gpuSamples() []MetricsPoint {
	var ps []MetricsPoint
	for i := range 3 {
		ps = append(ps, MetricsPoint{At: t0.Add(time.Duration(i-2) * 10 * time.Second), CPUUsageSeconds: 100 + 5*float64(i),
			MemoryWorkingSetBytes: 512 << 20, MemoryLimitBytes: 1 << 30,
			GPUs: []GPUSample{{Index: 0, UtilPercent: 90, MemoryUsedBytes: 1 << 30}, {Index: 1, UtilPercent: 4}}})
	}
	return ps
}

func metricsFixture(t *testing.T) *fixture {
	t.Helper()
	f := newFixture(t, func(_ *Config, d *Deps) {
		d.Services = &fakeServices{m: map[string]Service{}}
		d.JobMetrics = fakeJobMetrics{"job-w0": gpuSamples()}
	})
	f.store.putRun(Run{Name: "web", Type: "service", Status: "running", Revision: "0123456789abcdef0123", SubmittedAt: t0.Add(-time.Hour),
		Jobs: []Job{{ID: "job-w0", SubmissionID: "job-w0", JobName: "web-0-0", Status: "running", SubmittedAt: t0.Add(-time.Hour)}}})
	return f
}

// TestRunPage_jobMetricsChartsWithoutJS: the run page of a running job
// draws its CPU %, memory and GPU utilization as server-side SVG, one line
// per GPU.
func TestRunPage_jobMetricsChartsWithoutJS(t *testing.T) {
	f := metricsFixture(t)
	d := f.page(t, "/runs/web")
	charts := d.Find("[data-testid=usage] svg[data-testid=usage-chart]")
	if charts.Length() != 3 {
		t.Fatalf("usage charts = %d, want CPU, memory and GPU", charts.Length())
	}
	gpu := charts.Eq(2)
	if label, _ := gpu.Attr("aria-label"); label != "GPU utilization (%)" || gpu.Find("polyline").Length() != 2 {
		t.Fatalf("GPU chart %q with %d lines, want two", label, gpu.Find("polyline").Length())
	}
	if cpu := d.Find("[data-testid=usage-summary]").First().Text(); !strings.Contains(cpu, "now 50%") {
		t.Errorf("CPU summary %q, want 50%% (5 s of CPU in 10 s)", cpu)
	}
}

// TestGetRun_jobMetricsInTheAPI: GET /api/v1/runs/{name} carries a running
// job's samples with CPU percent.
func TestGetRun_jobMetricsInTheAPI(t *testing.T) {
	f := metricsFixture(t)
	resp := f.do(t, "GET", "/api/v1/runs/web", adminTok, nil)
	var r Run
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatal(err)
	}
	if len(r.Jobs) != 1 || len(r.Jobs[0].Metrics) != 3 {
		t.Fatalf("jobs = %+v, want one with 3 samples", r.Jobs)
	}
	if m := r.Jobs[0].Metrics[2]; m.CPUPercent != 50 || len(m.GPUs) != 2 || m.MemoryLimitBytes != 1<<30 {
		t.Fatalf("last sample = %+v", m)
	}
}

// TestMetrics_hoistJobSeries: /metrics exports the newest sample of each
// running job as hoist_job_* series labelled by run, job and gpu.
func TestMetrics_hoistJobSeries(t *testing.T) {
	f := metricsFixture(t)
	body := readBody(t, f.do(t, "GET", "/metrics", adminTok, nil))
	for _, want := range []string{
		`hoist_job_cpu_usage_seconds_total{job="web-0-0",project="main",run="web"} 110`,
		`hoist_job_memory_working_set_bytes{job="web-0-0",project="main",run="web"} 5.36870912e+08`,
		`hoist_job_memory_limit_bytes{job="web-0-0",project="main",run="web"} 1.073741824e+09`,
		`hoist_job_gpu_utilization_percent{gpu="1",job="web-0-0",project="main",run="web"} 4`,
		`hoist_job_gpu_memory_used_bytes{gpu="0",job="web-0-0",project="main",run="web"} 1.073741824e+09`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
