package reconciler

import (
	"testing"

	"hoist/backends/fake"
	"hoist/backends/offers"
)

// TestLocalShare_dividesThisHostAmongProjects: with several projects
// making a fleet of this host, each project's instance is an equal share
// of the host's CPUs (at least one), memory and GPUs.
func TestLocalShare_dividesThisHostAmongProjects(t *testing.T) {
	for name, tc := range map[string]struct {
		host   offers.Offer
		shares int
		want   offers.Offer
	}{
		"two projects":            {offers.Offer{Instance: "host", CPUs: 8, MemoryGB: 32, GPUCount: 2, GPUName: "A10"}, 2, offers.Offer{CPUs: 4, MemoryGB: 16, GPUCount: 1, GPUName: "A10"}},
		"more projects than GPUs": {offers.Offer{Instance: "host", CPUs: 2, MemoryGB: 8, GPUCount: 1, GPUName: "A10"}, 3, offers.Offer{CPUs: 1, MemoryGB: 8.0 / 3}},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, nil)
			f.withFakeBackend(fake.Config{Offers: []offers.Offer{tc.host}}, func(c *Config) {
				c.LocalBackend, c.LocalShares = "fake", tc.shares
			})
			got, err := f.c.localShare(f.ctx)
			if err != nil {
				t.Fatal(err)
			}
			if got.CPUs != tc.want.CPUs || got.MemoryGB != tc.want.MemoryGB || got.GPUCount != tc.want.GPUCount || got.GPUName != tc.want.GPUName {
				t.Errorf("share = %d cpus, %.2f GB, %d×%q; want %d, %.2f, %d×%q", got.CPUs, got.MemoryGB, got.GPUCount, got.GPUName,
					tc.want.CPUs, tc.want.MemoryGB, tc.want.GPUCount, tc.want.GPUName)
			}
		})
	}
}
