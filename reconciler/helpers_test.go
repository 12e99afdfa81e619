package reconciler

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"hoist/agents/api"
	"hoist/backends"
	"hoist/backends/sshfleet"
	"hoist/reconciler/source"
	"hoist/store"
)

// fakeClock is a settable clock shared by the store and the controller.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// fixtureKey is the fixture store's secret key (backend records and secrets
// are encrypted under it).
var fixtureKey = []byte("0123456789abcdef0123456789abcdef")

// fixture is a Controller over a real SQLite store and a real plain
// directory source, driven step by step by the test (no loops running).
type fixture struct {
	t     *testing.T
	ctx   context.Context
	clock *fakeClock
	st    *store.Store
	dir   string
	c     *Controller
}

func newFixture(t *testing.T, files map[string]string) *fixture {
	t.Helper()
	f := &fixture{t: t, ctx: t.Context(), clock: newFakeClock(), dir: t.TempDir()}
	for name, content := range files {
		f.write(name, content)
	}
	st, err := store.Open(f.ctx, filepath.Join(t.TempDir(), "hoist.db"), store.Options{Now: f.clock.Now, SecretKey: fixtureKey})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	f.st = st
	f.c = f.newController()
	return f
}

// newController starts a new Controller on the same store and directory,
// as a restarted server does.
func (f *fixture) newController() *Controller {
	f.t.Helper()
	src, err := source.Open(f.ctx, source.Config{Repo: f.dir})
	if err != nil {
		f.t.Fatal(err)
	}
	c, err := New(Config{Now: f.clock.Now, Owner: "test"}, Deps{Store: f.st, Source: src})
	if err != nil {
		f.t.Fatal(err)
	}
	return c
}

// withSSHBackend gives the controller a real SSH fleet backend named ssh
// whose hosts are never contacted (no agents), for tests of SSH fleets
// that drive instance rows themselves.
func (f *fixture) withSSHBackend() *fixture {
	f.t.Helper()
	be, err := sshfleet.New(sshfleet.Config{Records: f.st,
		Agents: func(string) (string, string, error) { return "", "", errors.New("no agents in this test") }})
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { be.Close() })
	c, err := New(Config{Now: f.clock.Now, Owner: "test"}, Deps{Store: f.st, Source: f.c.src,
		Backends: map[string]backends.Backend{"ssh": be}})
	if err != nil {
		f.t.Fatal(err)
	}
	f.c = c
	return f
}

func (f *fixture) write(name, content string) {
	f.t.Helper()
	if err := os.WriteFile(filepath.Join(f.dir, name), []byte(content), 0o644); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) remove(name string) {
	f.t.Helper()
	if err := os.Remove(filepath.Join(f.dir, name)); err != nil {
		f.t.Fatal(err)
	}
}

// sync runs the revision pipeline once and returns its result.
func (f *fixture) sync() string {
	f.t.Helper()
	res, err := f.c.syncOnce(f.ctx, true)
	if err != nil {
		f.t.Fatalf("sync: %v", err)
	}
	return res
}

func (f *fixture) run(name string) store.Run {
	f.t.Helper()
	r, err := f.st.GetRunByName(f.ctx, store.DefaultProject, name)
	if err != nil {
		f.t.Fatalf("run %s: %v", name, err)
	}
	return r
}

func (f *fixture) runs(name string) []store.Run {
	f.t.Helper()
	rs, err := f.st.ListRuns(f.ctx, store.RunFilter{Name: name, Limit: 1000})
	if err != nil {
		f.t.Fatal(err)
	}
	return rs
}

func (f *fixture) jobs(runID string) []store.Job {
	f.t.Helper()
	js, err := f.st.ListJobs(f.ctx, runID)
	if err != nil {
		f.t.Fatal(err)
	}
	return js
}

// reconcileRun runs the run worker once on the latest run named name and
// returns when it asks to be called again.
func (f *fixture) reconcileRun(name string) time.Duration {
	f.t.Helper()
	after, err := f.c.reconcileRun(f.ctx, f.run(name).ID)
	if err != nil {
		f.t.Fatalf("reconcile run %s: %v", name, err)
	}
	return after
}

// reconcileJobs runs the job worker once on every unfinished job of the
// latest run named name.
func (f *fixture) reconcileJobs(name string) {
	f.t.Helper()
	for _, j := range f.jobs(f.run(name).ID) {
		if store.IsJobFinished(j.Status) {
			continue
		}
		if _, err := f.c.reconcileJob(f.ctx, j.ID); err != nil {
			f.t.Fatalf("reconcile job %s: %v", j.JobName, err)
		}
	}
}

// runnerReports plays the runner: the latest submission of run name's job
// is running and then ends in state (done or failed with an exit code).
func (f *fixture) runnerReports(name string, state string, exit int) {
	f.t.Helper()
	js := latestSubmissions(f.jobs(f.run(name).ID))
	for _, j := range js {
		j.Status = store.JobRunning
		if err := f.st.UpdateJob(f.ctx, &j); err != nil {
			f.t.Fatal(err)
		}
		l, ok, err := f.c.claim(f.ctx, "jobs", j.ID)
		if err != nil || !ok {
			f.t.Fatalf("claim job: %v %v", ok, err)
		}
		f.c.jobFinished(f.ctx, l, j.ID, api.JobState{State: state, ExitCode: &exit})
		f.c.release(l)
	}
}

func (f *fixture) syncState() store.SyncState {
	f.t.Helper()
	st, err := f.st.GetSyncState(f.ctx, store.DefaultProject)
	if err != nil {
		f.t.Fatal(err)
	}
	return st
}
