package store

import (
	"errors"
	"syscall"

	"github.com/uptrace/bun/driver/pgdriver"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// IsDiskFull reports whether err is a write the disk had no room for:
// SQLite's SQLITE_FULL ("database or disk is full", the primary result
// code of any extended one, https://www.sqlite.org/rescode.html#full) or
// the system's ENOSPC, or PostgreSQL's disk_full (SQLSTATE 53100,
// https://www.postgresql.org/docs/current/errcodes-appendix.html). The write is then rolled back whole: nothing of it
// is stored.
func IsDiskFull(err error) bool {
	var se *sqlite.Error
	if errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_FULL {
		return true
	}
	var pe pgdriver.Error
	if errors.As(err, &pe) && pe.Field('C') == "53100" {
		return true
	}
	return errors.Is(err, syscall.ENOSPC)
}
