package reconciler

import (
	"testing"
	"time"

	"hoist/store"
)

// TestPump_stopsWhenItsLeaseIsTaken: a pump whose job lease another server
// took (after this one stalled past the lease) stops following the job
// instead of racing the new holder.
func TestPump_stopsWhenItsLeaseIsTaken(t *testing.T) {
	f := newFixture(t, nil)
	c, err := New(Config{Owner: "a", LeaseFor: 300 * time.Millisecond, Now: f.clock.Now},
		Deps{Store: f.st, Source: f.c.src})
	if err != nil {
		t.Fatal(err)
	}
	run := store.Run{Name: "r", Type: "task", Status: store.RunRunning}
	jobs := []store.Job{{JobName: "r-0-0", Status: store.JobRunning, InstanceID: "no-such-instance"}}
	if _, err := f.st.CreateRunWithJobs(f.ctx, &run, jobs); err != nil {
		t.Fatal(err)
	}
	l, ok, err := c.claim(f.ctx, "jobs", jobs[0].ID)
	if err != nil || !ok {
		t.Fatalf("claim: %v, %v", ok, err)
	}
	if !c.startPump(f.ctx, l, jobs[0]) {
		t.Fatal("pump not started")
	}
	// Kept alive past its lease while it works (the runner cannot be
	// reached, within the unreachable grace).
	time.Sleep(time.Second)
	if !c.pumping(jobs[0].ID) {
		t.Fatal("the pump stopped while it held its lease")
	}
	// Another server takes the row (this one's lease is released under
	// the pump, as when it expired).
	if err := f.st.Release(f.ctx, l); err != nil {
		t.Fatal(err)
	}
	if ls, err := f.st.Claim(f.ctx, store.ClaimRequest{Table: "jobs", Owner: "server-b", Limit: 1, LeaseFor: time.Minute,
		Where: "id = ?", Args: []any{jobs[0].ID}}); err != nil || len(ls) != 1 {
		t.Fatalf("server b's claim: %v, %v", ls, err)
	}
	deadline := time.Now().Add(3 * time.Second)
	for c.pumping(jobs[0].ID) {
		if time.Now().After(deadline) {
			t.Fatal("the pump kept following a job whose lease another server holds")
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.pumpWG.Wait()
	if got, _ := f.st.GetJob(f.ctx, jobs[0].ID); got.Status != store.JobRunning {
		t.Errorf("the stale pump changed the job: %s", got.Status)
	}
}
