package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"hoist/reconciler/plan"
)

// TestLoadServerConfig_projectBudgets: a project's budget reaches the
// reconciler's and the web's configs; a negative, NaN or infinite amount,
// an unknown budget field, a project other than main and one named twice
// are refused, naming the file and the field.
func TestLoadServerConfig_projectBudgets(t *testing.T) {
	dir := t.TempDir()
	write := func(name, yaml string) string {
		p := filepath.Join(dir, name+".yml")
		if err := os.WriteFile(p, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for name, tc := range map[string]struct{ yaml, want string }{
		"negative hourly budget": {"projects:\n  - name: main\n    budget:\n      max_per_hour: -1\n",
			"projects[0].budget.max_per_hour: -1 is not an amount of USD"},
		"NaN monthly budget": {"projects:\n  - name: main\n    budget:\n      max_per_month: .nan\n",
			"projects[0].budget.max_per_month: NaN is not an amount of USD"},
		"infinite hourly budget": {"projects:\n  - name: main\n    budget:\n      max_per_hour: .inf\n",
			"projects[0].budget.max_per_hour: +Inf is not an amount of USD"},
		"budget field typo": {"projects:\n  - name: main\n    budget:\n      max_per_hr: 1\n", "max_per_hr"},
		"nameless project":  {"projects:\n  - budget:\n      max_per_hour: 1\n", "projects[0].name: a name is required"},
		"budget of another project": {"projects:\n  - name: research\n    repo: /nowhere\n    budget:\n      max_per_hour: -1\n",
			`projects[0].budget.max_per_hour: -1 is not an amount`},
		"project twice": {"projects:\n  - name: main\n  - name: main\n", `projects[1].name: project "main" is configured twice`},
	} {
		t.Run(name, func(t *testing.T) {
			p := write(name, tc.yaml)
			_, err := loadServerConfig(p)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), p) {
				t.Fatalf("loadServerConfig = %v, want an error naming %s and %q", err, p, tc.want)
			}
		})
	}
	cfg, err := loadServerConfig(write("good", "projects:\n  - name: main\n    budget:\n      max_per_hour: 10\n      max_per_month: 2500.5\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := cfg.projectBudget("main"), (plan.Budget{MaxPerHour: 10, MaxPerMonth: 2500.5}); got != want {
		t.Errorf("budget of main = %+v, want %+v", got, want)
	}
	if got := cfg.projectBudget("other"); got.Limited() {
		t.Errorf("budget of a project not configured = %+v, want none", got)
	}
}
