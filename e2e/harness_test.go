package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"hoist/e2e/testenv"
)

// bin holds the binaries TestMain built: hoist, hoist-shim, hoist-runner.
var bin string

// e2eParallel is how many tests that call t.Parallel run at once unless
// -test.parallel says otherwise. They are the slow scenarios, and they
// spend their time waiting on servers, containers and timers rather than
// on the CPU, so more of them than the machine has cores (the default
// limit) fit side by side. Each keeps to its own installation, data
// directory, repository, ports and simulator, and passes its environment to
// its servers (server.env) rather than with t.Setenv.
const e2eParallel = 6

func TestMain(m *testing.M) {
	flag.Parse()
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit {
		_ = flag.Set("test.parallel", fmt.Sprint(e2eParallel))
	}
	dir, err := os.MkdirTemp("", "hoist-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for _, b := range []struct{ name, pkg string }{
		{"hoist", "./cmd/hoist"}, {"hoist-shim", "./cmd/hoist-shim"}, {"hoist-runner", "./cmd/hoist-runner"},
	} {
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, b.name), b.pkg)
		cmd.Dir = ".."
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "build %s: %v\n%s", b.name, err, out)
			os.RemoveAll(dir)
			os.Exit(1)
		}
	}
	bin = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// repo is a real Git repository driven with the git CLI, as users do.
type repo struct {
	t   testing.TB
	dir string
}

func newRepo(t testing.TB) *repo {
	t.Helper()
	r := &repo{t: t, dir: t.TempDir()}
	r.git("init", "-q", "-b", "main")
	return r
}

