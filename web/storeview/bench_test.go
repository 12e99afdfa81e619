package storeview_test

import (
	"fmt"
	"testing"
	"time"

	"hoist/store"
	"hoist/web"
)

// BenchmarkView_ListRunsPage lists one page (101 runs) of 1,000.
func BenchmarkView_ListRunsPage(b *testing.B) {
	v, st := openB(b)
	ctx := b.Context()
	for i := range 1000 {
		r := &store.Run{Name: fmt.Sprintf("run-%04d", i), Type: "task", Status: store.RunDone, SubmittedAt: now.Add(-time.Duration(i) * time.Minute)}
		if err := st.CreateRun(ctx, r); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		if _, err := v.ListRuns(ctx, web.RunFilter{Limit: 101}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkView_ListRunsPage_history lists the first page (101 runs) of a
// project with 200 running runs, each with a job on one of 13 instances,
// after 5,000 finished runs, each with a finished job: the page and the
// cost of active jobs must not read the whole history.
func BenchmarkView_ListRunsPage_history(b *testing.B) {
	v, st := openB(b)
	ctx := b.Context()
	var insts []store.Instance
	for i := range 13 {
		in := store.Instance{Name: fmt.Sprintf("vm-%02d", i), Backend: "aws", Status: store.InstanceBusy, Price: 0.5}
		if err := st.CreateInstance(ctx, &in); err != nil {
			b.Fatal(err)
		}
		insts = append(insts, in)
	}
	var jobs []store.Job
	for i := range 5200 {
		r := &store.Run{Name: fmt.Sprintf("run-%05d", i), Type: "task", Status: store.RunDone, SubmittedAt: now.Add(-time.Duration(5200-i) * time.Minute)}
		j := store.Job{JobName: r.Name + "-0-0", Status: store.JobDone}
		if i >= 5000 {
			r.Status, j.Status, j.InstanceID = store.RunRunning, store.JobRunning, insts[i%len(insts)].ID
		}
		if err := st.CreateRun(ctx, r); err != nil {
			b.Fatal(err)
		}
		j.RunID, j.RunName, j.SubmittedAt = r.ID, r.Name, r.SubmittedAt
		jobs = append(jobs, j)
	}
	if err := st.CreateJobs(ctx, jobs); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		runs, err := v.ListRuns(ctx, web.RunFilter{Limit: 101})
		if err != nil {
			b.Fatal(err)
		}
		if len(runs) != 101 || runs[0].CostPerHour == 0 {
			b.Fatalf("%d runs, the first costing %v an hour", len(runs), runs[0].CostPerHour)
		}
	}
}
