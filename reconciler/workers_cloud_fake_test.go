package reconciler

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"hoist/backends"
	"hoist/backends/fake"
	"hoist/backends/offers"
	"hoist/store"
)

// Tests of cloud provisioning against backends/fake: the offer walk on
// capacity errors, instances that do not boot, spot interruption, and
// placement groups of cluster fleets.

// threeOffers are one instance type each, cheapest first, in region loop.
var threeOffers = []offers.Offer{
	{Instance: "small", Region: "loop", CPUs: 4, MemoryGB: 16, DiskGB: 100, Price: 0.1},
	{Instance: "medium", Region: "loop", CPUs: 8, MemoryGB: 32, DiskGB: 100, Price: 0.2},
	{Instance: "large", Region: "loop", CPUs: 16, MemoryGB: 64, DiskGB: 100, Price: 0.3},
}

// settle runs the instance worker on every instance of fleet name that is
// not terminated until none changes, and returns the fleet's instances.
func (f *fixture) settle(name string) []store.Instance {
	f.t.Helper()
	for range 20 {
		changed := false
		for _, i := range f.fleetInstances(name) {
			if i.Status == store.InstanceTerminated || i.Status == store.InstanceIdle || i.Status == store.InstanceBusy {
				continue
			}
			f.reconcileInstance(i.ID)
			if got := f.instance(i.ID); got.Status != i.Status || got.Version != i.Version {
				changed = true
			}
		}
		if !changed {
			break
		}
	}
	return f.fleetInstances(name)
}

// offerOf is the instance type an instance was provisioned from.
func offerOf(i store.Instance) offers.Offer {
	var o offers.Offer
	_ = json.Unmarshal(i.Offer, &o)
	return o
}

// attempted lists the instance types of the backend's Creates, in order.
func attempted(be *fake.Backend) []string {
	var out []string
	for _, s := range be.Attempts() {
		out = append(out, s.Offer.Instance)
	}
	return out
}

// ready returns the fleet's idle instances.
func ready(insts []store.Instance) []store.Instance {
	return slices.DeleteFunc(slices.Clone(insts), func(i store.Instance) bool { return i.Status != store.InstanceIdle })
}

// TestWorkers_fleetInstanceTriesTheNextOffer: a fleet's instance whose
// offer cannot be had — no capacity, a VM that did not boot in time (the
// cloud engine's ErrNoCapacity), or one that stays provisioning past the
// provisioning timeout — ends, and the fleet provisions from the next
// cheapest offer.
func TestWorkers_fleetInstanceTriesTheNextOffer(t *testing.T) {
	for _, tc := range []struct {
		name     string
		cfg      fake.Config
		fault    func(be *fake.Backend)
		advance  time.Duration // after the first pass
		reason   string
		attempts []string
	}{
		{name: "no capacity on the cheapest", fault: func(be *fake.Backend) { be.SetNoCapacity("small", true) },
			reason: "no_offers", attempts: []string{"small", "medium"}},
		{name: "the cheapest did not boot in time", cfg: fake.Config{ProvisionFor: time.Minute},
			fault: func(be *fake.Backend) {
				be.SetBootFailure("small", backends.Transient(fmt.Errorf("vm: did not boot within 10m: %w", backends.ErrNoCapacity)))
			},
			reason: "no_offers", attempts: []string{"small", "medium"}},
		{name: "the cheapest stays provisioning", fault: func(be *fake.Backend) { be.SetNeverBoots("small", true) },
			advance: instanceProvisioningTimeout + time.Second, reason: "provisioning_timeout", attempts: []string{"small", "medium"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, map[string]string{"fleet.dstack.yml": "type: fleet\nname: cloud\nnodes: 1\n"})
			cfg := tc.cfg
			cfg.Offers = threeOffers
			be := f.withFakeBackend(cfg)
			tc.fault(be)
			f.sync()
			first := f.fleetInstances("cloud")[0]
			f.reconcileInstance(first.ID)
			f.clock.Advance(tc.advance)
			var insts []store.Instance
			for range 3 { // ProvisionFor passes
				f.clock.Advance(time.Minute)
				if insts = f.settle("cloud"); len(ready(insts)) > 0 {
					break
				}
			}
			if got := f.instance(first.ID); got.Status != store.InstanceTerminated || got.TerminationReason != tc.reason {
				t.Fatalf("first instance = %s (%s %q), want terminated for %s", got.Status, got.TerminationReason, got.StatusMessage, tc.reason)
			}
			up := ready(insts)
			if len(up) != 1 || offerOf(up[0]).Instance != "medium" {
				t.Fatalf("fleet instances %+v, want one idle from offer medium", insts)
			}
			if got := attempted(be); !slices.Equal(got, tc.attempts) {
				t.Errorf("offers tried %v, want %v", got, tc.attempts)
			}
			if got := be.Instances(); len(got) != 1 || got[0] != up[0].ID {
				t.Errorf("backend instances %v, want only %s", got, up[0].ID)
			}
			fl, _ := f.st.GetFleetByName(f.ctx, store.DefaultProject, "cloud")
			if len(fl.TriedOffers) != 1 || fl.TriedOffers[0].Offer != "fake/loop/small/false" {
				t.Errorf("fleet tried offers %+v, want small", fl.TriedOffers)
			}
		})
	}
}

