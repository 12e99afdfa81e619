package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/uptrace/bun"
)

func TestShared_confirmationsAreSharedAndExpire(t *testing.T) {
	forEachDB(t, func(t *testing.T, s *Store, clock *fakeClock) {
		ctx := context.Background()
		if ok, err := s.RevisionConfirmed(ctx, DefaultProject, "abc"); err != nil || ok {
			t.Fatalf("RevisionConfirmed before = %v, %v; want false", ok, err)
		}
		for range 2 { // confirming twice is a no-op
			if err := s.ConfirmRevision(ctx, DefaultProject, "abc"); err != nil {
				t.Fatalf("ConfirmRevision: %v", err)
			}
		}
		if ok, err := s.RevisionConfirmed(ctx, DefaultProject, "abc"); err != nil || !ok {
			t.Fatalf("RevisionConfirmed after = %v, %v; want true", ok, err)
		}
		clock.Advance(ConfirmationTTL + time.Second)
		if ok, _ := s.RevisionConfirmed(ctx, DefaultProject, "abc"); ok {
			t.Errorf("an expired confirmation still counts")
		}
		if n, err := s.PruneExpired(ctx); err != nil || n != 1 {
			t.Errorf("PruneExpired = %d, %v; want 1 row", n, err)
		}
	})
}

func TestShared_probeCountersCountPassesInARow(t *testing.T) {
	forEachDB(t, func(t *testing.T, s *Store, clock *fakeClock) {
		ctx := context.Background()
		steps := []struct {
			ok   bool
			want int
		}{{true, 1}, {true, 2}, {false, 0}, {true, 1}, {true, 2}, {true, 3}}
		for i, st := range steps {
			got, err := s.RecordProbe(ctx, "job-1", 0, st.ok)
			if err != nil || got != st.want {
				t.Fatalf("step %d: RecordProbe(%v) = %d, %v; want %d", i, st.ok, got, err, st.want)
			}
		}
		if got, _ := s.RecordProbe(ctx, "job-1", 1, true); got != 1 {
			t.Errorf("second probe of the job = %d, want 1 (counted apart)", got)
		}
		clock.Advance(time.Minute)
		if _, err := s.RecordProbe(ctx, "job-2", 0, false); err != nil {
			t.Fatal(err)
		}
		cs, err := s.ListProbeCounters(ctx, "job-1", "job-2", "job-3")
		if err != nil {
			t.Fatal(err)
		}
		want := []ProbeCounter{{JobID: "job-1", Probe: 0, Passes: 3}, {JobID: "job-1", Probe: 1, Passes: 1}, {JobID: "job-2", Probe: 0, Passes: 0}}
		if len(cs) != len(want) {
			t.Fatalf("ListProbeCounters = %+v, want %+v", cs, want)
		}
		for i, c := range cs {
			if c.JobID != want[i].JobID || c.Probe != want[i].Probe || c.Passes != want[i].Passes {
				t.Errorf("counter %d = %+v, want %+v", i, c, want[i])
			}
		}
		if !cs[2].UpdatedAt.After(cs[0].UpdatedAt) {
			t.Errorf("job-2's counter recorded at %s, not after job-1's %s", cs[2].UpdatedAt, cs[0].UpdatedAt)
		}
		if cs, err := s.ListProbeCounters(ctx); err != nil || cs != nil {
			t.Errorf("no jobs: %v, %v", cs, err)
		}
		if err := s.DeleteProbeCounters(ctx, "job-2"); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteProbeCounters(ctx, "job-1"); err != nil {
			t.Fatal(err)
		}
		if got, _ := s.RecordProbe(ctx, "job-1", 0, true); got != 1 {
			t.Errorf("after delete = %d, want 1", got)
		}
		// The job does not exist: its counters are pruned.
		if n, err := s.PruneExpired(ctx); err != nil || n != 1 {
			t.Errorf("PruneExpired = %d, %v; want the orphan counter", n, err)
		}
	})
}

