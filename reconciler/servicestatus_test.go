package reconciler

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"hoist/store"
)

// TestServiceHistory_ring covers the sample ring behind the dashboard's
// chart: bounded, oldest first, about one sample per interval.
func TestServiceHistory_ring(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	for _, tc := range []struct {
		name  string
		adds  []int // seconds after t0
		want  []int
		prune int // seconds after t0 (0: no prune)
	}{
		{name: "keeps samples oldest first", adds: []int{0, 10, 20}, want: []int{0, 10, 20}},
		{name: "drops the oldest once full", adds: []int{0, 10, 20, 30, 40, 50}, want: []int{20, 30, 40, 50}},
		{name: "replaces a sample taken within half an interval of the newest", adds: []int{0, 10, 14, 20}, want: []int{0, 14, 20}},
		{name: "keeps a sample taken half an interval or more after the newest", adds: []int{0, 5, 10}, want: []int{0, 5, 10}},
		{name: "prune keeps a service sampled within the span", adds: []int{0, 10}, prune: 50, want: []int{0, 10}},
		{name: "prune drops a service not sampled for the span", adds: []int{0, 10}, prune: 51},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newServiceHistory(10*time.Second, 4)
			for i, s := range tc.adds {
				h.add("main/web", ServiceSample{At: at(s), RPS: float64(i)})
			}
			if tc.prune > 0 {
				h.prune(at(tc.prune))
			}
			got := h.samples("main/web")
			if len(got) != len(tc.want) {
				t.Fatalf("%d samples %v, want %d", len(got), got, len(tc.want))
			}
			for i, s := range got {
				if !s.At.Equal(at(tc.want[i])) {
					t.Errorf("sample %d at %s, want %s", i, s.At, at(tc.want[i]))
				}
			}
			if other := h.samples("main/api"); other != nil {
				t.Errorf("another service has samples %v", other)
			}
		})
	}
}

// TestServiceStatus_showsReplicasProbesTrafficAndHistory: the dashboard
// view lists each replica with its probe counts and last result (from the
// store's counters), counts the ready ones, reads the traffic the autoscaler reads (over the spec's
// window), reports the autoscaler's desired count, and gathers one sample
// per tick of the injected clock.
func TestServiceStatus_showsReplicasProbesTrafficAndHistory(t *testing.T) {
	f := newFixture(t, map[string]string{
		"web.dstack.yml": "type: service\nname: web\nimage: busybox\nport: 8000\ncommands: [sleep 1h]\nreplicas: 2..3\n" +
			"scaling: {metric: rps, target: 10, window: 30}\n" +
			"probes:\n  - type: http\n    url: /health\n    ready_after: 2\n",
	})
	tr := &fakeTraffic{}
	f.c.traffic = tr
	if res := f.sync(); res != resultSynced {
		t.Fatalf("sync = %s", res)
	}
	run := f.run("web")
	jobs := latestSubmissions(f.jobs(run.ID))
	if len(jobs) != 2 {
		t.Fatalf("%d jobs, want 2", len(jobs))
	}
	for i := range jobs {
		jobs[i].Status = store.JobRunning
		jobs[i].RuntimeData = json.RawMessage(`{"service_addr":"127.0.0.1:800` + string(rune('0'+jobs[i].ReplicaNum)) + `"}`)
		if err := f.st.UpdateJob(f.ctx, &jobs[i]); err != nil {
			t.Fatal(err)
		}
	}
	byReplica := map[int]store.Job{}
	for _, j := range jobs {
		byReplica[j.ReplicaNum] = j
	}
	// Replica 0 passed twice, replica 1 failed: counted in the store, and
	// seen by this server's routing for replica 0.
	for _, ok := range []bool{true, true} {
		if _, err := f.st.RecordProbe(f.ctx, byReplica[0].ID, 0, ok); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.st.RecordProbe(f.ctx, byReplica[1].ID, 0, false); err != nil {
		t.Fatal(err)
	}
	probedAt := f.clock.Now()
	f.c.setPasses(byReplica[0].ID, []int{2})
	f.c.svcMu.Lock()
	f.c.scales[run.ID] = &scaleState{init: true, key: "main/web", desired: 3}
	f.c.svcMu.Unlock()
	tr.set(12.5, f.clock.Now())

	for i := 0; i < 3; i++ {
		f.clock.Advance(serviceSampleEvery)
		f.c.sampleServices(f.ctx)
	}
	st, err := f.c.ServiceStatus(f.ctx, store.DefaultProject, "web")
	if err != nil {
		t.Fatal(err)
	}
	if st.RPS != 12.5 || st.Window != 30*time.Second || tr.window != 30*time.Second {
		t.Errorf("rps %.1f over %s (meter asked over %s), want 12.5 over the spec's 30s", st.RPS, st.Window, tr.window)
	}
	if st.MinReplicas != 2 || st.MaxReplicas != 3 || st.DesiredReplicas != 3 || st.ReadyReplicas != 1 {
		t.Errorf("replicas %d..%d desired %d ready %d, want 2..3 desired 3 ready 1", st.MinReplicas, st.MaxReplicas, st.DesiredReplicas, st.ReadyReplicas)
	}
	if len(st.Replicas) != 2 {
		t.Fatalf("%d replicas, want 2", len(st.Replicas))
	}
	for _, r := range st.Replicas {
		wantReady := r.ReplicaNum == 0
		if r.Ready != wantReady || r.Status != store.JobRunning || r.Addr == "" || r.Revision != run.Revision {
			t.Errorf("replica %d: ready %v status %s addr %q revision %q; want ready %v, running, an address, the run's revision",
				r.ReplicaNum, r.Ready, r.Status, r.Addr, r.Revision, wantReady)
		}
		if len(r.Probes) != 1 {
			t.Fatalf("replica %d has %d probes, want 1", r.ReplicaNum, len(r.Probes))
		}
		p := r.Probes[0]
		if p.URL != "/health" || p.ReadyAfter != 2 || !p.LastAt.Equal(probedAt) || p.LastOK != wantReady || (p.Passes == 2) != wantReady {
			t.Errorf("replica %d probe = %+v", r.ReplicaNum, p)
		}
	}
	if len(st.History) != 3 || st.SampleEvery != serviceSampleEvery {
		t.Fatalf("%d samples every %s, want 3 every %s", len(st.History), st.SampleEvery, serviceSampleEvery)
	}
	for i, s := range st.History {
		if s.RPS != 12.5 || s.Replicas != 1 || s.Desired != 3 || !s.At.Equal(probedAt.Add(time.Duration(i+1)*serviceSampleEvery)) {
			t.Errorf("sample %d = %+v", i, s)
		}
	}
}

// TestServiceStatus_withoutScalingWantsMinAndAfterTheEndKeepsHistory: a
// fixed-count service wants replicas.min; once its run finished the view
// has no replicas but still its history; a task or an unknown name is not
// found.
func TestServiceStatus_withoutScalingWantsMinAndAfterTheEndKeepsHistory(t *testing.T) {
	f := newFixture(t, map[string]string{
		"web.dstack.yml":  "type: service\nname: web\nimage: busybox\nport: 8000\ncommands: [sleep 1h]\nreplicas: 2\n",
		"task.dstack.yml": "type: task\nname: train\nimage: busybox\ncommands: [x]\n",
	})
	f.sync()
	f.c.sampleServices(f.ctx)
	st, err := f.c.ServiceStatus(f.ctx, store.DefaultProject, "web")
	if err != nil {
		t.Fatal(err)
	}
	if st.DesiredReplicas != 2 || st.ReadyReplicas != 0 || len(st.Replicas) != 2 || st.Window != 60*time.Second || len(st.History) != 1 {
		t.Fatalf("status = desired %d ready %d, %d replicas, window %s, %d samples; want 2, 0, 2, 60s, 1",
			st.DesiredReplicas, st.ReadyReplicas, len(st.Replicas), st.Window, len(st.History))
	}
	run := f.run("web")
	run.Status = store.RunTerminated
	if err := f.st.UpdateRun(f.ctx, &run); err != nil {
		t.Fatal(err)
	}
	if st, err = f.c.ServiceStatus(f.ctx, store.DefaultProject, "web"); err != nil {
		t.Fatal(err)
	}
	if len(st.Replicas) != 0 || len(st.History) != 1 {
		t.Errorf("finished service: %d replicas, %d samples; want none and the 1 sample", len(st.Replicas), len(st.History))
	}
	for _, name := range []string{"train", "nothing"} {
		if _, err := f.c.ServiceStatus(f.ctx, store.DefaultProject, name); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s: error %v, want not found", name, err)
		}
	}
}

