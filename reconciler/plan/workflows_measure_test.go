package plan_test

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"syscall"
	"testing"
	"testing/fstest"
	"time"

	"hoist/reconciler/plan"
	"hoist/schema"
)

// wideProviderFile holds a CUE provider generating stages × width jobs:
// job i of stage s runs after job i of stage s-1 (lanes) or after every
// job of stage s-1 (full). The schema's and the plan's measurements load
// the same one.
const wideProviderFile = "../../schema/testdata/measure/wide-providers.yaml"

// wideProvider reads wideProviderFile.
func wideProvider(tb testing.TB) []byte {
	tb.Helper()
	b, err := os.ReadFile(wideProviderFile)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// wideRevision loads a revision of one workflow whose CUE provider
// generates stages × width jobs, and a cloud fleet that grows for them
// (so that each job is priced).
func wideRevision(tb testing.TB, stages, width int, full bool) []schema.Resource {
	tb.Helper()
	d, err := schema.Load(fstest.MapFS{
		schema.ProvidersFile: {Data: wideProvider(tb)},
		schema.WorkflowsFile: {Data: []byte(fmt.Sprintf("workflows:\n  - name: wide\n    provider: wide\n    stages: %d\n    width: %d\n    full: %v\n", stages, width, full))},
		"fleet.dstack.yml":   {Data: []byte("type: fleet\nname: cloud\nnodes: 0..8\nbackends: [aws]\n")},
	})
	if err != nil {
		tb.Fatalf("load: %v", err)
	}
	if len(d.Resources) != 2 {
		tb.Fatalf("got %d resources, want the fleet and the workflow", len(d.Resources))
	}
	if n := len(d.Resources[1].Spec.(*schema.Workflow).Jobs); n != stages*width {
		tb.Fatalf("the provider generated %d jobs, want %d", n, stages*width)
	}
	return d.Resources
}

// flatPrice prices every job's offer at $0.5/h, as if one offer matched.
func flatPrice(schema.Resources, schema.Profile) (float64, bool) { return 0.5, true }

// benchmarkComputeWorkflow plans a 1,000-job workflow against an empty
// observed state.
func benchmarkComputeWorkflow(b *testing.B, full bool) {
	desired := wideRevision(b, 10, 100, full)
	b.ReportAllocs()
	for b.Loop() {
		p := plan.Compute(desired, plan.Observed{}, genNow, plan.Options{Estimate: flatPrice})
		if len(p.Steps) != 2 || len(p.Steps[1].Jobs) != 1000 {
			b.Fatalf("plan: %+v", p.Steps)
		}
	}
}

// BenchmarkCompute_workflow1000Lanes plans 10 stages × 100 jobs, each
// after the same lane's job of the previous stage.
func BenchmarkCompute_workflow1000Lanes(b *testing.B) { benchmarkComputeWorkflow(b, false) }

// BenchmarkCompute_workflow1000Full plans 10 stages × 100 jobs, each
// after all 100 jobs of the previous stage.
func BenchmarkCompute_workflow1000Full(b *testing.B) { benchmarkComputeWorkflow(b, true) }

// processCPU is the process's user and system CPU time.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestMeasure_workflow1000Plan prints what planning a CUE provider's
// 1,000 jobs costs: load (validate and expand; the first load of the
// process is cold, compiling the validators), then plan.Compute against
// an empty observed state with a flat price, and the plan's JSON size,
// for lanes and full stages. Run with HOIST_MEASURE=1, alone in its
// process for the cold figure.
func TestMeasure_workflow1000Plan(t *testing.T) {
	if os.Getenv("HOIST_MEASURE") == "" {
		t.Skip("set HOIST_MEASURE=1 to measure")
	}
	measure := func(f func()) (cpu, wall time.Duration, allocs, bytes uint64) {
		runtime.GC()
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		c0, w0 := processCPU(), time.Now()
		f()
		wall, cpu = time.Since(w0), processCPU()-c0
		runtime.ReadMemStats(&m1)
		return cpu, wall, m1.Mallocs - m0.Mallocs, m1.TotalAlloc - m0.TotalAlloc
	}
	line := func(what string, cpu, wall time.Duration, allocs, bytes uint64, extra string) {
		t.Logf("MEASURE %-34s cpu=%-10v wall=%-10v allocs=%-9d alloc-bytes=%-10d %s", what,
			cpu.Round(time.Microsecond), wall.Round(time.Microsecond), allocs, bytes, extra)
	}
	t.Logf("MEASURE workflow of 1,000 jobs from a CUE provider (10 stages × 100), GOMAXPROCS=%d", runtime.GOMAXPROCS(0))
	for _, shape := range []struct {
		name string
		full bool
	}{{"lanes", false}, {"full", true}} {
		var desired []schema.Resource
		for i, phase := range []string{"cold", "warm"} {
			if i == 0 && shape.full {
				phase = "warm validators"
			}
			cpu, wall, allocs, bytes := measure(func() { desired = wideRevision(t, 10, 100, shape.full) })
			line(shape.name+" load "+phase, cpu, wall, allocs, bytes, fmt.Sprintf("workflow JSON %d bytes", len(desired[1].JSON)))
		}
		var p plan.Plan
		for range 3 {
			cpu, wall, allocs, bytes := measure(func() {
				p = plan.Compute(desired, plan.Observed{}, genNow, plan.Options{Estimate: flatPrice})
			})
			line(shape.name+" plan.Compute", cpu, wall, allocs, bytes, fmt.Sprintf("%d jobs planned, cost after $%.0f/h", len(p.Steps[1].Jobs), p.CostAfter))
		}
		var js []byte
		cpu, wall, allocs, bytes := measure(func() {
			var err error
			if js, err = json.Marshal(p); err != nil {
				t.Fatal(err)
			}
		})
		line(shape.name+" plan JSON", cpu, wall, allocs, bytes, fmt.Sprintf("plan JSON %d bytes", len(js)))
	}
}
