package web

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// JobMetrics reads the window of resource samples the reconciler collects
// from running jobs' runners (CPU, memory, GPUs).
type JobMetrics interface {
	// JobMetrics returns a job's samples in the window, oldest first.
	JobMetrics(ctx context.Context, jobID string) ([]MetricsPoint, error)
	// LatestJobMetrics returns the newest sample of every unfinished job,
	// with RunName and JobName set.
	LatestJobMetrics(ctx context.Context) ([]MetricsPoint, error)
}

// MetricsPoint is one sample of a job's resource use.
type MetricsPoint struct {
	// RunName and JobName name the job (set by LatestJobMetrics).
	RunName string `json:"-"`
	JobName string `json:"-"`
	// At is when the sample was taken.
	At time.Time `json:"at"`
	// CPUUsageSeconds is the CPU time the job's container consumed so far.
	CPUUsageSeconds float64 `json:"cpu_usage_seconds"`
	// CPUPercent is the CPU use since the previous sample, in percent of
	// one core (set by the server; 0 for the first sample).
	CPUPercent float64 `json:"cpu_percent"`
	// MemoryWorkingSetBytes is the memory in use less inactive file cache.
	MemoryWorkingSetBytes int64 `json:"memory_working_set_bytes"`
	// MemoryLimitBytes is the container's memory limit; 0 when it has none.
	MemoryLimitBytes int64 `json:"memory_limit_bytes,omitempty"`
	// GPUs is each GPU's use; empty without GPUs.
	GPUs []GPUSample `json:"gpus"`
}

// GPUSample is one GPU's use in a MetricsPoint.
type GPUSample struct {
	Index           int     `json:"index"`
	UtilPercent     float64 `json:"util_percent"`
	MemoryUsedBytes int64   `json:"memory_used_bytes"`
}

// withCPUPercent sets each point's CPUPercent from the CPU time used since
// the point before it.
func withCPUPercent(ps []MetricsPoint) []MetricsPoint {
	for i := range ps {
		if ps[i].GPUs == nil {
			ps[i].GPUs = []GPUSample{}
		}
		if i == 0 {
			continue
		}
		dt := ps[i].At.Sub(ps[i-1].At).Seconds()
		if dt > 0 {
			ps[i].CPUPercent = math.Max(0, 100*(ps[i].CPUUsageSeconds-ps[i-1].CPUUsageSeconds)/dt)
		}
	}
	return ps
}

// jobMetrics is a job's samples with CPU percent, or nil when the server
// has no JobMetrics or cannot say (logged).
func (s *Server) jobMetrics(ctx context.Context, p *project, j Job) []MetricsPoint {
	if p.JobMetrics == nil || j.ID == "" {
		return nil
	}
	ps, err := p.JobMetrics.JobMetrics(ctx, j.ID)
	if err != nil {
		s.log.Warn("job metrics failed", "job", j.JobName, "error", err)
		return nil
	}
	return withCPUPercent(ps)
}

// jobMetricsCollector reports the hoist_job_* series from the newest sample
// of every unfinished job of each project with JobMetrics at scrape time.
type jobMetricsCollector struct {
	s                       *Server
	cpu, mem, limit, gu, gm *prometheus.Desc
}

func newJobMetricsCollector(s *Server) jobMetricsCollector {
	jl, gl := []string{"project", "run", "job"}, []string{"project", "run", "job", "gpu"}
	return jobMetricsCollector{s: s,
		cpu:   prometheus.NewDesc("hoist_job_cpu_usage_seconds_total", "CPU time the job's container consumed (from its cgroup).", jl, nil),
		mem:   prometheus.NewDesc("hoist_job_memory_working_set_bytes", "The job container's memory in use less inactive file cache.", jl, nil),
		limit: prometheus.NewDesc("hoist_job_memory_limit_bytes", "The job container's memory limit (absent without one).", jl, nil),
		gu:    prometheus.NewDesc("hoist_job_gpu_utilization_percent", "A GPU's utilization in the job (nvidia-smi, amd-smi or rocm-smi).", gl, nil),
		gm:    prometheus.NewDesc("hoist_job_gpu_memory_used_bytes", "A GPU's memory in use in the job (nvidia-smi, amd-smi or rocm-smi).", gl, nil),
	}
}

