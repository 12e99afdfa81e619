package storeview

import (
	"context"
	"time"

	"hoist/store"
	"hoist/web"
)

var _ web.JobMetrics = (*View)(nil)

// JobMetrics returns a job's samples in the store's window, oldest first.
func (v *View) JobMetrics(ctx context.Context, jobID string) ([]web.MetricsPoint, error) {
	ps, err := v.st.MetricsPoints(ctx, jobID, time.Time{})
	if err != nil {
		return nil, err
	}
	out := make([]web.MetricsPoint, len(ps))
	for i, p := range ps {
		out[i] = webMetricsPoint(p)
	}
	return out, nil
}

// LatestJobMetrics returns the newest sample of every unfinished job.
func (v *View) LatestJobMetrics(ctx context.Context) ([]web.MetricsPoint, error) {
	ps, err := v.st.LatestMetricsPoints(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]web.MetricsPoint, len(ps))
	for i, p := range ps {
		out[i] = webMetricsPoint(p.MetricsPoint)
		out[i].RunName, out[i].JobName = p.RunName, p.JobName
	}
	return out, nil
}

func webMetricsPoint(p store.MetricsPoint) web.MetricsPoint {
	w := web.MetricsPoint{At: p.Time, CPUUsageSeconds: float64(p.CPUUsageMicros) / 1e6,
		MemoryWorkingSetBytes: p.MemoryWorkingSetBytes, MemoryLimitBytes: p.MemoryLimitBytes, GPUs: []web.GPUSample{}}
	for _, g := range p.GPUs {
		w.GPUs = append(w.GPUs, web.GPUSample{Index: g.Index, UtilPercent: g.UtilPercent, MemoryUsedBytes: g.MemoryUsedBytes})
	}
	return w
}
