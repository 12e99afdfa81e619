package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestOneBinary_plainBuildRunsTheQuickstart builds hoist alone, with a plain
// `go build ./cmd/hoist` (no task, no tags, no hoist-shim or hoist-runner
// anywhere), and runs the quickstart task to done: the hoist binary serves
// as its own runner inside the job's container.
func TestOneBinary_plainBuildRunsTheQuickstart(t *testing.T) {
	exe := buildHoistAlone(t, "CGO_ENABLED=0")
	spec, err := os.ReadFile(filepath.Join("testdata", "quickstart", "hello.dstack.yml"))
	if err != nil {
		t.Fatal(err)
	}
	r := newRepo(t)
	r.write("hello.dstack.yml", string(spec))
	sha := r.commit("quickstart")
	s := startServerExe(t, exe, r.dir)
	s.waitRun("hello", sha, "done", 90*time.Second)
	if got := s.logs("hello"); !strings.HasPrefix(got, "hello from hoist\n") {
		t.Fatalf("logs = %q, want the quickstart's output", got)
	}
}

// buildHoistAlone builds ./cmd/hoist into a directory of its own with the
// extra environment and returns its path.
func buildHoistAlone(t *testing.T, env ...string) string {
	t.Helper()
	exe := filepath.Join(t.TempDir(), "hoist")
	cmd := exec.Command("go", "build", "-o", exe, "./cmd/hoist")
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/hoist: %v\n%s", err, out)
	}
	return exe
}

// TestOneBinary_dynamicBuildSaysWhatToBuild builds hoist with cgo (a
// dynamically linked binary, which cannot be the runner inside a job's
// container): the task's run does not silently fail for "no fleets", the
// local instance's error names what to build.
func TestOneBinary_dynamicBuildSaysWhatToBuild(t *testing.T) {
	exe := buildHoistAlone(t, "CGO_ENABLED=1")
	r := newRepo(t)
	r.write("hello.dstack.yml", task("hello", "  - echo hello\n"))
	r.commit("hello")
	s := startServerExe(t, exe, r.dir)
	want := "CGO_ENABLED=0 go build ./cmd/hoist"
	waitFor(t, 60*time.Second, func() string { return "an instance error naming " + want }, func() bool {
		_, body := s.do("GET", "/api/v1/instances", nil)
		return strings.Contains(string(body), want)
	})
}
