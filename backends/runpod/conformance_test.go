package runpod

import (
	"crypto/rand"
	"encoding/hex"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"hoist/backends"
	"hoist/backends/conformance"
	"hoist/backends/internal/agentbin"
	"hoist/backends/internal/drivertest"
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

// TestConformance runs the kit over the simulated RunPod, its tasks as
// pods of the busybox test image running the standalone runner.
func TestConformance(t *testing.T) {
	testenv.Docker(t)
	e := startSim(t)
	recs := drivertest.Records(t)
	open := func(t *testing.T) backends.Backend {
		deps := drivertest.Deps(t, recs)
		deps.RunnerDownload = runnerDownloads(t)
		b, err := Factory(e.config(t, nil), deps)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	conformance.Run(t, conformance.Options{
		Backend:   open(t),
		Peer:      open,
		Timeout:   2 * time.Minute,
		TaskImage: testenv.BusyboxImage,
		TaskLeftovers: func(t *testing.T, inst backends.Instance) []string {
			pods, err := e.provider(t, nil).ListPods(t.Context(), map[string]string{backends.TagInstance: inst.ID})
			if err != nil {
				t.Fatal(err)
			}
			var left []string
			for _, p := range pods {
				left = append(left, "pod/"+p.ID)
			}
			return left
		},
	})
}
