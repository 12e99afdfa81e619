package reconciler

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"testing/fstest"
	"time"

	"hoist/backends"
	"hoist/backends/fake"
	"hoist/reconciler/plan"
	"hoist/reconciler/source"
	"hoist/schema"
	"hoist/store"
)

// benchSpec writes spec i of a generated repository: 40% tasks, 30%
// services, 10% dev environments, 10% fleets, 5% volumes, 5% gateways.
func benchSpec(i, variant int) (string, string) {
	name := fmt.Sprintf("r%05d", i)
	var src string
	switch m := i % 20; {
	case m < 8:
		src = fmt.Sprintf("type: task\nname: %s\nimage: busybox\ncommands:\n  - echo %d\n  - sleep 1\nenv:\n  A: \"%d\"\nresources:\n  cpu: 2..\n  memory: 4GB..\nretry:\n  on_events: [error]\n  duration: 1h\n", name, variant, i)
	case m < 14:
		src = fmt.Sprintf("type: service\nname: %s\nimage: busybox\nport: 8000\nreplicas: %d\ncommands:\n  - busybox httpd -f -p 8000 # %d\n", name, 1+i%2, variant)
	case m < 16:
		src = fmt.Sprintf("type: dev-environment\nname: %s\nide: vscode\ninactivity_duration: %dh\n", name, 1+variant%3)
	case m < 18:
		src = fmt.Sprintf("type: fleet\nname: %s\nnodes: 0..%d\nbackends: [aws, gcp]\nidle_duration: 1h\n", name, 1+variant%3)
	case m < 19:
		src = fmt.Sprintf("type: volume\nname: %s\nbackend: aws\nregion: us-east-1\nsize: %dGB\n", name, 100+variant)
	default:
		src = fmt.Sprintf("type: gateway\nname: %s\nbackend: aws\nregion: us-east-1\ndomain: d%d.example.com\n", name, variant)
	}
	return name + ".dstack.yml", src
}

// benchRepo is a store holding the applied state of n generated specs.
type benchRepo struct {
	c    *Controller
	fsys fstest.MapFS
}

var (
	benchOnce   sync.Once
	benchShared *benchRepo
	benchDir    string
)

// sharedBenchRepo builds the 10,000-spec store once for every benchmark of
// the run (it takes a while); TestMain removes it.
func sharedBenchRepo(b *testing.B) *benchRepo {
	b.Helper()
	benchOnce.Do(func() {
		dir, err := os.MkdirTemp("", "hoist-bench-")
		if err != nil {
			b.Fatal(err)
		}
		benchDir = dir
		benchShared = newBenchRepo(b, dir, 10000)
	})
	if benchShared == nil {
		b.Fatal("bench repository setup failed")
	}
	// Undo what a previous benchmark changed.
	name, src := benchSpec(0, 0)
	benchShared.fsys[name] = &fstest.MapFile{Data: []byte(src)}
	return benchShared
}

func TestMain(m *testing.M) {
	code := m.Run()
	if benchShared != nil {
		benchShared.c.st.Close()
	}
	if benchDir != "" {
		os.RemoveAll(benchDir)
	}
	os.Exit(code)
}

// cpuTime is the process's user and system CPU time: the machines these
// benchmarks run on are shared, so wall time alone misleads.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU reports CPU time per op since start.
func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(cpuTime()-start)/float64(b.N)/1e6, "cpu-ms/op")
}

