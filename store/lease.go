package store

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/uptrace/bun"
)

// LeaseTables are the tables whose rows workers claim with leases.
var LeaseTables = []string{"runs", "jobs", "instances", "fleets", "volumes", "gateways"}

// Lease is a worker's time-limited claim on one row. Writes made under it
// (UpdateXLeased, WithLease) are refused with ErrLeaseLost once another
// worker has taken the row.
type Lease struct {
	// Table is one of LeaseTables.
	Table string
	// ID is the claimed row's id.
	ID string
	// Token identifies this lease; it is unique per row and claim.
	Token string
	// Owner names the claimer (for example "runs@host-1").
	Owner string
	// Expires is when the lease lapses unless extended by Heartbeat.
	Expires time.Time
}

// ClaimRequest describes which rows a claimer wants.
type ClaimRequest struct {
	// Table is one of LeaseTables.
	Table string
	// Owner names the claimer; stored in lock_owner for diagnosis.
	Owner string
	// Project keeps rows of this project (every project when empty), so
	// that the workers of one project's controller never take another's
	// rows; jobs belong to their run's project.
	Project string
	// Limit is the most rows to claim (1 when zero).
	Limit int
	// LeaseFor is how long the lease lasts before another claimer may take
	// the row (30 s when zero).
	LeaseFor time.Duration
	// MinInterval skips rows released less than this long ago.
	MinInterval time.Duration
	// Where is an extra SQL condition on the table's columns, with ? placeholders
	// for Args, e.g. "status IN (?)" with bun.In(statuses). Compare times only
	// against Go time.Time arguments.
	Where string
	// Args are the arguments of Where.
	Args []any
}

// Claim leases up to req.Limit due rows of req.Table: rows whose lease is
// absent or expired, that were released at least req.MinInterval ago (or
// never), and that match req.Where; least recently processed first. On
// Postgres the candidates are locked with FOR UPDATE SKIP LOCKED, so
// concurrent claimers on several servers never get the same row; SQLite has
// one writer, so the same statement is atomic there.
func (s *Store) Claim(ctx context.Context, req ClaimRequest) ([]Lease, error) {
	return claim(ctx, s.db, s.dialect, s.Now(), req)
}

func claim(ctx context.Context, db bun.IDB, dialect string, now time.Time, req ClaimRequest) ([]Lease, error) {
	if !slices.Contains(LeaseTables, req.Table) {
		return nil, fmt.Errorf("claim: table %q has no lease columns", req.Table)
	}
	if req.Limit <= 0 {
		req.Limit = 1
	}
	if req.LeaseFor <= 0 {
		req.LeaseFor = 30 * time.Second
	}
	expires := now.Add(req.LeaseFor)
	var rows []struct {
		ID            string    `bun:"id"`
		LockToken     string    `bun:"lock_token"`
		LockExpiresAt time.Time `bun:"lock_expires_at"`
	}
	if err := claimQuery(db, dialect, now, req, newID()+"/").Scan(ctx, &rows); err != nil {
		return nil, fmt.Errorf("claim %s: %w", req.Table, err)
	}
	leases := make([]Lease, 0, len(rows))
	for _, r := range rows {
		leases = append(leases, Lease{Table: req.Table, ID: r.ID, Token: r.LockToken, Owner: req.Owner, Expires: expires})
	}
	return leases, nil
}

// claimQuery builds the claim statement: lease the due candidates and return
// them. Each row's token is the batch prefix followed by the row id, so
// tokens are unique per row and claim.
func claimQuery(db bun.IDB, dialect string, now time.Time, req ClaimRequest, batch string) *bun.UpdateQuery {
	sub := db.NewSelect().Table(req.Table).Column("id").
		Where("lock_expires_at IS NULL OR lock_expires_at < ?", now).
		Where("last_processed_at IS NULL OR last_processed_at <= ?", now.Add(-req.MinInterval)).
		OrderExpr("last_processed_at ASC NULLS FIRST, id").
		Limit(int64(req.Limit))
	if req.Where != "" {
		sub = sub.Where(req.Where, req.Args...)
	}
	if req.Project != "" {
		if req.Table == "jobs" {
			sub = sub.Where("run_id IN (SELECT id FROM runs WHERE project = ?)", req.Project)
		} else {
			sub = sub.Where("project = ?", req.Project)
		}
	}
	if dialect == DialectPostgres {
		sub = sub.For("UPDATE SKIP LOCKED")
	}
	return db.NewUpdate().Table(req.Table).
		Set("lock_token = ? || id", batch).
		Set("lock_owner = ?", req.Owner).
		Set("lock_expires_at = ?", now.Add(req.LeaseFor)).
		Where("id IN (?)", sub).
		Returning("id, lock_token, lock_expires_at")
}

