package e2e

import (
	"debug/elf"
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
// as its own runner inside the job's container. Built with cgo (what `go
// build` does where a C compiler is installed) it is dynamically linked and
// runs there through this host's ELF interpreter.
func TestOneBinary_plainBuildRunsTheQuickstart(t *testing.T) {
	spec, err := os.ReadFile(filepath.Join("testdata", "quickstart", "hello.dstack.yml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		cgo     string
		dynamic bool
	}{
		{"static", "CGO_ENABLED=0", false},
		{"dynamic", "CGO_ENABLED=1", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			exe := buildHoistAlone(t, tc.cgo)
			if got := isDynamic(t, exe); got != tc.dynamic {
				t.Fatalf("%s: dynamically linked = %v, want %v", tc.cgo, got, tc.dynamic)
			}
			r := newRepo(t)
			r.write("hello.dstack.yml", string(spec))
			sha := r.commit("quickstart")
			s := startServerExe(t, exe, r.dir)
			s.waitRun("hello", sha, "done", 90*time.Second)
			if got := s.logs("hello"); !strings.HasPrefix(got, "hello from hoist\n") {
				t.Fatalf("logs = %q, want the quickstart's output", got)
			}
		})
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

// isDynamic reports whether the executable has an ELF interpreter.
func isDynamic(t *testing.T, exe string) bool {
	t.Helper()
	f, err := elf.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return true
		}
	}
	return false
}