func (r *repo) git(args ...string) string {
	r.t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = r.dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=e2e", "GIT_AUTHOR_EMAIL=e2e@localhost", "GIT_COMMITTER_NAME=e2e", "GIT_COMMITTER_EMAIL=e2e@localhost")
	out, err := cmd.CombinedOutput()
	if err != nil {
		r.t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

func (r *repo) write(name, content string) {
	r.t.Helper()
	p := filepath.Join(r.dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		r.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		r.t.Fatal(err)
	}
}

// commit commits everything and returns the new sha.
func (r *repo) commit(msg string) string {
	r.t.Helper()
	r.git("add", "-A")
	r.git("commit", "-q", "--allow-empty", "-m", msg)
	return r.git("rev-parse", "HEAD")
}

// server is one `hoist serve` process.
type server struct {
	t        testing.TB
	url      string
	token    string
	dataDir  string
	install  string
	args     []string
	cmd      *exec.Cmd
	done     chan struct{}
	logMu    sync.Mutex
	log      bytes.Buffer
	logsKept bool
	exe      string // the hoist binary; bin/hoist when empty
	// env is added to the server's environment (after the test process's),
	// so that tests that run in parallel need no process-wide Setenv.
	env []string
}

// startServer starts hoist serve on repoDir (no --repo when empty) with a
// fresh data dir and a unique installation label, and removes every container it created when
// the test ends.
func startServer(t testing.TB, repoDir string, extra ...string) *server {
	t.Helper()
	return startServerExe(t, "", repoDir, extra...)
}

// startServerExe is startServer with the hoist binary exe ("" = bin/hoist).
func startServerExe(t testing.TB, exe, repoDir string, extra ...string) *server {
	t.Helper()
	return startServerEnv(t, exe, nil, repoDir, extra...)
}

// startServerEnv is startServerExe with env (KEY=value) added to the
// server's environment.
func startServerEnv(t testing.TB, exe string, env []string, repoDir string, extra ...string) *server {
	t.Helper()
	testenv.Docker(t)
	s := &server{
		t: t, token: "e2e-admin-token", dataDir: t.TempDir(),
		install: fmt.Sprintf("e2e-%d", time.Now().UnixNano()), exe: exe, env: env,
	}
	s.args = append([]string{"serve", "--data-dir", s.dataDir, "--installation", s.install,
		"--poll-interval", "1m", "--log-level", "debug"}, extra...)
	if repoDir != "" { // "": the config's projects name their repositories
		s.args = append([]string{"serve", "--repo", repoDir}, s.args[1:]...)
	}
	t.Cleanup(func() {
		s.stop()
		out, _ := exec.Command("docker", "ps", "-aq", "--filter", "label=hoist.installation="+s.install).Output()
		if ids := strings.Fields(string(out)); len(ids) > 0 {
			_ = exec.Command("docker", append([]string{"rm", "-f"}, ids...)...).Run()
		}
		if t.Failed() {
			s.logMu.Lock()
			t.Logf("hoist log:\n%s", s.log.String())
			s.logMu.Unlock()
		}
	})
	s.start()
	return s
}

func freePort(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func (s *server) start() {
	s.t.Helper()
	addr := freePort(s.t)
	s.url = "http://" + addr
	args := append(append([]string{}, s.args...), "--listen", addr)
	exe := s.exe
	if exe == "" {
		exe = filepath.Join(bin, "hoist")
	}
	s.cmd = exec.Command(exe, args...)
	s.cmd.Env = append(append(os.Environ(), "HOIST_ADMIN_TOKEN="+s.token, "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1"), s.env...)
	w := &lockedWriter{mu: &s.logMu, w: &s.log}
	s.cmd.Stdout, s.cmd.Stderr = w, w
	if err := s.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	s.done = make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(s.done) }()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(s.url + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		select {
		case <-s.done:
			s.t.Fatalf("hoist exited during start:\n%s", s.logText())
		case <-time.After(20 * time.Millisecond):
		}
	}
	s.t.Fatalf("hoist did not answer /healthz in 30s:\n%s", s.logText())
}

// running reports whether the server's process was started and has not
// exited.
func (s *server) running() bool {
	if s.cmd == nil || s.cmd.Process == nil {
		return false
	}
	select {
	case <-s.done:
		return false
	default:
		return true
	}
}

// stop stops the server with SIGTERM (SIGKILL after 10 s).
func (s *server) stop() {
	if !s.running() {
		return
	}
	_ = s.cmd.Process.Signal(os.Interrupt)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

// kill kills the server at once (SIGKILL), as a crash or an OOM kill
// does, and waits for the process to be gone: nothing of its shutdown
// runs.
func (s *server) kill() {
	if !s.running() {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.done
}

// chaosFull reports whether the chaos scenarios run in full
// (HOIST_CHAOS=full, as `go tool task chaos` sets) rather than in the
// short versions of the default test run.
func chaosFull() bool { return os.Getenv("HOIST_CHAOS") == "full" }

func (s *server) restart() {
	s.t.Helper()
	s.stop()
	s.start()
}

func (s *server) logText() string {
	s.logMu.Lock()
	defer s.logMu.Unlock()
	return s.log.String()
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// do calls the API with the admin token and returns status and body.
func (s *server) do(method, path string, body io.Reader) (int, []byte) {
	s.t.Helper()
	req, err := http.NewRequest(method, s.url+path, body)
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+s.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func (s *server) getJSON(path string, v any) int {
	s.t.Helper()
	code, b := s.do("GET", path, nil)
	if code == 200 {
		if err := json.Unmarshal(b, v); err != nil {
			s.t.Fatalf("GET %s: %v: %s", path, err, b)
		}
	}
	return code
}

type apiJob struct {
	SubmissionID      string `json:"submission_id"`
	Status            string `json:"status"`
	ExitCode          *int   `json:"exit_code"`
	TerminationReason string `json:"termination_reason"`
}

type apiRun struct {
	Name           string   `json:"name"`
	Status         string   `json:"status"`
	StatusMessage  string   `json:"status_message"`
	Revision       string   `json:"revision"`
	RemovedFromGit bool     `json:"removed_from_git"`
	Jobs           []apiJob `json:"jobs"`
}

type apiSync struct {
	Status         string   `json:"status"`
	Revision       string   `json:"revision"`
	LatestRevision string   `json:"latest_revision"`
	Errors         []string `json:"errors"`
	Held           bool     `json:"held"`
	HeldReasons    []string `json:"held_reasons"`
}

// waitFor polls cond every 20 ms until it is true or within passes.
func waitFor(t testing.TB, within time.Duration, what func() string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	for {
		if cond() {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("timed out after %s waiting for %s", within, what())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// waitRun waits until run name has revision rev and status.
func (s *server) waitRun(name, rev, status string, within time.Duration) apiRun {
	s.t.Helper()
	var r apiRun
	var last string
	waitFor(s.t, within, func() string {
		return fmt.Sprintf("run %s at %.8s to be %s (last: %s)", name, rev, status, last)
	}, func() bool {
		r = apiRun{}
		if s.getJSON("/api/v1/runs/"+name, &r) != 200 {
			return false
		}
		last = r.Status + "@" + r.Revision
		return (rev == "" || r.Revision == rev) && r.Status == status
	})
	return r
}

func (s *server) sync() apiSync {
	s.t.Helper()
	var st apiSync
	if code := s.getJSON("/api/v1/sync", &st); code != 200 {
		s.t.Fatalf("GET /api/v1/sync: %d", code)
	}
	return st
}

func (s *server) logs(name string) string {
	s.t.Helper()
	code, b := s.do("GET", "/api/v1/runs/"+name+"/logs", nil)
	if code != 200 {
		s.t.Fatalf("logs of %s: %d %s", name, code, b)
	}
	return string(b)
}

func task(name, cmds string) string {
	return fmt.Sprintf("type: task\nname: %s\nimage: %s\ncommands:\n%s", name, testenv.BusyboxImage, cmds)
}

// httpGet fetches url without credentials and without following redirects.
func httpGet(url string) (int, error) {
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(url)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}
