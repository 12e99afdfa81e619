package vultr

import (
	"testing"

	"hoist/backends"
	"hoist/backends/internal/drivertest"
	"hoist/e2e/cloudsim/sim"
	simvultr "hoist/e2e/cloudsim/vultr"
	"hoist/e2e/testenv"
)

func TestMain(m *testing.M) { drivertest.Main(m) }

// simEnv is the cloud simulator with the Vultr API and its backend entry.
type simEnv struct {
	cloud *testenv.CloudSim
	sim   *sim.Sim
	entry map[string]any
}

func startSim(t *testing.T) *simEnv {
	t.Helper()
	c := drivertest.StartSim(t, simvultr.New())
	return &simEnv{cloud: c, sim: c.Sim(), entry: c.Backend(simvultr.Name)}
}

func (e *simEnv) config(t *testing.T, edit func(map[string]any)) backends.Config {
	t.Helper()
	return drivertest.Config(t, "vultr", e.entry, edit)
}

// newTestProvider is the driver's Provider over the simulator, checked.
func (e *simEnv) newTestProvider(t *testing.T, edit func(map[string]any)) *Provider {
	t.Helper()
	var o Options
	if err := e.config(t, edit).Decode(&o); err != nil {
		t.Fatal(err)
	}
	p, err := newProvider("vultr", o, backends.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	p.c.SetRetryLimit(0)
	p.create.SetRetryLimit(0)
	if err := p.check(t.Context()); err != nil {
		t.Fatal(err)
	}
	return p
}

func (e *simEnv) open(t *testing.T, recs backends.Records) backends.Backend {
	t.Helper()
	b, err := Factory(e.config(t, nil), drivertest.Deps(t, recs))
	if err != nil {
		t.Fatal(err)
	}
	return b
}
