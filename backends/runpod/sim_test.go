package runpod

import (
	"log/slog"
	"testing"
	"time"

	"hoist/backends"
	"hoist/backends/internal/drivertest"
	"hoist/backends/offers"
	"hoist/backends/podcloud"
	runpodsim "hoist/e2e/cloudsim/runpod"
	"hoist/e2e/cloudsim/sim"
	"hoist/e2e/testenv"
)

// simEnv is the cloud simulator's RunPod a test talks to.
type simEnv struct {
	cloud *testenv.CloudSim
	sim   *sim.Sim
	// entry is the simulator's backend entry (GET /_sim/backend/runpod).
	entry map[string]any
}

func startSim(t *testing.T) *simEnv {
	t.Helper()
	c := testenv.StartCloudSim(t, runpodsim.New())
	return &simEnv{cloud: c, sim: c.Sim(), entry: c.Backend(runpodsim.Name)}
}

// config returns the simulator's entry as the server passes it to the
// driver, with edit's changes (when not nil).
func (e *simEnv) config(t *testing.T, edit func(map[string]any)) backends.Config {
	return drivertest.Config(t, "runpod", e.entry, edit)
}

// provider builds the driver's Provider over the simulator.
func (e *simEnv) provider(t *testing.T, edit func(map[string]any)) *Provider {
	t.Helper()
	var o Options
	if err := e.config(t, edit).Decode(&o); err != nil {
		t.Fatal(err)
	}
	p, err := NewProvider(o, nil, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// testTags are ownership tags of installation inst for task.
func testTags(inst, task string) map[string]string {
	return map[string]string{
		backends.TagInstallation: inst, backends.TagProject: "p", backends.TagResource: "fleet/runpod",
		backends.TagInstance: "i-" + task, podcloud.TagTask: task,
	}
}

// testSpec is a pod of one RTX A4000 in secure datacenter US-TX-3 that
// runs command in the busybox test image.
func testSpec(name string, spot bool, tags map[string]string, command ...string) podcloud.PodSpec {
	price := 0.25
	if spot {
		price = 0.13
	}
	return podcloud.PodSpec{
		Name: name,
		Offer: offers.Offer{Backend: "runpod", Instance: "NVIDIA RTX A4000", Region: "US-TX-3", GPUCount: 1,
			CPUs: 4, MemoryGB: 20, Price: price, Spot: spot},
		Image:   testenv.BusyboxImage,
		Command: command,
		Env:     map[string]string{"HELLO": "world"},
		Ports:   []int{10022},
		Tags:    tags,
	}
}

// waitStatus polls GetPod until the pod has status and returns it.
func waitStatus(t *testing.T, p *Provider, id, status string) podcloud.Pod {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	var pod podcloud.Pod
	for time.Now().Before(deadline) {
		var err error
		if pod, err = p.GetPod(t.Context(), id); err != nil {
			t.Fatal(err)
		}
		if pod.Status == status {
			return pod
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("pod %s: status %q (%s), want %q", id, pod.Status, pod.Message, status)
	return pod
}
