package gcp

import (
	"strings"
	"testing"

	"hoist/backends"
	"hoist/backends/internal/drivertest"
	"hoist/e2e/cloudsim/gce"
	"hoist/e2e/cloudsim/sim"
	"hoist/e2e/testenv"
)

func TestMain(m *testing.M) { drivertest.Main(m) }

// simEnv is the cloud simulator's Compute Engine a test talks to.
type simEnv struct {
	cloud *testenv.CloudSim
	sim   *sim.Sim
	// entry is the simulator's backend entry (GET /_sim/backend/gcp).
	entry map[string]any
}

// startSim starts the cloud simulator with its Compute Engine in the test's
// process.
func startSim(t *testing.T) *simEnv {
	t.Helper()
	c := drivertest.StartSim(t, gce.New())
	return &simEnv{cloud: c, sim: c.Sim(), entry: c.Backend(gce.Name)}
}

// config returns the simulator's entry as a backends.Config, with the
// changes of edit applied to its options.
func (e *simEnv) config(t *testing.T, edit func(map[string]any)) backends.Config {
	t.Helper()
	return drivertest.Config(t, "gcp", e.entry, edit)
}

// newTestProvider builds the driver's Provider over the simulator.
func (e *simEnv) newTestProvider(t *testing.T, edit func(map[string]any)) *Provider {
	t.Helper()
	cfg := e.config(t, edit)
	var o Options
	if err := cfg.Decode(&o); err != nil {
		t.Fatal(err)
	}
	p, err := newProvider(t.Context(), "gcp", o, backends.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	if err := p.check(t.Context()); err != nil {
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

// simID returns the simulator's id of the live instance at ref (zone/name).
func (e *simEnv) simID(t *testing.T, ref string) string {
	t.Helper()
	zone, name, _ := strings.Cut(ref, "/")
	for _, r := range e.sim.List(gce.Name, sim.KindInstance) {
		if r.Zone == zone && r.Name == name && r.Extra["deleted"] != "true" {
			return r.ID
		}
	}
	t.Fatalf("no simulated instance %s", ref)
	return ""
}

// checkWithCreds builds a provider over this simulator with the service
// account key of another one (token_uri moved here) and returns its
// credentials check.
func (e *simEnv) checkWithCreds(t *testing.T, other *simEnv) error {
	t.Helper()
	data := other.entry["creds"].(map[string]any)["data"].(string)
	data = strings.ReplaceAll(data, other.cloud.Endpoints[gce.Name], e.cloud.Endpoints[gce.Name])
	cfg := e.config(t, func(o map[string]any) {
		o["creds"] = map[string]any{"type": "service_account", "data": data}
	})
	var o Options
	if err := cfg.Decode(&o); err != nil {
		t.Fatal(err)
	}
	p, err := newProvider(t.Context(), "gcp", o, backends.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	return p.check(t.Context())
}