// Heartbeat extends l by d from now and returns the extended lease, or
// ErrLeaseLost when another worker has taken the row. A lease that expired
// but was not taken by anyone is extended.
func (s *Store) Heartbeat(ctx context.Context, l Lease, d time.Duration) (Lease, error) {
	return heartbeat(ctx, s.db, s.Now(), l, d)
}

func heartbeat(ctx context.Context, db bun.IDB, now time.Time, l Lease, d time.Duration) (Lease, error) {
	if !slices.Contains(LeaseTables, l.Table) {
		return l, fmt.Errorf("heartbeat: table %q has no lease columns", l.Table)
	}
	expires := now.Add(d)
	res, err := db.NewUpdate().Table(l.Table).
		Set("lock_expires_at = ?", expires).
		Where("id = ? AND lock_token = ?", l.ID, l.Token).
		Exec(ctx)
	if err != nil {
		return l, fmt.Errorf("heartbeat %s %s: %w", l.Table, l.ID, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return l, fmt.Errorf("heartbeat %s %s: %w", l.Table, l.ID, ErrLeaseLost)
	}
	l.Expires = expires
	return l, nil
}

// Release ends l: it clears the lease and sets last_processed_at to now (the
// row becomes due again after the claimer's MinInterval). It returns
// ErrLeaseLost when another worker has taken the row meanwhile.
func (s *Store) Release(ctx context.Context, l Lease) error {
	return release(ctx, s.db, s.Now(), l)
}

func release(ctx context.Context, db bun.IDB, now time.Time, l Lease) error {
	if !slices.Contains(LeaseTables, l.Table) {
		return fmt.Errorf("release: table %q has no lease columns", l.Table)
	}
	res, err := db.NewUpdate().Table(l.Table).
		Set("lock_token = NULL").
		Set("lock_expires_at = NULL").
		Set("last_processed_at = ?", now).
		Where("id = ? AND lock_token = ?", l.ID, l.Token).
		Exec(ctx)
	if err != nil {
		return fmt.Errorf("release %s %s: %w", l.Table, l.ID, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("release %s %s: %w", l.Table, l.ID, ErrLeaseLost)
	}
	return nil
}

// WithLease runs fn in a transaction that first checks, and locks, that l
// still holds its row; fn's writes commit only if it does. It returns
// ErrLeaseLost (and never calls fn) when another worker has taken the row.
func (s *Store) WithLease(ctx context.Context, l Lease, fn func(ctx context.Context, tx bun.Tx) error) error {
	if !slices.Contains(LeaseTables, l.Table) {
		return fmt.Errorf("with lease: table %q has no lease columns", l.Table)
	}
	return s.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		// A no-op write takes the row lock (Postgres) or the write lock
		// (SQLite) and tells whether the token still matches.
		res, err := tx.NewUpdate().Table(l.Table).
			Set("lock_token = lock_token").
			Where("id = ? AND lock_token = ?", l.ID, l.Token).
			Exec(ctx)
		if err != nil {
			return fmt.Errorf("check lease %s %s: %w", l.Table, l.ID, err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return fmt.Errorf("%s %s: %w", l.Table, l.ID, ErrLeaseLost)
		}
		return fn(ctx, tx)
	})
}

// Complete is the last step of processing a leased row: in one transaction it
// releases l (as Release does) and runs fn, so the worker's final writes and
// the release commit together or not at all. It returns ErrLeaseLost (and
// never calls fn) when another worker has taken the row. fn may be nil.
func (s *Store) Complete(ctx context.Context, l Lease, fn func(ctx context.Context, tx bun.Tx) error) error {
	if !slices.Contains(LeaseTables, l.Table) {
		return fmt.Errorf("complete: table %q has no lease columns", l.Table)
	}
	now := s.Now()
	return s.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if err := release(ctx, tx, now, l); err != nil {
			return err
		}
		if fn == nil {
			return nil
		}
		return fn(ctx, tx)
	})
}

// KeepLease heartbeats l in the background, every third of leaseFor,
// extending it to now+leaseFor, until stop is called. The returned context is
// cancelled when the lease is lost (or ctx ends), so slow work done under the
// lease (cloud APIs, SSH) stops early. stop ends the heartbeats and returns
// the latest lease, or ErrLeaseLost when it was lost meanwhile.
func (s *Store) KeepLease(ctx context.Context, l Lease, leaseFor time.Duration) (leaseCtx context.Context, stop func() (Lease, error)) {
	k := s.KeepAlive(ctx, l, leaseFor)
	return k.Context(), k.Stop
}

