package lambda

import (
	"testing"
	"time"

	"hoist/backends"
	"hoist/backends/internal/drivertest"
	"hoist/backends/offers"
	"hoist/backends/vm"
	lambdasim "hoist/e2e/cloudsim/lambda"
	"hoist/e2e/cloudsim/sim"
	"hoist/e2e/testenv"
)

func TestMain(m *testing.M) { drivertest.Main(m) }

// simEnv is the cloud simulator's Lambda Cloud a test talks to.
type simEnv struct {
	cloud *testenv.CloudSim
	sim   *sim.Sim
	// entry is the simulator's backend entry (GET /_sim/backend/lambda).
	entry map[string]any
}

func startSim(t *testing.T) *simEnv {
	t.Helper()
	c := drivertest.StartSim(t, lambdasim.New())
	return &simEnv{cloud: c, sim: c.Sim(), entry: c.Backend(lambdasim.Name)}
}

func (e *simEnv) config(t *testing.T, edit func(map[string]any)) backends.Config {
	t.Helper()
	return drivertest.Config(t, "lambda", e.entry, edit)
}

// newTestProvider builds the driver's Provider over the simulator, with
// records recs (fresh ones when nil).
func (e *simEnv) newTestProvider(t *testing.T, recs backends.Records, edit func(map[string]any)) *Provider {
	t.Helper()
	var o Options
	if err := e.config(t, edit).Decode(&o); err != nil {
		t.Fatal(err)
	}
	if recs == nil {
		recs = drivertest.Records(t)
	}
	p, err := newProvider("lambda", o, backends.Deps{Records: recs})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// open builds the backend through Factory, as hoist serve does.
func (e *simEnv) open(t *testing.T, recs backends.Records) backends.Backend {
	t.Helper()
	b, err := Factory(e.config(t, nil), drivertest.Deps(t, recs))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// testLaunch is a request for the cheapest CPU type in us-east-1 of
// installation inst.
func testLaunch(id, inst string) vm.LaunchRequest {
	return vm.LaunchRequest{
		ID: id, Name: vm.ResourceName("fleet-errors", id, maxNameLen),
		Offer:     offers.Offer{Instance: "cpu_4x_general", Region: "us-east-1", CPUs: 4, MemoryGB: 16},
		User:      "root",
		PublicKey: testKey,
		Tags: map[string]string{
			backends.TagInstallation: inst, backends.TagInstance: id,
			backends.TagProject: "p", backends.TagResource: "fleet/errors",
		},
	}
}

// testKey is an authorized_keys line for launches whose VM nobody logs into.
const testKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHb2S1lT6nGk6C1x7sE7w4c0b3m9yqk3bYx0lqZkz8Qp hoist"

func waitRunning(t *testing.T, p *Provider, ref string) vm.Machine {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		m, err := p.Get(t.Context(), ref)
		if err != nil {
			t.Fatal(err)
		}
		if m.State == vm.StateRunning {
			return m
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("instance %s did not run", ref)
	return vm.Machine{}
}