// TestWorkers_fleetRecordsNoOffersWhenEveryOfferFails: when no offer has
// capacity, the fleet tries each once, cheapest first, and records
// no_offers saying the last failures.
func TestWorkers_fleetRecordsNoOffersWhenEveryOfferFails(t *testing.T) {
	f := newFixture(t, map[string]string{"fleet.dstack.yml": "type: fleet\nname: cloud\nnodes: 1\n"})
	be := f.withFakeBackend(fake.Config{Offers: threeOffers})
	for _, o := range threeOffers {
		be.SetNoCapacity(o.Instance, true)
	}
	f.sync()
	insts := f.settle("cloud")
	if got := attempted(be); !slices.Equal(got, []string{"small", "medium", "large"}) {
		t.Errorf("offers tried %v, want each once, cheapest first", got)
	}
	if len(insts) != 4 {
		t.Fatalf("fleet has %d instances, want 3 tried and the no_offers record", len(insts))
	}
	last := insts[3]
	if last.Status != store.InstanceTerminated || last.TerminationReason != "no_offers" ||
		!strings.Contains(last.StatusMessage, "all 3 offers failed") || !strings.Contains(last.StatusMessage, "fake/loop/large/false: no capacity") {
		t.Errorf("last instance = %s (%s %q), want no_offers saying all 3 failed and why", last.Status, last.TerminationReason, last.StatusMessage)
	}
	// A changed spec walks the offers afresh.
	be.SetNoCapacity("large", false)
	f.write("fleet.dstack.yml", "type: fleet\nname: cloud\nnodes: 1\nidle_duration: 1h\n")
	f.sync()
	if up := ready(f.settle("cloud")); len(up) != 1 || offerOf(up[0]).Instance != "large" {
		t.Errorf("after a spec change the fleet has %+v idle, want one from large", up)
	}
}

