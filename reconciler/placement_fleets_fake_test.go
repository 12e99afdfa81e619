package reconciler

import (
	"fmt"
	"testing"

	"hoist/backends/fake"
	"hoist/backends/offers"
	"hoist/store"
)

// TestWorkers_jobNamingAFleetPastAThousandOthersIsPlacedOnIt: in a project
// of more than 1,000 fleets (a store list's default limit), a job naming
// the newest one is placed on its instance, not failed for "no fleets".
func TestWorkers_jobNamingAFleetPastAThousandOthersIsPlacedOnIt(t *testing.T) {
	f := newFixture(t, map[string]string{
		"fleet.dstack.yml": "type: fleet\nname: late\nnodes: 1\n",
		"task.dstack.yml":  "type: task\nname: job\nimage: busybox\ncommands: [sleep 1h]\nfleets: [late]\nresources: {cpu: 1.., memory: 1GB..}\n",
	})
	for i := range 1000 {
		if err := f.st.CreateFleet(f.ctx, &store.Fleet{Name: fmt.Sprintf("early-%04d", i), Status: store.FleetActive, Spec: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	f.withFakeBackend(fake.Config{Offers: []offers.Offer{{Instance: "fake-4cpu", Region: "loop", CPUs: 4, MemoryGB: 16, DiskGB: 100,
		Price: 0.10, Availability: offers.AvailabilityAvailable}}})
	if res := f.sync(); res != resultSynced {
		t.Fatalf("sync = %s: %+v", res, f.syncState())
	}
	inst := f.readyFleetInstance("late")
	if j := f.stepJob("job", store.JobPulling); j.InstanceID != inst.ID {
		t.Fatalf("job on %q, want fleet late's instance %s", j.InstanceID, inst.ID)
	}
}
