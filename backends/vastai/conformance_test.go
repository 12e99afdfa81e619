package vastai

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"hoist/agents/api"
	"hoist/backends"
	"hoist/backends/conformance"
	"hoist/backends/internal/agentbin"
	"hoist/backends/internal/drivertest"
	"hoist/backends/offers"
	"hoist/backends/podcloud"
	"hoist/e2e/testenv"
)

func TestMain(m *testing.M) { drivertest.Main(m) }

// runnerDownloads serves the hoist-runner built for the test on a loopback
// address, as hoist serve's /agents/runner/{arch} does for pods, to the
// bearer token it grants (one for every task: the test trusts itself).
func runnerDownloads(t *testing.T) func(taskID, arch string) (string, string, error) {
	t.Helper()
	var b [16]byte
	_, _ = rand.Read(b[:])
	token := hex.EncodeToString(b[:])
	mux := http.NewServeMux()
	mux.HandleFunc("GET /agents/runner/{arch}", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "a granted bearer token is required", http.StatusUnauthorized)
			return
		}
		_, runner, err := agentbin.Agents(r.PathValue("arch"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		http.ServeFile(w, r, runner)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(mux)
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return func(taskID, arch string) (string, string, error) {
		return srv.URL + "/agents/runner/" + arch, token, nil
	}
}

// open builds the backend through Factory, as hoist serve does, over
// records recs.
func (e *simEnv) open(t *testing.T, recs backends.Records) backends.Backend {
	t.Helper()
	deps := drivertest.Deps(t, recs)
	deps.RunnerDownload = runnerDownloads(t)
	b, err := Factory(e.config(t, nil), deps)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestConformance runs the kit over the simulated Vast.ai, its tasks as
// instances of the busybox test image running the standalone runner.
func TestConformance(t *testing.T) {
	testenv.Docker(t)
	e := startSim(t)
	recs := drivertest.Records(t)
	conformance.Run(t, conformance.Options{
		Backend:   e.open(t, recs),
		Peer:      func(t *testing.T) backends.Backend { return e.open(t, recs) },
		Timeout:   2 * time.Minute,
		TaskImage: testenv.BusyboxImage,
		TaskLeftovers: func(t *testing.T, inst backends.Instance) []string {
			pods, err := e.provider(t, nil).ListPods(t.Context(), map[string]string{backends.TagInstance: inst.ID})
			if err != nil {
				t.Fatal(err)
			}
			var left []string
			for _, p := range pods {
				left = append(left, "instance/"+p.ID)
			}
			return left
		},
	})
}

// TestBackend_outbidInstanceInterruptsTask checks the way Vast.ai's
// stopping of an outbid instance reaches a run: the task of the bid
// instance ends as interrupted, and hoist's instance is terminated and
// Interrupted.
func TestBackend_outbidInstanceInterruptsTask(t *testing.T) {
	testenv.Docker(t)
	e := startSim(t)
	b := e.open(t, drivertest.Records(t))
	ctx := t.Context()
	spot, err := b.Offers(ctx, offers.Query{SpotPolicy: offers.SpotPolicySpot, GPUNames: []string{"RTX4090"}, GPUCount: offers.Exactly(1)})
	if err != nil || len(spot) == 0 {
		t.Fatalf("bid offers: %v, %v", spot, err)
	}
	var offer offers.Offer
	for _, o := range spot {
		if o.Spot {
			offer = o
		}
	}
	if !offer.Spot {
		t.Fatalf("no bid offer among %v", spot)
	}
	spec := backends.InstanceSpec{ID: "bid-1", Offer: offer, Tags: testTags("inst-bid", "unused")}
	delete(spec.Tags, podcloud.TagTask)
	spec.Tags[backends.TagInstance] = spec.ID
	inst, err := b.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Terminate(context.Background(), inst.ID) })
	conn, err := b.(backends.Connector).Connect(ctx, inst)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	sc := api.NewShimClient(conn.ShimURL(), conn.HTTPClient())
	if _, err := sc.CreateTask(ctx, api.TaskSpec{ID: "bid-task", Image: testenv.BusyboxImage}); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if _, err := sc.WaitTask(wctx, "bid-task", api.TaskRunning); err != nil {
		t.Fatal(err)
	}
	pods, err := e.provider(t, nil).ListPods(ctx, map[string]string{backends.TagInstance: inst.ID})
	if err != nil || len(pods) != 1 {
		t.Fatalf("the task's instance: %v, %v", pods, err)
	}
	e.cloud.Interrupt(pods[0].ID)
	info, err := sc.WaitTask(wctx, "bid-task", api.TaskTerminated)
	if err != nil {
		t.Fatal(err)
	}
	if info.TerminationReason != api.ReasonInterrupted {
		t.Errorf("task %+v, want terminated as %s", info, api.ReasonInterrupted)
	}
	got, err := b.Describe(ctx, inst.ID)
	if err != nil || got.Status != backends.StatusTerminated || !got.Interrupted {
		t.Errorf("instance after the outbid: %+v, %v; want terminated and interrupted", got, err)
	}
}
