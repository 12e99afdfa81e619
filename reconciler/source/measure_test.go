package source

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"
	"time"
)

// Latency and cost measurements, run with
//
//	go test -run '^$' -bench . -benchtime 20x ./reconciler/source/
//
// They report the median and the worst latency of the iterations as
// custom metrics; ns/op includes the work of making the change.

// latencies collects per-iteration durations and reports them.
type latencies []time.Duration

func (l latencies) report(b *testing.B, unit string) {
	if len(l) == 0 {
		return
	}
	sort.Slice(l, func(i, j int) bool { return l[i] < l[j] })
	b.ReportMetric(float64(l[len(l)/2].Microseconds())/1000, "median-ms-"+unit)
	b.ReportMetric(float64(l[len(l)-1].Microseconds())/1000, "max-ms-"+unit)
}

// awaitNewRevision waits for the nudge, then reads Latest and the snapshot,
// as the revision pipeline does, until the revision differs from prev.
func awaitNewRevision(b *testing.B, src Source, prev string) (nudged time.Time, rev Revision) {
	for {
		if !waitNudge(src, 10*time.Second) {
			b.Fatal("no nudge")
		}
		nudged = time.Now()
		rev = latest(b, src)
		if rev.ID != prev {
			snap, err := src.Checkout(context.Background(), rev)
			if err != nil {
				b.Fatal(err)
			}
			snap.Close()
			return nudged, rev
		}
	}
}

// BenchmarkLocalGitCommitToNudge measures a git CLI commit in a local
// repository to the nudge (and to a checked-out snapshot).
func BenchmarkLocalGitCommitToNudge(b *testing.B) {
	requireGit(b)
	dir := b.TempDir()
	gitCmd(b, dir, "init", "-q", "-b", "main")
	for i := range 200 {
		writeFiles(b, dir, map[string]string{fmt.Sprintf("specs/s%03d.dstack.yml", i): "type: task\nname: t\n"})
	}
	gitCmd(b, dir, "add", "-A")
	gitCmd(b, dir, "commit", "-q", "-m", "init")
	src := open(b, Config{Repo: dir, Path: "specs", PollInterval: time.Hour})
	runSource(b, src)
	prev := latest(b, src).ID

	var toNudge, afterExit, toSnapshot latencies
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		writeFiles(b, dir, map[string]string{"specs/s000.dstack.yml": fmt.Sprintf("type: task\nname: t%d\n", i)})
		start := time.Now()
		cmd := exec.Command("git", "commit", "-q", "-am", fmt.Sprintf("c%d", i))
		cmd.Dir, cmd.Env = dir, gitEnv()
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("git commit: %v\n%s", err, out)
		}
		exited := time.Now()
		nudged, rev := awaitNewRevision(b, src, prev)
		prev = rev.ID
		toNudge = append(toNudge, nudged.Sub(start))
		afterExit = append(afterExit, nudged.Sub(exited))
		toSnapshot = append(toSnapshot, time.Since(start))
	}
	b.StopTimer()
	toNudge.report(b, "commit-start-to-nudge")
	afterExit.report(b, "commit-exit-to-nudge")
	toSnapshot.report(b, "commit-start-to-snapshot")
}

// BenchmarkDirWriteToNudge measures a file write in dev mode to the nudge
// (and to a snapshot).
func BenchmarkDirWriteToNudge(b *testing.B) {
	dir := b.TempDir()
	for i := range 200 {
		writeFiles(b, dir, map[string]string{fmt.Sprintf("s%03d.dstack.yml", i): "type: task\nname: t\n"})
	}
	src := open(b, Config{Repo: dir, PollInterval: time.Hour})
	runSource(b, src)
	prev := latest(b, src).ID

	var toNudge, toSnapshot latencies
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		start := time.Now()
		writeFiles(b, dir, map[string]string{"s000.dstack.yml": fmt.Sprintf("type: task\nname: t%d\n", i)})
		nudged, rev := awaitNewRevision(b, src, prev)
		prev = rev.ID
		toNudge = append(toNudge, nudged.Sub(start))
		toSnapshot = append(toSnapshot, time.Since(start))
	}
	b.StopTimer()
	toNudge.report(b, "write-to-nudge")
	toSnapshot.report(b, "write-to-snapshot")
}

