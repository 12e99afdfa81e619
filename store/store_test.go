package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"hoist/e2e/testenv"
)

func TestOpen_sqliteSecondOpenFailsFast(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hoist.db")
	s := openTest(t, path, Options{})
	if s.Dialect() != DialectSQLite {
		t.Fatalf("Dialect() = %q, want sqlite", s.Dialect())
	}
	start := time.Now()
	_, err := Open(t.Context(), "sqlite://"+path, Options{})
	if !errors.Is(err, ErrInUse) {
		t.Fatalf("second Open error = %v, want ErrInUse", err)
	}
	if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "pid") {
		t.Errorf("error %q should name the file and the owner pid", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("second Open took %v, want fail fast", d)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatalf("Open after Close: %v", err)
	}
	s2.Close()
}

func TestOpen_badPostgresDSNErrorHidesThePassword(t *testing.T) {
	_, err := Open(t.Context(), "postgres://app:hunter2@db.example:notaport/hoist", Options{})
	if err == nil {
		t.Fatal("Open accepted a DSN with a bad port")
	}
	if strings.Contains(err.Error(), "hunter2") {
		t.Errorf("error %q shows the DSN's password", err)
	}
	if !strings.Contains(err.Error(), "port") {
		t.Errorf("error %q does not say what is wrong", err)
	}
}

