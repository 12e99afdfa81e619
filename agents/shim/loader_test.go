package shim

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestLaunchFor_dynamicBinaryRunsThroughItsInterpreter checks how a
// container starts a dynamically linked runner (here /bin/sh, linked
// against the host's C library): its interpreter and every library it needs
// are mounted read-only, and the interpreter runs it with that library path.
func TestLaunchFor_dynamicBinaryRunsThroughItsInterpreter(t *testing.T) {
	l, err := launchFor("/bin/sh")
	if err != nil {
		t.Fatal(err)
	}
	if len(l.entrypoint) != 4 || !strings.HasPrefix(l.entrypoint[0], RunnerLibDir+"/ld-") ||
		!slices.Equal(l.entrypoint[1:], []string{"--library-path", RunnerLibDir, RunnerPath}) {
		t.Fatalf("entrypoint = %q, want the interpreter in %s running %s", l.entrypoint, RunnerLibDir, RunnerPath)
	}
	var libc bool
	for _, b := range l.binds {
		if !strings.HasSuffix(b, ":ro") || !strings.Contains(b, ":"+RunnerLibDir+"/") {
			t.Errorf("bind %q, want a read-only mount into %s", b, RunnerLibDir)
		}
		libc = libc || strings.Contains(b, RunnerLibDir+"/libc.so")
	}
	if !libc || len(l.binds) < 2 {
		t.Errorf("binds = %q, want the interpreter and the C library", l.binds)
	}
}

// TestLaunchFor_staticBinaryIsTheEntrypoint checks that a static runner
// (the tests' own) is started directly, with nothing else mounted.
func TestLaunchFor_staticBinaryIsTheEntrypoint(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "hoist-runner")
	cmd := exec.Command("go", "build", "-o", bin, "hoist/cmd/hoist-runner")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	l, err := launchFor(bin)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(l.entrypoint, []string{RunnerPath}) || len(l.binds) != 0 {
		t.Fatalf("launch = %+v, want the runner alone", l)
	}
}
