package web

import (
	"regexp"
	"testing"
)

// TestOverview_spendPerHourIsWhatBilledInstancesCost: the overview's $/h is
// plan.CostsOf over the instances (the figure a plan calls its spend now):
// idle instances cost too; pending (not created) and terminated ones, SSH
// hosts and this host do not.
func TestOverview_spendPerHourIsWhatBilledInstancesCost(t *testing.T) {
	f := newFixture(t, func(_ *Config, d *Deps) {
		d.Inventory = &fakeInventory{instances: []Instance{
			{Name: "gpu-0", Fleet: "gpu", Status: "busy", Price: 1.25},
			{Name: "gpu-1", Fleet: "gpu", Status: "idle", Price: 0.75},
			{Name: "gpu-2", Fleet: "gpu", Status: "pending", Price: 4},
			{Name: "gpu-3", Fleet: "gpu", Status: "terminated", Price: 8},
			{Name: "byoh-0", Fleet: "byoh", Backend: "ssh", Status: "busy"},
			{Name: "local-0", Fleet: "local", Backend: "local", Status: "idle"},
		}}
	})
	page := readBody(t, f.do(t, "GET", "/", adminTok, nil))
	m := regexp.MustCompile(`data-testid="spend-per-hour"><div class="n">([^<]*)<`).FindStringSubmatch(page)
	if m == nil || m[1] != "$2.000" {
		t.Fatalf("spend per hour = %q, want $2.000", m)
	}
}