// LeaseKeeper extends one lease in the background for as long as its holder
// works; see KeepAlive.
type LeaseKeeper struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	done   chan struct{}
	fin    chan struct{}
	once   sync.Once

	mu   sync.Mutex
	cur  Lease
	lost error
}

// KeepAlive extends l every third of leaseFor to now+leaseFor until Stop.
// Its Context is cancelled when the lease is lost (another server took the
// row) or ctx ends, so the holder stops working; Lease returns the latest
// extension, for writes made under it. The store renews every kept lease
// of a table in one statement per tick (renewer.go), not one per lease: a
// server following a thousand jobs writes a few times per tick, not a
// thousand.
func (s *Store) KeepAlive(ctx context.Context, l Lease, leaseFor time.Duration) *LeaseKeeper {
	k := &LeaseKeeper{cur: l, done: make(chan struct{}), fin: make(chan struct{})}
	k.ctx, k.cancel = context.WithCancelCause(ctx)
	if !slices.Contains(LeaseTables, l.Table) {
		k.lost = fmt.Errorf("heartbeat: table %q has no lease columns", l.Table)
		k.cancel(k.lost)
		close(k.fin)
		return k
	}
	g := s.renewers.group(s, max(leaseFor, time.Millisecond))
	g.add(k)
	go func() {
		defer close(k.fin)
		select {
		case <-k.done:
		case <-k.ctx.Done():
		}
		g.remove(k)
	}()
	return k
}

// renewed records an extension made by the renewer.
func (k *LeaseKeeper) renewed(expires time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.lost == nil {
		k.cur.Expires = expires
	}
}

// lose records that another worker took the row and ends the holder's
// context.
func (k *LeaseKeeper) lose(log *slog.Logger) {
	k.mu.Lock()
	if k.lost != nil {
		k.mu.Unlock()
		return
	}
	k.lost = fmt.Errorf("heartbeat %s %s: %w", k.cur.Table, k.cur.ID, ErrLeaseLost)
	lost, l := k.lost, k.cur
	k.mu.Unlock()
	log.Warn("lease lost", "table", l.Table, "id", l.ID, "owner", l.Owner)
	k.cancel(lost)
}

// Context is cancelled when the lease is lost, Stop is called, or the
// context KeepAlive was given ends; context.Cause tells ErrLeaseLost apart.
func (k *LeaseKeeper) Context() context.Context { return k.ctx }

// Lease returns the lease as last extended.
func (k *LeaseKeeper) Lease() Lease {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.cur
}

// Lost reports whether another worker took the row.
func (k *LeaseKeeper) Lost() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.lost != nil
}

// Stop ends the heartbeats and returns the latest lease, or ErrLeaseLost
// when it was lost meanwhile. It may be called more than once.
func (k *LeaseKeeper) Stop() (Lease, error) {
	k.once.Do(func() { close(k.done) })
	<-k.fin
	k.cancel(context.Canceled)
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.cur, k.lost
}

// ReleaseLeasesOf clears the leases held under owner and returns how many
// it cleared. A server calls it as it starts, under a name that outlives
// its process (its data directory's, whose lock it holds): leases under
// that name are those of its killed predecessor, and the work they held
// is taken up at once rather than after LeaseFor. Other owners' leases are
// untouched.
func (s *Store) ReleaseLeasesOf(ctx context.Context, owner string) (int64, error) {
	n, err := s.clearLeases(ctx, "lock_owner = ?", owner)
	if err != nil {
		return n, fmt.Errorf("release the leases of %s: %w", owner, err)
	}
	return n, nil
}

// clearLeases clears, in every leased table, the leases of the rows where
// holds, and returns how many it cleared.
func (s *Store) clearLeases(ctx context.Context, where string, args ...any) (int64, error) {
	var n int64
	for _, table := range LeaseTables {
		res, err := s.db.NewUpdate().Table(table).
			Set("lock_token = NULL").
			Set("lock_owner = NULL").
			Set("lock_expires_at = NULL").
			Where(where, args...).
			Exec(ctx)
		if err != nil {
			return n, fmt.Errorf("%s: %w", table, err)
		}
		if k, err := res.RowsAffected(); err == nil {
			n += k
		}
	}
	return n, nil
}

// dropDeadLeases clears every lease in the database. Open calls it on
// SQLite only: the owner lock makes the opening process the file's only
// user, so a lease found there is a dead process's (a crash or a kill left
// it), and waiting for it to expire would only hold the work back for
// LeaseFor after a restart. On PostgreSQL other servers' leases are live.
func (s *Store) dropDeadLeases(ctx context.Context) error {
	if _, err := s.clearLeases(ctx, "lock_token IS NOT NULL OR lock_expires_at IS NOT NULL"); err != nil {
		return fmt.Errorf("drop dead leases: %w", err)
	}
	return nil
}
