package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"hoist/e2e/cloudsim/vultr"
	"hoist/e2e/testenv"
)

// TestOffersCmd_configListsVultrPlans: `hoist offers --config` with a
// vultr entry lists the live offers of its plans (the catalog has no
// vultr rows), cheapest first, in the entry's regions.
func TestOffersCmd_configListsVultrPlans(t *testing.T) {
	c := testenv.StartCloudSim(t, vultr.New())
	entry, err := json.Marshal(c.Backend(vultr.Name))
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "config.yml")
	if err := os.WriteFile(cfg, []byte("backends:\n- "+string(entry)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := runHoist(t, "offers", "--config", cfg, "--backend", "vultr", "--gpu", "H100:8", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var rows []map[string]any
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("output is not a JSON array: %v\n%s", err, out)
	}
	if len(rows) != 1 || rows[0]["backend"] != "vultr" || rows[0]["instance"] != "vbm-112c-2048gb-8-h100-gpu" || rows[0]["region"] != "ewr" {
		t.Fatalf("offers = %v, want the 8×H100 bare-metal plan in ewr", rows)
	}
}
