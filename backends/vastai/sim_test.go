package vastai

import (
	"log/slog"
	"net/http"
	"testing"
	"time"

	"hoist/backends"
	"hoist/backends/internal/drivertest"
	"hoist/backends/podcloud"
	"hoist/e2e/cloudsim/sim"
	vastsim "hoist/e2e/cloudsim/vastai"
	"hoist/e2e/testenv"
)

// simEnv is the cloud simulator's Vast.ai a test talks to.
type simEnv struct {
	cloud *testenv.CloudSim
	sim   *sim.Sim
	prov  *vastsim.Provider
	// entry is the simulator's backend entry (GET /_sim/backend/vastai).
	entry map[string]any
}

func startSim(t *testing.T) *simEnv {
	t.Helper()
	prov := vastsim.New().(*vastsim.Provider)
	c := testenv.StartCloudSim(t, prov)
	return &simEnv{cloud: c, sim: c.Sim(), prov: prov, entry: c.Backend(vastsim.Name)}
}

// config returns the simulator's entry as the server passes it to the
// driver, with edit's changes (when not nil).
func (e *simEnv) config(t *testing.T, edit func(map[string]any)) backends.Config {
	return drivertest.Config(t, "vastai", e.entry, edit)
}

// options are the simulator's backend entry as Options, changed by edit.
func (e *simEnv) options(t *testing.T, edit func(*Options)) Options {
	t.Helper()
	var o Options
	if err := e.config(t, nil).Decode(&o); err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(&o)
	}
	return o
}

func (e *simEnv) provider(t *testing.T, edit func(*Options)) *Provider {
	t.Helper()
	p, err := NewProvider(e.options(t, edit), &http.Client{Timeout: 10 * time.Second}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// testTags are a pod's ownership tags for task task of installation inst.
func testTags(inst, task string) map[string]string {
	return map[string]string{
		backends.TagInstallation: inst, backends.TagProject: "main", backends.TagResource: "run/train",
		backends.TagInstance: "inst-" + task, podcloud.TagTask: task,
	}
}

// waitPod polls pod id until done says so.
func waitPod(t *testing.T, p *Provider, id string, what string, done func(podcloud.Pod) bool) podcloud.Pod {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		pod, err := p.GetPod(t.Context(), id)
		if err != nil {
			t.Fatalf("get pod %s: %v", id, err)
		}
		if done(pod) {
			return pod
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod %s not %s: %+v", id, what, pod)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
