package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"

	"hoist/e2e/testenv"
)

// TestSkeleton_gitCommitsDriveRuns is the walking skeleton as a user runs
// it: commits to a real Git repository, a real `hoist serve`, real Docker.
func TestSkeleton_gitCommitsDriveRuns(t *testing.T) {
	r := newRepo(t)
	r.write("hello.dstack.yml", task("hello", "  - echo hello\n"))
	sha1 := r.commit("add hello")
	s := startServer(t, r.dir)

	// Commit → done, with its output in the API.
	run := s.waitRun("hello", sha1, "done", 60*time.Second)
	if len(run.Jobs) != 1 || run.Jobs[0].Status != "done" || run.Jobs[0].ExitCode == nil || *run.Jobs[0].ExitCode != 0 {
		t.Fatalf("run jobs = %+v, want one done job with exit code 0", run.Jobs)
	}
	if got := s.logs("hello"); got != "hello\n" {
		t.Fatalf("logs = %q, want %q", got, "hello\n")
	}
	if st := s.sync(); st.Status != "synced" || st.Revision != sha1 {
		t.Fatalf("sync = %+v, want synced at %s", st, sha1)
	}
	// The revision keeps the plan it produced.
	var rev struct {
		Plan *struct {
			Changes []struct{ Action, Kind, Name string } `json:"changes"`
		} `json:"plan"`
	}
	if code := s.getJSON("/api/v1/revisions/"+sha1, &rev); code != 200 || rev.Plan == nil ||
		len(rev.Plan.Changes) != 1 || rev.Plan.Changes[0].Action != "create" || rev.Plan.Changes[0].Name != "hello" {
		t.Fatalf("GET /api/v1/revisions/%s = %d %+v, want the plan that created hello", sha1, code, rev.Plan)
	}

	// Changing the file replaces the run.
	r.write("hello.dstack.yml", task("hello", "  - echo changed\n  - exit 3\n"))
	sha2 := r.commit("change hello")
	run = s.waitRun("hello", sha2, "failed", 60*time.Second)
	if run.Jobs[0].ExitCode == nil || *run.Jobs[0].ExitCode != 3 {
		t.Fatalf("replaced run's job = %+v, want exit code 3", run.Jobs[0])
	}
	if got := s.logs("hello"); got != "changed\n" {
		t.Fatalf("logs after change = %q", got)
	}

	// A broken commit leaves everything live as it is and says where.
	r.write("broken.dstack.yml", "type: task\nname: broken\nimage: x\ncomands:\n  - echo\n")
	bad := r.commit("broken spec")
	waitFor(t, 30*time.Second, func() string { return "sync to be invalid" }, func() bool { return s.sync().Status == "invalid" })
	st := s.sync()
	if st.Revision != sha2 || st.LatestRevision != bad {
		t.Fatalf("sync = %+v: the applied revision must stay %s", st, sha2)
	}
	if len(st.Errors) == 0 || !strings.HasPrefix(st.Errors[0], "broken.dstack.yml:4:1: ") || !strings.Contains(st.Errors[0], "commands") {
		t.Fatalf("errors = %q, want broken.dstack.yml:4:1 with a did-you-mean", st.Errors)
	}
	// The fix syncs.
	r.write("broken.dstack.yml", task("broken", "  - echo fixed\n"))
	fixed := r.commit("fix spec")
	s.waitRun("broken", fixed, "done", 60*time.Second)

	// Deleting the file of a running task stops it and marks it removed.
	r.write("long.dstack.yml", task("long", "  - echo start\n  - sleep 300\n"))
	sha3 := r.commit("add long")
	s.waitRun("long", sha3, "running", 60*time.Second)
	waitFor(t, 10*time.Second, func() string { return "long to print start" }, func() bool { return s.logs("long") == "start\n" })
	if err := os.Remove(r.dir + "/long.dstack.yml"); err != nil {
		t.Fatal(err)
	}
	r.commit("remove long")
	run = s.waitRun("long", sha3, "terminated", 60*time.Second)
	if !run.RemovedFromGit {
		t.Fatalf("run long = %+v, want removed_from_git", run)
	}

	// Restarting converges to the same state without duplicate runs.
	before := countRuns(t, s)
	s.restart()
	time.Sleep(3 * time.Second)
	s.waitRun("hello", sha2, "failed", 10*time.Second)
	if after := countRuns(t, s); after != before {
		t.Fatalf("runs after restart = %d, want %d (no duplicates)", after, before)
	}
}