func TestOpen_sqliteFilesAreOwnerOnly(t *testing.T) {
	old := syscall.Umask(0o022) // the usual umask, under which SQLite made 0644 files
	t.Cleanup(func() { syscall.Umask(old) })
	dir := t.TempDir()
	path := filepath.Join(dir, "hoist.db")
	checkModes := func(t *testing.T) {
		t.Helper()
		matches, _ := filepath.Glob(path + "*")
		if len(matches) < 3 {
			t.Fatalf("want the database, its lock and WAL files, got %v", matches)
		}
		for _, p := range matches {
			fi, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm() != 0o600 {
				t.Errorf("%s has mode %#o, want 0600", filepath.Base(p), fi.Mode().Perm())
			}
		}
	}
	t.Run("new database", func(t *testing.T) {
		s := openTest(t, path, Options{})
		if err := s.RecordRevision(t.Context(), Revision{SHA: "abc"}); err != nil {
			t.Fatal(err)
		}
		checkModes(t)
	})
	t.Run("existing database readable by others", func(t *testing.T) {
		matches, _ := filepath.Glob(path + "*")
		for _, p := range matches {
			if err := os.Chmod(p, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		var logs strings.Builder
		openTest(t, path, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		checkModes(t)
		if !strings.Contains(logs.String(), "database_file_mode_restricted") || !strings.Contains(logs.String(), "hoist.db") {
			t.Errorf("no warning about the fixed modes:\n%s", logs.String())
		}
	})
}

func TestOpen_sqlitePragmasOnEveryConnection(t *testing.T) {
	s := openTest(t, filepath.Join(t.TempDir(), "hoist.db"), Options{MaxOpenConns: 3})
	ctx := t.Context()
	// Hold three distinct connections at once and ask each.
	for i := range 3 {
		conn, err := s.db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		var mode string
		var timeout, fk int
		if err := conn.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
			t.Fatal(err)
		}
		if err := conn.QueryRowContext(ctx, "PRAGMA busy_timeout").Scan(&timeout); err != nil {
			t.Fatal(err)
		}
		if err := conn.QueryRowContext(ctx, "PRAGMA foreign_keys").Scan(&fk); err != nil {
			t.Fatal(err)
		}
		if mode != "wal" || timeout != 10000 || fk != 1 {
			t.Errorf("conn %d: journal_mode=%s busy_timeout=%d foreign_keys=%d, want wal 10000 1", i, mode, timeout, fk)
		}
	}
}

func TestOpen_dialectFromDSN(t *testing.T) {
	tests := []struct {
		dsn      string
		postgres bool
		path     string
	}{
		{"postgres://u@h/db", true, ""},
		{"postgresql://u@h/db", true, ""},
		{"/var/lib/hoist/hoist.db", false, "/var/lib/hoist/hoist.db"},
		{"sqlite:///var/lib/hoist/hoist.db", false, "/var/lib/hoist/hoist.db"},
		{"sqlite://rel/hoist.db", false, "rel/hoist.db"},
		{"file:hoist.db?mode=rwc", false, "hoist.db"},
	}
	for _, tt := range tests {
		if got := isPostgres(tt.dsn); got != tt.postgres {
			t.Errorf("isPostgres(%q) = %v", tt.dsn, got)
		}
		if !tt.postgres {
			if got := sqlitePath(tt.dsn); got != tt.path {
				t.Errorf("sqlitePath(%q) = %q, want %q", tt.dsn, got, tt.path)
			}
		}
	}
}

func TestStore_timesAreUTC(t *testing.T) {
	forEachDB(t, func(t *testing.T, s *Store, clock *fakeClock) {
		ctx := t.Context()
		berlin := time.FixedZone("CET", 3600)
		r := &Run{Name: "t", Type: "task", Status: RunPending, NextTriggeredAt: time.Date(2026, 12, 1, 9, 0, 0, 5000, berlin)}
		if err := s.CreateRun(ctx, r); err != nil {
			t.Fatal(err)
		}
		got, err := s.GetRun(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		for name, tm := range map[string]time.Time{"submitted_at": got.SubmittedAt, "next_triggered_at": got.NextTriggeredAt, "created_at": got.CreatedAt} {
			if tm.Location() != time.UTC {
				t.Errorf("%s location = %v, want UTC", name, tm.Location())
			}
		}
		if !got.NextTriggeredAt.Equal(r.NextTriggeredAt) {
			t.Errorf("next_triggered_at = %v, want %v", got.NextTriggeredAt, r.NextTriggeredAt)
		}
		if !got.SubmittedAt.Equal(clock.Now()) {
			t.Errorf("submitted_at = %v, want the injected clock %v", got.SubmittedAt, clock.Now())
		}
		if !got.FinishedAt.IsZero() {
			t.Errorf("finished_at = %v, want zero (NULL)", got.FinishedAt)
		}
	})
}

func TestRevisions_recordUpsertsBySHA(t *testing.T) {
	forEachDB(t, func(t *testing.T, s *Store, clock *fakeClock) {
		ctx := t.Context()
		committed := time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)
		if err := s.RecordRevision(ctx, Revision{SHA: "aaa", Author: "ann", Message: "first", CommittedAt: committed, Valid: false, Errors: []string{"a.yml:1: bad"}}); err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Minute)
		if err := s.RecordRevision(ctx, Revision{SHA: "bbb", Author: "bob", Message: "second", CommittedAt: committed.Add(time.Hour), Valid: true}); err != nil {
			t.Fatal(err)
		}
		// Re-recording updates the validation result in place.
		if err := s.RecordRevision(ctx, Revision{SHA: "aaa", Author: "ann", Message: "first", CommittedAt: committed, Valid: true}); err != nil {
			t.Fatal(err)
		}
		got, err := s.GetRevision(ctx, DefaultProject, "aaa")
		if err != nil {
			t.Fatal(err)
		}
		if !got.Valid || len(got.Errors) != 0 || got.Author != "ann" || !got.CommittedAt.Equal(committed) {
			t.Errorf("GetRevision(aaa) = %+v", got)
		}
		revs, err := s.ListRevisions(ctx, DefaultProject, 10)
		if err != nil {
			t.Fatal(err)
		}
		var shas []string
		for _, r := range revs {
			shas = append(shas, r.SHA)
		}
		if diff := cmp.Diff([]string{"bbb", "aaa"}, shas); diff != "" {
			t.Errorf("ListRevisions order (-want +got):\n%s", diff)
		}
		if _, err := s.GetRevision(ctx, DefaultProject, "zzz"); !errors.Is(err, ErrNotFound) {
			t.Errorf("GetRevision(zzz) error = %v, want ErrNotFound", err)
		}
		bad, _ := s.GetRevision(ctx, DefaultProject, "bbb")
		if err := s.RecordRevision(ctx, Revision{SHA: "bbb", Valid: false, Errors: []string{"x", "y"}}); err != nil {
			t.Fatal(err)
		}
		bad, _ = s.GetRevision(ctx, DefaultProject, "bbb")
		if diff := cmp.Diff([]string{"x", "y"}, bad.Errors); diff != "" {
			t.Errorf("errors round trip (-want +got):\n%s", diff)
		}
	})
}

func TestSyncState_versionGuarded(t *testing.T) {
	forEachDB(t, func(t *testing.T, s *Store, clock *fakeClock) {
		ctx := t.Context()
		a, err := s.GetSyncState(ctx, DefaultProject)
		if err != nil {
			t.Fatal(err)
		}
		if a.Status != SyncSyncing || a.Version != 1 {
			t.Fatalf("initial sync state = %+v", a)
		}
		b := a
		a.Status, a.LatestSHA, a.AppliedSHA, a.Errors = SyncInvalid, "bbb", "aaa", []string{"bad"}
		if err := s.UpdateSyncState(ctx, &a); err != nil {
			t.Fatal(err)
		}
		b.Suspended = true
		if err := s.UpdateSyncState(ctx, &b); !errors.Is(err, ErrConflict) {
			t.Fatalf("stale UpdateSyncState error = %v, want ErrConflict", err)
		}
		n1, err := s.RequestSync(ctx, DefaultProject)
		if err != nil {
			t.Fatal(err)
		}
		n2, _ := s.RequestSync(ctx, DefaultProject)
		if n1 != 1 || n2 != 2 {
			t.Errorf("RequestSync = %d, %d; want 1, 2", n1, n2)
		}
		got, _ := s.GetSyncState(ctx, DefaultProject)
		// RequestSync does not bump the version, so the holder of a can still write.
		if got.Status != SyncInvalid || got.LatestSHA != "bbb" || got.Suspended || got.Requested != 2 || got.Version != 2 {
			t.Errorf("sync state = %+v", got)
		}
		a.Status = SyncSynced
		if err := s.UpdateSyncState(ctx, &a); err != nil {
			t.Fatalf("UpdateSyncState after RequestSync: %v", err)
		}
		got, _ = s.GetSyncState(ctx, DefaultProject)
		if got.Requested != 2 {
			t.Errorf("UpdateSyncState overwrote requested: %d", got.Requested)
		}
	})
}

func TestResources_upsertAndOptimisticConcurrency(t *testing.T) {
	forEachDB(t, func(t *testing.T, s *Store, clock *fakeClock) {
		ctx := t.Context()
		r, err := s.UpsertResource(ctx, Resource{Kind: "task", Name: "train", Spec: json.RawMessage(`{"b":1, "a":[2]}`), SpecHash: "h1", File: "train.yml", Revision: "r1"})
		if err != nil {
			t.Fatal(err)
		}
		if r.Version != 1 || r.Project != DefaultProject || string(r.Spec) != `{"b":1, "a":[2]}` {
			t.Fatalf("created resource = %+v (spec %s)", r, r.Spec)
		}
		// Same spec at a new revision: nothing changes.
		same, err := s.UpsertResource(ctx, Resource{Kind: "task", Name: "train", Spec: r.Spec, SpecHash: "h1", File: "train.yml", Revision: "r2"})
		if err != nil {
			t.Fatal(err)
		}
		if same.Version != 1 || same.Revision != "r1" {
			t.Errorf("unchanged upsert bumped the row: version %d revision %s", same.Version, same.Revision)
		}
		// Two writers read the same version; the second one must lose.
		w1, w2 := same, same
		w1.Status, w1.AppliedRevision = "ready", "r1"
		if err := s.UpdateResource(ctx, &w1); err != nil {
			t.Fatal(err)
		}
		if w1.Version != 2 {
			t.Errorf("version after update = %d, want 2", w1.Version)
		}
		w2.Suspended = true
		if err := s.UpdateResource(ctx, &w2); !errors.Is(err, ErrConflict) {
			t.Fatalf("stale UpdateResource error = %v, want ErrConflict", err)
		}
		if w2.Version != 1 {
			t.Errorf("failed update changed the caller's version to %d", w2.Version)
		}
		// A changed spec bumps the version and keeps status.
		changed, err := s.UpsertResource(ctx, Resource{Kind: "task", Name: "train", Spec: json.RawMessage(`{}`), SpecHash: "h2", File: "train.yml", Revision: "r3"})
		if err != nil {
			t.Fatal(err)
		}
		if changed.Version != 3 || changed.Revision != "r3" || changed.Status != "ready" || changed.AppliedRevision != "r1" {
			t.Errorf("changed upsert = %+v", changed)
		}
		if err := s.MarkResourceDeleted(ctx, "", "task", "train"); err != nil {
			t.Fatal(err)
		}
		if err := s.MarkResourceDeleted(ctx, "", "task", "nope"); !errors.Is(err, ErrNotFound) {
			t.Errorf("MarkResourceDeleted(nope) = %v, want ErrNotFound", err)
		}
		live, _ := s.ListResources(ctx, ResourceFilter{})
		all, _ := s.ListResources(ctx, ResourceFilter{IncludeDeleted: true})
		if len(live) != 0 || len(all) != 1 || !all[0].Deleted || all[0].DeletedAt.IsZero() || all[0].Version != 4 {
			t.Errorf("after delete: live=%d all=%+v", len(live), all)
		}
		// Re-adding to Git revives the row.
		back, err := s.UpsertResource(ctx, Resource{Kind: "task", Name: "train", Spec: json.RawMessage(`{}`), SpecHash: "h2", File: "train.yml", Revision: "r4"})
		if err != nil {
			t.Fatal(err)
		}
		if back.Deleted || !back.DeletedAt.IsZero() || back.Version != 5 {
			t.Errorf("revived resource = %+v", back)
		}
		if _, err := s.UpsertResource(ctx, Resource{Kind: "fleet", Name: "gpus", SpecHash: "f"}); err != nil {
			t.Fatal(err)
		}
		fleets, _ := s.ListResources(ctx, ResourceFilter{Kind: "fleet"})
		if len(fleets) != 1 || fleets[0].Name != "gpus" {
			t.Errorf("ListResources(kind=fleet) = %+v", fleets)
		}
	})
}

func TestRuns_lifecycle(t *testing.T) {
	forEachDB(t, func(t *testing.T, s *Store, clock *fakeClock) {
		ctx := t.Context()
		old := &Run{Name: "train", Type: "task", Status: RunDone, Spec: json.RawMessage(`{"commands":["echo"]}`), SpecHash: "h", Revision: "r1"}
		if err := s.CreateRun(ctx, old); err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Second)
		cur := &Run{Name: "train", Type: "task", Status: RunSubmitted, ResourceKind: "task", ResourceName: "train"}
		if err := s.CreateRun(ctx, cur); err != nil {
			t.Fatal(err)
		}
		svc := &Run{Name: "web", Type: "service", Status: RunRunning}
		if err := s.CreateRun(ctx, svc); err != nil {
			t.Fatal(err)
		}
		if err := s.CreateRun(ctx, &Run{Name: "bad", Type: "cron", Status: RunPending}); err == nil {
			t.Error("CreateRun with type cron: want CHECK constraint error")
		}
		if err := s.CreateRun(ctx, &Run{Name: "bad", Type: "task", Status: "exploded"}); err == nil {
			t.Error("CreateRun with status exploded: want CHECK constraint error")
		}
		got, err := s.GetRunByName(ctx, "", "train")
		if err != nil {
			t.Fatal(err)
		}
		if got.ID != cur.ID {
			t.Errorf("GetRunByName = %s, want latest %s", got.ID, cur.ID)
		}
		// Update with version guard.
		stale := got
		got.Status, got.StatusMessage, got.DeploymentNum = RunRunning, "running", 1
		if err := s.UpdateRun(ctx, &got); err != nil {
			t.Fatal(err)
		}
		stale.Status = RunTerminating
		if err := s.UpdateRun(ctx, &stale); !errors.Is(err, ErrConflict) {
			t.Errorf("stale UpdateRun = %v, want ErrConflict", err)
		}
		missing := Run{ID: "nope", Version: 1, Type: "task", Status: RunDone}
		if err := s.UpdateRun(ctx, &missing); !errors.Is(err, ErrNotFound) {
			t.Errorf("UpdateRun(missing) = %v, want ErrNotFound", err)
		}
		// Filters.
		running, _ := s.ListRuns(ctx, RunFilter{Status: []string{RunRunning}})
		if len(running) != 2 {
			t.Errorf("ListRuns(status=running) = %d runs, want 2", len(running))
		}
		services, _ := s.ListRuns(ctx, RunFilter{Type: "service"})
		if len(services) != 1 || services[0].ID != svc.ID {
			t.Errorf("ListRuns(type=service) = %+v", services)
		}
		active, _ := s.ListRuns(ctx, RunFilter{Active: true})
		if len(active) != 2 {
			t.Errorf("ListRuns(active) = %d, want 2", len(active))
		}
		all, _ := s.ListRuns(ctx, RunFilter{Limit: 2})
		if len(all) != 2 {
			t.Errorf("ListRuns(limit=2) = %d", len(all))
		}
		// Deleted runs disappear from lookups by name.
		got.Deleted = true
		if err := s.UpdateRun(ctx, &got); err != nil {
			t.Fatal(err)
		}
		byName, err := s.GetRunByName(ctx, "", "train")
		if err != nil || byName.ID != old.ID {
			t.Errorf("GetRunByName after delete = %s, %v; want the older run", byName.ID, err)
		}
		if _, err := s.GetRunByName(ctx, "", "nope"); !errors.Is(err, ErrNotFound) {
			t.Errorf("GetRunByName(nope) = %v", err)
		}
	})
}

