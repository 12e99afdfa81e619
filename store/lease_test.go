package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/uptrace/bun"
)

// replica returns a second Store on the same database with its own connection
// pool, as a second hoist server would have. SQLite's owner lock forbids a
// second Open, so there the pool is opened directly.
func replica(t testing.TB, dsn string, clock func() time.Time) *Store {
	t.Helper()
	if isPostgres(dsn) {
		return openTest(t, dsn, Options{Now: clock})
	}
	return &Store{db: rawDB(t, dsn), dialect: DialectSQLite, now: clock, logQuota: DefaultLogQuota}
}

// insertDueRuns inserts n submitted runs in bulk and returns their ids.
func insertDueRuns(t testing.TB, s *Store, n int) []string {
	t.Helper()
	ctx := context.Background()
	ids := make([]string, 0, n)
	now := s.Now()
	err := s.RunInTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		batch := make([]Run, 0, 500)
		flush := func() error {
			if len(batch) == 0 {
				return nil
			}
			_, err := tx.NewInsert().Model(&batch).ExcludeColumn(leaseColumnNames...).Exec(ctx)
			batch = batch[:0]
			return err
		}
		for i := range n {
			r := Run{ID: newID(), Project: "main", Name: fmt.Sprintf("run-%05d", i), Type: "task", Status: RunSubmitted,
				SubmittedAt: now, Version: 1, CreatedAt: now, UpdatedAt: now}
			ids = append(ids, r.ID)
			batch = append(batch, r)
			if len(batch) == cap(batch) {
				if err := flush(); err != nil {
					return err
				}
			}
		}
		return flush()
	})
	if err != nil {
		t.Fatalf("insert %d runs: %v", n, err)
	}
	return ids
}

type claimStats struct {
	processed  atomic.Int64
	claims     atomic.Int64
	leaseLost  atomic.Int64
	mu         sync.Mutex
	counts     map[string]int
	errs       []error
	perReplica []int64
}

// runClaimers races len(stores) replicas × workers over total due runs, the
// way the reconciler's pipelines do: per replica one fetcher claims batches
// into a queue and workers process each row under its lease (one guarded
// write, then Release; or both at once with Complete in mode "complete"; or
// no write at all, only Release, in mode "release").
func runClaimers(ctx context.Context, stores []*Store, workers, total int, mode string) *claimStats {
	st := &claimStats{counts: make(map[string]int, total), perReplica: make([]int64, len(stores))}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	fail := func(err error) {
		st.mu.Lock()
		st.errs = append(st.errs, err)
		st.mu.Unlock()
		cancel()
	}
	for ri, s := range stores {
		queue := make(chan Lease, 2*workers)
		owner := fmt.Sprintf("runs@replica-%d", ri)
		wg.Add(1)
		go func() { // fetcher
			defer wg.Done()
			defer close(queue)
			for ctx.Err() == nil && st.processed.Load() < int64(total) {
				if len(queue) > workers/2 {
					time.Sleep(200 * time.Microsecond)
					continue
				}
				leases, err := s.Claim(ctx, ClaimRequest{
					Table: "runs", Owner: owner, Limit: 2 * workers, LeaseFor: time.Minute, MinInterval: time.Hour,
					Where: "status = ?", Args: []any{RunSubmitted},
				})
				if err != nil {
					if ctx.Err() == nil {
						fail(err)
					}
					return
				}
				st.claims.Add(int64(len(leases)))
				if len(leases) == 0 {
					time.Sleep(2 * time.Millisecond)
					continue
				}
				for _, l := range leases {
					queue <- l
				}
			}
		}()
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for l := range queue {
					work := func(ctx context.Context, tx bun.Tx) error {
						_, err := tx.NewUpdate().Model((*Run)(nil)).
							Set("status = ?", RunRunning).Set("priority = priority + 1").Set("version = version + 1").
							Where("id = ?", l.ID).Exec(ctx)
						return err
					}
					var err error
					switch mode {
					case "complete":
						err = s.Complete(ctx, l, work)
					case "release":
						err = s.Release(ctx, l)
					default:
						if err = s.WithLease(ctx, l, work); err == nil {
							err = s.Release(ctx, l)
						}
					}
					switch {
					case errors.Is(err, ErrLeaseLost):
						st.leaseLost.Add(1)
						continue
					case err != nil:
						if ctx.Err() == nil {
							fail(err)
						}
						return
					}
					st.mu.Lock()
					st.counts[l.ID]++
					st.perReplica[ri]++
					st.mu.Unlock()
					st.processed.Add(1)
				}
			}()
		}
	}
	wg.Wait()
	return st
}

