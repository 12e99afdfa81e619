package runpod

import (
	"context"
	"testing"
	"time"

	"hoist/backends"
	"hoist/backends/conformance"
	"hoist/backends/internal/drivertest"
	"hoist/backends/offers"
	"hoist/backends/podcloud"
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
	b := open(t)
	conformance.Run(t, conformance.Options{
		Backend: b,
		Peer:    open,
		// Instances in a secure datacenter, where network volumes live.
		Spec: func(int) backends.InstanceSpec {
			return backends.InstanceSpec{Offer: datacenterOffer(t, b, "US-TX-3")}
		},
		// A volume made in the account as a user would, for volume_id.
		ExternalVolume: func(t *testing.T, region string, sizeGB float64) string {
			p := e.provider(t, nil)
			v, err := p.CreateVolume(t.Context(), podcloud.VolumeRequest{Name: "user-volume", Region: region, SizeGB: int(sizeGB)})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = p.DeleteVolume(context.Background(), v.ID) })
			return v.ID
		},
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

// datacenterOffer is b's first on-demand offer in datacenter dc.
func datacenterOffer(t *testing.T, b backends.Backend, dc string) offers.Offer {
	t.Helper()
	all, err := b.Offers(t.Context(), offers.Query{Regions: []string{dc}})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range all {
		if !o.Spot {
			return o
		}
	}
	t.Fatalf("no on-demand offer in %s", dc)
	return offers.Offer{}
}
