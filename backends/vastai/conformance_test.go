package vastai

import (
	"testing"
	"time"

	"hoist/backends"
	"hoist/backends/conformance"
	"hoist/backends/internal/drivertest"
	"hoist/e2e/testenv"
)

func TestMain(m *testing.M) { drivertest.Main(m) }

// open builds the backend through Factory, as hoist serve does, over
// records recs.
func (e *simEnv) open(t *testing.T, recs backends.Records) backends.Backend {
	t.Helper()
	deps := drivertest.Deps(t, recs)
	deps.RunnerDownload = drivertest.RunnerDownloads(t)
	b, err := Factory(e.config(t, nil), deps)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestConformance runs the kit over the simulated Vast.ai, its tasks as
// instances of the busybox test image running the standalone runner.
func TestConformance(t *testing.T) {
	testenv.Docker(t)
	e := startSim(t)
	recs := drivertest.Records(t)
	conformance.Run(t, conformance.Options{
		Backend:   e.open(t, recs),
		Peer:      func(t *testing.T) backends.Backend { return e.open(t, recs) },
		Timeout:   2 * time.Minute,
		TaskImage: testenv.BusyboxImage,
		// The provider reclaims the pod of the spot instance's task.
		Interrupt: func(t *testing.T, inst backends.Instance) {
			pods, err := e.provider(t, nil).ListPods(t.Context(), map[string]string{backends.TagInstance: inst.ID})
			if err != nil || len(pods) != 1 {
				t.Fatalf("the spot task's instance: %v, %v", pods, err)
			}
			e.cloud.Interrupt(pods[0].ID)
		},
		TaskLeftovers: func(t *testing.T, inst backends.Instance) []string {
			pods, err := e.provider(t, nil).ListPods(t.Context(), map[string]string{backends.TagInstance: inst.ID})
			if err != nil {
				t.Fatal(err)
			}
			var left []string
			for _, p := range pods {
				left = append(left, "instance/"+p.ID)
			}
			return left
		},
	})
}