func countRuns(t *testing.T, s *server) int {
	t.Helper()
	var runs []apiRun
	if code := s.getJSON("/api/v1/runs", &runs); code != 200 {
		t.Fatalf("GET /api/v1/runs: %d", code)
	}
	return len(runs)
}

// TestSkeleton_apiNeedsToken checks the open and closed routes.
func TestSkeleton_apiNeedsToken(t *testing.T) {
	r := newRepo(t)
	r.commit("empty")
	s := startServer(t, r.dir)
	for _, path := range []string{"/api/v1/runs", "/api/v1/sync", "/runs"} {
		resp, err := httpGet(s.url + path)
		if err != nil {
			t.Fatal(err)
		}
		if resp != 401 && resp != 303 && resp != 302 {
			t.Errorf("GET %s without a token = %d, want 401 or a redirect to login", path, resp)
		}
	}
}

// TestMeasure_commitToDone prints the median time from `git commit` to a
// one-line task being done, next to a bare `docker run --rm` of the same
// image in the same run. Set HOIST_MEASURE=1 to run it.
func TestMeasure_commitToDone(t *testing.T) {
	if os.Getenv("HOIST_MEASURE") == "" {
		t.Skip("measurement: set HOIST_MEASURE=1")
	}
	hoist, bare := measureCommitToDone(t, 9)
	mb, mh := median(bare), median(hoist)
	t.Logf("commit → done median %v (all %v); docker run --rm median %v (all %v); ratio %.2f×",
		mh.Round(time.Millisecond), rounded(hoist), mb.Round(time.Millisecond), rounded(bare), float64(mh)/float64(mb))
}

// BenchmarkTable_commitToDone reports the median of five commits → a
// one-line task done on the local backend, and of five bare `docker run
// --rm` of the same image and command. Run with -benchtime 1x; go tool
// task bench prints it in the table.
func BenchmarkTable_commitToDone(b *testing.B) {
	hoist, bare := measureCommitToDone(b, 5)
	b.ReportMetric(float64(median(hoist))/float64(time.Millisecond), "hoist-ms")
	b.ReportMetric(float64(median(bare))/float64(time.Millisecond), "ref-ms")
}

// measureCommitToDone times n bare `docker run --rm IMAGE echo hello`,
// then n commits of a task running the same command through a real hoist
// serve, each from its commit to the API's run being done, each started
// once the previous one's container was removed.
func measureCommitToDone(t testing.TB, n int) (hoist, bare []time.Duration) {
	t.Helper()
	image := testenv.Docker(t)
	for i := 0; i < n; i++ {
		start := time.Now()
		if out, err := exec.Command("docker", "run", "--rm", image, "echo", "hello").CombinedOutput(); err != nil {
			t.Fatalf("docker run: %v %s", err, out)
		}
		bare = append(bare, time.Since(start))
	}
	r := newRepo(t)
	r.commit("empty")
	s := startServer(t, r.dir, "--log-level", "info")
	for i := 0; i < n; i++ {
		r.write("m.dstack.yml", task("measure", fmt.Sprintf("  - echo hello %d\n", i)))
		start := time.Now()
		sha := r.commit(fmt.Sprintf("m %d", i))
		var run apiRun
		for {
			run = apiRun{}
			s.getJSON("/api/v1/runs/measure", &run)
			if run.Revision == sha && run.Status == "done" {
				break
			}
			if time.Since(start) > time.Minute {
				t.Fatalf("run measure at %s not done in a minute: %+v", sha, run)
			}
			time.Sleep(2 * time.Millisecond)
		}
		hoist = append(hoist, time.Since(start))
		// The container is removed after the run is done; start the next
		// commit from a quiet engine, as each bare docker run --rm did.
		waitFor(t, 30*time.Second, func() string { return "the task's container to be removed" }, func() bool {
			out, _ := exec.Command("docker", "ps", "-aq", "--filter", "label=hoist.installation="+s.install).Output()
			return strings.TrimSpace(string(out)) == ""
		})
	}
	return hoist, bare
}

func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func rounded(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(time.Millisecond)
	}
	return out
}
