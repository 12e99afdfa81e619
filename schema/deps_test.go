package schema_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestDeps_schemaImportsNothingOfHoist enforces the layering rule of
// schema: validation and normalization are pure (no store, no backends, no
// network of ours), so schema and its subpackages import no other package
// of hoist.
func TestDeps_schemaImportsNothingOfHoist(t *testing.T) {
	if testing.Short() && os.Getenv("CI") != "true" {
		t.Skip("SKIP: runs go list (-short)")
	}
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", "hoist/schema/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		if (p == "hoist" || strings.HasPrefix(p, "hoist/")) && p != "hoist/schema" && !strings.HasPrefix(p, "hoist/schema/") {
			t.Errorf("schema depends on %s", p)
		}
	}
}
