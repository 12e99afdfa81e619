package store

import (
	"context"
	"fmt"
)

// syncLockKey is the PostgreSQL advisory lock that makes one server at a
// time run the revision pipeline.
const syncLockKey = 0x686f697374 // "hoist"

// TrySyncLock takes the revision pipeline's lock without waiting, so that
// of several servers sharing a PostgreSQL database one syncs at a time: a
// session advisory lock (https://www.postgresql.org/docs/current/explicit-locking.html#ADVISORY-LOCKS)
// held on a connection of its own until unlock is called. On SQLite one
// server owns the file (see Open) and the lock always succeeds. ok is
// false when another server holds it.
func (s *Store) TrySyncLock(ctx context.Context) (unlock func(), ok bool, err error) {
	if s.dialect != DialectPostgres {
		return func() {}, true, nil
	}
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("sync lock: %w", err)
	}
	var got bool
	if err := conn.QueryRowContext(ctx, "SELECT pg_try_advisory_lock(?)", syncLockKey).Scan(&got); err != nil || !got {
		_ = conn.Close()
		if err != nil {
			return nil, false, fmt.Errorf("sync lock: %w", err)
		}
		return nil, false, nil
	}
	return func() {
		_, _ = conn.ExecContext(context.Background(), "SELECT pg_advisory_unlock(?)", syncLockKey)
		_ = conn.Close()
	}, true, nil
}
