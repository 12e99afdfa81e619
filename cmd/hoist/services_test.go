package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"hoist/reconciler"
	"hoist/reconciler/source"
	"hoist/store"
	"hoist/web"
	"hoist/web/storeview"
)

// steadyTraffic is a reconciler.Traffic with a constant rate.
type steadyTraffic float64

func (t steadyTraffic) RPS(string, string, time.Duration) float64 { return float64(t) }
func (steadyTraffic) LastRequest(string, string) time.Time        { return time.Time{} }

// TestServices_statusReachesTheRunAPI: wired as `hoist serve` wires them,
// the reconciler's view of a service (its replicas with their probes, the
// traffic its autoscaler reads, its sample interval) is the run API's
// `service`; a task has none.
func TestServices_statusReachesTheRunAPI(t *testing.T) {
	ctx := t.Context()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "hoist.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	spec := `{"type":"service","name":"web","image":"busybox","commands":["httpd"],"port":{"container_port":8000},` +
		`"replicas":{"min":1,"max":2},"scaling":{"metric":"rps","target":10,"window":30},` +
		`"probes":[{"type":"http","url":"/health","method":"get","timeout":10,"interval":15,"ready_after":2}]}`
	run := store.Run{Name: "web", Type: "service", ResourceKind: "service", ResourceName: "web", Spec: json.RawMessage(spec),
		Revision: "0123456789abcdef0123456789abcdef01234567", Status: store.RunRunning}
	jobs := []store.Job{
		{RunName: "web", JobName: "web-0-0", ReplicaNum: 0, Spec: json.RawMessage(spec), Status: store.JobRunning,
			RuntimeData: json.RawMessage(`{"service_addr":"127.0.0.1:8000"}`)},
		{RunName: "web", JobName: "web-0-1", ReplicaNum: 1, Spec: json.RawMessage(spec), Status: store.JobProvisioning},
	}
	if _, err := st.CreateRunWithJobs(ctx, &run, jobs); err != nil {
		t.Fatal(err)
	}
	task := store.Run{Name: "train", Type: "task", ResourceKind: "task", ResourceName: "train", Status: store.RunRunning,
		Spec: json.RawMessage(`{"type":"task","name":"train","commands":["x"]}`)}
	if _, err := st.CreateRunWithJobs(ctx, &task, nil); err != nil {
		t.Fatal(err)
	}
	src, err := source.Open(ctx, source.Config{Repo: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ctrl, err := reconciler.New(reconciler.Config{NoLocalFleet: true}, reconciler.Deps{Store: st, Source: src, Traffic: steadyTraffic(4.5)})
	if err != nil {
		t.Fatal(err)
	}
	view := storeview.New(st, "")
	srv, err := web.New(web.Config{AdminToken: "admin-tok"}, web.Deps{Store: view, Syncer: noSync{view},
		Services: services{ctrl: ctrl}, ServiceStatuses: services{ctrl: ctrl}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)

	get := func(name string) web.Run {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, "GET", ts.URL+"/api/v1/runs/"+name, nil)
		req.Header.Set("Authorization", "Bearer admin-tok")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var r web.Run
		if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&r) != nil {
			t.Fatalf("GET run %s: %d", name, resp.StatusCode)
		}
		return r
	}
	svc := get("web").Service
	if svc == nil {
		t.Fatal("service run without service")
	}
	if svc.RPS != 4.5 || svc.RPSWindowSeconds != 30 || svc.HistoryIntervalSeconds != 10 || svc.History == nil {
		t.Errorf("rps %.1f over %d s, samples every %d s, history %v; want 4.5 over 30, every 10, []",
			svc.RPS, svc.RPSWindowSeconds, svc.HistoryIntervalSeconds, svc.History)
	}
	// No server scaled it yet: desired is the replicas alive.
	if svc.MinReplicas != 1 || svc.MaxReplicas != 2 || svc.DesiredReplicas != 2 || svc.ReadyReplicas != 0 || len(svc.Replicas) != 2 {
		t.Fatalf("replicas %d..%d desired %d ready %d, %d listed; want 1..2, 2, 0 (never probed), 2",
			svc.MinReplicas, svc.MaxReplicas, svc.DesiredReplicas, svc.ReadyReplicas, len(svc.Replicas))
	}
	for _, r := range svc.Replicas {
		if len(r.Probes) != 1 || r.Probes[0].URL != "/health" || r.Probes[0].ReadyAfter != 2 || r.Probes[0].LastProbeAt != nil || r.Ready {
			t.Errorf("replica %d = %+v, want one unprobed /health probe, not ready", r.ReplicaNum, r)
		}
		if want := map[int]string{0: "127.0.0.1:8000", 1: ""}[r.ReplicaNum]; r.Address != want || r.Revision != run.Revision {
			t.Errorf("replica %d at %q of %q, want %q of the run's revision", r.ReplicaNum, r.Address, r.Revision, want)
		}
	}
	if got := get("train"); got.Service != nil {
		t.Errorf("task carries service %+v", got.Service)
	}
}
