package store

import (
	"context"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	"hoist/e2e/testenv"
)

// fakeClock is a settable clock for tests.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{t: time.Date(2026, 11, 22, 1, 2, 3, 456789000, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// testKey is a fixed 32-byte secret key for tests.
var testKey = []byte("0123456789abcdef0123456789abcdef")

// dbCase is one database a test runs against.
type dbCase struct {
	name string
	dsn  func(t testing.TB) string
}

var dbCases = []dbCase{
	{"sqlite", func(t testing.TB) string { return filepath.Join(t.TempDir(), "hoist.db") }},
	{"postgres", func(t testing.TB) string { return testenv.Postgres(t) }},
}

// forEachDB runs fn once against a fresh SQLite file and once against a fresh
// Postgres database.
func forEachDB(t *testing.T, fn func(t *testing.T, s *Store, clock *fakeClock)) {
	t.Helper()
	for _, c := range dbCases {
		t.Run(c.name, func(t *testing.T) {
			clock := newFakeClock()
			s := openTest(t, c.dsn(t), Options{Now: clock.Now, SecretKey: testKey})
			fn(t, s, clock)
		})
	}
}

// forEachDSN runs fn with a fresh DSN of each database.
func forEachDSN(t *testing.T, fn func(t *testing.T, dsn string)) {
	t.Helper()
	for _, c := range dbCases {
		t.Run(c.name, func(t *testing.T) { fn(t, c.dsn(t)) })
	}
}

func openTest(t testing.TB, dsn string, opts Options) *Store {
	t.Helper()
	s, err := Open(context.Background(), dsn, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func modelType(m any) reflect.Type { return reflect.TypeOf(m).Elem() }
