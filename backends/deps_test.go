package backends_test

import (
	"os/exec"
	"strings"
	"testing"

	"hoist/e2e/testenv"
)

// TestDeps_layering enforces the layering rules of backends/: the interface
// package and the tunnel depend on nothing of hoist but backends/offers (and
// the tunnel on backends); drivers may add the agents but never the
// reconciler, the store, the web server, the schema or cmd.
func TestDeps_layering(t *testing.T) {
	if testing.Short() && !testenv.InCI() {
		t.Skip("SKIP: runs go list (-short)")
	}
	tests := []struct {
		pkg     string
		allowed []string
	}{
		{"hoist/backends", []string{"hoist/backends", "hoist/backends/offers"}},
		{"hoist/backends/tunnel", []string{"hoist/backends", "hoist/backends/offers", "hoist/backends/tunnel"}},
		{"hoist/backends/local", []string{"hoist/backends", "hoist/backends/offers", "hoist/backends/local", "hoist/backends/internal/agentauth", "hoist/backends/internal/hostoffer", "hoist/agents/api", "hoist/agents/hostinfo", "hoist/agents/internal/agenthttp", "hoist/agents/shim"}},
		{"hoist/backends/sshfleet", []string{"hoist/backends", "hoist/backends/offers", "hoist/backends/sshfleet", "hoist/backends/tunnel", "hoist/backends/internal/agentauth", "hoist/backends/internal/hostoffer", "hoist/agents/api"}},
		{"hoist/backends/kubernetes", []string{"hoist/backends", "hoist/backends/offers", "hoist/backends/kubernetes", "hoist/backends/internal/agentauth", "hoist/backends/internal/shimserver", "hoist/agents/api"}},
		{"hoist/backends/podcloud", []string{"hoist/backends", "hoist/backends/offers", "hoist/backends/podcloud", "hoist/backends/tunnel", "hoist/backends/internal/agentauth", "hoist/backends/internal/shimserver", "hoist/agents/api"}},
		{"hoist/backends/internal/shimserver", []string{"hoist/backends/internal/shimserver", "hoist/backends/offers", "hoist/agents/api"}},
		{"hoist/backends/internal/hostoffer", []string{"hoist/backends/internal/hostoffer", "hoist/backends/offers", "hoist/agents/api"}},
		{"hoist/backends/internal/agentauth", []string{"hoist/backends/internal/agentauth", "hoist/agents/api"}},
		{"hoist/backends/fake", []string{"hoist/backends", "hoist/backends/offers", "hoist/backends/fake", "hoist/backends/internal/agentauth", "hoist/agents/api"}},
	}
	for _, tt := range tests {
		t.Run(tt.pkg, func(t *testing.T) {
			out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", tt.pkg).Output()
			if err != nil {
				t.Fatalf("go list: %v", err)
			}
			for _, p := range strings.Fields(string(out)) {
				if p != "hoist" && !strings.HasPrefix(p, "hoist/") {
					continue
				}
				ok := false
				for _, a := range tt.allowed {
					ok = ok || p == a
				}
				if !ok {
					t.Errorf("%s depends on %s", tt.pkg, p)
				}
			}
		})
	}
}