func TestJobs_submissionsNewestFirst(t *testing.T) {
	forEachDB(t, func(t *testing.T, s *Store, clock *fakeClock) {
		ctx := t.Context()
		run := &Run{Name: "train", Type: "task", Status: RunSubmitted}
		if err := s.CreateRun(ctx, run); err != nil {
			t.Fatal(err)
		}
		var ids []string
		for sub := range 3 {
			j := &Job{RunID: run.ID, RunName: run.Name, JobName: "train-0-0", SubmissionNum: sub, Status: JobSubmitted}
			if err := s.CreateJob(ctx, j); err != nil {
				t.Fatal(err)
			}
			ids = append([]string{j.ID}, ids...)
			clock.Advance(time.Second)
		}
		jobs, err := s.ListJobs(ctx, run.ID)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, j := range jobs {
			got = append(got, j.ID)
		}
		if diff := cmp.Diff(ids, got); diff != "" {
			t.Errorf("ListJobs order (-want +got):\n%s", diff)
		}
		j := jobs[0]
		code := 137
		j.Status, j.TerminationReason, j.ExitCode = JobFailed, "container_exited_with_error", &code
		j.InstanceID, j.Backend, j.ShimTaskID, j.RunnerAddr, j.LogCursor = "i-1", "local", "task-1", "unix:///run/hoist/runner.sock", 42
		j.StartedAt, j.FinishedAt = clock.Now().Add(-time.Minute), clock.Now()
		if err := s.UpdateJob(ctx, &j); err != nil {
			t.Fatal(err)
		}
		back, err := s.GetJob(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(j, back); diff != "" {
			t.Errorf("job round trip (-want +got):\n%s", diff)
		}
		failed, _ := s.ListJobsFiltered(ctx, JobFilter{Status: []string{JobFailed}})
		active, _ := s.ListJobsFiltered(ctx, JobFilter{Active: true, RunID: run.ID})
		if len(failed) != 1 || len(active) != 2 {
			t.Errorf("filters: failed=%d active=%d; want 1, 2", len(failed), len(active))
		}
		if err := s.CreateJob(ctx, &Job{RunID: "no-such-run", Status: JobSubmitted}); err == nil {
			t.Error("CreateJob for a missing run: want foreign key error")
		}
	})
}

func TestInfra_roundTrip(t *testing.T) {
	forEachDB(t, func(t *testing.T, s *Store, clock *fakeClock) {
		ctx := t.Context()
		f := &Fleet{Name: "gpus", Status: FleetActive, Spec: json.RawMessage(`{"nodes":2}`), SpecHash: "h"}
		if err := s.CreateFleet(ctx, f); err != nil {
			t.Fatal(err)
		}
		inst := &Instance{
			Name: "gpus-0", FleetID: f.ID, Backend: "local", Region: "here", Offer: json.RawMessage(`{"gpu":"A100"}`),
			Price: 1.25, Hostname: "127.0.0.1", SSHPort: 2222, SSHUser: "root", Ports: map[string]int{"ssh": 2222},
			HostKey: "ssh-ed25519 AAAAC3Nza test", Status: InstancePending,
			OwnershipTags: map[string]string{"hoist.dev/owner": "server-1"}, LastSeenAt: clock.Now(),
		}
		if err := s.CreateInstance(ctx, inst); err != nil {
			t.Fatal(err)
		}
		got, err := s.GetInstance(ctx, inst.ID)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(*inst, got); diff != "" {
			t.Errorf("instance round trip (-want +got):\n%s", diff)
		}
		got.Status, got.Unreachable = InstanceIdle, true
		if err := s.UpdateInstance(ctx, &got); err != nil {
			t.Fatal(err)
		}
		inFleet, _ := s.ListInstances(ctx, InfraFilter{FleetID: f.ID})
		idle, _ := s.ListInstances(ctx, InfraFilter{Status: []string{InstanceIdle}})
		if len(inFleet) != 1 || len(idle) != 1 || !idle[0].Unreachable {
			t.Errorf("ListInstances: fleet=%d idle=%+v", len(inFleet), idle)
		}
		if byName, err := s.GetInstanceByName(ctx, "", "gpus-0"); err != nil || byName.ID != inst.ID {
			t.Errorf("GetInstanceByName = %v, %v", byName.ID, err)
		}

		v := &Volume{Name: "data", Status: VolumeSubmitted, Backend: "local", SizeGB: 100}
		if err := s.CreateVolume(ctx, v); err != nil {
			t.Fatal(err)
		}
		if err := s.AttachVolume(ctx, v.ID, inst.ID, json.RawMessage(`{"device":"/dev/sdb"}`)); err != nil {
			t.Fatal(err)
		}
		if err := s.AttachVolume(ctx, v.ID, inst.ID, json.RawMessage(`{"device":"/dev/sdc"}`)); err != nil {
			t.Fatalf("repeated AttachVolume: %v", err)
		}
		atts, _ := s.ListVolumeAttachments(ctx, v.ID, "")
		if len(atts) != 1 || string(atts[0].AttachmentData) != `{"device":"/dev/sdc"}` {
			t.Errorf("attachments = %+v", atts)
		}
		if err := s.DetachVolume(ctx, v.ID, inst.ID); err != nil {
			t.Fatal(err)
		}
		atts, _ = s.ListVolumeAttachments(ctx, "", inst.ID)
		if len(atts) != 0 {
			t.Errorf("attachments after detach = %+v", atts)
		}
		v.Status, v.ExternalID = VolumeActive, "vol-123"
		if err := s.UpdateVolume(ctx, v); err != nil {
			t.Fatal(err)
		}
		if gv, _ := s.GetVolumeByName(ctx, "", "data"); gv.ExternalID != "vol-123" || gv.Version != 2 {
			t.Errorf("volume = %+v", gv)
		}

		g := &Gateway{Name: "gw", Status: GatewaySubmitted, Hostname: "gw.example", HostKey: "ssh-ed25519 AAAA gw"}
		if err := s.CreateGateway(ctx, g); err != nil {
			t.Fatal(err)
		}
		g.Status = GatewayRunning
		if err := s.UpdateGateway(ctx, g); err != nil {
			t.Fatal(err)
		}
		gws, _ := s.ListGateways(ctx, InfraFilter{Status: []string{GatewayRunning}})
		if len(gws) != 1 || gws[0].HostKey != g.HostKey {
			t.Errorf("gateways = %+v", gws)
		}
		f.TriedOffers = []TriedOffer{{Offer: "aws/us-east-1/p4d.24xlarge/false", Error: "no capacity", At: clock.Now()}}
		f.PlacementGroups = []FleetPlacementGroup{{ID: "pg-1", Backend: "aws", Region: "us-east-1", ProviderID: "hoist-gpus-1"}}
		if err := s.UpdateFleet(ctx, f); err != nil {
			t.Fatal(err)
		}
		if gf, err := s.GetFleet(ctx, f.ID); err != nil || !cmp.Equal(gf.TriedOffers, f.TriedOffers) || !cmp.Equal(gf.PlacementGroups, f.PlacementGroups) {
			t.Errorf("fleet offers and groups = %+v %+v, %v; want %+v %+v", gf.TriedOffers, gf.PlacementGroups, err, f.TriedOffers, f.PlacementGroups)
		}
		f.Deleted = true
		if err := s.UpdateFleet(ctx, f); err != nil {
			t.Fatal(err)
		}
		if fs, _ := s.ListFleets(ctx, InfraFilter{}); len(fs) != 0 {
			t.Errorf("ListFleets returned a deleted fleet: %+v", fs)
		}
		if _, err := s.GetFleetByName(ctx, "", "gpus"); !errors.Is(err, ErrNotFound) {
			t.Errorf("GetFleetByName(deleted) = %v, want ErrNotFound", err)
		}
	})
}

func TestEvents_filterAndOrder(t *testing.T) {
	forEachDB(t, func(t *testing.T, s *Store, clock *fakeClock) {
		ctx := t.Context()
		add := func(kind, name, typ, rev string) {
			t.Helper()
			if _, err := s.AddEvent(ctx, Event{ObjectKind: kind, ObjectName: name, ObjectID: kind + "/" + name, Type: typ, Message: typ + " " + name, Revision: rev}); err != nil {
				t.Fatal(err)
			}
		}
		add("run", "train", "created", "r1")
		add("run", "train", "status", "r1") // same clock reading: ordered by id
		clock.Advance(time.Second)
		add("run", "web", "created", "r2")
		add("fleet", "gpus", "created", "r2")
		es, err := s.ListEvents(ctx, EventFilter{ObjectKind: "run", ObjectName: "train"})
		if err != nil {
			t.Fatal(err)
		}
		if len(es) != 2 || es[0].Type != "status" || es[1].Type != "created" {
			t.Errorf("events of run/train = %+v", es)
		}
		byRev, _ := s.ListEvents(ctx, EventFilter{Revision: "r2"})
		byID, _ := s.ListEvents(ctx, EventFilter{ObjectID: "fleet/gpus"})
		limited, _ := s.ListEvents(ctx, EventFilter{Limit: 3})
		if len(byRev) != 2 || len(byID) != 1 || len(limited) != 3 || limited[0].ObjectName != "gpus" {
			t.Errorf("byRev=%d byID=%d limited=%+v", len(byRev), len(byID), limited)
		}
		n, err := s.PruneEvents(ctx, clock.Now())
		if err != nil || n != 2 {
			t.Errorf("PruneEvents = %d, %v; want 2", n, err)
		}
	})
}

func TestUsers_tokens(t *testing.T) {
	forEachDB(t, func(t *testing.T, s *Store, clock *fakeClock) {
		ctx := t.Context()
		u, err := s.CreateUser(ctx, "ann", RoleAdmin)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.CreateUser(ctx, "ann", RoleUser); !errors.Is(err, ErrConflict) {
			t.Errorf("duplicate CreateUser = %v, want ErrConflict", err)
		}
		if _, err := s.CreateUser(ctx, "bob", "root"); err == nil {
			t.Error("CreateUser with role root: want error")
		}
		plain, tok, err := s.CreateToken(ctx, u.ID, "ci", clock.Now().Add(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(plain, TokenPrefix) || strings.Contains(tok.TokenHash, plain) {
			t.Errorf("token %q hash %q", plain, tok.TokenHash)
		}
		var stored int
		if err := s.db.NewSelect().Table("api_tokens").ColumnExpr("count(*)").Where("token_hash = ?", plain).Scan(ctx, &stored); err != nil || stored != 0 {
			t.Errorf("plaintext token found in the table (%d, %v)", stored, err)
		}
		got, err := s.LookupToken(ctx, plain)
		if err != nil || got.ID != u.ID || got.Role != RoleAdmin {
			t.Errorf("LookupToken = %+v, %v", got, err)
		}
		if _, err := s.LookupToken(ctx, plain+"x"); !errors.Is(err, ErrNotFound) {
			t.Errorf("LookupToken(wrong) = %v, want ErrNotFound", err)
		}
		clock.Advance(2 * time.Hour)
		if _, err := s.LookupToken(ctx, plain); !errors.Is(err, ErrNotFound) {
			t.Errorf("LookupToken(expired) = %v, want ErrNotFound", err)
		}
		plain2, tok2, _ := s.CreateToken(ctx, u.ID, "forever", time.Time{})
		if _, err := s.LookupToken(ctx, plain2); err != nil {
			t.Errorf("LookupToken(no expiry) = %v", err)
		}
		if err := s.RevokeToken(ctx, tok2.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := s.LookupToken(ctx, plain2); !errors.Is(err, ErrNotFound) {
			t.Errorf("LookupToken(revoked) = %v, want ErrNotFound", err)
		}
		p, err := s.EnsureProject(ctx, "main")
		p2, err2 := s.EnsureProject(ctx, "main")
		if err != nil || err2 != nil || p.ID != p2.ID {
			t.Errorf("EnsureProject not idempotent: %v %v %v %v", p.ID, p2.ID, err, err2)
		}
	})
}

func TestSecrets_encryptedAtRest(t *testing.T) {
	forEachDSN(t, func(t *testing.T, dsn string) {
		ctx := t.Context()
		s, err := Open(ctx, dsn, Options{SecretKey: testKey})
		if err != nil {
			t.Fatal(err)
		}
		plain := []byte("hf_supersecret_token_value_1234567890")
		if err := s.SetSecret(ctx, "", "HF_TOKEN", plain); err != nil {
			t.Fatal(err)
		}
		if err := s.SetSecret(ctx, "", "AWS_KEY", []byte("x")); err != nil {
			t.Fatal(err)
		}
		got, err := s.GetSecret(ctx, "", "HF_TOKEN")
		if err != nil || string(got) != string(plain) {
			t.Fatalf("GetSecret = %q, %v", got, err)
		}
		var rows []secretRow
		if err := s.db.NewSelect().Model(&rows).Scan(ctx); err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			for _, col := range [][]byte{r.Ciphertext, r.Nonce, []byte(r.KeyID)} {
				if strings.Contains(string(col), "supersecret") {
					t.Errorf("secret %s: plaintext found in a stored column", r.Name)
				}
			}
		}
		names, _ := s.ListSecretNames(ctx, "")
		if diff := cmp.Diff([]string{"AWS_KEY", "HF_TOKEN"}, names); diff != "" {
			t.Errorf("ListSecretNames (-want +got):\n%s", diff)
		}
		// A ciphertext copied under another name does not decrypt.
		if _, err := s.db.NewUpdate().Table("secrets").
			Set("ciphertext = (SELECT ciphertext FROM secrets WHERE name = 'HF_TOKEN')").
			Set("nonce = (SELECT nonce FROM secrets WHERE name = 'HF_TOKEN')").
			Where("name = 'AWS_KEY'").Exec(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := s.GetSecret(ctx, "", "AWS_KEY"); !errors.Is(err, ErrSecretKey) {
			t.Errorf("moved ciphertext: GetSecret = %v, want ErrSecretKey", err)
		}
		s.Close()

		wrong := []byte("ffffffffffffffffffffffffffffffff")
		s2, err := Open(ctx, dsn, Options{SecretKey: wrong})
		if err != nil {
			t.Fatal(err)
		}
		defer s2.Close()
		_, err = s2.GetSecret(ctx, "", "HF_TOKEN")
		if !errors.Is(err, ErrSecretKey) || !strings.Contains(err.Error(), "key") {
			t.Errorf("GetSecret with wrong key = %v, want ErrSecretKey", err)
		}
		if err != nil && strings.Contains(err.Error(), "supersecret") {
			t.Error("error message leaks the secret")
		}
		s3, err := Open(ctx, dsn+"", Options{})
		if err == nil {
			defer s3.Close()
			if _, err := s3.GetSecret(ctx, "", "HF_TOKEN"); !errors.Is(err, ErrSecretKey) {
				t.Errorf("GetSecret without key = %v, want ErrSecretKey", err)
			}
		}
	})
}

func TestLoadSecretKey(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(SecretKeyEnv, "")
	k1, err := LoadSecretKey(dir)
	if err != nil || len(k1) != 32 {
		t.Fatalf("LoadSecretKey created %d bytes, %v", len(k1), err)
	}
	fi, err := os.Stat(filepath.Join(dir, SecretKeyFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("key file mode = %v, %v; want 0600", fi.Mode(), err)
	}
	k2, _ := LoadSecretKey(dir)
	if string(k1) != string(k2) {
		t.Error("LoadSecretKey did not reuse the key file")
	}
	t.Setenv(SecretKeyEnv, "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff")
	k3, err := LoadSecretKey(dir)
	if err != nil || k3[1] != 0x11 || len(k3) != 32 {
		t.Errorf("LoadSecretKey from env = %x, %v", k3, err)
	}
	t.Setenv(SecretKeyEnv, "short")
	if _, err := LoadSecretKey(dir); err == nil {
		t.Error("LoadSecretKey accepted a short key")
	}
}

// TestOpen_sqliteSecondProcessFailsFast opens the database here and then
// again from a child process (this test binary), as a second `hoist serve`
// would.
func TestOpen_sqliteSecondProcessFailsFast(t *testing.T) {
	if path := os.Getenv("HOIST_STORE_CHILD_OPEN"); path != "" {
		_, err := Open(context.Background(), path, Options{})
		if errors.Is(err, ErrInUse) {
			fmt.Println("IN USE:", err)
			os.Exit(3)
		}
		fmt.Println("UNEXPECTED:", err)
		os.Exit(1)
	}
	path := filepath.Join(t.TempDir(), "hoist.db")
	openTest(t, path, Options{})
	cmd := exec.Command(os.Args[0], "-test.run=^TestOpen_sqliteSecondProcessFailsFast$")
	cmd.Env = append(os.Environ(), "HOIST_STORE_CHILD_OPEN="+path)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 3 {
		t.Fatalf("child Open: %v: %s", err, out)
	}
	if !strings.Contains(string(out), fmt.Sprintf("pid %d", os.Getpid())) {
		t.Errorf("child error should name this process's pid %d: %s", os.Getpid(), out)
	}
}

func TestResources_concurrentWritersNeverLoseAnUpdate(t *testing.T) {
	forEachDB(t, func(t *testing.T, s *Store, clock *fakeClock) {
		ctx := t.Context()
		if _, err := s.UpsertResource(ctx, Resource{Kind: "task", Name: "counter", StatusMessage: "0"}); err != nil {
			t.Fatal(err)
		}
		const writers, each = 6, 15
		var wg sync.WaitGroup
		var conflicts atomic.Int64
		errs := make(chan error, writers)
		for range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range each {
					for { // read-modify-write, retried on conflict
						r, err := s.GetResource(ctx, "", "task", "counter")
						if err != nil {
							errs <- err
							return
						}
						n, _ := strconv.Atoi(r.StatusMessage)
						r.StatusMessage = strconv.Itoa(n + 1)
						err = s.UpdateResource(ctx, &r)
						if errors.Is(err, ErrConflict) {
							conflicts.Add(1)
							continue
						}
						if err != nil {
							errs <- err
							return
						}
						break
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		r, _ := s.GetResource(ctx, "", "task", "counter")
		if r.StatusMessage != strconv.Itoa(writers*each) || r.Version != int64(1+writers*each) {
			t.Errorf("counter = %s at version %d, want %d at %d (%d conflicts retried)",
				r.StatusMessage, r.Version, writers*each, 1+writers*each, conflicts.Load())
		}
	})
}

func TestOpen_postgresLoopbackWithoutSSLMode(t *testing.T) {
	dsn := testenv.Postgres(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Del("sslmode")
	u.RawQuery = q.Encode()
	s := openTest(t, u.String(), Options{})
	if s.Dialect() != DialectPostgres {
		t.Errorf("Dialect() = %q", s.Dialect())
	}
}

// TestWorkflowOutput_keepsTheFirstJobsOfAnInputHash checks the program
// providers' output cache: by project and hash, first write wins.
func TestWorkflowOutput_keepsTheFirstJobsOfAnInputHash(t *testing.T) {
	forEachDB(t, func(t *testing.T, s *Store, _ *fakeClock) {
		ctx := t.Context()
		if _, err := s.GetWorkflowOutput(ctx, "", "h1"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("missing output: %v, want ErrNotFound", err)
		}
		if err := s.PutWorkflowOutput(ctx, "", "h1", json.RawMessage(`[{"name":"a"}]`)); err != nil {
			t.Fatal(err)
		}
		if err := s.PutWorkflowOutput(ctx, "", "h1", json.RawMessage(`[{"name":"b"}]`)); err != nil {
			t.Fatal(err)
		}
		got, err := s.GetWorkflowOutput(ctx, DefaultProject, "h1")
		if err != nil || string(got) != `[{"name":"a"}]` {
			t.Fatalf("output = %s, %v; want the first", got, err)
		}
		if _, err := s.GetWorkflowOutput(ctx, "other", "h1"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("another project's output: %v, want ErrNotFound", err)
		}
	})
}
