package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"hoist/store"
	"hoist/web"
	"hoist/web/client"
	"hoist/web/storeview"
)

// twoProjectFixture is a real web server over a real store with the
// default project main and a project beta, each holding a run hello whose
// status message and log line name its project. It records the API paths
// it served.
type twoProjectFixture struct {
	url  string
	ctrl map[string]*stopRecorder
	mu   sync.Mutex
	hits []string
}

func newTwoProjectFixture(t *testing.T) *twoProjectFixture {
	t.Helper()
	ctx := t.Context()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "hoist.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := st.EnsureProject(ctx, "beta"); err != nil {
		t.Fatal(err)
	}
	for _, project := range []string{store.DefaultProject, "beta"} {
		run := &store.Run{Project: project, Name: "hello", Type: "task", Status: store.RunRunning, StatusMessage: "in " + project,
			SubmittedAt: cliNow.Add(-10 * time.Minute), Spec: json.RawMessage(`{"type":"task","name":"hello","commands":["true"]}`)}
		if err := st.CreateRun(ctx, run); err != nil {
			t.Fatal(err)
		}
		job := &store.Job{RunID: run.ID, RunName: "hello", JobName: "hello-0-0", Status: store.JobDone, ExitCode: new(int),
			SubmittedAt: cliNow.Add(-10 * time.Minute), StartedAt: cliNow.Add(-10 * time.Minute), FinishedAt: cliNow}
		if err := st.CreateJob(ctx, job); err != nil {
			t.Fatal(err)
		}
		if _, err := st.AppendLogs(ctx, job.ID, []store.LogLine{{Time: cliNow, Stream: "stdout", Data: []byte("log of " + project + "\n")}}); err != nil {
			t.Fatal(err)
		}
	}
	f := &twoProjectFixture{ctrl: map[string]*stopRecorder{"main": {}, "beta": {}}}
	main, beta := storeview.New(st, store.DefaultProject), storeview.New(st, "beta")
	srv, err := web.New(web.Config{AdminToken: "admin-tok", ListCacheTTL: -1}, web.Deps{
		Store: main, Syncer: noSync{main}, Controller: f.ctrl["main"],
		Projects: map[string]web.ProjectDeps{"beta": {Store: beta, Syncer: noSync{beta}, Controller: f.ctrl["beta"]}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	h := srv.Handler()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.hits = append(f.hits, r.Method+" "+r.URL.Path)
		f.mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	f.url = ts.URL
	return f
}

// run runs hoist with args and returns stdout, and the error.
func (f *twoProjectFixture) run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	f.mu.Lock()
	f.hits = nil
	f.mu.Unlock()
	cmd := newRootCmd()
	var out, errb bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errb)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(t.Context())
	return out.String(), err
}

// served reports whether the last run's requests included want.
func (f *twoProjectFixture) served(want string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Contains(f.hits, want)
}

