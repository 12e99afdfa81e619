package reconciler

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"hoist/backends"
	"hoist/backends/fake"
	"hoist/reconciler/source"
	"hoist/store"
)

// BenchmarkGang_commitToAllNodesRunning measures, on the real clock with
// the controller's loops running against backends/fake (instances with an
// in-process shim and runner), the time from committing a task of n nodes
// to a cluster fleet of n idle instances until all n jobs run
// (commit→running), and the time between the first and the last node
// starting (start-spread).
func BenchmarkGang_commitToAllNodesRunning(b *testing.B) {
	for _, n := range []int{2, 8} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			var total, spread time.Duration
			for range b.N {
				t, s := gangStartOnce(b, n)
				total, spread = total+t, spread+s
			}
			b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms-commit→running")
			b.ReportMetric(float64(spread.Milliseconds())/float64(b.N), "ms-start-spread")
		})
	}
}

// gangStartOnce runs one commit of an n-node task and returns its
// commit→running time and start spread.
func gangStartOnce(b *testing.B, n int) (time.Duration, time.Duration) {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir := b.TempDir()
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	write("fleet.dstack.yml", fmt.Sprintf("type: fleet\nname: cluster\nnodes: %d\nplacement: cluster\n", n))
	st, err := store.Open(ctx, filepath.Join(b.TempDir(), "hoist.db"), store.Options{Now: time.Now, SecretKey: fixtureKey})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	src, err := source.Open(ctx, source.Config{Repo: dir})
	if err != nil {
		b.Fatal(err)
	}
	be := fake.New(fake.Config{})
	defer be.Close()
	c, err := New(Config{Now: time.Now, Owner: "bench", NoLocalFleet: true}, Deps{Store: st, Source: src, Backends: map[string]backends.Backend{"fake": be}})
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	defer func() { cancel(); <-done }()
	poll := func(what string, cond func() bool) {
		deadline := time.Now().Add(60 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				b.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	poll("the fleet's instances", func() bool {
		fl, err := st.GetFleetByName(ctx, store.DefaultProject, "cluster")
		if err != nil {
			return false
		}
		insts, _ := st.ListInstances(ctx, store.InfraFilter{Project: store.DefaultProject, FleetID: fl.ID})
		return len(insts) == n && !slices.ContainsFunc(insts, func(i store.Instance) bool { return i.Status != store.InstanceIdle })
	})
	start := time.Now()
	write("task.dstack.yml", fmt.Sprintf("type: task\nname: train\nimage: busybox\ncommands: [sleep 1h]\nfleets: [cluster]\nnodes: %d\n", n))
	var jobs []store.Job
	poll("every node running", func() bool {
		r, err := st.GetRunByName(ctx, store.DefaultProject, "train")
		if err != nil {
			return false
		}
		jobs, _ = st.ListJobs(ctx, r.ID)
		return len(jobs) == n && !slices.ContainsFunc(jobs, func(j store.Job) bool { return j.Status != store.JobRunning })
	})
	elapsed := time.Since(start)
	first, last := jobs[0].StartedAt, jobs[0].StartedAt
	for _, j := range jobs {
		if j.StartedAt.Before(first) {
			first = j.StartedAt
		}
		if j.StartedAt.After(last) {
			last = j.StartedAt
		}
	}
	return elapsed, last.Sub(first)
}
