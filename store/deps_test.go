package store

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDeps_storeImportsNoHigherLayer enforces the layering rule: store must
// not import reconciler, web, backends, agents or cmd.
func TestDeps_storeImportsNoHigherLayer(t *testing.T) {
	if testing.Short() {
		t.Skip("SKIP: runs go list")
	}
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		for _, banned := range []string{"hoist/reconciler", "hoist/web", "hoist/backends", "hoist/agents", "hoist/cmd"} {
			if p == banned || strings.HasPrefix(p, banned+"/") {
				t.Errorf("store depends on %s", p)
			}
		}
	}
}