func TestLease_concurrentReplicasProcessEachRowOnce(t *testing.T) {
	rows := 10_000
	if testing.Short() {
		rows = 1_000
	}
	forEachDSN(t, func(t *testing.T, dsn string) {
		a := openTest(t, dsn, Options{})
		b := replica(t, dsn, time.Now)
		ids := insertDueRuns(t, a, rows)
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
		defer cancel()
		start := time.Now()
		st := runClaimers(ctx, []*Store{a, b}, 8, rows, "withlease+release")
		elapsed := time.Since(start)
		for _, err := range st.errs {
			t.Errorf("claimer error: %v", err)
		}
		if n := st.leaseLost.Load(); n != 0 {
			t.Errorf("%d leases lost, want 0", n)
		}
		for _, id := range ids {
			if c := st.counts[id]; c != 1 {
				t.Errorf("run %s processed %d times, want exactly once", id, c)
			}
		}
		if got := st.claims.Load(); got != int64(rows) {
			t.Errorf("%d claims for %d rows: some row was claimed twice", got, rows)
		}
		// The database agrees: every row written exactly once, none leased.
		var bad int
		if err := a.db.NewSelect().Model((*Run)(nil)).ColumnExpr("count(*)").
			Where("priority <> 1 OR status <> ? OR lock_token IS NOT NULL OR last_processed_at IS NULL", RunRunning).
			Scan(ctx, &bad); err != nil {
			t.Fatal(err)
		}
		if bad != 0 {
			t.Errorf("%d rows not processed exactly once in the database", bad)
		}
		t.Logf("%s: %d rows, 2 replicas × 8 workers: %v (%.0f claims/s), per replica %v",
			dialectOf(dsn), rows, elapsed.Round(time.Millisecond), float64(rows)/elapsed.Seconds(), st.perReplica)
	})
}

