package store

import (
	"testing"
	"time"
)

func TestMetricsPoints_keepABoundedWindowPerJobAndGoWithFinishedJobs(t *testing.T) {
	forEachDB(t, func(t *testing.T, s *Store, clock *fakeClock) {
		ctx := t.Context()
		r := &Run{Name: "t", Type: "task", Status: RunRunning}
		if err := s.CreateRun(ctx, r); err != nil {
			t.Fatal(err)
		}
		a := &Job{RunID: r.ID, RunName: r.Name, JobName: "t-0-0", Status: JobRunning}
		b := &Job{RunID: r.ID, RunName: r.Name, JobName: "t-1-0", Status: JobRunning}
		for _, j := range []*Job{a, b} {
			if err := s.CreateJob(ctx, j); err != nil {
				t.Fatal(err)
			}
		}
		t0 := clock.Now().Truncate(time.Second)
		for i := range 6 {
			at := t0.Add(time.Duration(i) * 10 * time.Second)
			p := MetricsPoint{JobID: a.ID, Time: at, CPUUsageMicros: int64(i) * 1e6, MemoryWorkingSetBytes: 1 << 20,
				GPUs: []GPUSample{{Index: 0, UtilPercent: float64(i)}}}
			if err := s.AddMetricsPoint(ctx, p, at.Add(-30*time.Second)); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.AddMetricsPoint(ctx, MetricsPoint{JobID: b.ID, Time: t0}, t0.Add(-time.Hour)); err != nil {
			t.Fatal(err)
		}
		ps, err := s.MetricsPoints(ctx, a.ID, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		if len(ps) != 4 || !ps[0].Time.Equal(t0.Add(20*time.Second)) || ps[3].CPUUsageMicros != 5e6 || len(ps[3].GPUs) != 1 || ps[3].GPUs[0].UtilPercent != 5 {
			t.Fatalf("window of job a = %+v, want the 4 samples from t0+20s, oldest first", ps)
		}
		latest, err := s.LatestMetricsPoints(ctx)
		if err != nil || len(latest) != 2 || latest[0].JobName != "t-0-0" || latest[0].RunName != "t" || latest[0].CPUUsageMicros != 5e6 {
			t.Fatalf("LatestMetricsPoints = %+v, %v; want one per job", latest, err)
		}
		b.Status, b.FinishedAt = JobDone, t0
		if err := s.UpdateJob(ctx, b); err != nil {
			t.Fatal(err)
		}
		if latest, _ := s.LatestMetricsPoints(ctx); len(latest) != 1 || latest[0].JobID != a.ID {
			t.Fatalf("LatestMetricsPoints after b finished = %+v, want only a's", latest)
		}
		if n, err := s.PruneMetrics(ctx, t0.Add(time.Minute)); err != nil || n != 1 {
			t.Fatalf("PruneMetrics = %d, %v; want 1", n, err)
		}
	})
}
