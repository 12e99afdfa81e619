package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	runpodsim "hoist/e2e/cloudsim/runpod"
	"hoist/e2e/cloudsim/sim"
	vastaisim "hoist/e2e/cloudsim/vastai"
	vultrsim "hoist/e2e/cloudsim/vultr"
	"hoist/e2e/testenv"
)

// TestOffersCmd_configListsLiveOffers: `hoist offers --config` with a
// vultr, runpod or vastai entry lists the provider's live offers (Vultr's
// plans, which the catalog lacks; RunPod's GPU types in stock; Vast.ai's
// asks) for the query, in place of the offline catalog's rows of that
// backend (the catalog has Vast.ai rows, whose names are no asks to rent).
func TestOffersCmd_configListsLiveOffers(t *testing.T) {
	tests := []struct {
		name     string
		provider sim.Provider
		gpu      string
		// live says whether an offer's instance is one the provider
		// named (a RunPod GPU type id, a Vast.ai ask id).
		live func(instance string) bool
	}{
		{"vultr", vultrsim.New(), "H100:8", func(i string) bool { return i == "vbm-112c-2048gb-8-h100-gpu" }},
		{"runpod", runpodsim.New(), "A4000", func(i string) bool { return strings.HasPrefix(i, "NVIDIA ") }},
		{"vastai", vastaisim.New(), "RTX4090", func(i string) bool { _, err := strconv.Atoi(i); return err == nil }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := testenv.StartCloudSim(t, tt.provider)
			entry, err := json.Marshal(c.Backend(tt.name))
			if err != nil {
				t.Fatal(err)
			}
			cfg := filepath.Join(t.TempDir(), "config.yml")
			if err := os.WriteFile(cfg, []byte("backends:\n- "+string(entry)+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			out, err := runHoist(t, "offers", "--config", cfg, "--backend", tt.name, "--gpu", tt.gpu, "-o", "json")
			if err != nil {
				t.Fatal(err)
			}
			var rows []map[string]any
			if err := json.Unmarshal([]byte(out), &rows); err != nil {
				t.Fatalf("output is not a JSON array: %v\n%s", err, out)
			}
			if len(rows) == 0 {
				t.Fatalf("no offers of %s for %s", tt.name, tt.gpu)
			}
			for _, r := range rows {
				if inst, _ := r["instance"].(string); r["backend"] != tt.name || !tt.live(inst) {
					t.Errorf("offer %v, want a live one of %s", r, tt.name)
				}
			}
		})
	}
}