func TestLease_crashedClaimerIsReplacedAndItsWriteRefused(t *testing.T) {
	forEachDSN(t, func(t *testing.T, dsn string) {
		clock := newFakeClock()
		a := openTest(t, dsn, Options{Now: clock.Now})
		b := replica(t, dsn, clock.Now)
		ctx := t.Context()
		run := &Run{Name: "train", Type: "task", Status: RunSubmitted}
		if err := a.CreateRun(ctx, run); err != nil {
			t.Fatal(err)
		}
		req := ClaimRequest{Table: "runs", Owner: "a", Limit: 10, LeaseFor: 30 * time.Second}

		// Replica A claims the row and dies mid-work: its context is cancelled
		// inside the guarded transaction, and it never releases the lease.
		actx, kill := context.WithCancel(ctx)
		leases, err := a.Claim(actx, req)
		if err != nil || len(leases) != 1 {
			t.Fatalf("A Claim = %v, %v", leases, err)
		}
		stale := leases[0]
		started := make(chan struct{})
		done := make(chan error)
		go func() {
			done <- a.WithLease(actx, stale, func(ctx context.Context, tx bun.Tx) error {
				if _, err := tx.NewUpdate().Model((*Run)(nil)).Set("status_message = 'from a'").Where("id = ?", stale.ID).Exec(ctx); err != nil {
					return err
				}
				close(started)
				<-ctx.Done()
				return ctx.Err()
			})
		}()
		<-started
		kill()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("killed WithLease = %v, want context.Canceled", err)
		}
		// database/sql rolls the killed transaction back in the background;
		// a blocking no-op write waits until its row lock is gone.
		if _, err := b.db.NewUpdate().Table("runs").Set("lock_owner = lock_owner").Where("id = ?", run.ID).Exec(ctx); err != nil {
			t.Fatal(err)
		}

		// Before expiry nobody else gets the row.
		b.now = clock.Now
		req.Owner = "b"
		clock.Advance(29 * time.Second)
		if got, err := b.Claim(ctx, req); err != nil || len(got) != 0 {
			t.Fatalf("B Claim before expiry = %v, %v; want nothing", got, err)
		}
		// After expiry B takes it.
		clock.Advance(2 * time.Second)
		got, err := b.Claim(ctx, req)
		if err != nil || len(got) != 1 || got[0].ID != run.ID {
			t.Fatalf("B Claim after expiry = %v, %v", got, err)
		}
		fresh := got[0]
		if fresh.Token == stale.Token {
			t.Fatal("B got the same token as A")
		}

		// Every write of the stale lease is refused.
		r, err := a.GetRun(ctx, run.ID)
		if err != nil {
			t.Fatal(err)
		}
		if r.StatusMessage == "from a" {
			t.Error("A's cancelled transaction was committed")
		}
		staleRun := r
		staleRun.Status = RunFailed
		if err := a.UpdateRunLeased(ctx, stale, &staleRun); !errors.Is(err, ErrLeaseLost) {
			t.Errorf("stale UpdateRunLeased = %v, want ErrLeaseLost", err)
		}
		called := false
		if err := a.WithLease(ctx, stale, func(context.Context, bun.Tx) error { called = true; return nil }); !errors.Is(err, ErrLeaseLost) || called {
			t.Errorf("stale WithLease = %v (fn called %v), want ErrLeaseLost", err, called)
		}
		if _, err := a.Heartbeat(ctx, stale, time.Minute); !errors.Is(err, ErrLeaseLost) {
			t.Errorf("stale Heartbeat = %v, want ErrLeaseLost", err)
		}
		if err := a.Release(ctx, stale); !errors.Is(err, ErrLeaseLost) {
			t.Errorf("stale Release = %v, want ErrLeaseLost", err)
		}
		// The new holder's writes go through.
		r.Status = RunProvisioning
		if err := b.UpdateRunLeased(ctx, fresh, &r); err != nil {
			t.Fatalf("fresh UpdateRunLeased: %v", err)
		}
		if err := b.Release(ctx, fresh); err != nil {
			t.Fatalf("fresh Release: %v", err)
		}
		final, _ := a.GetRun(ctx, run.ID)
		if final.Status != RunProvisioning || final.LockToken != "" || !final.LastProcessedAt.Equal(clock.Now()) {
			t.Errorf("final run = status %s token %q last_processed %v", final.Status, final.LockToken, final.LastProcessedAt)
		}
	})
}

func TestLease_heartbeatKeepsTheRow(t *testing.T) {
	forEachDB(t, func(t *testing.T, s *Store, clock *fakeClock) {
		ctx := t.Context()
		j := createTestJob(t, s)
		req := ClaimRequest{Table: "jobs", Owner: "w", LeaseFor: 10 * time.Second}
		ls, err := s.Claim(ctx, req)
		if err != nil || len(ls) != 1 || ls[0].ID != j.ID {
			t.Fatalf("Claim = %v, %v", ls, err)
		}
		l := ls[0]
		for range 5 {
			clock.Advance(8 * time.Second)
			if l, err = s.Heartbeat(ctx, l, 10*time.Second); err != nil {
				t.Fatalf("Heartbeat: %v", err)
			}
			if got, _ := s.Claim(ctx, req); len(got) != 0 {
				t.Fatalf("row claimed while its lease was kept alive: %v", got)
			}
		}
		if !l.Expires.Equal(clock.Now().Add(10 * time.Second)) {
			t.Errorf("lease expires %v, want %v", l.Expires, clock.Now().Add(10*time.Second))
		}
		got, _ := s.GetJob(ctx, j.ID)
		got.Status = JobProvisioning
		if err := s.UpdateJobLeased(ctx, l, &got); err != nil {
			t.Fatalf("UpdateJobLeased: %v", err)
		}
		if err := s.Release(ctx, l); err != nil {
			t.Fatal(err)
		}
	})
}

