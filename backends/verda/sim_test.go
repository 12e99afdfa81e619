package verda

import (
	"testing"

	"hoist/backends"
	"hoist/backends/internal/drivertest"
	"hoist/e2e/cloudsim/sim"
	simverda "hoist/e2e/cloudsim/verda"
	"hoist/e2e/testenv"
)

func TestMain(m *testing.M) { drivertest.Main(m) }

// simEnv is the cloud simulator's Verda API a test talks to.
type simEnv struct {
	cloud *testenv.CloudSim
	sim   *sim.Sim
	// entry is the simulator's backend entry (GET /_sim/backend/verda).
	entry map[string]any
	prov  *simverda.Provider
}

// startSim starts the cloud simulator with its Verda API in the test's
// process.
func startSim(t *testing.T) *simEnv {
	t.Helper()
	prov := simverda.New().(*simverda.Provider)
	c := drivertest.StartSim(t, prov)
	return &simEnv{cloud: c, sim: c.Sim(), entry: c.Backend(simverda.Name), prov: prov}
}

// config returns the simulator's entry as a backends.Config, with the
// changes of edit applied to its options.
func (e *simEnv) config(t *testing.T, edit func(map[string]any)) backends.Config {
	t.Helper()
	return drivertest.Config(t, "verda", e.entry, edit)
}

// newTestProvider builds the driver's Provider over the simulator.
func (e *simEnv) newTestProvider(t *testing.T, edit func(map[string]any)) *Provider {
	t.Helper()
	var o Options
	if err := e.config(t, edit).Decode(&o); err != nil {
		t.Fatal(err)
	}
	p, err := newProvider("verda", o, backends.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// open builds the backend through Factory, as hoist serve does, from the
// simulator's entry.
func (e *simEnv) open(t *testing.T, recs backends.Records) backends.Backend {
	t.Helper()
	b, err := Factory(e.config(t, nil), drivertest.Deps(t, recs))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// expire revokes every access token the simulator handed out.
func (e *simEnv) expire(t *testing.T) {
	t.Helper()
	e.prov.Expire()
}
