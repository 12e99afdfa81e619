package e2e

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"hoist/e2e/testenv"
	"hoist/store"
)

// TestProjects_twoDirectoriesOfOneRepository: one server runs projects a
// and b from the directories a/ and b/ of one repository. Both define a
// task named hello: each runs to done on this host as its project's own
// run, each project keeps its own revisions and sync state, and a commit
// that changes b/ only gives b a new run. The test reads the database
// (Postgres, which the server keeps open) for what each project holds; a
// user of a, made with the CLI, reads a's run and gets 404 for everything
// of b's, through the API and the pages.
func TestProjects_twoDirectoriesOfOneRepository(t *testing.T) {
	dsn := testenv.Postgres(t)
	r := newRepo(t)
	r.write("a/hello.dstack.yml", small(task("hello", "  - echo from-a\n")))
	r.write("b/hello.dstack.yml", small(task("hello", "  - echo from-b\n")))
	first := r.commit("two projects")
	cfg := filepath.Join(t.TempDir(), "config.yml")
	conf := fmt.Sprintf(`backends:
  - type: local
projects:
  - name: a
    repo: %[1]s
    path: a
  - name: b
    repo: %[1]s
    path: b
`, r.dir)
	if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, "", "--config", cfg, "--db", dsn, "--resync-interval", "2s")
	st, err := store.Open(t.Context(), dsn, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()

	runOf := func(project string) store.Run {
		rs, err := st.ListRuns(t.Context(), store.RunFilter{Project: project, Name: "hello"})
		if err != nil || len(rs) == 0 {
			return store.Run{}
		}
		return rs[0]
	}
	waitDone := func(project, rev string) store.Run {
		var run store.Run
		waitFor(t, 3*time.Minute, func() string {
			return fmt.Sprintf("run hello of project %s at %.8s to be done (last: %s@%.8s)", project, rev, run.Status, run.Revision)
		}, func() bool {
			run = runOf(project)
			return run.Revision == rev && run.Status == store.RunDone
		})
		return run
	}
	start := time.Now()
	ra, rb := waitDone("a", first), waitDone("b", first)
	t.Logf("both projects' hello done %v after the server answered", time.Since(start).Round(time.Millisecond))
	if ra.ID == rb.ID {
		t.Fatalf("projects a and b share run %s", ra.ID)
	}
	s.waitRun("hello", first, "done", time.Minute)
	if logs := s.logs("hello"); !strings.Contains(logs, "from-a") || strings.Contains(logs, "from-b") {
		t.Errorf("project a's logs = %q; want from-a only", logs)
	}
	for _, p := range []string{"a", "b"} {
		ss, err := st.GetSyncState(t.Context(), p)
		if err != nil || ss.AppliedSHA != first {
			t.Errorf("sync state of %s = %+v, %v; want applied %.8s", p, ss, err, first)
		}
		if _, err := st.GetRevision(t.Context(), p, first); err != nil {
			t.Errorf("revision %.8s of %s: %v", first, p, err)
		}
		if fs, err := st.ListFleets(t.Context(), store.InfraFilter{Project: p}); err != nil || len(fs) != 1 {
			t.Errorf("fleets of %s = %d, %v; want its own fleet of this host", p, len(fs), err)
		}
	}

	r.write("b/hello.dstack.yml", small(task("hello", "  - echo from-b-again\n")))
	second := r.commit("change b only")
	waitDone("b", second)
	var ssa store.SyncState
	waitFor(t, time.Minute, func() string { return "project a to look at " + second[:8] }, func() bool {
		ssa, _ = st.GetSyncState(t.Context(), "a")
		return ssa.LatestSHA == second
	})
	if got := runOf("a"); got.ID != ra.ID || got.Revision != first {
		t.Errorf("project a's hello after a commit to b/ = %s@%.8s; want its first run %s unchanged", got.ID, got.Revision, ra.ID)
	}
	if rs, _ := st.ListRuns(t.Context(), store.RunFilter{Project: "a", Name: "hello", Limit: 10}); len(rs) != 1 {
		t.Errorf("project a has %d runs of hello; want 1", len(rs))
	}

	// A user of a, made with the CLI, sees a's hello and nothing of b's:
	// not its runs, its run, its logs, nor may it stop it (404, as for a
	// project that does not exist). The admin reads b's below its prefix.
	hoist := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(filepath.Join(bin, "hoist"), args...)
		cmd.Env = append(os.Environ(), "HOIST_SERVER="+s.url, "HOIST_TOKEN="+s.token, "XDG_CONFIG_HOME="+t.TempDir())
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("hoist %s: %v: %s", strings.Join(args, " "), err, stderr.String())
		}
		return string(out)
	}
	hoist("user", "add", "ann")
	hoist("project", "member", "add", "a", "ann", "--role", "user")
	ann := strings.TrimSpace(hoist("token", "create", "laptop", "--user", "ann"))
	as := func(token, method, path string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, s.url+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, c := range []struct {
		token, method, path string
		want                int
		has                 string
	}{
		{ann, "GET", "/api/v1/runs/hello", 200, `"revision":"` + first + `"`},
		{ann, "GET", "/api/v1/projects/a/runs/hello/logs", 200, "from-a"},
		{ann, "GET", "/api/v1/projects/b/runs", 404, "project not found"},
		{ann, "GET", "/api/v1/projects/b/runs/hello", 404, "project not found"},
		{ann, "GET", "/api/v1/projects/b/runs/hello/logs", 404, "project not found"},
		{ann, "POST", "/api/v1/projects/b/runs/hello/stop", 404, "project not found"},
		{ann, "GET", "/projects/b/runs/hello", 404, ""},
		{ann, "GET", "/api/v1/projects", 200, `"a"`},
		{s.token, "GET", "/api/v1/projects/b/runs/hello/logs", 200, "from-b-again"},
	} {
		code, body := as(c.token, c.method, c.path)
		if code != c.want || !strings.Contains(body, c.has) {
			t.Errorf("%s %s: %d %.200s; want %d with %q", c.method, c.path, code, body, c.want, c.has)
		}
		if c.token == ann && strings.Contains(body, "from-b") {
			t.Errorf("%s %s shows b's logs to a's user: %.200s", c.method, c.path, body)
		}
	}
	if _, body := as(ann, "GET", "/api/v1/projects"); strings.Contains(body, `"b"`) {
		t.Errorf("a's user lists project b: %s", body)
	}
}

// small asks a task for one CPU and 1 GB: each of the two projects' fleets
// of this host has half of it, and dstack's default (cpu 2..) does not fit
// half of a host of two CPUs.
func small(spec string) string {
	return spec + "resources:\n  cpu: 1..\n  memory: 1GB..\n"
}
