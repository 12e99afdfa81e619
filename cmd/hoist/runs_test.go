package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"hoist/store"
	"hoist/store/blob"
	"hoist/web"
	"hoist/web/client"
	"hoist/web/storeview"
)

var update = flag.Bool("update", false, "rewrite the CLI's golden files under testdata/cli")

// cliNow is the fixture's clock: every time the goldens show derives from it.
var cliNow = time.Date(2026, 3, 4, 12, 0, 0, 0, time.UTC)

// cliFixture is a real web server over a real store holding three runs
// (train running, hello done, serve failed) with logs and events.
type cliFixture struct {
	url   string
	st    *store.Store
	srv   *web.Server
	ctrl  *stopRecorder
	train *store.Job
	// blobs keeps the runs' artifact files (none unless a test puts some).
	blobs *blob.FS
	// runIDs are the runs' ids by name.
	runIDs map[string]string
}

// stopRecorder is the web's Controller: it records stops and refuses the
// other actions, which these tests do not use.
type stopRecorder struct {
	mu      sync.Mutex
	stopped []string
}

func (c *stopRecorder) StopRun(_ context.Context, name string, abort bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if abort {
		name += " (abort)"
	}
	c.stopped = append(c.stopped, name)
	return nil
}

func (*stopRecorder) RerunRun(context.Context, string) error { return errors.New("not in this test") }

func (*stopRecorder) SetRunSuspended(context.Context, string, bool) error {
	return errors.New("not in this test")
}

func (*stopRecorder) SetAutoSync(context.Context, bool) error { return errors.New("not in this test") }

func (*stopRecorder) ApplyRevision(context.Context, string) error {
	return errors.New("not in this test")
}

