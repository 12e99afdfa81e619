package aws

import (
	"testing"
	"time"

	"hoist/backends"
	"hoist/backends/internal/drivertest"
	"hoist/e2e/cloudsim/ec2"
	"hoist/e2e/cloudsim/sim"
	"hoist/e2e/testenv"
)

// simEnv is the cloud simulator's EC2 a test talks to.
type simEnv struct {
	cloud    *testenv.CloudSim
	sim      *sim.Sim
	provider *ec2.Provider
	// entry is the simulator's backend entry (GET /_sim/backend/aws).
	entry map[string]any
}

// startSim starts the cloud simulator with its EC2 in the test's process.
func startSim(t *testing.T) *simEnv {
	t.Helper()
	p := ec2.New().(*ec2.Provider)
	p.ShutdownDelay = 100 * time.Millisecond
	c := drivertest.StartSim(t, p)
	return &simEnv{cloud: c, sim: c.Sim(), provider: p, entry: c.Backend("aws")}
}

// config returns the simulator's entry as a backends.Config, with the
// changes of edit applied to its options.
func (e *simEnv) config(t *testing.T, edit func(map[string]any)) backends.Config {
	t.Helper()
	return drivertest.Config(t, "aws", e.entry, edit)
}

// newTestProvider builds the driver's Provider over the simulator.
func (e *simEnv) newTestProvider(t *testing.T, edit func(map[string]any)) *Provider {
	t.Helper()
	cfg := e.config(t, edit)
	var o Options
	if err := cfg.Decode(&o); err != nil {
		t.Fatal(err)
	}
	p, err := newProvider(o, backends.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.check(t.Context()); err != nil {
		t.Fatal(err)
	}
	return p
}
