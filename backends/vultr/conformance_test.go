package vultr

import (
	"testing"
	"time"

	"hoist/backends"
	"hoist/backends/conformance"
	"hoist/backends/internal/drivertest"
)

// TestConformance runs the kit against the simulated Vultr API: instances
// launched through govultr boot as real sshd VMs and are taken over by the
// cloud-VM engine.
func TestConformance(t *testing.T) {
	env := startSim(t)
	recs := drivertest.Records(t)
	b := env.open(t, recs)
	start := time.Now()
	conformance.Run(t, conformance.Options{
		Backend:  b,
		Capacity: 2,
		Timeout:  2 * time.Minute,
		Peer:     func(t *testing.T) backends.Backend { return env.open(t, recs) },
	})
	st := env.cloud.Stats()
	t.Logf("conformance took %s; Vultr API calls: %v", time.Since(start).Round(time.Millisecond), st.Calls["vultr"])
}