// BenchmarkLatestUnchanged measures what a poll costs when nothing moved:
// a ref lookup for a local repository, one ref listing for a remote.
func BenchmarkLatestUnchanged(b *testing.B) {
	requireGit(b)
	work := newGoGitRepo(b, "main")
	files := map[string]string{}
	for i := range 200 {
		files[fmt.Sprintf("specs/s%03d.dstack.yml", i)] = "type: task\nname: t\n"
	}
	work.commit(b, "init", files)
	for i := range 50 {
		work.commit(b, fmt.Sprintf("c%d", i), map[string]string{"specs/s000.dstack.yml": fmt.Sprint(i)})
	}
	root := b.TempDir()
	bare := newBareRemote(b, root, "specs", work.dir)
	base := serveGit(b, root, nil)

	for _, c := range []struct{ name, repo string }{
		{"local", work.dir},
		{"http", base + "/specs.git"},
		{"file", "file://" + bare},
	} {
		b.Run(c.name, func(b *testing.B) {
			src := open(b, Config{Repo: c.repo, Path: "specs"})
			want := latest(b, src).ID
			for b.Loop() {
				if latest(b, src).ID != want {
					b.Fatal("revision moved")
				}
			}
		})
	}
}

// BenchmarkRemoteCheckout measures a depth-1 fetch of a 200-spec
// repository over HTTP when the ref moved (the cache is bypassed).
func BenchmarkRemoteCheckout(b *testing.B) {
	requireGit(b)
	work := newGoGitRepo(b, "main")
	files := map[string]string{}
	for i := range 200 {
		files[fmt.Sprintf("specs/s%03d.dstack.yml", i)] = fmt.Sprintf("type: task\nname: t%d\ncommands: [echo %d]\n", i, i)
	}
	work.commit(b, "init", files)
	root := b.TempDir()
	newBareRemote(b, root, "specs", work.dir)
	base := serveGit(b, root, nil)
	for _, c := range []struct{ name, cacheDir string }{{"memory", ""}, {"cache-dir", b.TempDir()}} {
		b.Run(c.name, func(b *testing.B) {
			src := open(b, Config{Repo: base + "/specs.git", Path: "specs", CacheDir: c.cacheDir}).(*remoteGit)
			rev := latest(b, src)
			b.ReportAllocs()
			for b.Loop() {
				src.mu.Lock()
				src.cache, src.order = map[string]cachedRev{}, nil
				src.mu.Unlock()
				src.trees = treeReader{}
				snap, err := src.Checkout(context.Background(), rev)
				if err != nil {
					b.Fatal(err)
				}
				snap.Close()
			}
		})
	}
}

// BenchmarkLocalGitCheckout10k measures reading a 10,000-spec revision of a
// local repository into memory, the first time and after a one-file commit.
func BenchmarkLocalGitCheckout10k(b *testing.B) {
	requireGit(b)
	dir := b.TempDir()
	gitCmd(b, dir, "init", "-q", "-b", "main")
	for i := range 10000 {
		writeFiles(b, dir, map[string]string{
			fmt.Sprintf("specs/team%02d/s%05d.dstack.yml", i%100, i): fmt.Sprintf("type: task\nname: t%d\ncommands: [echo %d]\n", i, i),
		})
	}
	gitCmd(b, dir, "add", "-A")
	gitCmd(b, dir, "commit", "-q", "-m", "init")
	gitCmd(b, dir, "gc", "-q")
	src := open(b, Config{Repo: dir, Path: "specs"})
	rev := latest(b, src)
	b.Run("full", func(b *testing.B) {
		for b.Loop() {
			src.(*localGit).trees = treeReader{} // nothing to reuse
			snap, err := src.CheckoutAt(context.Background(), rev.ID)
			if err != nil {
				b.Fatal(err)
			}
			snap.Close()
		}
	})
	b.Run("after-one-file-commit", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			b.StopTimer()
			writeFiles(b, dir, map[string]string{"specs/team00/s00000.dstack.yml": fmt.Sprintf("type: task\nname: t%d\n", i)})
			gitCmd(b, dir, "commit", "-q", "-am", "one")
			b.StartTimer()
			snap, err := src.Checkout(context.Background(), latest(b, src))
			if err != nil {
				b.Fatal(err)
			}
			snap.Close()
		}
	})
}

// BenchmarkDirLatest10k measures hashing a 10,000-spec directory in dev
// mode, which every nudge costs.
func BenchmarkDirLatest10k(b *testing.B) {
	dir := b.TempDir()
	for i := range 10000 {
		writeFiles(b, dir, map[string]string{
			fmt.Sprintf("team%02d/s%05d.dstack.yml", i%100, i): fmt.Sprintf("type: task\nname: t%d\ncommands: [echo %d]\n", i, i),
		})
	}
	// Files last edited a while ago, as in a real working copy.
	past := time.Now().Add(-time.Hour)
	filepath.WalkDir(dir, func(p string, _ fs.DirEntry, _ error) error { return os.Chtimes(p, past, past) })
	src := open(b, Config{Repo: dir})
	for b.Loop() {
		latest(b, src)
	}
}
