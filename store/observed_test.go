package store

import (
	"encoding/json"
	"testing"
	"time"
)

func TestObservedState_resourcesAndTheNewestRunOfEachName(t *testing.T) {
	forEachDB(t, func(t *testing.T, s *Store, clock *fakeClock) {
		ctx := t.Context()
		train, err := s.UpsertResource(ctx, Resource{Kind: "task", Name: "train", Spec: json.RawMessage(`{"a":1}`), SpecHash: "h1", File: "train.yml", Revision: "r1"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.UpsertResource(ctx, Resource{Kind: "volume", Name: "gone", Spec: json.RawMessage(`{}`), SpecHash: "h0", File: "gone.yml", Revision: "r1"}); err != nil {
			t.Fatal(err)
		}
		if err := s.MarkResourceDeleted(ctx, DefaultProject, "volume", "gone"); err != nil {
			t.Fatal(err)
		}
		old := &Run{Name: "train", Type: "task", Status: RunDone, Spec: json.RawMessage(`{"old":1}`), SpecHash: "h0"}
		if err := s.CreateRun(ctx, old); err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Second)
		cur := &Run{Name: "train", Type: "task", Status: RunRunning, Spec: json.RawMessage(`{"a":1}`), SpecHash: "h1"}
		if err := s.CreateRun(ctx, cur); err != nil {
			t.Fatal(err)
		}
		if err := s.CreateRun(ctx, &Run{Project: "other", Name: "elsewhere", Type: "task", Status: RunRunning}); err != nil {
			t.Fatal(err)
		}

		obs, err := s.ObservedState(ctx, DefaultProject)
		if err != nil {
			t.Fatal(err)
		}
		if len(obs.Resources) != 1 {
			t.Fatalf("resources = %+v, want train only (deleted ones are not observed)", obs.Resources)
		}
		want := ObservedResource{ID: train.ID, Kind: "task", Name: "train", SpecHash: "h1", File: "train.yml", Status: train.Status}
		if obs.Resources[0] != want {
			t.Errorf("resource = %+v, want %+v", obs.Resources[0], want)
		}
		if len(obs.LatestRuns) != 1 {
			t.Fatalf("latest runs = %+v, want train only (other projects are not observed)", obs.LatestRuns)
		}
		if got := obs.LatestRuns["train"]; got.ID != cur.ID || got.Status != RunRunning || got.SpecHash != "h1" {
			t.Errorf("latest run of train = %+v, want the newest (%s, running, h1)", got, cur.ID)
		}

		specs, err := s.RunSpecs(ctx, []string{old.ID, "no-such-run"})
		if err != nil {
			t.Fatal(err)
		}
		if len(specs) != 1 || string(specs[old.ID]) != `{"old":1}` {
			t.Errorf("RunSpecs = %q, want the old run's spec only", specs)
		}
		rspecs, err := s.ResourceSpecs(ctx, []string{train.ID})
		if err != nil {
			t.Fatal(err)
		}
		var got map[string]int
		if err := json.Unmarshal(rspecs[train.ID], &got); err != nil || got["a"] != 1 {
			t.Errorf("ResourceSpecs = %q (%v), want train's spec", rspecs, err)
		}
		if none, err := s.ResourceSpecs(ctx, nil); err != nil || len(none) != 0 {
			t.Errorf("ResourceSpecs(nil) = %v, %v; want nothing, no query", none, err)
		}
	})
}

func TestTrySyncLock_oneServerSyncsAtATime(t *testing.T) {
	forEachDSN(t, func(t *testing.T, dsn string) {
		ctx := t.Context()
		a := openTest(t, dsn, Options{})
		unlock, ok, err := a.TrySyncLock(ctx, DefaultProject)
		if err != nil || !ok {
			t.Fatalf("first TrySyncLock = %v, %v; want the lock", ok, err)
		}
		if a.Dialect() != DialectPostgres {
			// One server owns a SQLite file: the lock is always its own.
			unlock()
			return
		}
		b := openTest(t, dsn, Options{})
		if _, ok, err := b.TrySyncLock(ctx, DefaultProject); err != nil || ok {
			t.Fatalf("second server's TrySyncLock while held = %v, %v; want not ok", ok, err)
		}
		unlock()
		unlockB, ok, err := b.TrySyncLock(ctx, DefaultProject)
		if err != nil || !ok {
			t.Fatalf("second server's TrySyncLock after unlock = %v, %v; want the lock", ok, err)
		}
		unlockB()
	})
}
