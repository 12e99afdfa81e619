package testenv

import (
	"crypto/subtle"
	"io"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// ServeGit serves the bare repositories under root over Git's smart HTTP
// protocol with the real git-http-backend (through net/http/cgi) on a
// loopback port, and returns the base URL (http://127.0.0.1:port). With
// token set, every request must carry it as the Basic auth password (any
// user name), as GitHub and GitLab take a token; others get 401. The server
// stops when the test ends.
func ServeGit(t testing.TB, root, token string) string {
	t.Helper()
	Require(t, "git")
	out, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		t.Fatalf("git --exec-path: %v", err)
	}
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if !strings.HasSuffix(strings.ToLower(k), "_proxy") && k != "GIT_DIR" {
			env = append(env, kv)
		}
	}
	var h http.Handler = &cgi.Handler{
		Path: filepath.Join(strings.TrimSpace(string(out)), "git-http-backend"),
		Env:  append(env, "GIT_PROJECT_ROOT="+root, "GIT_HTTP_EXPORT_ALL=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1"),
		// A request for a missing repository is answered 404; the
		// backend's complaint about it is no test output.
		Stderr: io.Discard,
	}
	if token != "" {
		backend := h
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, pass, ok := r.BasicAuth()
			if !ok || subtle.ConstantTimeCompare([]byte(pass), []byte(token)) != 1 {
				w.Header().Set("WWW-Authenticate", `Basic realm="hoist-test"`)
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
			backend.ServeHTTP(w, r)
		})
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}
