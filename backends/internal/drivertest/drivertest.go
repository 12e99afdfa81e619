package drivertest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"hoist/backends"
	"hoist/backends/internal/agentbin"
	"hoist/backends/offers"
	"hoist/e2e/cloudsim/sim"
	"hoist/e2e/testenv"
	"hoist/store"
)

// Main runs a driver package's tests and removes the agents agentbin built
// for them; a package's TestMain calls it.
func Main(m *testing.M) {
	code := m.Run()
	agentbin.Cleanup()
	os.Exit(code)
}

// Records returns the records of a fresh store (SQLite, encrypted) in the
// test's temp dir, what cmd/hoist hands a driver.
func Records(t testing.TB) backends.Records {
	t.Helper()
	st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "hoist.db"),
		store.Options{SecretKey: []byte("0123456789abcdef0123456789abcdef")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// Deps are a factory's dependencies for a test: records recs, the embedded
// catalog, the agents built for the test and a state dir in the test's
// temp dir.
func Deps(t testing.TB, recs backends.Records) backends.Deps {
	t.Helper()
	cat, err := offers.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	return backends.Deps{
		StateDir: t.TempDir(),
		Records:  recs,
		Agents:   agentbin.Agents,
		Catalog:  func() *offers.Catalog { return cat },
	}
}

// Config returns the simulator's backend entry as the server passes it to
// the driver of type typ (named typ): every key but type in Options, with
// the changes of edit (if not nil) applied to a copy.
func Config(t testing.TB, typ string, entry map[string]any, edit func(map[string]any)) backends.Config {
	t.Helper()
	opts := map[string]any{}
	for k, v := range entry {
		if k != "type" {
			opts[k] = v
		}
	}
	if edit != nil {
		edit(opts)
	}
	raw, err := json.Marshal(opts)
	if err != nil {
		t.Fatal(err)
	}
	return backends.Config{Name: typ, Type: typ, Options: raw}
}

// StartSim starts the cloud simulator with providers in the test's
// process. Disks a test left attached lose their loop devices and device
// links before the simulator stops.
func StartSim(t testing.TB, providers ...sim.Provider) *testenv.CloudSim {
	t.Helper()
	c := testenv.StartCloudSim(t, providers...)
	t.Cleanup(func() {
		if err := c.Sim().DetachAllDisks(); err != nil {
			t.Errorf("detach disks: %v", err)
		}
	})
	return c
}

// PerInstance renders the API calls made between two counts by operation
// (the simulator's Stats), divided by the n instances they served: the
// total and each operation's share, for the measure tests' logs.
func PerInstance(before, after map[string]int, n int) string {
	ops := make([]string, 0, len(after))
	total := 0
	for op, c := range after {
		if c-before[op] > 0 {
			ops = append(ops, op)
			total += c - before[op]
		}
	}
	sort.Strings(ops)
	s := fmt.Sprintf("%.1f total", float64(total)/float64(n))
	for _, op := range ops {
		s += fmt.Sprintf(", %s %.2f", op, float64(after[op]-before[op])/float64(n))
	}
	return s
}
