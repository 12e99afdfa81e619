package reconciler

import (
	"errors"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"hoist/backends/fake"
	"hoist/store"
)

// get sends GET path to a replica through its Transport and returns the
// body.
func get(t *testing.T, rep ServiceReplica, path string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+rep.Addr+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := rep.Transport.RoundTrip(req)
	if err != nil {
		t.Fatalf("GET %s through the replica's transport: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestServices_routeListsOnlyReplicasPassingTheirProbes: a service run's
// route carries its auth, strip_prefix, model and rate_limits; its replica
// is listed (reachable through the connection to its instance) only once
// it passed its probe ready_after times, taken out when the probe fails and
// put back when it passes again.
func TestServices_routeListsOnlyReplicasPassingTheirProbes(t *testing.T) {
	const svc = "type: service\nname: web\nimage: busybox\nport: 8000\ncommands: [sleep 1h]\nauth: false\nstrip_prefix: false\n" +
		"model: {type: chat, name: llama, format: openai}\n" +
		"rate_limits:\n  - prefix: /api\n    rps: 2.5\n    burst: 4\n" +
		"probes:\n  - type: http\n    url: /health\n    ready_after: 2\n"
	f := newFixture(t, map[string]string{"fleet.dstack.yml": cloudFleet, "web.dstack.yml": svc})
	var healthy atomic.Bool
	f.withFakeBackend(fake.Config{Service: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" && !healthy.Load() {
			http.Error(w, "starting", http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "hello from "+r.URL.Path)
	})})
	if _, err := f.c.ServiceRoute(f.ctx, store.DefaultProject, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("route of an unknown service: %v, want ErrNotFound", err)
	}
	f.startTask("web")

	route := func() ServiceRoute {
		t.Helper()
		rt, err := f.c.ServiceRoute(f.ctx, store.DefaultProject, "web")
		if err != nil {
			t.Fatal(err)
		}
		return rt
	}
	rt := route()
	if rt.Auth || rt.StripPrefix || rt.MinReplicas != 1 || rt.Model == nil || rt.Model.Name != "llama" || rt.Model.Format != "openai" || rt.Model.Prefix != "/v1" {
		t.Errorf("route = %+v (model %+v), want auth and strip_prefix off, min 1, model llama openai /v1", rt, rt.Model)
	}
	if len(rt.RateLimits) != 1 || rt.RateLimits[0] != (ServiceRateLimit{Prefix: "/api", RPS: 2.5, Burst: 4}) {
		t.Errorf("rate limits = %+v, want /api 2.5 rps burst 4", rt.RateLimits)
	}
	if len(rt.Replicas) != 0 {
		t.Fatalf("replicas before any probe = %+v, want none", rt.Replicas)
	}

	f.reconcileRun("web") // the probe fails
	if n := len(route().Replicas); n != 0 {
		t.Fatalf("%d replicas after a failed probe, want none", n)
	}
	healthy.Store(true)
	f.reconcileRun("web") // passes once of ready_after 2
	if n := len(route().Replicas); n != 0 {
		t.Fatalf("%d replicas after one pass of two, want none", n)
	}
	if after := f.reconcileRun("web"); after <= 0 {
		t.Errorf("run worker wakes in %s, want a wake-up to probe again", after)
	}
	rt = route()
	if len(rt.Replicas) != 1 || rt.Replicas[0].JobID != f.job("web").ID {
		t.Fatalf("replicas after two passes = %+v, want the run's job", rt.Replicas)
	}
	if body := get(t, rt.Replicas[0], "/x"); body != "hello from /x" {
		t.Errorf("replica answered %q through its transport, want hello from /x", body)
	}
	models, err := f.c.ServiceModels(f.ctx, store.DefaultProject)
	if err != nil || len(models) != 1 || models[0].Run != "web" || len(models[0].Replicas) != 1 {
		t.Errorf("models = %+v, %v; want web with its replica", models, err)
	}

	healthy.Store(false)
	f.reconcileRun("web")
	if n := len(route().Replicas); n != 0 {
		t.Fatalf("%d replicas once the probe fails, want none", n)
	}
	healthy.Store(true)
	f.reconcileRun("web")
	f.reconcileRun("web")
	if n := len(route().Replicas); n != 1 {
		t.Fatalf("%d replicas once the probe passes again, want 1", n)
	}
}

// TestServices_routeOfAServiceWithoutProbesListsItsRunningReplica: without
// probes a running replica is ready; dstack's defaults (auth and
// strip_prefix on) apply, and no model is listed.
func TestServices_routeOfAServiceWithoutProbesListsItsRunningReplica(t *testing.T) {
	f := newFixture(t, map[string]string{
		"fleet.dstack.yml": cloudFleet,
		"web.dstack.yml":   "type: service\nname: web\nimage: busybox\nport: 8000\ncommands: [sleep 1h]\n",
	})
	f.withFakeBackend(fake.Config{})
	f.startTask("web")
	rt, err := f.c.ServiceRoute(f.ctx, store.DefaultProject, "web")
	if err != nil {
		t.Fatal(err)
	}
	if !rt.Auth || !rt.StripPrefix || rt.Model != nil || len(rt.Replicas) != 1 {
		t.Fatalf("route = %+v, want auth, strip_prefix, no model, one replica", rt)
	}
	if body := get(t, rt.Replicas[0], "/"); body != "ok\n" {
		t.Errorf("replica answered %q, want ok", body)
	}
	if models, err := f.c.ServiceModels(f.ctx, store.DefaultProject); err != nil || len(models) != 0 {
		t.Errorf("models = %+v, %v; want none", models, err)
	}
}

// TestServices_scalesToZeroAndWakesOnARequest: a `replicas: 0..2` service
// starts with no replica and runs scaled to zero; WakeService (the proxy
// holding a request) submits one, which the route lists once running; after
// scale_down_delay without a request it is scaled away, the run stays up,
// and the next wake brings a new submission of the replica back.
func TestServices_scalesToZeroAndWakesOnARequest(t *testing.T) {
	f := newFixture(t, map[string]string{
		"fleet.dstack.yml": cloudFleet,
		"web.dstack.yml": "type: service\nname: web\nimage: busybox\nport: 8000\ncommands: [sleep 1h]\nreplicas: 0..2\n" +
			"scaling: {metric: rps, target: 10, scale_up_delay: 60, scale_down_delay: 120}\n",
	})
	tr := &fakeTraffic{}
	f.withFakeBackend(fake.Config{})
	f.c.traffic = tr
	if res := f.sync(); res != resultSynced {
		t.Fatalf("sync = %s", res)
	}
	if after := f.reconcileRun("web"); after != scaleInterval {
		t.Errorf("run worker wakes in %s, want %s to watch the traffic", after, scaleInterval)
	}
	run := f.run("web")
	if run.Status != store.RunRunning || run.StatusMessage != "scaled to zero" || len(f.jobs(run.ID)) != 0 {
		t.Fatalf("run = %s (%q) with %d jobs, want running, scaled to zero, no job", run.Status, run.StatusMessage, len(f.jobs(run.ID)))
	}
	rt, err := f.c.ServiceRoute(f.ctx, store.DefaultProject, "web")
	if err != nil || rt.MinReplicas != 0 || len(rt.Replicas) != 0 {
		t.Fatalf("route = %+v, %v; want min 0 and no replica", rt, err)
	}

	// A request is held: the proxy wakes the run.
	tr.set(0, f.clock.Now())
	if err := f.c.WakeService(f.ctx, store.DefaultProject, "web"); err != nil {
		t.Fatal(err)
	}
	f.reconcileRun("web")
	f.provision("web")
	f.stepJob("web", store.JobRunning)
	f.reconcileJobs("web")
	f.reconcileRun("web")
	if rt, _ = f.c.ServiceRoute(f.ctx, store.DefaultProject, "web"); len(rt.Replicas) != 1 {
		t.Fatalf("%d ready replicas after the wake, want 1", len(rt.Replicas))
	}
	if run := f.run("web"); run.Status != store.RunRunning || run.StatusMessage != store.RunRunning {
		t.Errorf("run = %s (%q), want running", run.Status, run.StatusMessage)
	}

	// Requests within scale_down_delay keep it; none for that long scale it away.
	f.clock.Advance(90 * time.Second)
	tr.set(0, f.clock.Now().Add(-10*time.Second))
	f.reconcileRun("web")
	if j := f.job("web"); j.Status != store.JobRunning {
		t.Fatalf("replica %s 80 s after a request, want running", j.Status)
	}
	f.clock.Advance(121 * time.Second)
	f.reconcileRun("web")
	if j := f.job("web"); j.Status != store.JobTerminating || j.TerminationReason != reasonScaledDown {
		t.Fatalf("replica %s (%s) after scale_down_delay without requests, want terminating, scaled_down", j.Status, j.TerminationReason)
	}
	f.clock.Advance(defaultServiceDrain) // it drains first
	f.stepJob("web", store.JobTerminated)
	f.reconcileRun("web")
	run = f.run("web")
	if run.Status != store.RunRunning || run.StatusMessage != "scaled to zero" {
		t.Fatalf("run = %s (%q) once its last replica went, want running, scaled to zero", run.Status, run.StatusMessage)
	}
	if rt, _ = f.c.ServiceRoute(f.ctx, store.DefaultProject, "web"); len(rt.Replicas) != 0 {
		t.Fatalf("%d ready replicas scaled to zero, want none", len(rt.Replicas))
	}

	// The next request wakes it again: a new submission of replica 0.
	tr.set(0, f.clock.Now())
	if err := f.c.WakeService(f.ctx, store.DefaultProject, "web"); err != nil {
		t.Fatal(err)
	}
	f.reconcileRun("web")
	if j := f.job("web"); j.Status != store.JobSubmitted || j.SubmissionNum != 1 || j.ReplicaNum != 0 {
		t.Fatalf("after the second wake: job %s submission %d replica %d, want submitted, 1, 0", j.Status, j.SubmissionNum, j.ReplicaNum)
	}
	if err := f.c.WakeService(f.ctx, store.DefaultProject, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("waking an unknown service: %v, want ErrNotFound", err)
	}
}

// TestServices_trafficScalesOneToTwoAndBack: a `replicas: 1..2` service
// gets a second replica once its rps asked for it for scale_up_delay, both
// are routed to, and the second goes scale_down_delay after the load ends.
func TestServices_trafficScalesOneToTwoAndBack(t *testing.T) {
	f := newFixture(t, map[string]string{
		"fleet.dstack.yml": cloudFleet,
		"web.dstack.yml": "type: service\nname: web\nimage: busybox\nport: 8000\ncommands: [sleep 1h]\nreplicas: 1..2\n" +
			"scaling: {metric: rps, target: 5, scale_up_delay: 60, scale_down_delay: 120}\n",
	})
	tr := &fakeTraffic{}
	f.withFakeBackend(fake.Config{})
	f.c.traffic = tr
	f.startTask("web")
	f.reconcileRun("web")
	run := f.run("web")
	latest := func() []store.Job { return latestSubmissions(f.jobs(run.ID)) }

	tr.set(8, f.clock.Now())
	f.reconcileRun("web")
	if n := len(latest()); n != 1 {
		t.Fatalf("%d replicas before scale_up_delay, want 1", n)
	}
	f.clock.Advance(61 * time.Second)
	tr.set(8, f.clock.Now())
	f.reconcileRun("web")
	js := latest()
	if len(js) != 2 {
		t.Fatalf("%d replicas after scale_up_delay at 8 rps for a target of 5, want 2", len(js))
	}
	for _, j := range js {
		for range 50 {
			if j, _ = f.st.GetJob(f.ctx, j.ID); j.Status == store.JobRunning {
				break
			}
			f.reconcileJobs("web")
			for _, inst := range f.fleetInstances("cloud") {
				f.reconcileInstance(inst.ID)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	f.reconcileJobs("web")
	if rt, _ := f.c.ServiceRoute(f.ctx, store.DefaultProject, "web"); len(rt.Replicas) != 2 {
		t.Fatalf("%d ready replicas, want 2", len(rt.Replicas))
	}

	f.clock.Advance(60 * time.Second)
	tr.set(0, f.clock.Now())
	f.reconcileRun("web")
	if n := len(latest()); n != 2 {
		t.Fatalf("%d replicas 60 s after scaling up, want 2 until scale_down_delay", n)
	}
	f.clock.Advance(61 * time.Second)
	f.reconcileRun("web")
	for _, j := range latest() {
		if j.ReplicaNum == 1 && (j.Status != store.JobTerminating || j.TerminationReason != reasonScaledDown) {
			t.Errorf("replica 1 %s (%s) after scale_down_delay, want terminating, scaled_down", j.Status, j.TerminationReason)
		}
		if j.ReplicaNum == 0 && j.Status != store.JobRunning {
			t.Errorf("replica 0 %s, want running (min 1)", j.Status)
		}
	}
}
