package lambda

import (
	"testing"
	"time"

	"hoist/backends"
	"hoist/backends/conformance"
	"hoist/backends/internal/drivertest"
	lambdasim "hoist/e2e/cloudsim/lambda"
)

func TestConformance(t *testing.T) {
	env := startSim(t)
	recs := drivertest.Records(t)
	b := env.open(t, recs)
	if _, ok := b.(backends.VolumeBackend); ok {
		t.Error("the lambda backend claims volumes")
	}
	start := time.Now()
	conformance.Run(t, conformance.Options{
		Backend:  b,
		Capacity: 2,
		Timeout:  2 * time.Minute,
		// Another server: a backend of its own over the same records.
		Peer: func(t *testing.T) backends.Backend { return env.open(t, recs) },
	})
	st := env.cloud.Stats()
	t.Logf("conformance took %s; Lambda API calls: %v (failed on purpose: %v)", time.Since(start).Round(time.Millisecond),
		st.Calls[lambdasim.Name], st.Failed[lambdasim.Name])
	// Every instance's SSH key went with it.
	for _, r := range env.sim.List(lambdasim.Name, lambdasim.KindSSHKey) {
		if r.State != "deleted" {
			t.Errorf("SSH key %s (%s) left after the kit", r.Name, r.ID)
		}
	}
}
