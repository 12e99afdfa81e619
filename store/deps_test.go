package store

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// skipShortOutsideCI skips a test that runs `go list` under -short, except
// under CI=true, where it always runs.
func skipShortOutsideCI(t *testing.T) {
	t.Helper()
	if testing.Short() && os.Getenv("CI") != "true" {
		t.Skip("SKIP: runs go list (-short)")
	}
}

// TestDeps_storeImportsNoHigherLayer enforces the layering rule: store must
// not import reconciler, web, backends, agents or cmd.
func TestDeps_storeImportsNoHigherLayer(t *testing.T) {
	skipShortOutsideCI(t)
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		for _, banned := range []string{"hoist/reconciler", "hoist/web", "hoist/backends", "hoist/agents", "hoist/cmd", "hoist/e2e"} {
			if p == banned || strings.HasPrefix(p, banned+"/") {
				t.Errorf("store depends on %s", p)
			}
		}
	}
}

// TestDeps_onlyStoreSpeaksSQL enforces that no package of hoist outside
// store imports bun, database/sql or a database driver: every query is a
// store method. The one exception is the test harness e2e/testenv, which
// creates and drops the throwaway databases of a test Postgres cluster
// (administration, not hoist's data).
func TestDeps_onlyStoreSpeaksSQL(t *testing.T) {
	skipShortOutsideCI(t)
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "hoist/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	sql := []string{"github.com/uptrace/bun", "database/sql", "modernc.org/sqlite", "github.com/lib/pq", "github.com/jackc/pgx"}
	allowed := map[string][]string{
		"hoist/e2e/testenv": {"database/sql", "github.com/uptrace/bun/driver/pgdriver"},
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		pkg, imports := f[0], f[1:]
		if pkg == "hoist/store" || strings.HasPrefix(pkg, "hoist/store/") {
			continue
		}
	imports:
		for _, imp := range imports {
			for _, a := range allowed[pkg] {
				if imp == a {
					continue imports
				}
			}
			for _, s := range sql {
				if imp == s || strings.HasPrefix(imp, s+"/") {
					t.Errorf("%s imports %s: only store speaks SQL", pkg, imp)
				}
			}
		}
	}
}
