package store

import (
	"context"
	"errors"
	"testing"
)

// TestAssignJobsLeased_gangIsWrittenTogetherOrNotAtAll: the jobs of a gang
// are placed on their instances in one write; when one of the instances
// has an active job outside the gang, or another job of the gang changed
// meanwhile, none is written.
func TestAssignJobsLeased_gangIsWrittenTogetherOrNotAtAll(t *testing.T) {
	forEachDB(t, func(t *testing.T, s *Store, clock *fakeClock) {
		ctx := context.Background()
		var insts []Instance
		for _, name := range []string{"host-0", "host-1", "host-2"} {
			inst := Instance{Name: name, Status: InstanceIdle}
			if err := s.CreateInstance(ctx, &inst); err != nil {
				t.Fatal(err)
			}
			insts = append(insts, inst)
		}
		r := Run{Name: "r", Type: "task", Status: RunSubmitted}
		jobs := []Job{{JobName: "r-0", Status: JobSubmitted}, {JobName: "r-1", JobNum: 1, Status: JobSubmitted}, {JobName: "other", Status: JobSubmitted}}
		if _, err := s.CreateRunWithJobs(ctx, &r, jobs); err != nil {
			t.Fatal(err)
		}
		ls, err := s.Claim(ctx, ClaimRequest{Table: "jobs", Owner: "w", Where: "id = ?", Args: []any{jobs[0].ID}})
		if err != nil || len(ls) != 1 {
			t.Fatalf("claim: %v, %v", ls, err)
		}
		l := ls[0]
		// Another job holds host-1: the gang is refused as a whole.
		other := jobs[2]
		other.InstanceID, other.Status = insts[1].ID, JobProvisioning
		if err := s.UpdateJob(ctx, &other); err != nil {
			t.Fatal(err)
		}
		m, w := jobs[0], jobs[1]
		m.InstanceID, w.InstanceID = insts[0].ID, insts[1].ID
		m.Status, w.Status = JobProvisioning, JobProvisioning
		if err := s.AssignJobsLeased(ctx, l, []*Job{&m, &w}); !errors.Is(err, ErrInstanceBusy) {
			t.Fatalf("gang on a busy instance = %v, want ErrInstanceBusy", err)
		}
		for _, j := range jobs[:2] {
			if got, _ := s.GetJob(ctx, j.ID); got.InstanceID != "" || got.Status != JobSubmitted {
				t.Errorf("refused gang wrote job %s: %s on %q", got.JobName, got.Status, got.InstanceID)
			}
		}
		if m.Version != jobs[0].Version {
			t.Errorf("refused gang changed the caller's job version %d → %d", jobs[0].Version, m.Version)
		}
		// A worker job changed meanwhile: a conflict, nothing written.
		w.InstanceID = insts[2].ID
		stale := w
		fresh, _ := s.GetJob(ctx, w.ID)
		fresh.StatusMessage = "waiting"
		if err := s.UpdateJob(ctx, &fresh); err != nil {
			t.Fatal(err)
		}
		if err := s.AssignJobsLeased(ctx, l, []*Job{&m, &stale}); !errors.Is(err, ErrConflict) {
			t.Fatalf("gang with a stale job = %v, want ErrConflict", err)
		}
		if got, _ := s.GetJob(ctx, m.ID); got.InstanceID != "" {
			t.Errorf("conflicting gang wrote the master: on %q", got.InstanceID)
		}
		// Free instances: both are written.
		w = fresh
		w.InstanceID, w.Status = insts[2].ID, JobProvisioning
		if err := s.AssignJobsLeased(ctx, l, []*Job{&m, &w}); err != nil {
			t.Fatalf("gang on free instances: %v", err)
		}
		for _, want := range []Job{m, w} {
			if got, _ := s.GetJob(ctx, want.ID); got.InstanceID != want.InstanceID || got.Status != JobProvisioning || got.Version != want.Version {
				t.Errorf("job %s = %s on %q v%d, want provisioning on %q v%d", got.JobName, got.Status, got.InstanceID, got.Version, want.InstanceID, want.Version)
			}
		}
		// A lease of a job outside the set is refused.
		if err := s.AssignJobsLeased(ctx, l, []*Job{&w}); err == nil {
			t.Error("gang written under another job's lease")
		}
	})
}
