package api_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestDependencies_followTheLayoutRules checks the import rules of the
// agents: api imports nothing of hoist, and the agents never import the
// server's packages (they ship to hosts).
func TestDependencies_followTheLayoutRules(t *testing.T) {
	tests := []struct {
		pkg     string
		allowed []string
	}{
		{"hoist/agents/api", nil},
		{"hoist/agents/internal/agenthttp", []string{"hoist/agents/api"}},
		{"hoist/agents/runner", []string{"hoist/agents/api", "hoist/agents/internal/agenthttp"}},
		{"hoist/agents/hostinfo", []string{"hoist/agents/api"}},
		{"hoist/agents/shim", []string{"hoist/agents/api", "hoist/agents/hostinfo", "hoist/agents/internal/agenthttp"}},
		{"hoist/cmd/hoist-runner", []string{"hoist/agents/api", "hoist/agents/internal/agenthttp", "hoist/agents/runner"}},
		{"hoist/cmd/hoist-shim", []string{"hoist/agents/api", "hoist/agents/hostinfo", "hoist/agents/internal/agenthttp", "hoist/agents/shim"}},
	}
	for _, tt := range tests {
		t.Run(tt.pkg, func(t *testing.T) {
			out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", tt.pkg).Output()
			if err != nil {
				t.Fatalf("go list %s: %v", tt.pkg, err)
			}
			for _, dep := range strings.Fields(string(out)) {
				if dep == tt.pkg || !strings.HasPrefix(dep, "hoist/") {
					continue
				}
				ok := false
				for _, a := range tt.allowed {
					ok = ok || dep == a
				}
				if !ok {
					t.Errorf("%s imports %s", tt.pkg, dep)
				}
			}
		})
	}
}

// TestDeps_agentsImportOnlyAgents enforces the rule for every package under
// agents/, present and future: the agents ship to hosts, so they import of
// hoist only agents/... .
func TestDeps_agentsImportOnlyAgents(t *testing.T) {
	if testing.Short() && os.Getenv("CI") != "true" {
		t.Skip("SKIP: runs go list (-short)")
	}
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", "hoist/agents/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		if (p == "hoist" || strings.HasPrefix(p, "hoist/")) && !strings.HasPrefix(p, "hoist/agents/") {
			t.Errorf("agents depend on %s", p)
		}
	}
}