func newCLIFixture(t *testing.T) *cliFixture {
	t.Helper()
	ctx := t.Context()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "hoist.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	f := &cliFixture{st: st, ctrl: &stopRecorder{}}
	rev := "2222222222222222222222222222222222222222"
	fleet := &store.Fleet{Name: "gpu-pool", Status: store.FleetActive, Revision: rev,
		Spec: json.RawMessage(`{"type":"fleet","name":"gpu-pool","nodes":1}`)}
	if err := st.CreateFleet(ctx, fleet); err != nil {
		t.Fatal(err)
	}
	inst := &store.Instance{Name: "gpu-pool-0", FleetID: fleet.ID, Backend: "local", Region: "home", Price: 1.25, Status: store.InstanceBusy,
		Offer: json.RawMessage(`{"instance":"local","cpus":16,"memory_gb":64,"gpu_name":"A100","gpu_count":2}`), LastSeenAt: cliNow}
	if err := st.CreateInstance(ctx, inst); err != nil {
		t.Fatal(err)
	}
	hello := &store.Run{Name: "hello", Type: "task", Revision: rev, Status: store.RunDone, StatusMessage: "exited (0)",
		SubmittedAt: cliNow.Add(-118 * time.Minute), FinishedAt: cliNow.Add(-100 * time.Minute),
		Spec: json.RawMessage(`{"type":"task","name":"hello","image":"busybox","commands":["echo hello"]}`)}
	train := &store.Run{Name: "train", Type: "task", Revision: rev, Status: store.RunRunning, StatusMessage: "running",
		SubmittedAt: cliNow.Add(-90 * time.Minute), FleetID: fleet.ID,
		Spec: json.RawMessage(`{"type":"task","name":"train","image":"busybox","commands":["train"]}`)}
	serve := &store.Run{Name: "serve", Type: "service", Revision: rev, Status: store.RunFailed, StatusMessage: "no offers",
		TerminationReason: "failed_to_start_due_to_no_capacity", SubmittedAt: cliNow.Add(-150 * time.Minute), FinishedAt: cliNow.Add(-149 * time.Minute),
		Spec: json.RawMessage(`{"type":"service","name":"serve","port":8000,"commands":["serve"]}`)}
	queued := &store.Run{Name: "queued", Type: "task", Revision: rev, Status: store.RunPending, StatusMessage: "waiting for capacity",
		SubmittedAt: cliNow.Add(-5 * time.Minute),
		Spec:        json.RawMessage(`{"type":"task","name":"queued","image":"busybox","commands":["true"]}`)}
	for _, r := range []*store.Run{hello, train, serve, queued} {
		if err := st.CreateRun(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	helloJob := &store.Job{RunID: hello.ID, RunName: "hello", JobName: "hello-0-0", Status: store.JobDone, ExitCode: new(int),
		TerminationReason: "done_by_runner", SubmittedAt: cliNow.Add(-111 * time.Minute), StartedAt: cliNow.Add(-110 * time.Minute), FinishedAt: cliNow.Add(-100 * time.Minute)}
	f.train = &store.Job{RunID: train.ID, RunName: "train", JobName: "train-0-0", Status: store.JobRunning,
		SubmittedAt: cliNow.Add(-90 * time.Minute), StartedAt: cliNow.Add(-85 * time.Minute), InstanceID: inst.ID}
	for _, j := range []*store.Job{helloJob, f.train} {
		if err := st.CreateJob(ctx, j); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.AppendLogs(ctx, helloJob.ID, []store.LogLine{
		{Time: cliNow.Add(-105 * time.Minute), Stream: "stdout", Data: []byte("hello line 1\n")},
		{Time: cliNow.Add(-104 * time.Minute), Stream: "stdout", Data: []byte("hello line 2\n")},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.AppendLogs(ctx, f.train.ID, []store.LogLine{{Time: cliNow.Add(-80 * time.Minute), Stream: "stdout", Data: []byte("epoch 1 loss=0.91\n")}}); err != nil {
		t.Fatal(err)
	}
	for _, e := range []store.Event{
		{ObjectKind: "run", ObjectName: "serve", Type: "failed", Message: "no offers", Revision: rev, Time: cliNow.Add(-149 * time.Minute)},
		{ObjectKind: "run", ObjectName: "hello", Type: "submitted", Message: "run submitted", Revision: rev, Time: cliNow.Add(-118 * time.Minute)},
		{ObjectKind: "run", ObjectName: "hello", Type: "done", Message: "run done", Revision: rev, Time: cliNow.Add(-100 * time.Minute)},
		{ObjectKind: "run", ObjectName: "train", Type: "submitted", Message: "run submitted", Revision: rev, Time: cliNow.Add(-90 * time.Minute)},
	} {
		if _, err := st.AddEvent(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	// Two samples of train's job, 10 s apart: 5 s of CPU between them
	// (50 % of a core), two GPUs.
	for i, p := range []store.MetricsPoint{
		{Time: cliNow.Add(-20 * time.Second), CPUUsageMicros: 100e6, MemoryUsageBytes: 700 << 20, MemoryWorkingSetBytes: 600 << 20, MemoryLimitBytes: 2 << 30,
			GPUs: []store.GPUSample{{Index: 0, MemoryUsedBytes: 30 << 30, UtilPercent: 85}, {Index: 1, MemoryUsedBytes: 512 << 20, UtilPercent: 0}}},
		{Time: cliNow.Add(-10 * time.Second), CPUUsageMicros: 105e6, MemoryUsageBytes: 900 << 20, MemoryWorkingSetBytes: 1536 << 20, MemoryLimitBytes: 2 << 30,
			GPUs: []store.GPUSample{{Index: 0, MemoryUsedBytes: 31 << 30, UtilPercent: 97}, {Index: 1, MemoryUsedBytes: 700 << 20, UtilPercent: 12}}},
	} {
		p.JobID = f.train.ID
		if err := st.AddMetricsPoint(ctx, p, time.Time{}); err != nil {
			t.Fatalf("sample %d: %v", i, err)
		}
	}
	f.runIDs = map[string]string{}
	for _, r := range []*store.Run{hello, train, serve, queued} {
		f.runIDs[r.Name] = r.ID
	}
	if f.blobs, err = blob.OpenFS(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	view := storeview.New(st, "")
	srv, err := web.New(web.Config{AdminToken: "admin-tok"}, web.Deps{Store: view, Syncer: noSync{view}, Controller: f.ctrl, JobMetrics: view,
		Artifacts: storeview.NewArtifacts(st, "", f.blobs)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	f.url, f.srv = ts.URL, srv
	return f
}

// syncBuffer is a bytes.Buffer safe to read while a command writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// runCLI runs hoist with args against the fixture's server, with no config
// file nor environment to fall back on, and returns stdout, stderr and the
// exit code main would use.
func (f *cliFixture) runCLI(ctx context.Context, stdout *syncBuffer, args ...string) (stderr string, code int) {
	cmd := newRootCmd()
	var errb bytes.Buffer
	cmd.SetOut(stdout)
	cmd.SetErr(&errb)
	cmd.SetArgs(append(args, "--server", f.url, "--token", "admin-tok"))
	if err := cmd.ExecuteContext(ctx); err != nil {
		var ee *exitError
		if errors.As(err, &ee) {
			return errb.String(), ee.code
		}
		return errb.String() + "hoist: " + err.Error() + "\n", exitCode(err)
	}
	return errb.String(), 0
}

// isolateClientEnv points the config directory at an empty one and clears
// the variables the client reads, so the host's login never leaks in.
func isolateClientEnv(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", dir)
	t.Setenv("HOME", dir)
	for _, k := range []string{"HOIST_URL", "HOIST_TOKEN", "HOIST_ADMIN_TOKEN", "HOIST_SERVER", "HOIST_DATA_DIR", "HOIST_PROJECT"} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	return dir
}

var (
	uuidRE      = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	updatedAtRE = regexp.MustCompile(`"updated_at": "[^"]*"`)
)

// checkGolden compares got (ids and the store's update times masked) with testdata/cli/name.golden, or
// rewrites the file with -update.
func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	got = uuidRE.ReplaceAllString(got, "<uuid>")
	got = updatedAtRE.ReplaceAllString(got, `"updated_at": "<time>"`)
	path := filepath.Join("testdata", "cli", name+".golden")
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from %s:\n--- got\n%s--- want\n%s", name, path, got, want)
	}
}

func TestRunCommands_printTheGoldenOutputInTextAndJSON(t *testing.T) {
	isolateClientEnv(t)
	f := newCLIFixture(t)
	for _, tc := range []struct {
		name string
		args []string
		code int
	}{
		{"ps", []string{"ps"}, 0},
		{"ps-all", []string{"ps", "-a"}, 0},
		{"ps-all-json", []string{"ps", "-a", "-o", "json"}, 0},
		{"logs", []string{"logs", "hello"}, 0},
		{"logs-json", []string{"logs", "hello", "-o", "json"}, 0},
		{"logs-since", []string{"logs", "hello", "--since", cliNow.Add(-104 * time.Minute).Format(time.RFC3339)}, 0},
		{"logs-unknown-run", []string{"logs", "nope"}, 3},
		{"logs-follow-run-without-job", []string{"logs", "queued", "-f"}, 1},
		{"events", []string{"events"}, 0},
		{"events-json", []string{"events", "-o", "json"}, 0},
		{"events-run", []string{"events", "--run", "hello"}, 0},
		{"events-unknown-run", []string{"events", "--run", "nope"}, 3},
		{"stop", []string{"stop", "train"}, 0},
		{"stop-json", []string{"stop", "train", "-o", "json"}, 0},
		{"stop-unknown-run", []string{"stop", "nope"}, 3},
		{"metrics", []string{"metrics", "train"}, 0},
		{"metrics-json", []string{"metrics", "train", "-o", "json"}, 0},
		{"metrics-finished-job", []string{"metrics", "hello", "--job", "0"}, 0},
		{"metrics-finished-run", []string{"metrics", "hello"}, 1},
		{"metrics-queued-run", []string{"metrics", "queued"}, 1},
		{"metrics-unknown-job", []string{"metrics", "train", "--job", "7"}, 1},
		{"metrics-unknown-run", []string{"metrics", "nope"}, 3},
		{"stop-abort", []string{"stop", "train", "--abort"}, 0},
		{"stop-abort-json", []string{"stop", "train", "-x", "-o", "json"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out syncBuffer
			stderr, code := f.runCLI(t.Context(), &out, tc.args...)
			if code != tc.code {
				t.Fatalf("exit code %d, want %d; stderr: %s", code, tc.code, stderr)
			}
			got := out.String()
			if stderr != "" {
				got += "--- stderr\n" + stderr
			}
			checkGolden(t, tc.name, got)
		})
	}
	f.ctrl.mu.Lock()
	defer f.ctrl.mu.Unlock()
	if got := strings.Join(f.ctrl.stopped, ","); got != "train,train,train (abort),train (abort)" {
		t.Errorf("stopped %v, want train stopped twice, then aborted twice", got)
	}
}

// TestLogsFollow_printsLinesUntilTheJobEnds starts `logs -f` on the running
// job, appends lines once it printed the first, then finishes the job: the
// command must print every line and exit 0 on its own.
func TestLogsFollow_printsLinesUntilTheJobEnds(t *testing.T) {
	for _, output := range []string{"table", "json"} {
		t.Run(output, func(t *testing.T) {
			isolateClientEnv(t)
			f := newCLIFixture(t)
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			var out syncBuffer
			type result struct {
				stderr string
				code   int
			}
			done := make(chan result, 1)
			go func() {
				stderr, code := f.runCLI(ctx, &out, "logs", "train", "-f", "-o", output)
				done <- result{stderr, code}
			}()
			waitFor(t, ctx, func() bool { return strings.Contains(out.String(), "epoch 1") })
			if _, err := f.st.AppendLogs(ctx, f.train.ID, []store.LogLine{
				{Time: cliNow.Add(-70 * time.Minute), Stream: "stdout", Data: []byte("epoch 2 loss=0.52\n")},
				{Time: cliNow.Add(-60 * time.Minute), Stream: "stdout", Data: []byte("saved checkpoint\n")},
			}); err != nil {
				t.Fatal(err)
			}
			f.srv.NotifyLogs()
			waitFor(t, ctx, func() bool { return strings.Contains(out.String(), "saved checkpoint") })
			select {
			case r := <-done:
				t.Fatalf("logs -f ended while the job runs: code %d, %s", r.code, r.stderr)
			default:
			}
			f.train.Status, f.train.ExitCode, f.train.FinishedAt = store.JobDone, new(int), cliNow.Add(-50*time.Minute)
			if err := f.st.UpdateJob(ctx, f.train); err != nil {
				t.Fatal(err)
			}
			f.srv.NotifyLogs()
			select {
			case r := <-done:
				if r.code != 0 || r.stderr != "" {
					t.Fatalf("exit code %d, stderr %q", r.code, r.stderr)
				}
			case <-ctx.Done():
				t.Fatal("logs -f did not end after the job finished")
			}
			checkGolden(t, "logs-follow-"+output, out.String())
		})
	}
}

// waitFor polls cond until it holds or ctx ends.
func waitFor(t *testing.T, ctx context.Context, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatal("timed out waiting")
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// TestLogin_savesTheServerForOtherCommands logs in, then runs ps with
// neither flags nor environment: it reaches the server the config names.
func TestLogin_savesTheServerForOtherCommands(t *testing.T) {
	dir := isolateClientEnv(t)
	f := newCLIFixture(t)
	cmd := newRootCmd()
	var out, errb bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errb)
	cmd.SetArgs([]string{"login", "--server", f.url, "--token", "admin-tok", "-o", "json"})
	if err := cmd.ExecuteContext(t.Context()); err != nil {
		t.Fatalf("login: %v; %s", err, errb.String())
	}
	var who web.Principal
	if err := json.Unmarshal(out.Bytes(), &who); err != nil || who.Role != web.RoleAdmin {
		t.Fatalf("login printed %q (%v), want the admin principal", out.String(), err)
	}
	path := filepath.Join(dir, "hoist", "config.json")
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("config mode %v, want 0600", st.Mode().Perm())
	}
	cfg, err := client.ReadConfig(path)
	if err != nil || cfg.Server != f.url || cfg.Token != "admin-tok" {
		t.Fatalf("config %+v (%v)", cfg, err)
	}

	cmd = newRootCmd()
	out.Reset()
	cmd.SetOut(&out)
	cmd.SetErr(&errb)
	cmd.SetArgs([]string{"ps", "-a", "-o", "json", "--data-dir", t.TempDir()})
	if err := cmd.ExecuteContext(t.Context()); err != nil {
		t.Fatalf("ps after login: %v; %s", err, errb.String())
	}
	var runs []web.Run
	if err := json.Unmarshal(out.Bytes(), &runs); err != nil || len(runs) != 4 {
		t.Fatalf("ps after login printed %q (%v), want 4 runs", out.String(), err)
	}
}

func TestLogin_refusesAWrongToken(t *testing.T) {
	dir := isolateClientEnv(t)
	f := newCLIFixture(t)
	cmd := newRootCmd()
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetErr(&bytes.Buffer{})
	cmd.SetArgs([]string{"login", "--server", f.url, "--token", "wrong"})
	err := cmd.ExecuteContext(t.Context())
	if !errors.Is(err, client.ErrUnauthorized) {
		t.Fatalf("login with a wrong token: %v, want unauthorized", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "hoist", "config.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused login wrote the config (%v)", err)
	}
}

func TestClientNew_prefersFlagsThenEnvironmentThenConfig(t *testing.T) {
	dir := isolateClientEnv(t)
	cfgPath := filepath.Join(dir, "hoist", "config.json")
	if err := client.WriteConfig(cfgPath, client.Config{Server: "http://127.0.0.3:1", Token: "from-config", Project: "cfg-proj"}); err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	if err := os.WriteFile(filepath.Join(data, "admin-token"), []byte("from-data-dir\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name                               string
		env                                map[string]string
		opts                               client.Options
		wantServer, wantToken, wantProject string
	}{
		{"flags win", map[string]string{"HOIST_URL": "http://127.0.0.2:1", "HOIST_TOKEN": "from-env", "HOIST_PROJECT": "env-proj"},
			client.Options{Server: "http://127.0.0.1:1", Token: "from-flag", Project: "flag-proj"}, "http://127.0.0.1:1", "from-flag", "flag-proj"},
		{"environment beats the config", map[string]string{"HOIST_URL": "http://127.0.0.2:1", "HOIST_TOKEN": "from-env", "HOIST_PROJECT": "env-proj"},
			client.Options{}, "http://127.0.0.2:1", "from-env", "env-proj"},
		{"config beats the defaults", nil, client.Options{DataDir: data}, "http://127.0.0.3:1", "from-config", "cfg-proj"},
		{"the config's project is its server's", nil, client.Options{Server: "http://127.0.0.1:1"},
			"http://127.0.0.1:1", "from-config", ""},
		{"defaults without a config", nil, client.Options{ConfigPath: filepath.Join(dir, "none.json"), DataDir: data},
			client.DefaultServer, "from-data-dir", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			c, err := client.New(tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if c.BaseURL != tc.wantServer || c.Token != tc.wantToken || c.Project != tc.wantProject {
				t.Errorf("got %s %s %q, want %s %s %q", c.BaseURL, c.Token, c.Project, tc.wantServer, tc.wantToken, tc.wantProject)
			}
		})
	}
}

// TestPsWatch_redrawsUntilInterrupted runs `ps -w`, interrupts it once it
// drew, and checks that every frame is the ps golden after a clear screen
// and that the interrupt ends it with exit 0.
func TestPsWatch_redrawsUntilInterrupted(t *testing.T) {
	isolateClientEnv(t)
	f := newCLIFixture(t)
	want, err := os.ReadFile(filepath.Join("testdata", "cli", "ps.golden"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var out syncBuffer
	done := make(chan int, 1)
	go func() {
		_, code := f.runCLI(ctx, &out, "ps", "-w")
		done <- code
	}()
	wait, stop := context.WithTimeout(t.Context(), time.Minute)
	defer stop()
	waitFor(t, wait, func() bool { return strings.Contains(out.String(), "train") })
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit code %d after the interrupt, want 0", code)
		}
	case <-wait.Done():
		t.Fatal("ps -w did not end after the interrupt")
	}
	const clear = "\x1b[H\x1b[2J"
	got := out.String()
	if !strings.HasPrefix(got, clear) {
		t.Fatalf("ps -w output %q does not start by clearing the screen", got)
	}
	for _, frame := range strings.Split(got, clear)[1:] {
		if frame != string(want) {
			t.Errorf("frame %q, want %q", frame, want)
		}
	}
}

// TestEventsFollow_printsNewEventsUntilInterrupted follows a run's events,
// adds one, and interrupts once it was printed.
func TestEventsFollow_printsNewEventsUntilInterrupted(t *testing.T) {
	for _, output := range []string{"table", "json"} {
		t.Run(output, func(t *testing.T) {
			isolateClientEnv(t)
			f := newCLIFixture(t)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			var out syncBuffer
			done := make(chan int, 1)
			go func() {
				_, code := f.runCLI(ctx, &out, "events", "--run", "train", "-f", "-o", output)
				done <- code
			}()
			wait, stop := context.WithTimeout(t.Context(), time.Minute)
			defer stop()
			waitFor(t, wait, func() bool { return strings.Contains(out.String(), "run submitted") })
			if _, err := f.st.AddEvent(wait, store.Event{ObjectKind: "run", ObjectName: "train", Type: "stopped",
				Message: "stopped by user", Time: cliNow.Add(-time.Minute)}); err != nil {
				t.Fatal(err)
			}
			waitFor(t, wait, func() bool { return strings.Contains(out.String(), "stopped by user") })
			cancel()
			select {
			case code := <-done:
				if code != 0 {
					t.Fatalf("exit code %d after the interrupt, want 0", code)
				}
			case <-wait.Done():
				t.Fatal("events -f did not end after the interrupt")
			}
			checkGolden(t, "events-follow-"+output, out.String())
		})
	}
}
