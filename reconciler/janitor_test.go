package reconciler

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"hoist/backends"
	"hoist/backends/local"
	"hoist/backends/offers"
	"hoist/e2e/testenv"
	"hoist/store"
	"hoist/store/blob"
)

// TestAuditLeaks_terminatesTaggedInstancesTheStoreDoesNotKnow creates
// instances on the real local backend behind the store's back and checks
// that the audit terminates the unknown one once it is older than the
// grace, and leaves the known one and young ones alone.
// (Which installation's tags List matches is the conformance kit's to prove.)
func TestAuditLeaks_terminatesTaggedInstancesTheStoreDoesNotKnow(t *testing.T) {
	testenv.Docker(t)
	f := newFixture(t, nil)
	runner := filepath.Join(t.TempDir(), "hoist-runner")
	if err := os.WriteFile(runner, nil, 0o755); err != nil { // any file: no job runs here
		t.Fatal(err)
	}
	b, err := local.New(local.Config{RunnerBinary: runner, Records: f.st, StateDir: t.TempDir(), Now: f.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	f.c.bes = map[string]backends.Backend{"local": b}
	f.c.cfg.LeakGrace = 10 * time.Minute
	small := offers.Offer{CPUs: 1, MemoryGB: 0.5}
	tags := map[string]string{backends.TagInstallation: f.c.cfg.Installation, backends.TagProject: f.c.cfg.Project}
	known := &store.Instance{Name: "known-0", Backend: "local", Status: store.InstanceIdle}
	if err := f.st.CreateInstance(f.ctx, known); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{known.ID, "leaked-1"} {
		if _, err := b.Create(f.ctx, backends.InstanceSpec{ID: id, Tags: tags, Offer: small}); err != nil {
			t.Fatal(err)
		}
	}
	if n := f.c.auditLeaks(f.ctx); n != 0 {
		t.Fatalf("audit reaped %d instances younger than the grace", n)
	}
	f.clock.Advance(11 * time.Minute)
	if n := f.c.auditLeaks(f.ctx); n != 1 {
		t.Fatalf("audit reaped %d instances, want 1", n)
	}
	left, err := b.List(f.ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, i := range left {
		ids = append(ids, i.ID)
	}
	if len(ids) != 1 || ids[0] != known.ID {
		t.Errorf("instances left: %v, want only the known one %s", ids, known.ID)
	}
	es, _ := f.st.ListEvents(f.ctx, store.EventFilter{ObjectKind: "instance", ObjectName: "leaked-1"})
	if len(es) != 1 || es[0].Type != "leaked" {
		t.Errorf("events of the leaked instance = %+v", es)
	}
	for _, id := range ids {
		_ = b.Terminate(f.ctx, id)
	}
}

// TestPrune_dropsOldEventsAndFinishedLogs checks one retention pass.
func TestPrune_dropsOldEventsAndFinishedLogs(t *testing.T) {
	f := newFixture(t, nil)
	f.c.cfg.Retention = 24 * time.Hour
	f.c.event(f.ctx, "run", "old", "x", "created", "", "old event")
	f.clock.Advance(25 * time.Hour)
	f.c.event(f.ctx, "run", "new", "y", "created", "", "new event")
	f.c.prune(f.ctx)
	es, err := f.st.ListEvents(f.ctx, store.EventFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 1 || es[0].ObjectName != "new" {
		t.Errorf("events after retention: %+v", es)
	}
}

// TestPrune_dropsTheArtifactsOfRunsFinishedBeforeTheirRetention checks
// artifact retention: a run finished longer ago than it loses its
// artifacts, a run finished since keeps them.
func TestPrune_dropsTheArtifactsOfRunsFinishedBeforeTheirRetention(t *testing.T) {
	f := newFixture(t, map[string]string{
		"old.dstack.yml": "type: task\ncommands: [\"true\"]\n",
		"new.dstack.yml": "type: task\ncommands: [\"true\"]\n",
	})
	f.sync()
	arts, err := blob.OpenFS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	f.c.cfg.Artifacts, f.c.cfg.ArtifactRetention = arts, 24*time.Hour
	finish := func(name string) store.Run {
		r := f.run(name)
		r.Status, r.FinishedAt = store.RunDone, f.clock.Now()
		if err := f.st.UpdateRun(f.ctx, &r); err != nil {
			t.Fatal(err)
		}
		if err := arts.Put(f.ctx, blob.Key(r.Project, r.ID, 0, "out/data.txt"), strings.NewReader("x"), 1); err != nil {
			t.Fatal(err)
		}
		return r
	}
	old := finish("old")
	f.clock.Advance(20 * time.Hour)
	recent := finish("new")
	f.clock.Advance(5 * time.Hour)
	f.c.prune(f.ctx)
	for _, tc := range []struct {
		r    store.Run
		want int
	}{{old, 0}, {recent, 1}} {
		r, want := tc.r, tc.want
		objs, err := arts.List(f.ctx, blob.RunPrefix(r.Project, r.ID))
		if err != nil || len(objs) != want {
			t.Errorf("run %s: %d artifacts (%v), want %d", r.Name, len(objs), err, want)
		}
	}
	f.clock.Advance(24 * time.Hour)
	f.c.prune(f.ctx)
	if objs, _ := arts.List(f.ctx, "artifacts/"); len(objs) != 0 {
		t.Errorf("artifacts left after both runs' retention: %+v", objs)
	}
}