func TestLease_claimSelectsDueRows(t *testing.T) {
	forEachDB(t, func(t *testing.T, s *Store, clock *fakeClock) {
		ctx := t.Context()
		mk := func(name, status string) *Instance {
			i := &Instance{Name: name, Status: status}
			if err := s.CreateInstance(ctx, i); err != nil {
				t.Fatal(err)
			}
			return i
		}
		idle := mk("idle", InstanceIdle)
		pending := mk("pending", InstancePending)
		mk("gone", InstanceTerminated)
		req := ClaimRequest{Table: "instances", Owner: "w", Limit: 10, LeaseFor: time.Minute, MinInterval: 10 * time.Second,
			Where: "status IN (?)", Args: []any{bun.In([]string{InstancePending, InstanceIdle})}}
		ls, err := s.Claim(ctx, req)
		if err != nil || len(ls) != 2 {
			t.Fatalf("Claim = %v, %v; want the pending and idle instances", ls, err)
		}
		for _, l := range ls {
			if l.Table != "instances" || l.Owner != "w" || l.Token == "" {
				t.Errorf("lease = %+v", l)
			}
			if err := s.Release(ctx, l); err != nil {
				t.Fatal(err)
			}
		}
		if ls[0].Token == ls[1].Token {
			t.Error("two rows of one claim share a token")
		}
		// Released rows wait MinInterval.
		clock.Advance(5 * time.Second)
		if got, _ := s.Claim(ctx, req); len(got) != 0 {
			t.Errorf("claimed %d rows before MinInterval", len(got))
		}
		// Least recently processed first.
		clock.Advance(10 * time.Second)
		one, _ := s.Claim(ctx, ClaimRequest{Table: "instances", Owner: "w", Limit: 1, Where: "id = ?", Args: []any{idle.ID}})
		if len(one) != 1 {
			t.Fatalf("claim idle = %v", one)
		}
		clock.Advance(time.Second)
		s.Release(ctx, one[0])
		clock.Advance(time.Minute)
		first, _ := s.Claim(ctx, ClaimRequest{Table: "instances", Owner: "w", Limit: 1, Where: "status <> ?", Args: []any{InstanceTerminated}})
		if len(first) != 1 || first[0].ID != pending.ID {
			t.Errorf("claim order: got %v, want the less recently processed %s", first, pending.ID)
		}
		if _, err := s.Claim(ctx, ClaimRequest{Table: "resources"}); err == nil {
			t.Error("Claim on resources (no lease columns): want error")
		}
		// Lease columns are not overwritten by plain updates.
		inst, _ := s.GetInstance(ctx, pending.ID)
		inst.Hostname = "h"
		if err := s.UpdateInstance(ctx, &inst); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Heartbeat(ctx, first[0], time.Minute); err != nil {
			t.Errorf("UpdateInstance cleared the lease: %v", err)
		}
	})
}

func createTestJob(t *testing.T, s *Store) *Job {
	t.Helper()
	run := &Run{Name: "r", Type: "task", Status: RunSubmitted}
	if err := s.CreateRun(t.Context(), run); err != nil {
		t.Fatal(err)
	}
	j := &Job{RunID: run.ID, Status: JobSubmitted}
	if err := s.CreateJob(t.Context(), j); err != nil {
		t.Fatal(err)
	}
	return j
}

