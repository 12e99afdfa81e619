package plan_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestDeps_planImportsOnlySchema enforces the layering rule of the planner:
// a plan is computed from values alone, so plan imports of hoist only
// schema (which is pure too) and never the store, backends, agents, web,
// the rest of the reconciler or cmd, which do I/O.
func TestDeps_planImportsOnlySchema(t *testing.T) {
	if testing.Short() && os.Getenv("CI") != "true" {
		t.Skip("SKIP: runs go list (-short)")
	}
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", "hoist/reconciler/plan/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		if p != "hoist" && !strings.HasPrefix(p, "hoist/") {
			continue
		}
		ok := false
		for _, allowed := range []string{"hoist/schema", "hoist/reconciler/plan"} {
			ok = ok || p == allowed || strings.HasPrefix(p, allowed+"/")
		}
		if !ok {
			t.Errorf("plan depends on %s", p)
		}
	}
}