// TestProjectFlag_reachesTheProjectsRoutes: --project, HOIST_PROJECT and
// the login config's project send the commands to
// /api/v1/projects/<p>/…, where the run hello is that project's; without
// any, the unprefixed routes serve the default project.
func TestProjectFlag_reachesTheProjectsRoutes(t *testing.T) {
	isolateClientEnv(t)
	f := newTwoProjectFixture(t)
	srv := []string{"--server", f.url, "--token", "admin-tok"}
	psMessage := func(t *testing.T, out string) string {
		t.Helper()
		var runs []web.Run
		if err := json.Unmarshal([]byte(out), &runs); err != nil || len(runs) != 1 {
			t.Fatalf("ps printed %q (%v), want one run", out, err)
		}
		return runs[0].StatusMessage
	}

	out, err := f.run(t, append([]string{"ps", "-a", "-o", "json", "--project", "beta"}, srv...)...)
	if err != nil {
		t.Fatal(err)
	}
	if got := psMessage(t, out); got != "in beta" || !f.served("GET /api/v1/projects/beta/runs") {
		t.Errorf("ps --project beta: run %q, paths %v; want beta's hello from /api/v1/projects/beta/runs", got, f.hits)
	}
	out, err = f.run(t, append([]string{"logs", "hello", "--project", "beta"}, srv...)...)
	if err != nil || out != "log of beta\n" || !f.served("GET /api/v1/projects/beta/runs/hello/logs") {
		t.Errorf("logs --project beta: %q (%v), paths %v", out, err, f.hits)
	}
	if _, err := f.run(t, append([]string{"stop", "hello", "--project", "beta"}, srv...)...); err != nil {
		t.Fatal(err)
	}
	if got := f.ctrl["beta"].stopped; len(got) != 1 || got[0] != "hello" || len(f.ctrl["main"].stopped) != 0 {
		t.Errorf("stop --project beta stopped beta %v, main %v; want beta's hello only", got, f.ctrl["main"].stopped)
	}
	out, err = f.run(t, append([]string{"ps", "-a", "-o", "json"}, srv...)...)
	if err != nil {
		t.Fatal(err)
	}
	if got := psMessage(t, out); got != "in main" || !f.served("GET /api/v1/runs") {
		t.Errorf("ps without a project: run %q, paths %v; want main's hello from /api/v1/runs", got, f.hits)
	}
	if _, err := f.run(t, append([]string{"ps", "--project", "nope"}, srv...)...); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("ps --project nope: %v, want not found", err)
	}

	t.Run("HOIST_PROJECT", func(t *testing.T) {
		t.Setenv("HOIST_PROJECT", "beta")
		out, err := f.run(t, append([]string{"ps", "-a", "-o", "json"}, srv...)...)
		if err != nil {
			t.Fatal(err)
		}
		if got := psMessage(t, out); got != "in beta" {
			t.Errorf("ps with HOIST_PROJECT=beta: run %q, want beta's", got)
		}
	})

	t.Run("login config", func(t *testing.T) {
		if _, err := f.run(t, "login", "--server", f.url, "--token", "admin-tok", "--project", "nope"); err == nil ||
			!strings.Contains(err.Error(), `project "nope" is not one of yours`) {
			t.Fatalf("login --project nope: %v, want refused", err)
		}
		if _, err := f.run(t, "login", "--server", f.url, "--token", "admin-tok", "--project", "beta"); err != nil {
			t.Fatal(err)
		}
		out, err := f.run(t, "ps", "-a", "-o", "json", "--data-dir", t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		if got := psMessage(t, out); got != "in beta" || !f.served("GET /api/v1/projects/beta/runs") {
			t.Errorf("ps after login --project beta: run %q, paths %v; want beta's", got, f.hits)
		}
		out, err = f.run(t, "ps", "-a", "-o", "json", "--project", "main", "--data-dir", t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		if got := psMessage(t, out); got != "in main" {
			t.Errorf("ps --project main after login --project beta: run %q, want main's", got)
		}
	})

	t.Run("project list", func(t *testing.T) {
		out, err := f.run(t, append([]string{"project", "list"}, srv...)...)
		want := "NAME  ROLE   DEFAULT\nbeta  admin  \nmain  admin  yes\n"
		if err != nil || out != want {
			t.Errorf("project list printed %q (%v), want %q", out, err, want)
		}
	})
}

// TestWriteRunSSHConfig_namesTheProjectForSSHProxy: the Host entry attach
// writes for a run of another project reaches that project's run.
func TestWriteRunSSHConfig_namesTheProjectForSSHProxy(t *testing.T) {
	isolateClientEnv(t)
	path := filepath.Join(t.TempDir(), "config")
	for _, tc := range []struct{ project, want string }{
		{"beta", " --server http://127.0.0.1:8080 --identity /k --project beta --job 2\n"},
		{"", " --server http://127.0.0.1:8080 --identity /k --job 2\n"},
	} {
		if _, err := writeRunSSHConfig(path, "dev", "2", "http://127.0.0.1:8080", tc.project, userKey{path: "/k"}); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), tc.want) {
			t.Errorf("project %q: the entry\n%s\nlacks %q", tc.project, b, tc.want)
		}
	}
}