func TestShared_deliveriesAreSeenOnceUntilExpired(t *testing.T) {
	forEachDB(t, func(t *testing.T, s *Store, clock *fakeClock) {
		ctx := context.Background()
		if dup, err := s.SeenDelivery(ctx, time.Hour, "github:id:1", "github:body:x"); err != nil || dup {
			t.Fatalf("first delivery = %v, %v; want new", dup, err)
		}
		if dup, _ := s.SeenDelivery(ctx, time.Hour, "github:id:1", "github:body:y"); !dup {
			t.Errorf("same delivery id again was not a duplicate")
		}
		if dup, _ := s.SeenDelivery(ctx, time.Hour, "github:id:2", "github:body:x"); !dup {
			t.Errorf("same body under a new id was not a duplicate")
		}
		// The refused replay recorded nothing: body y is still new.
		if dup, _ := s.SeenDelivery(ctx, time.Hour, "", "github:body:y"); dup {
			t.Errorf("a key of a refused replay was recorded")
		}
		clock.Advance(time.Hour + time.Second)
		if dup, _ := s.SeenDelivery(ctx, time.Hour, "github:id:1"); dup {
			t.Errorf("an expired delivery id still counts")
		}
		if n, err := s.PruneExpired(ctx); err != nil || n != 2 {
			t.Errorf("PruneExpired = %d, %v; want the 2 expired keys", n, err)
		}
	})
}