func TestLease_keepLeaseHeartbeatsUntilLost(t *testing.T) {
	forEachDSN(t, func(t *testing.T, dsn string) {
		ctx := t.Context()
		s := openTest(t, dsn, Options{}) // real clock: KeepLease runs on real time
		j := createTestJob(t, s)
		const leaseFor = 600 * time.Millisecond
		ls, err := s.Claim(ctx, ClaimRequest{Table: "jobs", Owner: "w", LeaseFor: leaseFor})
		if err != nil || len(ls) != 1 {
			t.Fatalf("Claim = %v, %v", ls, err)
		}
		lctx, stop := s.KeepLease(ctx, ls[0], leaseFor)
		// Work for several lease lengths; nobody may take the row meanwhile.
		deadline := time.Now().Add(3 * leaseFor)
		for time.Now().Before(deadline) {
			if got, err := s.Claim(ctx, ClaimRequest{Table: "jobs", Owner: "thief"}); err != nil || len(got) != 0 {
				t.Fatalf("row claimed while kept: %v, %v", got, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
		if lctx.Err() != nil {
			t.Fatalf("lease context ended while the lease was held: %v", context.Cause(lctx))
		}
		l, err := stop()
		if err != nil {
			t.Fatalf("stop: %v", err)
		}
		if !l.Expires.After(ls[0].Expires) {
			t.Errorf("lease was not extended: %v -> %v", ls[0].Expires, l.Expires)
		}

		// Now lose it: another worker takes the row (simulated by a token change).
		lctx, stop = s.KeepLease(ctx, l, leaseFor)
		if _, err := s.db.NewUpdate().Table("jobs").Set("lock_token = 'stolen'").Where("id = ?", j.ID).Exec(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case <-lctx.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("lease context not cancelled after the lease was lost")
		}
		if !errors.Is(context.Cause(lctx), ErrLeaseLost) {
			t.Errorf("cause = %v, want ErrLeaseLost", context.Cause(lctx))
		}
		if _, err := stop(); !errors.Is(err, ErrLeaseLost) {
			t.Errorf("stop = %v, want ErrLeaseLost", err)
		}
	})
}

// TestLease_sqliteReopenDropsTheDeadProcessLeases: a server killed while
// holding leases on SQLite leaves them in the file; the next Open (the
// restarted server, the file's only user) clears them, so that its
// workers take the rows at once instead of after LeaseFor. On PostgreSQL
// a lease of another server stays.
func TestLease_sqliteReopenDropsTheDeadProcessLeases(t *testing.T) {
	forEachDSN(t, func(t *testing.T, dsn string) {
		clock := newFakeClock()
		ctx := t.Context()
		a, err := Open(ctx, dsn, Options{Now: clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		run := &Run{Name: "train", Type: "task", Status: RunSubmitted}
		if err := a.CreateRun(ctx, run); err != nil {
			t.Fatal(err)
		}
		req := ClaimRequest{Table: "runs", Owner: "a", Limit: 10, LeaseFor: 30 * time.Second}
		if got, err := a.Claim(ctx, req); err != nil || len(got) != 1 {
			t.Fatalf("Claim = %v, %v", got, err)
		}
		// The process dies holding the lease: only its lock file goes.
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		b := openTest(t, dsn, Options{Now: clock.Now})
		req.Owner = "b"
		got, err := b.Claim(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		want := 1
		if isPostgres(dsn) {
			want = 0
		}
		if len(got) != want {
			t.Fatalf("%s: Claim after reopen = %v, want %d lease(s)", dialectOf(dsn), got, want)
		}
	})
}

// TestLease_restartedOwnerReleasesOnlyItsOwnLeases: on PostgreSQL, where
// other servers' leases are live, a server that starts again under its
// old name (serve's data-directory owner) takes back the leases its killed
// predecessor held, and leaves another owner's alone.
func TestLease_restartedOwnerReleasesOnlyItsOwnLeases(t *testing.T) {
	forEachDSN(t, func(t *testing.T, dsn string) {
		clock := newFakeClock()
		ctx := t.Context()
		st := openTest(t, dsn, Options{Now: clock.Now})
		for _, name := range []string{"mine", "theirs"} {
			if err := st.CreateRun(ctx, &Run{Name: name, Type: "task", Status: RunSubmitted}); err != nil {
				t.Fatal(err)
			}
		}
		held := map[string]string{}
		for _, owner := range []string{"host-dead", "host-live"} {
			got, err := st.Claim(ctx, ClaimRequest{Table: "runs", Owner: owner, Limit: 1, LeaseFor: 30 * time.Second})
			if err != nil || len(got) != 1 {
				t.Fatalf("Claim by %s = %v, %v", owner, got, err)
			}
			held[owner] = got[0].ID
		}
		n, err := st.ReleaseLeasesOf(ctx, "host-dead")
		if err != nil || n != 1 {
			t.Fatalf("ReleaseLeasesOf = %d, %v; want 1 lease released", n, err)
		}
		got, err := st.Claim(ctx, ClaimRequest{Table: "runs", Owner: "host-dead", Limit: 10, LeaseFor: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0].ID != held["host-dead"] {
			t.Fatalf("%s: Claim after the release = %v, want only the released run %s (the live owner's %s stays leased)",
				dialectOf(dsn), got, held["host-dead"], held["host-live"])
		}
	})
}