// TestWorkers_restartDoesNotRetryFailedOffers: the offers a fleet's
// instances failed on are in the store: a restarted server carries the
// walk on from where it was, and one whose walk ended provisions nothing
// more however often it syncs.
func TestWorkers_restartDoesNotRetryFailedOffers(t *testing.T) {
	t.Run("in the middle of the walk", func(t *testing.T) {
		f := newFixture(t, map[string]string{"fleet.dstack.yml": "type: fleet\nname: cloud\nnodes: 1\n"})
		be := f.withFakeBackend(fake.Config{Offers: threeOffers})
		be.SetNoCapacity("small", true)
		be.SetNoCapacity("medium", true)
		f.sync()
		f.reconcileInstance(f.fleetInstances("cloud")[0].ID) // small fails, medium is next
		f.c = f.controllerOn(be, Config{Now: f.clock.Now, Owner: "restarted"})
		if res := f.sync(); res == resultSynced {
			t.Logf("sync after restart: %s", res)
		}
		up := ready(f.settle("cloud"))
		if len(up) != 1 || offerOf(up[0]).Instance != "large" {
			t.Fatalf("idle instances %+v, want one from large", up)
		}
		if got := attempted(be); !slices.Equal(got, []string{"small", "medium", "large"}) {
			t.Errorf("offers tried %v, want small, medium, large once each", got)
		}
	})
	t.Run("after the walk ended", func(t *testing.T) {
		f := newFixture(t, map[string]string{"fleet.dstack.yml": "type: fleet\nname: cloud\nnodes: 1\n"})
		be := f.withFakeBackend(fake.Config{Offers: threeOffers})
		for _, o := range threeOffers {
			be.SetNoCapacity(o.Instance, true)
		}
		f.sync()
		f.settle("cloud")
		n := len(f.fleetInstances("cloud"))
		for range 3 {
			f.c = f.controllerOn(be, Config{Now: f.clock.Now, Owner: "restarted"})
			f.sync()
			f.c.resync(f.ctx)
			f.settle("cloud")
			f.clock.Advance(time.Minute)
		}
		if got := attempted(be); len(got) != 3 {
			t.Errorf("offers tried %v, want the three of the first walk only", got)
		}
		if got := len(f.fleetInstances("cloud")); got != n {
			t.Errorf("fleet has %d instances after restarts, want %d", got, n)
		}
	})
}

// TestWorkers_spotFleetProvisionsSpotOffers: a fleet with `spot_policy:
// spot` gets its instance from the cheapest spot offer, and the driver is
// asked for a spot instance.
func TestWorkers_spotFleetProvisionsSpotOffers(t *testing.T) {
	f := newFixture(t, map[string]string{"fleet.dstack.yml": "type: fleet\nname: cloud\nnodes: 1\nspot_policy: spot\n"})
	be := f.withFakeBackend(fake.Config{Offers: []offers.Offer{
		{Instance: "small", Region: "loop", CPUs: 4, MemoryGB: 16, DiskGB: 100, Price: 0.1},
		{Instance: "large", Region: "loop", CPUs: 16, MemoryGB: 64, DiskGB: 100, Price: 0.12, Spot: true},
	}})
	f.sync()
	up := ready(f.settle("cloud"))
	if len(up) != 1 || !offerOf(up[0]).Spot || offerOf(up[0]).Instance != "large" {
		t.Fatalf("idle instances %+v, want one from the spot offer", up)
	}
	if spec, ok := be.Spec(up[0].ID); !ok || !spec.Offer.Spot {
		t.Errorf("driver spec %+v, want a spot offer", spec.Offer)
	}
}

