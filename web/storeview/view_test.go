package storeview_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"hoist/store"
	"hoist/web"
	"hoist/web/internal/fixture"
	"hoist/web/storeview"
)

var now = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

func open(t *testing.T) (*storeview.View, fixture.Seeded) {
	t.Helper()
	st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "hoist.db"), store.Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	seeded, err := fixture.Seed(t.Context(), st, now)
	if err != nil {
		t.Fatal(err)
	}
	return storeview.New(st, ""), seeded
}

func openB(b *testing.B) (*storeview.View, *store.Store) {
	st, err := store.Open(b.Context(), filepath.Join(b.TempDir(), "hoist.db"), store.Options{Now: func() time.Time { return now }})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	if _, err := fixture.Seed(b.Context(), st, now); err != nil {
		b.Fatal(err)
	}
	return storeview.New(st, ""), st
}

func TestView_runsJobsAndLogs(t *testing.T) {
	v, seeded := open(t)
	ctx := t.Context()
	runs, err := v.ListRuns(ctx, web.RunFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range runs {
		names = append(names, r.Name+":"+r.Status)
	}
	if got := strings.Join(names, ","); got != "train:running,hello:done,serve:failed" {
		t.Errorf("runs = %s", got)
	}
	if runs[0].CostPerHour != 1.25 || runs[0].Fleet != "gpu-pool" {
		t.Errorf("train cost %v fleet %q", runs[0].CostPerHour, runs[0].Fleet)
	}
	if rs, _ := v.ListRuns(ctx, web.RunFilter{Fleet: "gpu-pool", Status: "done"}); len(rs) != 1 || rs[0].Name != "hello" {
		t.Errorf("filtered = %+v", rs)
	}
	hello, err := v.GetRun(ctx, "hello")
	if err != nil {
		t.Fatal(err)
	}
	if len(hello.Jobs) != 3 || hello.Jobs[0].ID != seeded.HelloJob || *hello.Jobs[0].ExitCode != 0 ||
		hello.Jobs[1].TerminationReason != "container_exited_with_error" || hello.Jobs[2].Revision != seeded.RevOld {
		t.Errorf("hello jobs = %+v", hello.Jobs)
	}
	lines, err := v.ReadLogs(ctx, seeded.HelloJob, 1, 10)
	if err != nil || len(lines) != 2 || lines[0].Text != "hello line 2" || lines[0].Seq != 2 {
		t.Errorf("logs = %+v, %v", lines, err)
	}
	if _, err := v.GetRun(ctx, "nope"); !errors.Is(err, web.ErrNotFound) {
		t.Errorf("missing run: %v", err)
	}
}

func TestView_tokensSyncAndHistory(t *testing.T) {
	v, seeded := open(t)
	ctx := t.Context()
	p, err := v.LookupToken(ctx, seeded.Tokens.Viewer)
	if err != nil || p.RoleIn(store.DefaultProject) != web.RoleViewer || p.Role != web.RoleUser || p.Name != "victor" {
		t.Errorf("viewer token: %+v %v", p, err)
	}
	if _, err := v.LookupToken(ctx, "nope"); !errors.Is(err, web.ErrNotFound) {
		t.Errorf("bad token: %v", err)
	}
	st, err := v.SyncStatus(ctx)
	if err != nil || st.Status != "invalid" || st.Revision != seeded.RevNew || len(st.Errors) != 1 {
		t.Errorf("sync status %+v %v", st, err)
	}
	revs, err := v.ListRevisions(ctx, 10)
	if err != nil || len(revs) != 3 {
		t.Fatalf("revisions %+v %v", revs, err)
	}
	for _, r := range revs {
		if r.Applied != (r.SHA == seeded.RevNew) {
			t.Errorf("revision %s applied=%v", r.SHA, r.Applied)
		}
	}
}

func TestView_inventoryHidesSecrets(t *testing.T) {
	v, _ := open(t)
	ctx := t.Context()
	fl, err := v.ListFleets(ctx)
	if err != nil || len(fl) != 1 || fl[0].NodesTarget != 2 || *fl[0].NodesMax != 4 || fl[0].Instances != 2 {
		t.Errorf("fleets %+v %v", fl, err)
	}
	is, err := v.ListInstances(ctx, "gpu-pool")
	if err != nil || len(is) != 2 || is[0].Resources != "16xCPU, 64GB, 2xA100 (80GB), 500GB (disk)" || is[1].Reachable {
		t.Errorf("instances %+v %v", is, err)
	}
	vs, err := v.ListVolumes(ctx)
	if err != nil || len(vs) != 1 || vs[0].AttachedTo[0] != "gpu-pool-0" {
		t.Errorf("volumes %+v %v", vs, err)
	}
	gs, err := v.ListGateways(ctx)
	if err != nil || len(gs) != 1 || gs[0].Domain != "*.apps.example.com" {
		t.Errorf("gateways %+v %v", gs, err)
	}
}

// Instances name their fleet past a store list's default limit of 1,000
// fleets, and a filter by a deleted fleet's name lists none.
func TestView_instancesNameTheirFleetPastAThousandFleets(t *testing.T) {
	ctx := t.Context()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "hoist.db"), store.Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	var last store.Fleet
	for i := range 1001 {
		last = store.Fleet{Name: fmt.Sprintf("f%04d", i), Status: "active"}
		if err := st.CreateFleet(ctx, &last); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.CreateInstance(ctx, &store.Instance{Name: "f1000-0", FleetID: last.ID, Backend: "aws", Status: store.InstanceIdle}); err != nil {
		t.Fatal(err)
	}
	v := storeview.New(st, "")
	for _, fleet := range []string{"", "f1000"} {
		is, err := v.ListInstances(ctx, fleet)
		if err != nil || len(is) != 1 || is[0].Fleet != "f1000" {
			t.Errorf("ListInstances(%q) = %+v, %v; want f1000-0 of fleet f1000", fleet, is, err)
		}
	}
	last.Deleted = true
	if err := st.UpdateFleet(ctx, &last); err != nil {
		t.Fatal(err)
	}
	if is, err := v.ListInstances(ctx, "f1000"); err != nil || len(is) != 0 {
		t.Errorf("ListInstances of a deleted fleet = %+v, %v; want none", is, err)
	}
}
