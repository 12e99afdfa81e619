package reconciler

import (
	"errors"
	"slices"
	"testing"
	"time"

	"hoist/backends"
	"hoist/backends/fake"
	"hoist/backends/offers"
	"hoist/store"
)

// TestAudit_reportsLeakedLostDuplicatedAndUnlistable builds each finding
// on two fake providers behind the store's back — a tagged instance the
// store does not know, an instance and a volume the store holds that the
// provider lost, a job with two live submissions, a provider that cannot
// be listed — and checks the report names each once, with the leak's reap
// time at its creation plus the grace; the periodic pass leaves the leak
// while it is young and deletes it (and only it) after, reporting it gone.
func TestAudit_reportsLeakedLostDuplicatedAndUnlistable(t *testing.T) {
	f := newFixture(t, nil)
	be := fake.New(fake.Config{Now: f.clock.Now})
	broken := fake.New(fake.Config{Name: "broken", Now: f.clock.Now})
	t.Cleanup(func() { be.Close(); broken.Close() })
	broken.SetListError(errors.New("provider answers 503"))
	c, err := New(Config{Now: f.clock.Now, Owner: "test", LeakGrace: 10 * time.Minute},
		Deps{Store: f.st, Source: f.c.src, Backends: map[string]backends.Backend{"fake": be, "broken": broken}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.stopPumps(); c.pumpWG.Wait(); c.closeConns() })
	own := c.leakTags()
	small := offers.Offer{CPUs: 1, MemoryGB: 1}

	fl := &store.Fleet{Name: "pool", Status: store.FleetActive}
	if err := f.st.CreateFleet(f.ctx, fl); err != nil {
		t.Fatal(err)
	}
	kept := &store.Instance{Name: "pool-0", FleetID: fl.ID, Backend: "fake", Status: store.InstanceIdle}
	lost := &store.Instance{Name: "pool-1", FleetID: fl.ID, Backend: "fake", Status: store.InstanceBusy, InstanceNum: 1}
	for _, in := range []*store.Instance{kept, lost} {
		if err := f.st.CreateInstance(f.ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{kept.ID, lost.ID, "leaked-1"} {
		if _, err := be.Create(f.ctx, backends.InstanceSpec{ID: id, Tags: own, Offer: small}); err != nil {
			t.Fatal(err)
		}
	}
	be.Lose(lost.ID)
	vol := &store.Volume{Name: "data", Backend: "fake", Region: "loop", Status: store.VolumeActive}
	if err := f.st.CreateVolume(f.ctx, vol); err != nil {
		t.Fatal(err)
	}
	run := store.Run{Name: "train", Type: "task", Status: store.RunRunning, Spec: []byte(`{"type":"task"}`)}
	if err := f.st.CreateRun(f.ctx, &run); err != nil {
		t.Fatal(err)
	}
	var twice []string
	for i, st := range []string{store.JobRunning, store.JobSubmitted, store.JobFailed} {
		j := store.Job{RunID: run.ID, RunName: run.Name, JobName: "train-0-0", SubmissionNum: i, Status: st}
		if err := f.st.CreateJob(f.ctx, &j); err != nil {
			t.Fatal(err)
		}
		if st != store.JobFailed {
			twice = append(twice, j.ID)
		}
	}
	slices.Sort(twice)
	created := f.clock.Now()

	rep := c.Audit(f.ctx)
	if len(rep.Leaked) != 1 || rep.Leaked[0].ID != "leaked-1" || rep.Leaked[0].Kind != AuditInstance || rep.Leaked[0].Backend != "fake" ||
		!rep.Leaked[0].ReapAt.Equal(created.Add(10*time.Minute)) {
		t.Errorf("leaked = %+v, want instance leaked-1 on fake, reaped at %s", rep.Leaked, created.Add(10*time.Minute))
	}
	var lostGot []string
	for _, l := range rep.Lost {
		lostGot = append(lostGot, l.Kind+" "+l.Name+" "+l.Status+" "+l.Owner)
	}
	if want := []string{"instance pool-1 busy pool", "volume data active data"}; !slices.Equal(lostGot, want) {
		t.Errorf("lost = %q, want %q", lostGot, want)
	}
	if len(rep.Duplicated) != 1 || rep.Duplicated[0].Kind != AuditJob || rep.Duplicated[0].Run != "train" || rep.Duplicated[0].Job != "0" ||
		!slices.Equal(rep.Duplicated[0].IDs, twice) {
		t.Errorf("duplicated = %+v, want job 0 of train with %q", rep.Duplicated, twice)
	}
	var errs []string
	for _, e := range rep.Errors {
		errs = append(errs, e.Backend+" "+e.Kind)
	}
	if want := []string{"broken instance", "broken volume", "broken placement_group"}; !slices.Equal(errs, want) {
		t.Errorf("errors = %q, want %q", errs, want)
	}

	if n := c.auditLeaks(f.ctx); n != 0 {
		t.Fatalf("the pass deleted %d resources younger than the grace", n)
	}
	f.clock.Advance(11 * time.Minute)
	if n := c.auditLeaks(f.ctx); n != 1 {
		t.Fatalf("the pass deleted %d resources, want the leaked instance", n)
	}
	if got := be.Instances(); slices.Contains(got, "leaked-1") || !slices.Contains(got, kept.ID) {
		t.Errorf("instances left %q: want %s kept and leaked-1 gone", got, kept.ID)
	}
	if rep := c.Audit(f.ctx); len(rep.Leaked) != 0 {
		t.Errorf("after the pass, leaked = %+v", rep.Leaked)
	}
}