// TestWorkers_spotInterruption: a spot instance the provider reclaims ends
// its job as interrupted_by_no_capacity; a run retrying on interruption
// is resubmitted, one that does not fails; the instance is terminated.
func TestWorkers_spotInterruption(t *testing.T) {
	for _, tc := range []struct {
		name      string
		retry     string
		notFound  bool // the provider forgot the instance instead of reporting it interrupted
		resubmits bool
	}{
		{name: "retry on interruption resubmits", retry: "retry:\n  on_events: [interruption]\n  duration: 1h\n", resubmits: true},
		{name: "retry on interruption resubmits when the instance is not found", retry: "retry:\n  on_events: [interruption]\n  duration: 1h\n", notFound: true, resubmits: true},
		{name: "retry on error only does not", retry: "retry:\n  on_events: [error]\n  duration: 1h\n"},
		{name: "no retry does not"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, map[string]string{
				"fleet.dstack.yml": "type: fleet\nname: cloud\nnodes: 0..2\nspot_policy: spot\n",
				"task.dstack.yml":  "type: task\nname: train\nimage: busybox\ncommands: [echo started, sleep 1h]\n" + tc.retry,
			})
			be := f.withFakeBackend(fake.Config{Offers: []offers.Offer{
				{Instance: "small", Region: "loop", CPUs: 4, MemoryGB: 16, DiskGB: 100, Price: 0.03, Spot: true},
			}})
			inst := f.startTask("train")
			if !offerOf(inst).Spot {
				t.Fatalf("instance offer %+v, want spot", offerOf(inst))
			}
			if tc.notFound {
				be.Interrupt(inst.ID)
				if err := be.Terminate(f.ctx, inst.ID); err != nil {
					t.Fatal(err)
				}
			} else {
				be.Interrupt(inst.ID)
			}
			f.reconcileInstance(inst.ID)
			if got := f.instance(inst.ID); got.Status != store.InstanceTerminating || got.TerminationReason != "interrupted" {
				t.Fatalf("instance = %s (%s %q), want terminating as interrupted", got.Status, got.TerminationReason, got.StatusMessage)
			}
			j := f.stepJob("train", store.JobFailed)
			if j.TerminationReason != reasonInterruptedCapacity || jobStatusMessage(j) != "interrupted" {
				t.Fatalf("job failed for %s (%s), want %s", j.TerminationReason, jobStatusMessage(j), reasonInterruptedCapacity)
			}
			f.reconcileInstance(inst.ID)
			if got := f.instance(inst.ID); got.Status != store.InstanceTerminated {
				t.Errorf("instance = %s, want terminated", got.Status)
			}
			f.reconcileRun("train")
			run := f.run("train")
			if !tc.resubmits {
				if run.Status != store.RunTerminating && run.Status != store.RunFailed {
					t.Fatalf("run = %s, want failing", run.Status)
				}
				f.reconcileRun("train")
				if run := f.run("train"); run.Status != store.RunFailed {
					t.Errorf("run = %s (%s), want failed", run.Status, run.TerminationReason)
				}
				return
			}
			if run.Status != store.RunPending {
				t.Fatalf("run = %s (%q), want pending to retry", run.Status, run.StatusMessage)
			}
			f.clock.Advance(15 * time.Second)
			f.reconcileRun("train")
			if j := f.job("train"); j.SubmissionNum != 1 || j.Status != store.JobSubmitted {
				t.Fatalf("after the back-off the job is submission %d %s, want 1 submitted", j.SubmissionNum, j.Status)
			}
			second := f.provision("train")
			if second.ID == inst.ID || second.Status != store.InstanceIdle {
				t.Errorf("resubmitted job on %s (%s), want a new idle instance", second.ID, second.Status)
			}
		})
	}
}

