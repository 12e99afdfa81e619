package azure

import (
	"context"
	"testing"

	"hoist/backends"
)

// TestProvider_networkOwnership checks that the network security group and
// virtual network a launch makes carry the installation's ownership tag
// (and the configured tags): shared by the installation's VMs of the
// location, they are kept, never reaped.
func TestProvider_networkOwnership(t *testing.T) {
	e := startSim(t)
	p := e.provider(t, map[string]any{"tags": map[string]any{"team": "ml"}})
	if _, err := p.Launch(context.Background(), launchRequest("i-owned", d2s)); err != nil {
		t.Fatalf("Launch: %v", err)
	}
	seen := map[string]bool{}
	for _, n := range e.s.List("azure", "network") {
		typ := n.Extra["type"]
		if typ != "Microsoft.Network/networkSecurityGroups" && typ != "Microsoft.Network/virtualNetworks" {
			continue
		}
		seen[typ] = true
		if n.Tags[backends.TagInstallation] != "test" || n.Tags["team"] != "ml" {
			t.Errorf("%s %s tags = %v, want %s=test and team=ml", typ, n.Name, n.Tags, backends.TagInstallation)
		}
	}
	if len(seen) != 2 {
		t.Errorf("network resources seen: %v, want a security group and a virtual network", seen)
	}
}
