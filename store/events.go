package store

import (
	"context"
	"fmt"
	"time"
)

// MaxEventMessageBytes caps an event's message: messages may quote what
// agents and specs said (a termination message, a revision's errors), and
// every page of events shows them.
const MaxEventMessageBytes = 4 << 10

// capMessage cuts msg to MaxEventMessageBytes without splitting a
// character, saying how much was cut.
func capMessage(msg string) string {
	if len(msg) <= MaxEventMessageBytes {
		return msg
	}
	n := MaxEventMessageBytes - 64
	for n > 0 && msg[n]&0xC0 == 0x80 {
		n--
	}
	return fmt.Sprintf("%s … (%d more bytes cut)", msg[:n], len(msg)-n)
}

// EventFilter selects events in ListEvents; zero fields match all.
type EventFilter struct {
	// Project keeps events of this project (every project when empty).
	Project string
	// ObjectKind keeps events about objects of this kind.
	ObjectKind string
	// ObjectName keeps events about objects with this name.
	ObjectName string
	// ObjectID keeps events about the object with this ID.
	ObjectID string
	// Revision keeps events caused by this revision.
	Revision string
	// Type keeps events of this type.
	Type string
	// Since keeps events at or after this time.
	Since time.Time
	// Limit caps the result (100 when zero).
	Limit int
}

// AddEvent records e, filling in ID (a time-ordered UUID) and Time (now)
// when empty.
func (s *Store) AddEvent(ctx context.Context, e Event) (Event, error) {
	if e.ObjectKind == "" || e.Type == "" {
		return e, fmt.Errorf("add event: object kind and type must not be empty")
	}
	if e.ID == "" {
		e.ID = newID()
	}
	e.Project = project(e.Project)
	if e.Time.IsZero() {
		e.Time = s.Now()
	}
	e.Time = e.Time.UTC()
	e.Message = capMessage(e.Message)
	if _, err := s.db.NewInsert().Model(&e).Exec(ctx); err != nil {
		return e, fmt.Errorf("add event: %w", err)
	}
	return e, nil
}

// ListEvents returns matching events, newest first.
func (s *Store) ListEvents(ctx context.Context, f EventFilter) ([]Event, error) {
	var es []Event
	q := s.db.NewSelect().Model(&es).OrderExpr("time DESC, id DESC").Limit(limitOr(f.Limit, 100))
	if f.Project != "" {
		q = q.Where("project = ?", f.Project)
	}
	if f.ObjectKind != "" {
		q = q.Where("object_kind = ?", f.ObjectKind)
	}
	if f.ObjectName != "" {
		q = q.Where("object_name = ?", f.ObjectName)
	}
	if f.ObjectID != "" {
		q = q.Where("object_id = ?", f.ObjectID)
	}
	if f.Revision != "" {
		q = q.Where("revision = ?", f.Revision)
	}
	if f.Type != "" {
		q = q.Where("type = ?", f.Type)
	}
	if !f.Since.IsZero() {
		q = q.Where("time >= ?", f.Since.UTC())
	}
	if err := q.Scan(ctx); err != nil {
		return nil, fmt.Errorf("list events: %w", err)
	}
	return es, nil
}

// PruneEvents deletes events older than before and returns how many.
func (s *Store) PruneEvents(ctx context.Context, before time.Time) (int64, error) {
	res, err := s.db.NewDelete().Model((*Event)(nil)).Where("time < ?", before.UTC()).Exec(ctx)
	if err != nil {
		return 0, fmt.Errorf("prune events: %w", err)
	}
	n, _ := res.RowsAffected()
	return n, nil
}