// TestWorkers_clusterFleetPlacementGroup: a `placement: cluster` fleet on
// a backend with placement groups gets one group, created once before its
// first instance and given to every instance; the group is deleted after
// the fleet's last instance; and the fleet's instances stay in one region.
func TestWorkers_clusterFleetPlacementGroup(t *testing.T) {
	twoRegions := []offers.Offer{
		{Instance: "small", Region: "east", CPUs: 4, MemoryGB: 16, DiskGB: 100, Price: 0.1},
		{Instance: "large", Region: "west", CPUs: 16, MemoryGB: 64, DiskGB: 100, Price: 0.2},
	}
	t.Run("one group for every instance, deleted after the fleet", func(t *testing.T) {
		f := newFixture(t, map[string]string{"fleet.dstack.yml": "type: fleet\nname: cloud\nnodes: 3\nplacement: cluster\n"})
		be := f.withFakeBackend(fake.Config{Offers: twoRegions})
		f.sync()
		up := ready(f.settle("cloud"))
		groups := be.PlacementGroups()
		if len(up) != 3 || len(groups) != 1 || groups[0].Region != "east" {
			t.Fatalf("%d idle instances, groups %+v; want 3 and one group in east", len(up), groups)
		}
		for _, i := range up {
			if spec, _ := be.Spec(i.ID); spec.PlacementGroup != groups[0].ID {
				t.Errorf("instance %s created in group %q, want %q", i.Name, spec.PlacementGroup, groups[0].ID)
			}
		}
		fl, _ := f.st.GetFleetByName(f.ctx, store.DefaultProject, "cloud")
		if len(fl.PlacementGroups) != 1 || fl.PlacementGroups[0].ID != groups[0].ID || fl.PlacementGroups[0].ProviderID != groups[0].ProviderID {
			t.Errorf("fleet records groups %+v, want %+v", fl.PlacementGroups, groups)
		}
		f.remove("fleet.dstack.yml")
		f.sync()
		for i, inst := range f.fleetInstances("cloud") {
			f.reconcileInstance(inst.ID)
			if left := be.PlacementGroups(); i < 2 && len(left) != 1 {
				t.Errorf("groups %+v while instances remain, want the group kept", left)
			}
		}
		if left := be.PlacementGroups(); len(left) != 0 {
			t.Errorf("groups %+v after the fleet's last instance, want none", left)
		}
		if fl, _ := f.st.GetFleet(f.ctx, fl.ID); len(fl.PlacementGroups) != 0 {
			t.Errorf("fleet still records groups %+v", fl.PlacementGroups)
		}
	})
	t.Run("a group the provider still holds is deleted by a later resync", func(t *testing.T) {
		f := newFixture(t, map[string]string{"fleet.dstack.yml": "type: fleet\nname: cloud\nnodes: 1\nplacement: cluster\n"})
		be := f.withFakeBackend(fake.Config{Offers: twoRegions})
		f.sync()
		inst := ready(f.settle("cloud"))[0]
		group := be.PlacementGroups()[0]
		// A VM the provider has not let go of yet keeps the group in use.
		if _, err := be.Create(f.ctx, backends.InstanceSpec{ID: "still-going", Offer: twoRegions[0], PlacementGroup: group.ID}); err != nil {
			t.Fatal(err)
		}
		f.remove("fleet.dstack.yml")
		f.sync()
		f.reconcileInstance(inst.ID)
		if got := f.instance(inst.ID); got.Status != store.InstanceTerminated {
			t.Fatalf("instance = %s, want terminated", got.Status)
		}
		f.c.resync(f.ctx)
		if len(be.PlacementGroups()) != 1 {
			t.Fatalf("groups %+v while the provider holds the group, want it kept", be.PlacementGroups())
		}
		if fl, _ := f.st.GetFleetByName(f.ctx, store.DefaultProject, "cloud"); len(fl.PlacementGroups) != 1 {
			t.Fatalf("fleet records groups %+v, want the group until it is deleted", fl.PlacementGroups)
		}
		if err := be.Terminate(f.ctx, "still-going"); err != nil {
			t.Fatal(err)
		}
		f.c.resync(f.ctx)
		if left := be.PlacementGroups(); len(left) != 0 {
			t.Errorf("groups %+v after the provider let go, want none", left)
		}
	})
	t.Run("instances stay in the cluster's region", func(t *testing.T) {
		for _, cluster := range []bool{true, false} {
			spec := "type: fleet\nname: cloud\nnodes: 2\n"
			if cluster {
				spec += "placement: cluster\n"
			}
			f := newFixture(t, map[string]string{"fleet.dstack.yml": spec})
			be := f.withFakeBackend(fake.Config{Offers: twoRegions})
			f.sync()
			insts := f.fleetInstances("cloud")
			f.reconcileInstance(insts[0].ID)
			be.SetNoCapacity("small", true) // the second instance of east has none
			insts = f.settle("cloud")
			var regions []string
			for _, i := range ready(insts) {
				regions = append(regions, offerOf(i).Region)
			}
			want := []string{"east", "west"}
			if cluster {
				want = []string{"east"} // never west: the cluster is in east
				last := insts[len(insts)-1]
				if last.TerminationReason != "no_offers" || !strings.Contains(last.StatusMessage, "all 1 offers failed (fake/east/small/false") {
					t.Errorf("cluster fleet's last instance = %s %q, want no_offers in the cluster's region", last.TerminationReason, last.StatusMessage)
				}
			}
			if !slices.Equal(regions, want) {
				t.Errorf("cluster=%v: idle instances in %v, want %v", cluster, regions, want)
			}
		}
	})
}

