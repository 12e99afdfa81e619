// Package agentbin builds the hoist-shim and hoist-runner binaries for the
// tests of backend drivers (static, CGO_ENABLED=0), once per test binary.
//
// Only _test.go files under backends/ import it.
package agentbin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

var (
	mu    sync.Mutex
	built = map[string]result{}
	dir   string
)

type result struct {
	shim, runner string
	err          error
}

// Build returns the paths of hoist-shim and hoist-runner built for
// linux/arch into a directory that lives as long as the test binary (removed
// by Cleanup from TestMain, or left in the OS temp dir).
func Build(t testing.TB, arch string) (shim, runner string) {
	t.Helper()
	s, r, err := build(arch)
	if err != nil {
		t.Fatal(err)
	}
	return s, r
}

// Agents is Build as a backends.AgentBinaries-shaped function.
func Agents(arch string) (string, string, error) { return build(arch) }

func build(arch string) (string, string, error) {
	mu.Lock()
	defer mu.Unlock()
	if r, ok := built[arch]; ok {
		return r.shim, r.runner, r.err
	}
	var res result
	if dir == "" {
		d, err := os.MkdirTemp("", "hoist-agents-")
		if err != nil {
			return "", "", err
		}
		dir = d
	}
	root, err := moduleRoot()
	if err != nil {
		return "", "", err
	}
	out := filepath.Join(dir, arch)
	for _, name := range []string{"hoist-shim", "hoist-runner"} {
		cmd := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(out, name), "./cmd/"+name)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
		if b, err := cmd.CombinedOutput(); err != nil {
			res.err = fmt.Errorf("build %s for %s: %v: %s", name, arch, err, b)
			built[arch] = res
			return "", "", res.err
		}
	}
	res.shim, res.runner = filepath.Join(out, "hoist-shim"), filepath.Join(out, "hoist-runner")
	built[arch] = res
	return res.shim, res.runner, nil
}

// Cleanup removes the built binaries; call it at the end of TestMain.
func Cleanup() {
	mu.Lock()
	defer mu.Unlock()
	if dir != "" {
		os.RemoveAll(dir)
	}
}

func moduleRoot() (string, error) {
	_, file, _, _ := runtime.Caller(0)
	d := filepath.Dir(file)
	for {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		parent := filepath.Dir(d)
		if parent == d || strings.TrimSpace(parent) == "" {
			return "", fmt.Errorf("go.mod not found above %s", file)
		}
		d = parent
	}
}
