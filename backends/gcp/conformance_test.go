package gcp

import (
	"testing"
	"time"

	"hoist/backends"
	"hoist/backends/conformance"
	"hoist/backends/internal/drivertest"
	"hoist/backends/vm"
)

func TestConformance(t *testing.T) {
	env := startSim(t)
	recs := drivertest.Records(t)
	b := env.open(t, recs)
	if _, ok := b.(backends.VolumeBackend); !ok {
		t.Error("the gcp backend is not a VolumeBackend")
	}
	if _, ok := b.(backends.PlacementBackend); !ok {
		t.Error("the gcp backend is not a PlacementBackend")
	}
	p := env.newTestProvider(t, nil)
	conformance.Run(t, conformance.Options{
		Backend:  b,
		Capacity: 2,
		Timeout:  2 * time.Minute,
		// Another server: a backend of its own over the same records.
		Peer: func(t *testing.T) backends.Backend { return env.open(t, recs) },
		Interrupt: func(t *testing.T, inst backends.Instance) {
			env.cloud.Interrupt(env.simID(t, inst.ProviderID))
		},
		ExternalVolume: func(t *testing.T, region string, sizeGB float64) string {
			d, err := p.CreateVolume(t.Context(), vm.VolumeRequest{
				ID: "external", Name: "external-disk", Region: region, SizeGB: int(sizeGB),
			})
			if err != nil {
				t.Fatal(err)
			}
			return d.Ref
		},
	})
	st := env.cloud.Stats()
	t.Logf("Compute calls: %v (failed on purpose: %v)", st.Calls["gcp"], st.Failed["gcp"])
}
