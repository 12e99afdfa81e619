package store

import (
	"testing"
	"time"
)

// TestProjects_claimsAreScopedByProject: a claim for one project leases only
// that project's runs, jobs (through their run) and instances; a claim with
// no project leases every project's rows.
func TestProjects_claimsAreScopedByProject(t *testing.T) {
	forEachDB(t, func(t *testing.T, s *Store, clock *fakeClock) {
		ctx := t.Context()
		ids := map[string]map[string]string{} // project → table → id
		for _, p := range []string{"a", "b"} {
			run := &Run{Project: p, Name: "train", Type: "task", Status: RunSubmitted}
			if err := s.CreateRun(ctx, run); err != nil {
				t.Fatal(err)
			}
			job := &Job{RunID: run.ID, RunName: run.Name, Status: JobSubmitted}
			if err := s.CreateJob(ctx, job); err != nil {
				t.Fatal(err)
			}
			inst := &Instance{Project: p, Name: "box", Status: InstancePending}
			if err := s.CreateInstance(ctx, inst); err != nil {
				t.Fatal(err)
			}
			ids[p] = map[string]string{"runs": run.ID, "jobs": job.ID, "instances": inst.ID}
		}
		for _, table := range []string{"runs", "jobs", "instances"} {
			ls, err := s.Claim(ctx, ClaimRequest{Table: table, Owner: "a", Project: "a", Limit: 10, LeaseFor: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			if len(ls) != 1 || ls[0].ID != ids["a"][table] {
				t.Errorf("claim %s for project a = %+v; want only %s", table, ls, ids["a"][table])
			}
			// Project a's row is leased; an unscoped claim gets b's.
			ls, err = s.Claim(ctx, ClaimRequest{Table: table, Owner: "any", Limit: 10, LeaseFor: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			if len(ls) != 1 || ls[0].ID != ids["b"][table] {
				t.Errorf("unscoped claim %s = %+v; want %s", table, ls, ids["b"][table])
			}
		}
		js, err := s.ListJobsFiltered(ctx, JobFilter{Project: "b"})
		if err != nil || len(js) != 1 || js[0].ID != ids["b"]["jobs"] {
			t.Errorf("ListJobsFiltered(project b) = %v, %v; want b's job", js, err)
		}
	})
}

// TestProjects_gitStateIsPerProject: two projects reading one repository
// see the same sha with a different validity, keep their own sync state,
// and a confirmation of a held plan counts only in its project.
func TestProjects_gitStateIsPerProject(t *testing.T) {
	forEachDB(t, func(t *testing.T, s *Store, clock *fakeClock) {
		ctx := t.Context()
		if err := s.RecordRevision(ctx, Revision{Project: "a", SHA: "abc", Valid: true}); err != nil {
			t.Fatal(err)
		}
		if err := s.RecordRevision(ctx, Revision{Project: "b", SHA: "abc", Valid: false, Errors: []string{"b/x.yml:1: bad"}}); err != nil {
			t.Fatal(err)
		}
		ra, err := s.GetRevision(ctx, "a", "abc")
		if err != nil || !ra.Valid {
			t.Errorf("revision abc of a = %+v, %v; want valid", ra, err)
		}
		rb, err := s.GetRevision(ctx, "b", "abc")
		if err != nil || rb.Valid || len(rb.Errors) != 1 {
			t.Errorf("revision abc of b = %+v, %v; want invalid with its error", rb, err)
		}
		if revs, err := s.ListRevisions(ctx, DefaultProject, 10); err != nil || len(revs) != 0 {
			t.Errorf("revisions of main = %v, %v; want none", revs, err)
		}
		if err := s.SetRevisionPlan(ctx, "a", "abc", []byte(`{"steps":[]}`)); err != nil {
			t.Fatal(err)
		}
		if rb, _ := s.GetRevision(ctx, "b", "abc"); rb.Plan != nil {
			t.Errorf("b's revision got a's plan: %s", rb.Plan)
		}

		sa, err := s.GetSyncState(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		sa.AppliedSHA, sa.Status = "abc", SyncSynced
		if err := s.UpdateSyncState(ctx, &sa); err != nil {
			t.Fatal(err)
		}
		if n, err := s.RequestSync(ctx, "a"); err != nil || n != 1 {
			t.Errorf("RequestSync(a) = %d, %v; want 1", n, err)
		}
		sb, err := s.GetSyncState(ctx, "b")
		if err != nil || sb.AppliedSHA != "" || sb.Status != SyncSyncing || sb.Requested != 0 {
			t.Errorf("sync state of b = %+v, %v; want a fresh one", sb, err)
		}

		if err := s.ConfirmRevision(ctx, "a", "abc"); err != nil {
			t.Fatal(err)
		}
		if ok, err := s.RevisionConfirmed(ctx, "b", "abc"); err != nil || ok {
			t.Errorf("b's plan of abc confirmed by a's confirmation: %v, %v", ok, err)
		}
		if ok, err := s.RevisionConfirmed(ctx, "a", "abc"); err != nil || !ok {
			t.Errorf("a's plan of abc not confirmed: %v, %v", ok, err)
		}

		if _, err := s.AddEvent(ctx, Event{Project: "a", ObjectKind: "run", ObjectName: "train", Type: "created"}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.AddEvent(ctx, Event{Project: "b", ObjectKind: "run", ObjectName: "train", Type: "created"}); err != nil {
			t.Fatal(err)
		}
		if es, err := s.ListEvents(ctx, EventFilter{Project: "b", ObjectName: "train"}); err != nil || len(es) != 1 || es[0].Project != "b" {
			t.Errorf("events of b = %+v, %v; want b's one", es, err)
		}
	})
}
