package verda

import (
	"testing"
	"time"

	"hoist/backends"
	"hoist/backends/conformance"
	"hoist/backends/internal/drivertest"
)

func TestConformance(t *testing.T) {
	env := startSim(t)
	recs := drivertest.Records(t)
	b := env.open(t, recs)
	if _, ok := b.(backends.VolumeBackend); !ok {
		t.Error("the verda backend is not a VolumeBackend")
	}
	if _, ok := b.(backends.PlacementBackend); ok {
		t.Error("the verda backend claims placement groups it does not have")
	}
	start := time.Now()
	conformance.Run(t, conformance.Options{
		Backend:  b,
		Capacity: 2,
		Timeout:  2 * time.Minute,
		// Another server: a backend of its own over the same records.
		Peer: func(t *testing.T) backends.Backend { return env.open(t, recs) },
		Interrupt: func(t *testing.T, inst backends.Instance) {
			env.cloud.Interrupt(inst.ProviderID)
		},
		// A volume made with the API alone, as a user would in Verda's
		// console; registered by its id, as dstack's volume_id.
		ExternalVolume: func(t *testing.T, region string, sizeGB float64) string {
			p := env.newTestProvider(t, nil)
			var id string
			body := createVolume{Type: "HDD", Name: "user-data", Size: int(sizeGB), LocationCode: region}
			if _, err := p.api.do(t.Context(), "POST", "/volumes", body, &id); err != nil {
				t.Fatal(err)
			}
			return id
		},
	})
	st := env.cloud.Stats()
	t.Logf("conformance took %v; Verda calls: %v (failed on purpose: %v)", time.Since(start).Round(time.Second), st.Calls["verda"], st.Failed["verda"])
}
