package runpod

import (
	"testing"
	"time"

	"hoist/backends"
	"hoist/backends/conformance"
	"hoist/backends/internal/drivertest"
	"hoist/e2e/testenv"
)

func TestMain(m *testing.M) { drivertest.Main(m) }

// TestConformance runs the kit over the simulated RunPod, its tasks as
// pods of the busybox test image running the standalone runner.
func TestConformance(t *testing.T) {
	testenv.Docker(t)
	e := startSim(t)
	recs := drivertest.Records(t)
	open := func(t *testing.T) backends.Backend {
		deps := drivertest.Deps(t, recs)
		deps.RunnerDownload = drivertest.RunnerDownloads(t)
		b, err := Factory(e.config(t, nil), deps)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	conformance.Run(t, conformance.Options{
		Backend:   open(t),
		Peer:      open,
		Timeout:   2 * time.Minute,
		TaskImage: testenv.BusyboxImage,
		// The provider reclaims the pod of the spot instance's task.
		Interrupt: func(t *testing.T, inst backends.Instance) {
			pods, err := e.provider(t, nil).ListPods(t.Context(), map[string]string{backends.TagInstance: inst.ID})
			if err != nil || len(pods) != 1 {
				t.Fatalf("the spot task's pod: %v, %v", pods, err)
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
				left = append(left, "pod/"+p.ID)
			}
			return left
		},
	})
}