// TestWorkers_jobInstanceTriesTheNextOffer: an instance a fleet grew for a
// job that does not boot in time, or stays provisioning past the
// provisioning timeout, ends; the job gets an instance from the next
// offer, and the fleet does not replace the instance itself.
func TestWorkers_jobInstanceTriesTheNextOffer(t *testing.T) {
	for _, tc := range []struct {
		name    string
		fault   func(be *fake.Backend)
		advance time.Duration
		reason  string
	}{
		{name: "did not boot in time", fault: func(be *fake.Backend) {
			be.SetBootFailure("small", backends.Transient(fmt.Errorf("vm: did not boot within 10m: %w", backends.ErrNoCapacity)))
		}, advance: time.Minute, reason: "no_offers"},
		{name: "stays provisioning", fault: func(be *fake.Backend) { be.SetNeverBoots("small", true) },
			advance: instanceProvisioningTimeout + time.Second, reason: "provisioning_timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, map[string]string{
				"fleet.dstack.yml": cloudFleet,
				"task.dstack.yml":  "type: task\nname: train\nimage: busybox\ncommands: [echo hi]\n",
			})
			be := f.withFakeBackend(fake.Config{Offers: threeOffers, ProvisionFor: time.Minute})
			tc.fault(be)
			f.sync()
			f.reconcileJobs("train")
			first := f.job("train").InstanceID
			f.reconcileInstance(first)
			f.clock.Advance(tc.advance)
			f.reconcileInstance(first)
			if got := f.instance(first); got.TerminationReason != tc.reason {
				t.Fatalf("first instance = %s (%s %q), want ending for %s", got.Status, got.TerminationReason, got.StatusMessage, tc.reason)
			}
			f.reconcileInstance(first) // terminating → terminated
			f.reconcileJobs("train")
			second := f.job("train").InstanceID
			if second == "" || second == first {
				t.Fatalf("job waits for %q, want a new instance", second)
			}
			f.reconcileInstance(second)
			f.clock.Advance(time.Minute)
			f.reconcileInstance(second)
			if got := f.instance(second); got.Status != store.InstanceIdle || offerOf(got).Instance != "medium" {
				t.Fatalf("second instance = %s from %s, want idle from medium", got.Status, offerOf(got).Instance)
			}
			if j := f.stepJob("train", store.JobProvisioning); j.InstanceID != second {
				t.Errorf("job on %s, want %s", j.InstanceID, second)
			}
			if n := len(f.fleetInstances("cloud")); n != 2 {
				t.Errorf("fleet has %d instances, want the job's two", n)
			}
		})
	}
}

// TestWorkers_fleetReplacesAnInstanceTheProviderTookAway: an idle fleet
// instance the provider reclaimed (spot) or lost (deleted behind hoist's
// back) ends — interrupted or error — and the fleet provisions a new one
// to stay at nodes, from the same offer (it says nothing about capacity).
func TestWorkers_fleetReplacesAnInstanceTheProviderTookAway(t *testing.T) {
	for _, tc := range []struct {
		name   string
		spot   bool
		take   func(be *fake.Backend, id string)
		reason string
	}{
		{name: "spot interruption", spot: true, take: func(be *fake.Backend, id string) { be.Interrupt(id) }, reason: "interrupted"},
		{name: "deleted at the provider (not found)", take: func(be *fake.Backend, id string) { _ = be.Terminate(t.Context(), id) }, reason: "error"},
		{name: "deleted at the provider (terminated)", take: func(be *fake.Backend, id string) { be.Lose(id) }, reason: "error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := "type: fleet\nname: cloud\nnodes: 1\n"
			if tc.spot {
				spec += "spot_policy: spot\n"
			}
			f := newFixture(t, map[string]string{"fleet.dstack.yml": spec})
			be := f.withFakeBackend(fake.Config{Offers: []offers.Offer{
				{Instance: "small", Region: "loop", CPUs: 4, MemoryGB: 16, DiskGB: 100, Price: 0.1, Spot: tc.spot},
			}})
			f.sync()
			first := ready(f.settle("cloud"))[0]
			tc.take(be, first.ID)
			f.reconcileInstance(first.ID)
			if got := f.instance(first.ID); got.Status != store.InstanceTerminating || got.TerminationReason != tc.reason {
				t.Fatalf("instance = %s (%s %q), want terminating for %s", got.Status, got.TerminationReason, got.StatusMessage, tc.reason)
			}
			insts := f.settle("cloud")
			if got := f.instance(first.ID); got.Status != store.InstanceTerminated {
				t.Errorf("instance = %s, want terminated", got.Status)
			}
			if up := ready(insts); len(up) != 1 || up[0].ID == first.ID || offerOf(up[0]).Instance != "small" {
				t.Errorf("idle instances %+v, want a new one from the same offer", up)
			}
			if got := be.Instances(); len(got) != 1 {
				t.Errorf("backend instances %v, want the new one", got)
			}
		})
	}
}

