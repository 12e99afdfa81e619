package drivertest

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"testing"

	"hoist/backends/internal/agentbin"
)

// RunnerDownloads serves the hoist-runner built for the test on loopback,
// as hoist serve's /agents/runner/{arch} does for container clouds' pods,
// to the bearer token it grants (one for every task: the test trusts
// itself). It is what a test puts in Deps.RunnerDownload.
func RunnerDownloads(t testing.TB) func(taskID, arch string) (string, string, error) {
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
	srv := httptest.NewServer(mux) // on 127.0.0.1
	t.Cleanup(srv.Close)
	return func(_, arch string) (string, string, error) {
		return srv.URL + "/agents/runner/" + arch, token, nil
	}
}
