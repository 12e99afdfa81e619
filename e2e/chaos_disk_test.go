package e2e

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"hoist/e2e/testenv"
)

// TestChaos_disk puts the server's data directory on a small tmpfs and
// fills it while a task on the local Docker backend prints numbered lines.
// The server refuses the new commit's task with a clear error in the sync
// status (the data directory is full, how many bytes are free, the
// minimum), loses none of the output it already stored, and once the
// filler is removed converges: the task's whole output is in the store
// once and in order, and the new commit's task runs. The full version
// prints more lines and keeps the disk full longer.
func TestChaos_disk(t *testing.T) {
	t.Parallel() // mostly waits: runs beside the other slow tests (harness_test.go)
	lines, full := 300, 6*time.Second
	if chaosFull() {
		lines, full = 1200, 30*time.Second
	}
	dir := testenv.Tmpfs(t, "32m")
	data := filepath.Join(dir, "data")
	r := newRepo(t)
	r.write("count.dstack.yml", task("count", fmt.Sprintf("  - i=1; while [ $i -le %d ]; do echo line-$i; i=$((i+1)); sleep 0.1; done\n", lines)))
	sha := r.commit("a task printing numbered lines")
	// Registered after the mount's cleanup, so run before it: the server
	// lets go of the tmpfs first.
	s := startServer(t, r.dir, "--data-dir", data, "--min-free-disk", "4MiB")
	s.waitRun("count", sha, "running", 2*time.Minute)
	waitFor(t, time.Minute, func() string { return "the first 20 lines of count stored" }, func() bool {
		return strings.Count(s.logs("count"), "\n") >= 20
	})

	t.Log("phase: the data directory fills up")
	filler := filepath.Join(dir, "filler")
	fill(t, filler)
	before := s.logs("count")
	r.write("after.dstack.yml", task("after", "  - echo after the disk was freed\n"))
	next := r.commit("a task committed while the disk is full")
	type syncStatus struct {
		LatestRevision string `json:"latest_revision"`
		Revision       string `json:"revision"`
		Error          string `json:"error"`
	}
	var st syncStatus
	waitFor(t, time.Minute, func() string { return fmt.Sprintf("sync refused for a full disk (last: %+v)", st) }, func() bool {
		s.do("POST", "/api/v1/sync", nil)
		st = syncStatus{}
		s.getJSON("/api/v1/sync", &st)
		return strings.Contains(st.Error, "data directory "+data+" is full") && strings.Contains(st.Error, "bytes free, below the minimum")
	})
	t.Logf("sync status while the disk is full: %s", st.Error)
	if st.Revision == next {
		t.Fatalf("revision %.8s was applied on a full disk", next)
	}
	if code, _ := s.do("GET", "/api/v1/runs/after", nil); code != 404 {
		t.Errorf("GET /api/v1/runs/after on a full disk: %d, want 404 (not submitted)", code)
	}
	// The task keeps printing while the disk stays full.
	time.Sleep(full)
	if got := s.logs("count"); !strings.HasPrefix(got, before) {
		t.Fatalf("output stored before the disk filled changed:\nbefore %q\nnow %q", before, got)
	}
	s.logMu.Lock()
	refused := strings.Count(s.log.String(), "job output not stored")
	s.logMu.Unlock()
	t.Logf("the store refused the job's output %d times while the disk was full", refused)

	t.Log("phase: the filler is removed; everything converges")
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	s.do("POST", "/api/v1/sync", nil)
	s.waitRun("after", next, "done", 2*time.Minute)
	s.waitRun("count", sha, "done", 3*time.Minute)
	var want strings.Builder
	for i := 1; i <= lines; i++ {
		fmt.Fprintf(&want, "line-%d\n", i)
	}
	if got := s.logs("count"); got != want.String() {
		t.Errorf("count's output after the disk was freed is not its %d lines once and in order:\n%s", lines, diffLines(got, want.String()))
	}
	if got := s.logs("after"); got != "after the disk was freed\n" {
		t.Errorf("after's output: %q", got)
	}
	st = syncStatus{}
	s.getJSON("/api/v1/sync", &st)
	if st.Error != "" {
		t.Errorf("sync status still says %q after the disk was freed", st.Error)
	}
}

// fill writes zeros to file until the file system is full.
func fill(t *testing.T, file string) {
	t.Helper()
	f, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("fill %s: %v", file, err)
			}
			break
		}
	}
	// The last bytes a 1 MiB write left.
	small := make([]byte, 4096)
	for {
		if _, err := f.Write(small); err != nil {
			return
		}
	}
}

// diffLines says where got departs from want, line by line.
func diffLines(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := range max(len(g), len(w)) {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return fmt.Sprintf("line %d: got %q, want %q (%d lines, want %d)", i+1, gl, wl, len(g)-1, len(w)-1)
		}
	}
	return "equal"
}