// TestWorkers_instancesGivenUpTogetherAreAllReplaced: two instances of a
// fleet whose offer has no capacity, given up by two workers at once, are
// both replaced (the fleet's lock serializes the replacements, so neither
// counts the other as still there).
func TestWorkers_instancesGivenUpTogetherAreAllReplaced(t *testing.T) {
	f := newFixture(t, map[string]string{"fleet.dstack.yml": "type: fleet\nname: cloud\nnodes: 2\n"})
	be := f.withFakeBackend(fake.Config{Offers: threeOffers})
	be.SetNoCapacity("small", true)
	f.sync()
	insts := f.fleetInstances("cloud")
	if len(insts) != 2 {
		t.Fatalf("fleet has %d instances, want 2", len(insts))
	}
	other := f.controllerOn(be, Config{Now: f.clock.Now, Owner: "other"})
	errs := make(chan error, 2)
	for i, c := range []*Controller{f.c, other} {
		go func() { _, err := c.reconcileInstance(f.ctx, insts[i].ID); errs <- err }()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	up := ready(f.settle("cloud"))
	if len(up) != 2 || offerOf(up[0]).Instance != "medium" || offerOf(up[1]).Instance != "medium" {
		t.Fatalf("idle instances %+v, want two from medium", up)
	}
}

// TestWorkers_jobsPlacedAtOnceNeverGrowAFleetPastItsMax: jobs placed at
// the same time, by workers of two servers, each wanting a new instance of
// an elastic fleet of nodes 0..2, grow it to two instances and no more
// (growth counts the fleet's instances holding its lease); the jobs left
// without one wait or fail for want of capacity, as when the fleet is full.
func TestWorkers_jobsPlacedAtOnceNeverGrowAFleetPastItsMax(t *testing.T) {
	const jobs = 6
	files := map[string]string{"fleet.dstack.yml": cloudFleet}
	for i := range jobs {
		files[fmt.Sprintf("task%d.dstack.yml", i)] = fmt.Sprintf("type: task\nname: train%d\nimage: busybox\ncommands: [echo hi]\n", i)
	}
	f := newFixture(t, files)
	be := f.withFakeBackend(fake.Config{Offers: threeOffers, ProvisionFor: time.Minute})
	other := f.controllerOn(be, Config{Now: f.clock.Now, Owner: "other", UnreachableGrace: time.Minute})
	f.sync()
	var ids []string
	for i := range jobs {
		ids = append(ids, f.job(fmt.Sprintf("train%d", i)).ID)
	}
	for range 3 { // a job that met a held fleet lease tries again
		var wg sync.WaitGroup
		for n, id := range ids {
			c := f.c
			if n%2 == 1 {
				c = other
			}
			wg.Go(func() {
				if _, err := c.reconcileJob(f.ctx, id); err != nil && backends.KindOf(err) != backends.KindWait {
					t.Errorf("reconcile job %s: %v", id, err)
				}
			})
		}
		wg.Wait()
	}
	insts := f.fleetInstances("cloud")
	if len(insts) != 2 {
		t.Fatalf("fleet has %d instances, want nodes.max 2", len(insts))
	}
	waiting := 0
	for _, id := range ids {
		j, err := f.st.GetJob(f.ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if j.InstanceID != "" {
			waiting++
		}
	}
	if waiting != 2 {
		t.Errorf("%d jobs wait for an instance, want one on each of the 2", waiting)
	}
}
