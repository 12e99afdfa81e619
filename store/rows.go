package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/uptrace/bun"
)

// versioned is implemented by the models that carry an id, a version and
// created/updated times: the rows written through createRow and updateRow.
type versioned interface {
	rowID() *string
	rowVersion() *int64
	rowTimes() (created, updated *time.Time)
	table() string
}

func (r *Resource) rowID() *string              { return &r.ID }
func (r *Resource) rowVersion() *int64          { return &r.Version }
func (r *Resource) rowTimes() (c, u *time.Time) { return &r.CreatedAt, &r.UpdatedAt }
func (r *Resource) table() string               { return "resources" }
func (r *Run) rowID() *string                   { return &r.ID }
func (r *Run) rowVersion() *int64               { return &r.Version }
func (r *Run) rowTimes() (c, u *time.Time)      { return &r.CreatedAt, &r.UpdatedAt }
func (r *Run) table() string                    { return "runs" }
func (j *Job) rowID() *string                   { return &j.ID }
func (j *Job) rowVersion() *int64               { return &j.Version }
func (j *Job) rowTimes() (c, u *time.Time)      { return &j.CreatedAt, &j.UpdatedAt }
func (j *Job) table() string                    { return "jobs" }
func (i *Instance) rowID() *string              { return &i.ID }
func (i *Instance) rowVersion() *int64          { return &i.Version }
func (i *Instance) rowTimes() (c, u *time.Time) { return &i.CreatedAt, &i.UpdatedAt }
func (i *Instance) table() string               { return "instances" }
func (f *Fleet) rowID() *string                 { return &f.ID }
func (f *Fleet) rowVersion() *int64             { return &f.Version }
func (f *Fleet) rowTimes() (c, u *time.Time)    { return &f.CreatedAt, &f.UpdatedAt }
func (f *Fleet) table() string                  { return "fleets" }
func (v *Volume) rowID() *string                { return &v.ID }
func (v *Volume) rowVersion() *int64            { return &v.Version }
func (v *Volume) rowTimes() (c, u *time.Time)   { return &v.CreatedAt, &v.UpdatedAt }
func (v *Volume) table() string                 { return "volumes" }
func (g *Gateway) rowID() *string               { return &g.ID }
func (g *Gateway) rowVersion() *int64           { return &g.Version }
func (g *Gateway) rowTimes() (c, u *time.Time)  { return &g.CreatedAt, &g.UpdatedAt }
func (g *Gateway) table() string                { return "gateways" }

// leaseColumnNames are never written by createRow/updateRow: only the lease
// methods touch them.
var leaseColumnNames = []string{"lock_token", "lock_owner", "lock_expires_at", "last_processed_at"}

func hasLease(m versioned) bool {
	switch m.(type) {
	case *Resource:
		return false
	}
	return true
}

// createRow inserts m, filling in its id (a UUIDv7 when empty), version 1 and
// created/updated times.
func createRow(ctx context.Context, db bun.IDB, now time.Time, m versioned) error {
	if *m.rowID() == "" {
		*m.rowID() = newID()
	}
	*m.rowVersion() = 1
	c, u := m.rowTimes()
	*c, *u = now, now
	q := db.NewInsert().Model(m)
	if hasLease(m) {
		q = q.ExcludeColumn(leaseColumnNames...)
	}
	if _, err := q.Exec(ctx); err != nil {
		return fmt.Errorf("create %s row: %w", m.table(), mapConstraint(err))
	}
	return nil
}

// updateRow writes every column of m except id, created_at and the lease
// columns, guarded by m's version (and by the lease token when lease is not
// nil). On success m's version is incremented. It returns ErrNotFound when the
// row is gone, ErrLeaseLost when the lease token no longer matches, and
// ErrConflict when the version moved.
func updateRow(ctx context.Context, db bun.IDB, now time.Time, m versioned, lease *Lease) error {
	id := *m.rowID()
	old := *m.rowVersion()
	_, u := m.rowTimes()
	prevUpdated := *u
	*m.rowVersion() = old + 1
	*u = now
	q := db.NewUpdate().Model(m).ExcludeColumn("id", "created_at").WherePK().Where("version = ?", old)
	if hasLease(m) {
		q = q.ExcludeColumn(leaseColumnNames...)
	}
	if lease != nil {
		if lease.Table != m.table() || lease.ID != id {
			*m.rowVersion(), *u = old, prevUpdated
			return fmt.Errorf("update %s %s: lease is for %s %s", m.table(), id, lease.Table, lease.ID)
		}
		q = q.Where("lock_token = ?", lease.Token)
	}
	res, err := q.Exec(ctx)
	if err != nil {
		*m.rowVersion(), *u = old, prevUpdated
		return fmt.Errorf("update %s %s: %w", m.table(), id, mapConstraint(err))
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return nil
	}
	*m.rowVersion(), *u = old, prevUpdated
	return whyNotUpdated(ctx, db, m.table(), id, old, lease)
}

// whyNotUpdated tells apart the reasons a guarded update touched no row.
func whyNotUpdated(ctx context.Context, db bun.IDB, table, id string, version int64, lease *Lease) error {
	var cur struct {
		Version   int64          `bun:"version"`
		LockToken sql.NullString `bun:"lock_token"`
	}
	q := db.NewSelect().Table(table).Column("version").Where("id = ?", id)
	if lease != nil {
		q = q.Column("lock_token")
	}
	if err := q.Scan(ctx, &cur); err != nil {
		return notFound(err, fmt.Sprintf("update %s %s", table, id))
	}
	if lease != nil && cur.LockToken.String != lease.Token {
		return fmt.Errorf("update %s %s: %w", table, id, ErrLeaseLost)
	}
	return fmt.Errorf("update %s %s: version %d is stale (now %d): %w", table, id, version, cur.Version, ErrConflict)
}

// mapConstraint turns unique-constraint violations of either driver into ErrConflict.
func mapConstraint(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if strings.Contains(msg, "UNIQUE constraint failed") || strings.Contains(msg, "SQLSTATE=23505") ||
		strings.Contains(msg, "duplicate key value") {
		return fmt.Errorf("%w: %v", ErrConflict, err)
	}
	return err
}

// getRow loads the row with the given id into m.
func getRow(ctx context.Context, db bun.IDB, m versioned, id string) error {
	if err := db.NewSelect().Model(m).Where("?TableAlias.id = ?", id).Scan(ctx); err != nil {
		return notFound(err, fmt.Sprintf("get %s %s", m.table(), id))
	}
	return nil
}

func limitOr(limit, def int) int64 {
	if limit <= 0 {
		return int64(def)
	}
	return int64(limit)
}

func project(p string) string {
	if p == "" {
		return DefaultProject
	}
	return p
}

var errEmptyName = errors.New("name must not be empty")

func bunIn(v []string) any { return bun.In(v) }

func isNoRows(err error) bool { return errors.Is(err, sql.ErrNoRows) }
