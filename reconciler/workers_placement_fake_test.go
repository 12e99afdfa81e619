package reconciler

import (
	"encoding/json"
	"strings"
	"testing"

	"hoist/backends/fake"
	"hoist/backends/offers"
	"hoist/store"
)

// Placement honours a run's regions, instance_types and max_price (dstack's
// profile filters of offers and of a fleet's instances), both when a fleet
// grows an instance for the job and when the job takes an idle instance.

// placementOffers are three offers that fit a default task: the cheapest
// in east, two dearer in west.
var placementOffers = []offers.Offer{
	{Instance: "small", Region: "east", CPUs: 4, MemoryGB: 16, DiskGB: 100, Price: 0.10, Availability: offers.AvailabilityAvailable},
	{Instance: "medium", Region: "west", CPUs: 4, MemoryGB: 16, DiskGB: 100, Price: 0.50, Availability: offers.AvailabilityAvailable},
	{Instance: "large", Region: "west", CPUs: 8, MemoryGB: 32, DiskGB: 100, Price: 2.00, Availability: offers.AvailabilityAvailable},
}

func instanceOffer(t *testing.T, inst store.Instance) offers.Offer {
	t.Helper()
	var o offers.Offer
	if err := json.Unmarshal(inst.Offer, &o); err != nil {
		t.Fatalf("instance %s offer %q: %v", inst.Name, inst.Offer, err)
	}
	return o
}

// TestWorkers_placementHonoursRegionsInstanceTypesAndMaxPrice is the proof
// the support table cites for a run's regions, instance_types and
// max_price.
func TestWorkers_placementHonoursRegionsInstanceTypesAndMaxPrice(t *testing.T) {
	t.Run("grown instance", testGrownInstanceComesFromAnOfferInTheRunsProfile)
	t.Run("no offer under max_price", testNoOfferUnderMaxPriceFailsForCapacity)
	t.Run("idle instance", testIdleInstanceOutsideTheRunsProfileIsPassedOver)
}

// testGrownInstanceComesFromAnOfferInTheRunsProfile: a fleet grows the
// job's instance from the cheapest offer in the run's regions, of its
// instance types and under its max price, never from a cheaper one outside
// them.
func testGrownInstanceComesFromAnOfferInTheRunsProfile(t *testing.T) {
	for _, tc := range []struct {
		name, profile, want string
	}{
		{"regions", "regions: [west]\n", "medium"},
		{"instance_types", "instance_types: [large]\n", "large"},
		{"max_price with regions", "regions: [west]\nmax_price: 1.0\n", "medium"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, map[string]string{
				"fleet.dstack.yml": cloudFleet,
				"task.dstack.yml":  "type: task\nname: train\nimage: busybox\ncommands: [echo hi]\n" + tc.profile,
			})
			be := f.withFakeBackend(fake.Config{Offers: placementOffers})
			if res := f.sync(); res != resultSynced {
				t.Fatalf("sync = %s", res)
			}
			inst := f.provision("train")
			if o := instanceOffer(t, inst); inst.Status != store.InstanceIdle || o.Instance != tc.want {
				t.Fatalf("instance = %s from offer %s in %s at $%g, want idle from offer %s", inst.Status, o.Instance, o.Region, o.Price, tc.want)
			}
			if j := f.stepJob("train", store.JobProvisioning); j.InstanceID != inst.ID {
				t.Errorf("job on %s, want %s", j.InstanceID, inst.ID)
			}
			if got := be.Instances(); len(got) != 1 {
				t.Errorf("backend instances = %v, want the one", got)
			}
		})
	}
}

// testNoOfferUnderMaxPriceFailsForCapacity: when every offer costs
// more than max_price the job fails for want of capacity and nothing is
// provisioned.
func testNoOfferUnderMaxPriceFailsForCapacity(t *testing.T) {
	f := newFixture(t, map[string]string{
		"fleet.dstack.yml": cloudFleet,
		"task.dstack.yml":  "type: task\nname: train\nimage: busybox\ncommands: [echo hi]\nmax_price: 0.05\n",
	})
	be := f.withFakeBackend(fake.Config{Offers: placementOffers})
	if res := f.sync(); res != resultSynced {
		t.Fatalf("sync = %s", res)
	}
	f.reconcileJobs("train")
	j := f.stepJob("train", store.JobFailed)
	if j.TerminationReason != reasonNoCapacity {
		t.Fatalf("job failed with %s %q, want %s", j.TerminationReason, j.TerminationMessage, reasonNoCapacity)
	}
	if got := be.Instances(); len(got) != 0 {
		t.Errorf("backend instances = %v, want none", got)
	}
}

// testIdleInstanceOutsideTheRunsProfileIsPassedOver: with an idle
// instance in each of two fleets at nodes.max — alpha's large one in west
// at $2/h, beta's small one in east at $0.10/h — a job takes the one its
// regions, instance_types and max_price allow, and fails for want of
// capacity when neither fits.
func testIdleInstanceOutsideTheRunsProfileIsPassedOver(t *testing.T) {
	for _, tc := range []struct {
		name, profile, want string
	}{
		{"regions east", "regions: [east]\n", "beta"},
		{"regions west", "regions: [west]\n", "alpha"},
		{"instance_types", "instance_types: [small]\n", "beta"},
		{"max_price", "max_price: 1.0\n", "beta"},
		{"max_price below every instance", "max_price: 0.05\n", ""},
		{"region and type that no instance has", "regions: [east]\ninstance_types: [large]\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, map[string]string{
				"alpha.dstack.yml": "type: fleet\nname: alpha\nnodes: 1\ninstance_types: [large]\n",
				"beta.dstack.yml":  "type: fleet\nname: beta\nnodes: 1\ninstance_types: [small]\n",
				"task.dstack.yml":  "type: task\nname: train\nimage: busybox\ncommands: [echo hi]\n" + tc.profile,
			})
			be := f.withFakeBackend(fake.Config{Offers: placementOffers})
			if res := f.sync(); res != resultSynced {
				t.Fatalf("sync = %s", res)
			}
			byID := map[string]string{}
			for _, fleet := range []string{"alpha", "beta"} {
				insts := f.fleetInstances(fleet)
				if len(insts) != 1 {
					t.Fatalf("fleet %s has %d instances, want 1", fleet, len(insts))
				}
				for range 5 {
					if f.instance(insts[0].ID).Status == store.InstanceIdle {
						break
					}
					f.reconcileInstance(insts[0].ID)
				}
				if got := f.instance(insts[0].ID); got.Status != store.InstanceIdle {
					t.Fatalf("fleet %s instance = %s, want idle", fleet, got.Status)
				}
				byID[insts[0].ID] = fleet
			}
			if tc.want == "" {
				f.reconcileJobs("train")
				j := f.stepJob("train", store.JobFailed)
				if j.TerminationReason != reasonNoCapacity || !strings.Contains(j.TerminationMessage, "nodes.max") {
					t.Fatalf("job failed with %s %q, want %s with the fleets at nodes.max", j.TerminationReason, j.TerminationMessage, reasonNoCapacity)
				}
			} else {
				j := f.stepJob("train", store.JobProvisioning)
				if got := byID[j.InstanceID]; got != tc.want {
					t.Fatalf("job placed on %s's instance, want %s's", got, tc.want)
				}
			}
			if got := be.Instances(); len(got) != 2 {
				t.Errorf("backend instances = %v, want the fleets' two", got)
			}
		})
	}
}