// TestServiceStatus_rollingDeploymentListsBothRuns: while a new run of
// the service rolls out, the view lists the older run's replicas too
// (with its revision), takes its settings from the newest run, and counts
// no replica of a run being retired as ready.
func TestServiceStatus_rollingDeploymentListsBothRuns(t *testing.T) {
	const v1 = "type: service\nname: web\nimage: busybox\nport: 8000\ncommands: [sleep 1h]\n"
	f := newFixture(t, map[string]string{"web.dstack.yml": v1})
	f.sync()
	old := f.run("web")
	f.write("web.dstack.yml", v1+"replicas: 2\nenv:\n  V: \"2\"\n")
	f.sync()
	runs := f.runs("web")
	if len(runs) != 2 {
		t.Fatalf("%d runs of web, want the old and the new", len(runs))
	}
	for _, r := range runs {
		for _, j := range latestSubmissions(f.jobs(r.ID)) {
			j.Status, j.RuntimeData = store.JobRunning, json.RawMessage(`{"service_addr":"127.0.0.1:8000"}`)
			if err := f.st.UpdateJob(f.ctx, &j); err != nil {
				t.Fatal(err)
			}
		}
	}
	st, err := f.c.ServiceStatus(f.ctx, store.DefaultProject, "web")
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Replicas) != 3 || st.ReadyReplicas != 3 || st.DesiredReplicas != 2 {
		t.Fatalf("%d replicas, %d ready, %d desired; want 3 (2 new, 1 old), 3, the new run's 2", len(st.Replicas), st.ReadyReplicas, st.DesiredReplicas)
	}
	old.Status = store.RunTerminating
	if err := f.st.UpdateRun(f.ctx, &old); err != nil {
		t.Fatal(err)
	}
	if st, err = f.c.ServiceStatus(f.ctx, store.DefaultProject, "web"); err != nil {
		t.Fatal(err)
	}
	if st.ReadyReplicas != 2 {
		t.Errorf("%d ready while the old run is retired, want the new run's 2", st.ReadyReplicas)
	}
	for _, r := range st.Replicas {
		if r.Revision == old.Revision && r.Ready {
			t.Errorf("replica %s of the retiring run counted ready", r.JobName)
		}
	}
}
