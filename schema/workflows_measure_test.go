package schema_test

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"hoist/schema"
)

// wideProviderFile holds a CUE provider generating stages × width jobs:
// job i of stage s runs after job i of stage s-1 (lanes) or after every
// job of stage s-1 (full). The schema's and the plan's measurements load
// the same one.
const wideProviderFile = "testdata/measure/wide-providers.yaml"

// wideProvider reads wideProviderFile.
func wideProvider(tb testing.TB) []byte {
	tb.Helper()
	b, err := os.ReadFile(wideProviderFile)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// wideRepo is a revision of one workflow whose CUE provider generates
// stages × width jobs (see wideProvider).
func wideRepo(tb testing.TB, stages, width int, full bool) fstest.MapFS {
	return fstest.MapFS{
		schema.ProvidersFile: {Data: wideProvider(tb)},
		schema.WorkflowsFile: {Data: []byte(fmt.Sprintf("workflows:\n  - name: wide\n    provider: wide\n    stages: %d\n    width: %d\n    full: %v\n", stages, width, full))},
	}
}

// loadWide loads fsys and returns its one workflow's job count and
// canonical JSON size.
func loadWide(tb testing.TB, fsys fstest.MapFS) (jobs, size int, err error) {
	tb.Helper()
	d, err := schema.Load(fsys)
	if err != nil {
		return 0, 0, err
	}
	if len(d.Resources) != 1 {
		tb.Fatalf("got %d resources, want the workflow", len(d.Resources))
	}
	return len(d.Resources[0].Spec.(*schema.Workflow).Jobs), len(d.Resources[0].JSON), nil
}

// BenchmarkLoad_workflow1000Cold loads a revision whose CUE provider
// generates 1,000 jobs (10 stages × 100 lanes) with nothing compiled or
// memoized: the daemon's first load.
func BenchmarkLoad_workflow1000Cold(b *testing.B) {
	fsys := wideRepo(b, 10, 100, false)
	b.ReportAllocs()
	for b.Loop() {
		schema.DropFieldCache()
		schema.DropCachedValidators()
		if n, _, err := loadWide(b, fsys); err != nil || n != 1000 {
			b.Fatalf("load: %d jobs, %v", n, err)
		}
	}
}

// BenchmarkLoad_workflow1000Warm reloads the same revision: validators
// compiled and field verdicts memoized.
func BenchmarkLoad_workflow1000Warm(b *testing.B) {
	fsys := wideRepo(b, 10, 100, false)
	if _, _, err := loadWide(b, fsys); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if n, _, err := loadWide(b, fsys); err != nil || n != 1000 {
			b.Fatalf("load: %d jobs, %v", n, err)
		}
	}
}

// TestMeasure_workflow1000Load prints the CPU time, wall time, allocations
// and workflow JSON size of loading (validating and expanding) a CUE
// provider's 1,000 jobs, cold and warm, for lanes (each job after one job
// of the previous stage) and full stages (after all 100). Run with
// HOIST_MEASURE=1.
func TestMeasure_workflow1000Load(t *testing.T) {
	if os.Getenv("HOIST_MEASURE") == "" {
		t.Skip("set HOIST_MEASURE=1 to measure")
	}
	for _, shape := range []struct {
		name string
		full bool
	}{{"lanes (1 edge/job)", false}, {"full (100 edges/job)", true}} {
		fsys := wideRepo(t, 10, 100, shape.full)
		for _, phase := range []string{"cold", "warm", "warm"} {
			if phase == "cold" {
				schema.DropFieldCache()
				schema.DropCachedValidators()
			}
			runtime.GC()
			var m0, m1 runtime.MemStats
			runtime.ReadMemStats(&m0)
			c0, w0 := cpuTime(), time.Now()
			n, size, err := loadWide(t, fsys)
			wall, cpu := time.Since(w0), cpuTime()-c0
			runtime.ReadMemStats(&m1)
			verdict := fmt.Sprintf("%d jobs, workflow JSON %d bytes", n, size)
			if err != nil {
				verdict = "refused: " + strings.SplitN(err.Error(), "\n", 2)[0]
			}
			t.Logf("MEASURE workflow load 10×100 %-21s %-4s cpu=%-10v wall=%-10v allocs=%-9d alloc-bytes=%-10d %s (GOMAXPROCS=%d)",
				shape.name, phase, cpu.Round(time.Microsecond), wall.Round(time.Microsecond),
				m1.Mallocs-m0.Mallocs, m1.TotalAlloc-m0.TotalAlloc, verdict, runtime.GOMAXPROCS(0))
		}
	}
}
