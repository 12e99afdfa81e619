package store

import (
	"context"
	"fmt"
	"hash/fnv"
)

// syncLockKey is the PostgreSQL advisory lock that makes one server at a
// time run the revision pipeline of the default project.
const syncLockKey = 0x686f697374 // "hoist"

// syncLockKeyOf is the advisory lock of project proj's revision pipeline:
// syncLockKey for the default project (as before projects existed), a hash
// of the name otherwise.
func syncLockKeyOf(proj string) int64 {
	if proj = project(proj); proj == DefaultProject {
		return syncLockKey
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte("hoist sync " + proj))
	return int64(h.Sum64() &^ (1 << 63))
}

// TrySyncLock takes the lock of project proj's revision pipeline without
// waiting, so that of several servers sharing a PostgreSQL database one
// syncs a project at a time (projects sync independently): a
// session advisory lock (https://www.postgresql.org/docs/current/explicit-locking.html#ADVISORY-LOCKS)
// held on a connection of its own until unlock is called. On SQLite one
// server owns the file (see Open) and the lock always succeeds. ok is
// false when another server holds it.
func (s *Store) TrySyncLock(ctx context.Context, proj string) (unlock func(), ok bool, err error) {
	if s.dialect != DialectPostgres {
		return func() {}, true, nil
	}
	key := syncLockKeyOf(proj)
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("sync lock: %w", err)
	}
	var got bool
	if err := conn.QueryRowContext(ctx, "SELECT pg_try_advisory_lock(?)", key).Scan(&got); err != nil || !got {
		_ = conn.Close()
		if err != nil {
			return nil, false, fmt.Errorf("sync lock: %w", err)
		}
		return nil, false, nil
	}
	return func() {
		_, _ = conn.ExecContext(context.Background(), "SELECT pg_advisory_unlock(?)", key)
		_ = conn.Close()
	}, true, nil
}
