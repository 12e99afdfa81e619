package reconciler

import (
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"hoist/reconciler/plan"
	"hoist/reconciler/source"
	"hoist/schema"
)

// tableRounds is how many times each BenchmarkTable_ of this package
// measures hoist and its reference, alternately; the medians are reported.
const tableRounds = 5

// BenchmarkTable_plan10kCold validates and plans the 10,000-spec
// repository at the head of a local Git repository, read through the Git
// source as the daemon reads it, with nothing memoized (a new source, the
// schema compiled anew, no field verdicts), against a store holding their
// state; the reference reads the same 10,000 files of the work tree. Run
// with -benchtime 1x; go tool task bench prints it in the table.
func BenchmarkTable_plan10kCold(b *testing.B) { benchmarkTablePlan(b, "cold") }

// BenchmarkTable_plan10kWarm re-plans the unchanged head: the daemon's
// common case. Run with -benchtime 1x.
func BenchmarkTable_plan10kWarm(b *testing.B) { benchmarkTablePlan(b, "warm") }

// BenchmarkTable_replanOneFileCommit plans the head after a commit that
// changed one of the 10,000 files (one replace): the checkout of the new
// commit and the plan are timed, not `git commit`. Run with -benchtime 1x.
func BenchmarkTable_replanOneFileCommit(b *testing.B) { benchmarkTablePlan(b, "oneFile") }

func benchmarkTablePlan(b *testing.B, mode string) {
	r := sharedBenchRepo(b)
	ctx := context.Background()
	dir := b.TempDir()
	git := func(args ...string) {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
			"GIT_AUTHOR_NAME=bench", "GIT_AUTHOR_EMAIL=bench@localhost", "GIT_COMMITTER_NAME=bench", "GIT_COMMITTER_EMAIL=bench@localhost")
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("init", "-q", "-b", "main")
	for name, f := range r.fsys {
		if err := os.WriteFile(filepath.Join(dir, name), f.Data, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	git("add", "-A")
	git("commit", "-q", "-m", "10,000 specs")
	openSource := func() source.Source {
		src, err := source.Open(ctx, source.Config{Repo: dir})
		if err != nil {
			b.Fatal(err)
		}
		return src
	}
	src := openSource()
	planHead := func() (plan.Plan, error) {
		rev, err := src.Latest(ctx)
		if err != nil {
			return plan.Plan{}, err
		}
		snap, err := src.Checkout(ctx, rev)
		if err != nil {
			return plan.Plan{}, err
		}
		defer snap.Close()
		return r.c.PlanFS(ctx, snap.FS)
	}
	if _, err := planHead(); err != nil { // the previous revision
		b.Fatal(err)
	}
	var hoist, ref []time.Duration
	for i := range tableRounds {
		switch mode {
		case "cold":
			src = openSource()
			schema.DropFieldCache()
			schema.DropCachedValidators()
			schema.DropFileCache()
		case "oneFile":
			name, spec := benchSpec(0, i+1)
			if err := os.WriteFile(filepath.Join(dir, name), []byte(spec), 0o644); err != nil {
				b.Fatal(err)
			}
			git("commit", "-q", "-am", "one file")
		}
		start := time.Now()
		p, err := planHead()
		hoist = append(hoist, time.Since(start))
		if err != nil {
			b.Fatal(err)
		}
		want := 0
		if mode == "oneFile" {
			want = 1
		}
		if n := p.Count(plan.Replace); n != want || p.Count(plan.Create) != 0 {
			b.Fatalf("%s: %d replaces, %d creates; want %d replaces", mode, n, p.Count(plan.Create), want)
		}
		start = time.Now()
		if n := scanFiles(b, dir); n != len(r.fsys) {
			b.Fatalf("the scan read %d files, want %d", n, len(r.fsys))
		}
		ref = append(ref, time.Since(start))
	}
	b.ReportMetric(medianMS(hoist), "hoist-ms")
	b.ReportMetric(medianMS(ref), "ref-ms")
}

// scanFiles reads every regular file under dir but .git, as the plainest
// loader would, and returns how many it read.
func scanFiles(b *testing.B, dir string) int {
	n := 0
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".git" {
			return fs.SkipDir
		}
		if !d.Type().IsRegular() {
			return nil
		}
		if _, err := os.ReadFile(path); err != nil {
			return err
		}
		n++
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return n
}

// medianMS is the median of ds in milliseconds.
func medianMS(ds []time.Duration) float64 {
	s := slices.Clone(ds)
	slices.Sort(s)
	return float64(s[len(s)/2]) / float64(time.Millisecond)
}
