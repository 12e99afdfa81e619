package e2e

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// trapTask is a task that answers SIGTERM by printing "got TERM" and
// exiting, and has the longest stop grace hoist gives (10 s).
func trapTask(name string) string {
	return task(name, "  - trap 'echo got TERM; exit 0' TERM\n  - echo ready\n  - while true; do sleep 1; done\n") +
		"stop_duration: 10s\n"
}

// TestStop_abortKillsWithoutTheGracefulStop stops two jobs that trap
// SIGTERM with `hoist stop`: the graceful one runs its trap (its output
// says "got TERM") and ends terminated (stopped_by_user); the one stopped
// with --abort is killed at once, so its trap never runs, and it ends
// aborted, its run terminated with reason aborted_by_user (dstack's
// `stop --abort`).
func TestStop_abortKillsWithoutTheGracefulStop(t *testing.T) {
	r := newRepo(t)
	r.write("graceful.dstack.yml", trapTask("graceful"))
	r.write("abort.dstack.yml", trapTask("abort"))
	sha := r.commit("two tasks that trap TERM")
	s := startServer(t, r.dir)
	for _, name := range []string{"graceful", "abort"} {
		s.waitRun(name, sha, "running", reconcileWait)
		waitFor(t, reconcileWait, func() string { return name + " to print ready" }, func() bool {
			return strings.Contains(s.logs(name), "ready\n")
		})
	}
	stop := func(args ...string) {
		t.Helper()
		cmd := exec.Command(filepath.Join(bin, "hoist"), append([]string{"stop", "--server", s.url, "--token", s.token}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("hoist stop %v: %v\n%s", args, err, out)
		}
	}
	stop("graceful")
	stop("abort", "--abort")

	graceful := s.waitRunCond("graceful", reconcileWait, "terminated", func(r apiRunFull) bool { return r.Status == "terminated" })
	if graceful.TerminationReason != "stopped_by_user" || graceful.Jobs[0].Status != "terminated" || graceful.Jobs[0].TerminationReason != "terminated_by_user" {
		t.Errorf("graceful stop: run %s (%s), job %s (%s); want terminated (stopped_by_user), job terminated (terminated_by_user)",
			graceful.Status, graceful.TerminationReason, graceful.Jobs[0].Status, graceful.Jobs[0].TerminationReason)
	}
	if out := s.logs("graceful"); !strings.Contains(out, "got TERM\n") {
		t.Errorf("the graceful stop's output %q lacks the trap's line: the job never got SIGTERM before its end", out)
	}

	abort := s.waitRunCond("abort", reconcileWait, "terminated", func(r apiRunFull) bool { return r.Status == "terminated" })
	if abort.TerminationReason != "aborted_by_user" || abort.Jobs[0].Status != "aborted" || abort.Jobs[0].TerminationReason != "aborted_by_user" {
		t.Errorf("abort: run %s (%s), job %s (%s); want terminated (aborted_by_user), job aborted (aborted_by_user)",
			abort.Status, abort.TerminationReason, abort.Jobs[0].Status, abort.Jobs[0].TerminationReason)
	}
	if out := s.logs("abort"); out != "ready\n" {
		t.Errorf("the aborted job's output %q, want only %q: its TERM trap ran, so it was not killed at once", out, "ready\n")
	}
}