func TestShared_sessionsAreSharedAndExpire(t *testing.T) {
	forEachDB(t, func(t *testing.T, s *Store, clock *fakeClock) {
		ctx := context.Background()
		ses := Session{ID: "cookie-value", Principal: "ada", Role: "user", CSRF: "c", ExpiresAt: clock.Now().Add(time.Hour)}
		if err := s.CreateSession(ctx, ses); err != nil {
			t.Fatal(err)
		}
		var raw string
		if err := s.db.NewSelect().Table("web_sessions").Column("id_hash").Scan(ctx, &raw); err != nil || raw == ses.ID {
			t.Errorf("stored id = %q, %v; want a hash, never the cookie", raw, err)
		}
		got, err := s.GetSession(ctx, "cookie-value")
		if err != nil || got.Principal != "ada" || got.Role != "user" || got.CSRF != "c" || !got.ExpiresAt.Equal(ses.ExpiresAt) {
			t.Fatalf("GetSession = %+v, %v", got, err)
		}
		if _, err := s.GetSession(ctx, "other"); !errors.Is(err, ErrNotFound) {
			t.Errorf("unknown session = %v, want ErrNotFound", err)
		}
		clock.Advance(time.Hour)
		if _, err := s.GetSession(ctx, "cookie-value"); !errors.Is(err, ErrNotFound) {
			t.Errorf("expired session = %v, want ErrNotFound", err)
		}
		if n, _ := s.PruneExpired(ctx); n != 1 {
			t.Errorf("PruneExpired = %d, want the expired session", n)
		}
		if err := s.CreateSession(ctx, Session{ID: "x", Principal: "b", Role: "admin", CSRF: "d", ExpiresAt: clock.Now().Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteSession(ctx, "x"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.GetSession(ctx, "x"); !errors.Is(err, ErrNotFound) {
			t.Errorf("deleted session = %v, want ErrNotFound", err)
		}
	})
}

func TestShared_prPlansKeepTheLatestHead(t *testing.T) {
	forEachDB(t, func(t *testing.T, s *Store, clock *fakeClock) {
		ctx := context.Background()
		put := func(n int, head, data string, same bool) {
			t.Helper()
			clock.Advance(time.Second)
			if err := s.PutPRPlan(ctx, PRPlan{Provider: "github", Number: n, HeadSHA: head, Data: []byte(data)}, same); err != nil {
				t.Fatal(err)
			}
		}
		put(1, "a", "planning a", false)
		put(1, "b", "planning b", false)
		put(1, "a", "planned a", true) // finished after the newer push: dropped
		put(2, "c", "planning c", false)
		ps, err := s.ListPRPlans(ctx)
		if err != nil || len(ps) != 2 {
			t.Fatalf("ListPRPlans = %v, %v", ps, err)
		}
		if ps[0].Number != 2 || ps[1].HeadSHA != "b" || string(ps[1].Data) != "planning b" {
			t.Errorf("plans = %+v", ps)
		}
		put(1, "b", "planned b", true)
		if ps, _ := s.ListPRPlans(ctx); string(ps[0].Data) != "planned b" {
			t.Errorf("update of the current head was not kept: %+v", ps[0])
		}
		if err := s.DeletePRPlan(ctx, "github", 1); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < MaxPRPlans+5; i++ {
			put(100+i, "h", "p", false)
		}
		if ps, _ := s.ListPRPlans(ctx); len(ps) != MaxPRPlans || ps[0].Number != 100+MaxPRPlans+4 {
			t.Errorf("kept %d plans (newest #%d), want the newest %d", len(ps), ps[0].Number, MaxPRPlans)
		}
		var n int
		if err := s.db.NewSelect().Table("pr_plans").ColumnExpr("count(*)").Scan(ctx, &n); err != nil || n != MaxPRPlans {
			t.Errorf("rows = %d, %v; want %d", n, err, MaxPRPlans)
		}
	})
}

func TestBackendRecords_areEncryptedAndListedByBackend(t *testing.T) {
	forEachDB(t, func(t *testing.T, s *Store, clock *fakeClock) {
		ctx := context.Background()
		if _, ok, err := s.GetBackendRecord(ctx, "gpu-hosts", "i-1"); err != nil || ok {
			t.Fatalf("missing record = %v, %v", ok, err)
		}
		for i := 1; i <= 3; i++ {
			v := json.RawMessage(fmt.Sprintf(`{"id":"i-%d","private_key":"SECRET"}`, i))
			if err := s.PutBackendRecord(ctx, "gpu-hosts", fmt.Sprintf("i-%d", i), v); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.PutBackendRecord(ctx, "other", "i-1", json.RawMessage(`{}`)); err != nil {
			t.Fatal(err)
		}
		if err := s.PutBackendRecord(ctx, "gpu-hosts", "i-2", json.RawMessage(`{"id":"i-2","v":2}`)); err != nil {
			t.Fatal(err)
		}
		var blobs [][]byte
		if err := s.db.NewSelect().Table("backend_records").Column("ciphertext").Scan(ctx, &blobs); err != nil {
			t.Fatal(err)
		}
		for _, b := range blobs {
			if json.Valid(b) {
				t.Errorf("a record is stored in clear: %s", b)
			}
		}
		got, ok, err := s.GetBackendRecord(ctx, "gpu-hosts", "i-2")
		if err != nil || !ok || string(got) != `{"id":"i-2","v":2}` {
			t.Errorf("GetBackendRecord = %s, %v, %v", got, ok, err)
		}
		all, err := s.ListBackendRecords(ctx, "gpu-hosts")
		if err != nil || len(all) != 3 {
			t.Fatalf("ListBackendRecords = %v, %v", all, err)
		}
		if err := s.DeleteBackendRecord(ctx, "gpu-hosts", "i-1"); err != nil {
			t.Fatal(err)
		}
		if all, _ := s.ListBackendRecords(ctx, "gpu-hosts"); len(all) != 2 {
			t.Errorf("after delete: %d records, want 2", len(all))
		}
	})
}

func TestCreateRunWithJobs_retryIsANoOp(t *testing.T) {
	forEachDB(t, func(t *testing.T, s *Store, clock *fakeClock) {
		ctx := context.Background()
		mk := func() (Run, []Job) {
			return Run{Name: "train", Type: "task", Status: RunSubmitted, SubmitKey: "main/train/rev1/hash"},
				[]Job{{JobName: "train-0-0", Status: JobSubmitted}, {JobNum: 1, JobName: "train-1-0", Status: JobSubmitted}}
		}
		r, js := mk()
		created, err := s.CreateRunWithJobs(ctx, &r, js)
		if err != nil || !created || r.ID == "" || js[1].RunID != r.ID {
			t.Fatalf("first CreateRunWithJobs = %v, %v (run %q, job run %q)", created, err, r.ID, js[1].RunID)
		}
		r2, js2 := mk()
		created, err = s.CreateRunWithJobs(ctx, &r2, js2)
		if err != nil || created {
			t.Fatalf("retry = %v, %v; want a no-op", created, err)
		}
		runs, _ := s.ListRuns(ctx, RunFilter{Name: "train"})
		jobs, _ := s.ListJobsFiltered(ctx, JobFilter{})
		if len(runs) != 1 || len(jobs) != 2 {
			t.Errorf("rows after retry: %d runs, %d jobs; want 1 and 2", len(runs), len(jobs))
		}
		// A job that cannot be written rolls the run back with it.
		bad := Run{Name: "broken", Type: "task", Status: RunSubmitted, SubmitKey: "k2"}
		if _, err := s.CreateRunWithJobs(ctx, &bad, []Job{{JobName: "x", Status: "no-such-status"}}); err == nil {
			t.Fatalf("a job with an invalid status was written")
		}
		if runs, _ := s.ListRuns(ctx, RunFilter{Name: "broken"}); len(runs) != 0 {
			t.Errorf("the run of a failed job write was kept")
		}
		// Re-runs carry no key and are always written.
		for range 2 {
			rr := Run{Name: "train", Type: "task", Status: RunSubmitted}
			if created, err := s.CreateRunWithJobs(ctx, &rr, nil); err != nil || !created {
				t.Fatalf("keyless run = %v, %v", created, err)
			}
		}
	})
}

func TestKeepAlive_stopsWhenTheLeaseIsTaken(t *testing.T) {
	forEachDSN(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := openTest(t, dsn, Options{SecretKey: testKey}) // real clock: heartbeats run on real time
		r := Run{Name: "r", Type: "task", Status: RunSubmitted}
		if err := s.CreateRun(ctx, &r); err != nil {
			t.Fatal(err)
		}
		ls, err := s.Claim(ctx, ClaimRequest{Table: "runs", Owner: "a", LeaseFor: 300 * time.Millisecond})
		if err != nil || len(ls) != 1 {
			t.Fatalf("Claim = %v, %v", ls, err)
		}
		k := s.KeepAlive(ctx, ls[0], 300*time.Millisecond)
		time.Sleep(700 * time.Millisecond) // past the first lease: kept alive
		if k.Context().Err() != nil {
			t.Fatalf("keeper stopped early: %v", context.Cause(k.Context()))
		}
		if !k.Lease().Expires.After(ls[0].Expires) {
			t.Errorf("lease was not extended")
		}
		// Another server takes the row (as after a long pause of this one).
		if _, err := s.db.NewUpdate().Table("runs").Set("lock_token = 'other'").Where("id = ?", r.ID).Exec(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case <-k.Context().Done():
		case <-time.After(2 * time.Second):
			t.Fatal("keeper did not notice the lost lease")
		}
		if !errors.Is(context.Cause(k.Context()), ErrLeaseLost) || !k.Lost() {
			t.Errorf("cause = %v, want ErrLeaseLost", context.Cause(k.Context()))
		}
		if _, err := k.Stop(); !errors.Is(err, ErrLeaseLost) {
			t.Errorf("Stop = %v, want ErrLeaseLost", err)
		}
	})
}

func TestAssignJobLeased_oneActiveJobPerExclusiveInstance(t *testing.T) {
	forEachDB(t, func(t *testing.T, s *Store, clock *fakeClock) {
		ctx := context.Background()
		inst := Instance{Name: "host-0", Status: InstanceIdle}
		if err := s.CreateInstance(ctx, &inst); err != nil {
			t.Fatal(err)
		}
		r := Run{Name: "r", Type: "task", Status: RunSubmitted}
		jobs := []Job{{JobName: "a", Status: JobSubmitted}, {JobName: "b", Status: JobSubmitted}}
		if _, err := s.CreateRunWithJobs(ctx, &r, jobs); err != nil {
			t.Fatal(err)
		}
		lease := func(id string) Lease {
			t.Helper()
			ls, err := s.Claim(ctx, ClaimRequest{Table: "jobs", Owner: "w", Where: "id = ?", Args: []any{id}})
			if err != nil || len(ls) != 1 {
				t.Fatalf("claim %s: %v, %v", id, ls, err)
			}
			return ls[0]
		}
		a, b := jobs[0], jobs[1]
		a.InstanceID, a.Status = inst.ID, JobProvisioning
		if err := s.AssignJobLeased(ctx, lease(a.ID), &a, true); err != nil {
			t.Fatalf("first assignment: %v", err)
		}
		b.InstanceID, b.Status = inst.ID, JobProvisioning
		lb := lease(b.ID)
		if err := s.AssignJobLeased(ctx, lb, &b, true); !errors.Is(err, ErrInstanceBusy) {
			t.Fatalf("second exclusive assignment = %v, want ErrInstanceBusy", err)
		}
		if got, _ := s.GetJob(ctx, b.ID); got.InstanceID != "" || got.Version != b.Version {
			t.Errorf("the refused assignment wrote the job: %+v", got)
		}
		// A shared instance (this host) takes both.
		if err := s.AssignJobLeased(ctx, lb, &b, false); err != nil {
			t.Errorf("shared assignment: %v", err)
		}
		// Once a's job is done, the instance is free for another.
		a.Status = JobDone
		if err := s.UpdateJob(ctx, &a); err != nil {
			t.Fatal(err)
		}
		c := Job{RunID: r.ID, JobName: "c", Status: JobSubmitted}
		if err := s.CreateJob(ctx, &c); err != nil {
			t.Fatal(err)
		}
		b.Status = JobDone
		if err := s.UpdateJob(ctx, &b); err != nil {
			t.Fatal(err)
		}
		c.InstanceID = inst.ID
		if err := s.AssignJobLeased(ctx, lease(c.ID), &c, true); err != nil {
			t.Errorf("assignment to the freed instance: %v", err)
		}
	})
}

func TestAssignJobBlocksLeased_jobsShareAnInstancesBlocks(t *testing.T) {
	forEachDB(t, func(t *testing.T, s *Store, clock *fakeClock) {
		ctx := context.Background()
		inst := Instance{Name: "host-0", Status: InstanceIdle}
		if err := s.CreateInstance(ctx, &inst); err != nil {
			t.Fatal(err)
		}
		r := Run{Name: "r", Type: "task", Status: RunSubmitted}
		jobs := []Job{{JobName: "a", Status: JobSubmitted}, {JobName: "b", Status: JobSubmitted}, {JobName: "c", Status: JobSubmitted}}
		if _, err := s.CreateRunWithJobs(ctx, &r, jobs); err != nil {
			t.Fatal(err)
		}
		lease := func(id string) Lease {
			t.Helper()
			ls, err := s.Claim(ctx, ClaimRequest{Table: "jobs", Owner: "w", Where: "id = ?", Args: []any{id}})
			if err != nil || len(ls) != 1 {
				t.Fatalf("claim %s: %v, %v", id, ls, err)
			}
			return ls[0]
		}
		// Of an instance of 4 blocks, a takes 1 and b 3; c's 1 more does
		// not fit.
		for i, blocks := range []int{1, 3} {
			j := &jobs[i]
			j.InstanceID, j.Status, j.Blocks = inst.ID, JobProvisioning, blocks
			if err := s.AssignJobBlocksLeased(ctx, lease(j.ID), j, 4); err != nil {
				t.Fatalf("assign %s (%d blocks): %v", j.JobName, blocks, err)
			}
		}
		if busy, err := s.BusyBlocks(ctx, inst.ID, "", 4); err != nil || busy != 4 {
			t.Fatalf("busy blocks = %d, %v; want 4", busy, err)
		}
		c := jobs[2]
		c.InstanceID, c.Status, c.Blocks = inst.ID, JobProvisioning, 1
		lc := lease(c.ID)
		if err := s.AssignJobBlocksLeased(ctx, lc, &c, 4); !errors.Is(err, ErrInstanceBusy) {
			t.Fatalf("assignment beyond the instance's blocks = %v, want ErrInstanceBusy", err)
		}
		// Once a is done, its block is c's.
		a := jobs[0]
		a.Status = JobDone
		if err := s.UpdateJob(ctx, &a); err != nil {
			t.Fatal(err)
		}
		if err := s.AssignJobBlocksLeased(ctx, lc, &c, 4); err != nil {
			t.Fatalf("assignment to the freed block: %v", err)
		}
		if busy, err := s.BusyBlocks(ctx, inst.ID, c.ID, 4); err != nil || busy != 3 {
			t.Errorf("busy blocks but c's = %d, %v; want 3", busy, err)
		}
		// A job that records no blocks (a node of a multi-node run) holds
		// the whole instance.
		b := jobs[1]
		b.Blocks = 0
		if err := s.UpdateJob(ctx, &b); err != nil {
			t.Fatal(err)
		}
		if busy, err := s.BusyBlocks(ctx, inst.ID, c.ID, 4); err != nil || busy != 4 {
			t.Errorf("busy blocks with a job of no recorded blocks = %d, %v; want all 4", busy, err)
		}
	})
}

func TestShared_prPlanCommentSurvivesNewPushes(t *testing.T) {
	forEachDB(t, func(t *testing.T, s *Store, clock *fakeClock) {
		ctx := context.Background()
		if _, err := s.GetPRPlan(ctx, "github", 7); !errors.Is(err, ErrNotFound) {
			t.Fatalf("missing plan = %v, want ErrNotFound", err)
		}
		if err := s.PutPRPlan(ctx, PRPlan{Provider: "github", Number: 7, HeadSHA: "a", Data: []byte("planning a")}, false); err != nil {
			t.Fatal(err)
		}
		if err := s.SetPRPlanComment(ctx, "github", 7, 4242); err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Second)
		// A new push writes the plan again without knowing the comment.
		if err := s.PutPRPlan(ctx, PRPlan{Provider: "github", Number: 7, HeadSHA: "b", Data: []byte("planning b")}, false); err != nil {
			t.Fatal(err)
		}
		if err := s.PutPRPlan(ctx, PRPlan{Provider: "github", Number: 7, HeadSHA: "b", Data: []byte("planned b")}, true); err != nil {
			t.Fatal(err)
		}
		p, err := s.GetPRPlan(ctx, "github", 7)
		if err != nil || p.CommentID != 4242 || p.HeadSHA != "b" || string(p.Data) != "planned b" {
			t.Fatalf("GetPRPlan = %+v, %v; want comment 4242 kept at head b", p, err)
		}
		if err := s.PutPRPlan(ctx, PRPlan{Provider: "github", Number: 7, HeadSHA: "c", Data: []byte("c"), CommentID: 99}, false); err != nil {
			t.Fatal(err)
		}
		if ps, _ := s.ListPRPlans(ctx); len(ps) != 1 || ps[0].CommentID != 99 {
			t.Errorf("a given comment id replaces the stored one: %+v", ps)
		}
		if err := s.SetPRPlanComment(ctx, "gitlab", 1, 5); err != nil {
			t.Errorf("SetPRPlanComment of a closed request = %v, want nil", err)
		}
	})
}

// heartbeatCounter counts the statements that extend leases.
type heartbeatCounter struct{ n atomic.Int64 }

func (h *heartbeatCounter) BeforeQuery(ctx context.Context, _ *bun.QueryEvent) context.Context {
	return ctx
}

func (h *heartbeatCounter) AfterQuery(_ context.Context, e *bun.QueryEvent) {
	if strings.HasPrefix(e.Query, "UPDATE") && strings.Contains(e.Query, "lock_expires_at") && !strings.Contains(e.Query, "lock_owner") {
		h.n.Add(1)
	}
}

func TestKeepAlive_renewsEveryLeaseOfATableInOneStatement(t *testing.T) {
	forEachDSN(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := openTest(t, dsn, Options{SecretKey: testKey}) // real clock: heartbeats run on real time
		for i := range 20 {
			r := Run{Name: fmt.Sprintf("r%02d", i), Type: "task", Status: RunSubmitted}
			if err := s.CreateRun(ctx, &r); err != nil {
				t.Fatal(err)
			}
		}
		const leaseFor = 600 * time.Millisecond
		ls, err := s.Claim(ctx, ClaimRequest{Table: "runs", Owner: "a", Limit: 20, LeaseFor: leaseFor})
		if err != nil || len(ls) != 20 {
			t.Fatalf("Claim = %d leases, %v", len(ls), err)
		}
		h := &heartbeatCounter{}
		s.db.AddQueryHook(h)
		var ks []*LeaseKeeper
		for _, l := range ls {
			ks = append(ks, s.KeepAlive(ctx, l, leaseFor))
		}
		// Another server takes one row.
		if _, err := s.db.NewUpdate().Table("runs").Set("lock_token = 'other'").Where("id = ?", ls[0].ID).Exec(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case <-ks[0].Context().Done():
		case <-time.After(5 * time.Second):
			t.Fatal("keeper did not notice the lost lease")
		}
		time.Sleep(2 * leaseFor) // past the first leases: the others are kept alive
		for i, k := range ks[1:] {
			if k.Context().Err() != nil {
				t.Fatalf("keeper %d stopped: %v", i+1, context.Cause(k.Context()))
			}
			if !k.Lease().Expires.After(ls[i+1].Expires) {
				t.Errorf("lease %d was not extended", i+1)
			}
		}
		ticks := h.n.Load()
		for _, k := range ks {
			_, _ = k.Stop()
		}
		// One statement per tick for all twenty leases: about 3 × 2 ticks
		// of a third of the lease, never one per lease.
		if ticks < 2 || ticks > 15 {
			t.Errorf("%d heartbeat statements for 20 leases over %d ticks, want one per tick", ticks, 3*2+1)
		}
		if _, err := ks[0].Stop(); !errors.Is(err, ErrLeaseLost) {
			t.Errorf("Stop = %v, want ErrLeaseLost", err)
		}
	})
}