// Describe implements prometheus.Collector.
func (jc jobMetricsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{jc.cpu, jc.mem, jc.limit, jc.gu, jc.gm} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (jc jobMetricsCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, proj := range jc.s.projectList() {
		if proj.JobMetrics == nil {
			continue
		}
		ps, err := proj.JobMetrics.LatestJobMetrics(ctx)
		if err != nil {
			ch <- prometheus.NewInvalidMetric(jc.mem, err)
			continue
		}
		pn := proj.name
		for _, p := range ps {
			ch <- prometheus.MustNewConstMetric(jc.cpu, prometheus.CounterValue, p.CPUUsageSeconds, pn, p.RunName, p.JobName)
			ch <- prometheus.MustNewConstMetric(jc.mem, prometheus.GaugeValue, float64(p.MemoryWorkingSetBytes), pn, p.RunName, p.JobName)
			if p.MemoryLimitBytes > 0 {
				ch <- prometheus.MustNewConstMetric(jc.limit, prometheus.GaugeValue, float64(p.MemoryLimitBytes), pn, p.RunName, p.JobName)
			}
			for _, g := range p.GPUs {
				gpu := strconv.Itoa(g.Index)
				ch <- prometheus.MustNewConstMetric(jc.gu, prometheus.GaugeValue, g.UtilPercent, pn, p.RunName, p.JobName, gpu)
				ch <- prometheus.MustNewConstMetric(jc.gm, prometheus.GaugeValue, float64(g.MemoryUsedBytes), pn, p.RunName, p.JobName, gpu)
			}
		}
	}
}

// usageChart is one series of a job's samples over time: a line on a
// plot with a left axis.
type usageChart struct {
	Title         string
	Width, Height int
	// Left and Right are the x of the plot's edges, Top and Bottom the y.
	Left, Right, Top, Bottom int
	// Lines are SVG polyline points, one per series (one per GPU).
	Lines   []string
	YLabels []yLabel
	Ticks   []tick
	// Summary says in words what the chart draws.
	Summary string
}

// jobUsageCharts lays out a job's samples (oldest first, CPU percent set)
// as charts of CPU %, memory and, when the job has GPUs, GPU utilization;
// none without samples.
func jobUsageCharts(ps []MetricsPoint) []usageChart {
	if len(ps) == 0 {
		return nil
	}
	cpu := func(p MetricsPoint) []float64 { return []float64{p.CPUPercent} }
	mem := func(p MetricsPoint) []float64 { return []float64{float64(p.MemoryWorkingSetBytes) / (1 << 20)} }
	last := ps[len(ps)-1]
	charts := []usageChart{
		lineChart("CPU (% of one core)", ps, 1, cpu, 0, fmt.Sprintf("now %.0f%%", last.CPUPercent)),
		lineChart("Memory working set (MiB)", ps, 1, mem, 0, fmt.Sprintf("now %.0f MiB", float64(last.MemoryWorkingSetBytes)/(1<<20))),
	}
	gpus := 0
	for _, p := range ps {
		gpus = max(gpus, len(p.GPUs))
	}
	if gpus > 0 {
		util := func(p MetricsPoint) []float64 {
			v := make([]float64, gpus)
			for i := range v {
				v[i] = math.NaN()
			}
			for i, g := range p.GPUs {
				if i < gpus {
					v[i] = g.UtilPercent
				}
			}
			return v
		}
		charts = append(charts, lineChart("GPU utilization (%)", ps, gpus, util, 100, fmt.Sprintf("%d GPUs", gpus)))
	}
	return charts
}

// lineChart draws n series read by value from ps over time; top is the
// axis's top (0: rounded up from the largest value). NaN values are gaps.
func lineChart(title string, ps []MetricsPoint, n int, value func(MetricsPoint) []float64, top float64, now string) usageChart {
	const h, topM, bottom, left, right = 120, 10, 22, 60, 20
	ch := usageChart{Title: title, Width: chartWidth, Height: h, Left: left, Right: chartWidth - right, Top: topM, Bottom: h - bottom}
	start, end := ps[0].At, ps[len(ps)-1].At
	if end.Sub(start) < time.Minute {
		end = start.Add(time.Minute)
	}
	peak := 0.0
	for _, p := range ps {
		for _, v := range value(p) {
			if !math.IsNaN(v) {
				peak = math.Max(peak, v)
			}
		}
	}
	if top <= 0 {
		top = niceCeil(peak)
	}
	plotW, plotH := float64(ch.Right-ch.Left), float64(ch.Bottom-ch.Top)
	x := func(t time.Time) int {
		return ch.Left + int(math.Round(plotW*float64(t.Sub(start))/float64(end.Sub(start))))
	}
	y := func(v float64) int { return ch.Bottom - int(math.Round(plotH*math.Min(v, top)/top)) }
	lines := make([][]byte, n)
	for _, p := range ps {
		for i, v := range value(p) {
			if math.IsNaN(v) {
				continue
			}
			if len(lines[i]) > 0 {
				lines[i] = append(lines[i], ' ')
			}
			lines[i] = fmt.Appendf(lines[i], "%d,%d", x(p.At), y(v))
		}
	}
	for _, l := range lines {
		ch.Lines = append(ch.Lines, string(l))
	}
	for k := 0; k <= 2; k++ {
		v := top * float64(k) / 2
		ch.YLabels = append(ch.YLabels, yLabel{Y: y(v), Label: strconv.FormatFloat(v, 'f', -1, 64)})
	}
	ch.Ticks = timeTicks(start, end, x)
	ch.Summary = fmt.Sprintf("%s: %d samples from %s to %s, peak %s, %s", title, len(ps),
		ps[0].At.UTC().Format("15:04:05"), ps[len(ps)-1].At.UTC().Format("15:04:05"), strconv.FormatFloat(peak, 'f', 1, 64), now)
	return ch
}
