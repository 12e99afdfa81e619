package storeview_test

import (
	"path/filepath"
	"testing"
	"time"

	"hoist/store"
	"hoist/web/storeview"
)

func TestView_jobMetricsCarryNamesAndSeconds(t *testing.T) {
	ctx := t.Context()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "hoist.db"), store.Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	r := &store.Run{Name: "train", Type: "task", Status: store.RunRunning}
	if err := st.CreateRun(ctx, r); err != nil {
		t.Fatal(err)
	}
	j := &store.Job{RunID: r.ID, RunName: r.Name, JobName: "train-0-0", Status: store.JobRunning}
	if err := st.CreateJob(ctx, j); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		p := store.MetricsPoint{JobID: j.ID, Time: now.Add(time.Duration(i) * 10 * time.Second), CPUUsageMicros: int64(i+1) * 2_500_000,
			MemoryWorkingSetBytes: 1 << 20, GPUs: []store.GPUSample{{Index: 3, UtilPercent: 42}}}
		if err := st.AddMetricsPoint(ctx, p, now.Add(-time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	v := storeview.New(st, "")
	ps, err := v.JobMetrics(ctx, j.ID)
	if err != nil || len(ps) != 2 || ps[1].CPUUsageSeconds != 5 || ps[1].GPUs[0].Index != 3 {
		t.Fatalf("JobMetrics = %+v, %v", ps, err)
	}
	latest, err := v.LatestJobMetrics(ctx)
	if err != nil || len(latest) != 1 || latest[0].RunName != "train" || latest[0].JobName != "train-0-0" || !latest[0].At.Equal(now.Add(10*time.Second)) {
		t.Fatalf("LatestJobMetrics = %+v, %v", latest, err)
	}
}