func newBenchRepo(b *testing.B, dir string, n int) *benchRepo {
	b.Helper()
	ctx := context.Background()
	fsys := fstest.MapFS{}
	for i := 0; i < n; i++ {
		name, src := benchSpec(i, 0)
		fsys[name] = &fstest.MapFile{Data: []byte(src)}
	}
	st, err := store.Open(ctx, filepath.Join(dir, "hoist.db"), store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	// The generated gateways' backend runs gateways, or validation refuses them.
	c, err := New(Config{Owner: "bench"}, Deps{Store: st, Source: nopSource{},
		Backends: map[string]backends.Backend{"aws": fake.New(fake.Config{Name: "aws"})}})
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	desired, err := schema.Load(fsys)
	if err != nil {
		b.Fatal(err)
	}
	p := plan.Compute(desired.Resources, plan.Observed{}, time.Now(), plan.Options{})
	if err := c.apply(ctx, benchRev, p); err != nil {
		b.Fatal(err)
	}
	b.Logf("applied %d specs in %s", n, time.Since(start).Round(time.Millisecond))
	return &benchRepo{c: c, fsys: fsys}
}

// BenchmarkPlanFS_10k plans a repository of 10,000 specs against a store
// holding their state (goal ≤ 2 s): schema.Load, observe and Compute.
func BenchmarkPlanFS_10k(b *testing.B) {
	r := sharedBenchRepo(b)
	ctx := context.Background()
	b.ResetTimer()
	cpu := cpuTime()
	defer reportCPU(b, cpu)
	for b.Loop() {
		p, err := r.c.PlanFS(ctx, r.fsys)
		if err != nil {
			b.Fatal(err)
		}
		if p.Changes() {
			b.Fatalf("the applied repository plans changes: %d creates %d replaces", p.Count(plan.Create), p.Count(plan.Replace))
		}
	}
}

// BenchmarkPlanFS_10kOneFileCommit re-plans the repository after a commit
// that changes one file (goal ≤ 100 ms).
func BenchmarkPlanFS_10kOneFileCommit(b *testing.B) {
	r := sharedBenchRepo(b)
	ctx := context.Background()
	if _, err := r.c.PlanFS(ctx, r.fsys); err != nil { // the previous revision
		b.Fatal(err)
	}
	i := 0
	b.ResetTimer()
	cpu := cpuTime()
	defer reportCPU(b, cpu)
	for b.Loop() {
		i++
		name, src := benchSpec(0, i)
		r.fsys[name] = &fstest.MapFile{Data: []byte(src)}
		p, err := r.c.PlanFS(ctx, r.fsys)
		if err != nil {
			b.Fatal(err)
		}
		if n := p.Count(plan.Replace); n != 1 {
			b.Fatalf("one changed task plans %d replaces", n)
		}
	}
}

// BenchmarkObserve_10k measures observing the 10,000-spec store for an
// unchanged revision, as sync and plan do (observeFor with the desired
// specs, so that unchanged specs are not read back).
func BenchmarkObserve_10k(b *testing.B) {
	r := sharedBenchRepo(b)
	ctx := context.Background()
	desired, err := schema.Load(r.fsys)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	cpu := cpuTime()
	defer reportCPU(b, cpu)
	for b.Loop() {
		if _, err := r.c.observeFor(ctx, desired.Resources); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCompute_10k measures plan.Compute alone on 10,000 in-sync specs.
func BenchmarkCompute_10k(b *testing.B) {
	r := sharedBenchRepo(b)
	ctx := context.Background()
	desired, err := schema.Load(r.fsys)
	if err != nil {
		b.Fatal(err)
	}
	obs, err := r.c.observeFor(ctx, desired.Resources)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	cpu := cpuTime()
	defer reportCPU(b, cpu)
	for b.Loop() {
		plan.Compute(desired.Resources, obs, time.Now(), plan.Options{})
	}
}

// BenchmarkLoad_10k measures schema.Load alone on 10,000 specs.
func BenchmarkLoad_10k(b *testing.B) {
	fsys := fstest.MapFS{}
	for i := 0; i < 10000; i++ {
		name, src := benchSpec(i, 0)
		fsys[name] = &fstest.MapFile{Data: []byte(src)}
	}
	b.ResetTimer()
	cpu := cpuTime()
	defer reportCPU(b, cpu)
	for b.Loop() {
		if _, err := schema.Load(fsys); err != nil {
			b.Fatal(err)
		}
	}
}

var benchRev = source.Revision{ID: "bench"}

// nopSource is a source that never changes; the benchmarks plan file
// systems they build themselves.
type nopSource struct{}

func (nopSource) Describe() string { return "bench" }
func (nopSource) Latest(context.Context) (source.Revision, error) {
	return benchRev, nil
}
func (nopSource) Checkout(context.Context, source.Revision) (*source.Snapshot, error) {
	return nil, source.ErrRevisionNotFound
}
func (nopSource) CheckoutAt(context.Context, string) (*source.Snapshot, error) {
	return nil, source.ErrRevisionNotFound
}
func (nopSource) Changes() <-chan struct{}  { return nil }
func (nopSource) Trigger()                  {}
func (nopSource) Run(context.Context) error { return nil }

// BenchmarkObserveQueries_10k compares reading every resource and run row
// whole (ListResources, ListRuns) with the small-column read observe makes
// (store.ObservedState: the resources and the newest run of each name).
func BenchmarkObserveQueries_10k(b *testing.B) {
	r := sharedBenchRepo(b)
	ctx := context.Background()
	st := r.c.st
	b.Run("ListResources", func(b *testing.B) {
		cpu := cpuTime()
		defer reportCPU(b, cpu)
		for b.Loop() {
			if _, err := st.ListResources(ctx, store.ResourceFilter{Project: store.DefaultProject}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("ListRuns", func(b *testing.B) {
		cpu := cpuTime()
		defer reportCPU(b, cpu)
		for b.Loop() {
			if _, err := st.ListRuns(ctx, store.RunFilter{Project: store.DefaultProject, Limit: 1 << 30}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("ObservedState", func(b *testing.B) {
		cpu := cpuTime()
		defer reportCPU(b, cpu)
		for b.Loop() {
			obs, err := st.ObservedState(ctx, store.DefaultProject)
			if err != nil {
				b.Fatal(err)
			}
			if len(obs.LatestRuns) < 8000 {
				b.Fatalf("%d latest runs", len(obs.LatestRuns))
			}
		}
	})
}

// BenchmarkLoadFiles_oneOf10k measures validating only the one changed file
// of a 10,000-spec revision: what an incremental load would pay per commit.
func BenchmarkLoadFiles_oneOf10k(b *testing.B) {
	fsys := fstest.MapFS{}
	for i := 0; i < 10000; i++ {
		name, src := benchSpec(i, 0)
		fsys[name] = &fstest.MapFile{Data: []byte(src)}
	}
	i := 0
	cpu := cpuTime()
	defer reportCPU(b, cpu)
	for b.Loop() {
		i++
		name, src := benchSpec(0, i)
		fsys[name] = &fstest.MapFile{Data: []byte(src)}
		if _, err := schema.LoadFiles(fsys, []string{name}); err != nil {
			b.Fatal(err)
		}
	}
}
