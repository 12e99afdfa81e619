package local_test

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"hoist/backends"
	"hoist/backends/offers"
	"hoist/e2e/testenv"
	"hoist/store"
)

var (
	recordsMu sync.Mutex
	recordsBy = map[string]backends.Records{}
)

// recordsFor returns the shared records of the server whose state dir is
// dir (a restarted backend on the same dir gets the same records): a
// fresh store (SQLite), what cmd/hoist hands the driver.
func recordsFor(t *testing.T, dir string) backends.Records {
	t.Helper()
	recordsMu.Lock()
	defer recordsMu.Unlock()
	if r, ok := recordsBy[dir]; ok {
		return r
	}
	st := openStore(t)
	recordsBy[dir] = st
	t.Cleanup(func() {
		recordsMu.Lock()
		delete(recordsBy, dir)
		recordsMu.Unlock()
	})
	return st
}

func openStore(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "hoist.db"),
		store.Options{SecretKey: []byte("0123456789abcdef0123456789abcdef")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func TestRecords_anotherServerSeesTheInstanceRunning(t *testing.T) {
	testenv.Docker(t)
	removeContainers(t)
	dirA, dirB := t.TempDir(), t.TempDir()
	shared := openStore(t)
	recordsMu.Lock()
	recordsBy[dirA], recordsBy[dirB] = shared, shared
	recordsMu.Unlock()
	a := newBackend(t, dirA)
	b := newBackend(t, dirB)
	ctx := t.Context()
	os, err := a.Offers(ctx, offers.Query{CPU: offers.AtLeast(1), Memory: offers.AtLeast(0.25)})
	if err != nil || len(os) == 0 {
		t.Fatalf("offers: %v", err)
	}
	inst, err := a.Create(ctx, backends.InstanceSpec{ID: "i-shared", Offer: os[0], Tags: map[string]string{testLabel: "backends-local"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Terminate(ctx, inst.ID) })

	got, err := b.Describe(ctx, inst.ID)
	if err != nil || got.Status != backends.StatusRunning {
		t.Fatalf("other server Describe = %+v, %v; want running, never gone", got, err)
	}
	if l, err := b.List(ctx, map[string]string{testLabel: "backends-local"}); err != nil || len(l) != 1 {
		t.Errorf("other server List = %+v, %v", l, err)
	}
	if _, err := b.Connect(ctx, got); !errors.Is(err, backends.ErrUnreachable) {
		t.Errorf("other server Connect = %v, want unreachable (the shim runs in the first)", err)
	}
	if err := b.Terminate(ctx, inst.ID); err == nil || backends.KindOf(err) != backends.KindTransient {
		t.Errorf("other server Terminate = %v, want a transient error (the owner drains it)", err)
	}
	if _, err := a.Describe(ctx, inst.ID); err != nil {
		t.Errorf("the owner lost its instance: %v", err)
	}
	if err := a.Terminate(ctx, inst.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Describe(ctx, inst.ID); !errors.Is(err, backends.ErrNotFound) {
		t.Errorf("after the owner terminated it, other server Describe = %v, want not found", err)
	}
}

func TestRecords_filesOfAnOlderHoistAreMigrated(t *testing.T) {
	testenv.Docker(t)
	removeContainers(t)
	dir := t.TempDir()
	inst := filepath.Join(dir, "instances", "old-1")
	if err := os.MkdirAll(inst, 0o700); err != nil {
		t.Fatal(err)
	}
	rec := `{"id":"old-1","offer":{"cpus":1,"memory_gb":0.5},"tags":{"hoist.test":"backends-local"},"created_at":"2026-11-01T00:00:00Z"}`
	if err := os.WriteFile(filepath.Join(inst, "instance.json"), []byte(rec), 0o600); err != nil {
		t.Fatal(err)
	}
	b := newBackend(t, dir)
	if _, err := os.Stat(filepath.Join(inst, "instance.json")); !os.IsNotExist(err) {
		t.Errorf("record file still there: %v", err)
	}
	got, err := b.Describe(t.Context(), "old-1")
	if err != nil || got.Status != backends.StatusRunning {
		t.Fatalf("migrated instance = %+v, %v", got, err)
	}
	if err := b.Terminate(t.Context(), "old-1"); err != nil {
		t.Fatal(err)
	}
}
