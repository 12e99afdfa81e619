package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"
	"github.com/uptrace/bun/dialect/sqlitedialect"
	"github.com/uptrace/bun/driver/pgdriver"
	"github.com/uptrace/bun/schema"
	_ "modernc.org/sqlite" // registers the pure-Go "sqlite" database/sql driver
)

// Dialect names returned by Store.Dialect.
const (
	DialectSQLite   = "sqlite"
	DialectPostgres = "postgres"
)

// Errors callers decide on; match them with errors.Is.
var (
	// ErrNotFound means the requested row does not exist.
	ErrNotFound = errors.New("not found")
	// ErrConflict means the row changed since it was read (its version no
	// longer matches), or a unique name is taken; re-read and retry.
	ErrConflict = errors.New("conflict: row was changed by another writer")
	// ErrLeaseLost means the caller's lease token no longer matches the row:
	// another worker took it after the lease expired. Drop the results.
	ErrLeaseLost = errors.New("lease lost")
	// ErrInstanceBusy means another active job is placed on the instance an
	// exclusive assignment asked for.
	ErrInstanceBusy = errors.New("instance is busy with another job")
	// ErrLogQuota means a job's log byte quota is used up.
	ErrLogQuota = errors.New("job log quota exceeded")
	// ErrInUse means another hoist process owns the SQLite database file
	// (or, from LockFile, the data directory).
	ErrInUse = errors.New("in use by another hoist process")
	// ErrSchemaTooNew means the database was migrated by a newer hoist.
	ErrSchemaTooNew = errors.New("database schema is newer than this hoist")
	// ErrSecretKey means the secret key cannot decrypt the stored secrets.
	ErrSecretKey = errors.New("secret key does not match the key the secrets were encrypted with")
)

// Options configure Open. The zero value works: it logs nowhere, uses the
// wall clock, and keeps secrets unavailable until a key is given.
type Options struct {
	// Logger receives the store's few log lines (migrations, lock files).
	Logger *slog.Logger
	// Now is the clock; every time the store writes comes from it, in UTC.
	Now func() time.Time
	// SecretKey is the 32-byte AES-256 key for secrets at rest. Empty means
	// secrets cannot be read or written (ErrSecretKey). See LoadSecretKey.
	SecretKey []byte
	// LogQuota is the per-job log byte quota; zero means DefaultLogQuota.
	LogQuota int64
	// MaxOpenConns bounds the connection pool; zero means a dialect default.
	MaxOpenConns int
}

// DefaultLogQuota is the per-job log quota when Options.LogQuota is zero.
const DefaultLogQuota int64 = 256 << 20

// Store is hoist's state: every repository method of the package hangs off
// it. It is safe for concurrent use.
type Store struct {
	db       *bun.DB
	dialect  string
	log      *slog.Logger
	now      func() time.Time
	key      []byte
	keyID    string
	logQuota int64
	unlock   func() error
	renewers renewers
}

// Open connects to the database named by dsn, applies pending migrations and
// returns the Store. A dsn starting with postgres:// or postgresql:// selects
// PostgreSQL; anything else is a SQLite file path, optionally written as
// sqlite://path or file:path. On SQLite, Open takes an exclusive lock on
// <path>.lock, so a second process opening the same file fails fast with
// ErrInUse. A database migrated by a newer hoist is refused with
// ErrSchemaTooNew.
func Open(ctx context.Context, dsn string, opts Options) (*Store, error) {
	s := &Store{log: opts.Logger, now: opts.Now, logQuota: opts.LogQuota}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.logQuota <= 0 {
		s.logQuota = DefaultLogQuota
	}
	if len(opts.SecretKey) > 0 {
		if err := s.setKey(opts.SecretKey); err != nil {
			return nil, err
		}
	}
	var err error
	if isPostgres(dsn) {
		s.dialect = DialectPostgres
		s.db, err = openPostgres(dsn, opts.MaxOpenConns)
	} else {
		s.dialect = DialectSQLite
		path := sqlitePath(dsn)
		s.unlock, err = LockFile(path + ".lock")
		if err != nil {
			return nil, err
		}
		err = restrictSQLiteFiles(path, s.log)
		if err == nil {
			s.db, err = openSQLite(path, opts.MaxOpenConns)
		}
	}
	if err != nil {
		s.releaseLock()
		return nil, err
	}
	if err := s.db.PingContext(ctx); err != nil {
		s.Close()
		if strings.Contains(err.Error(), "SSL is not enabled") {
			return nil, fmt.Errorf("connect to %s database: %w (add sslmode=disable to the DSN for a server without TLS)", s.dialect, err)
		}
		return nil, fmt.Errorf("connect to %s database: %w", s.dialect, err)
	}
	if err := s.migrate(ctx); err != nil {
		s.Close()
		return nil, err
	}
	if s.dialect == DialectSQLite {
		if err := s.dropDeadLeases(ctx); err != nil {
			s.Close()
			return nil, err
		}
	}
	return s, nil
}

// Close closes the database and releases the SQLite owner lock.
func (s *Store) Close() error {
	err := s.db.Close()
	if lerr := s.releaseLock(); err == nil {
		err = lerr
	}
	return err
}

func (s *Store) releaseLock() error {
	if s.unlock == nil {
		return nil
	}
	err := s.unlock()
	s.unlock = nil
	return err
}

// Dialect returns "sqlite" or "postgres".
func (s *Store) Dialect() string { return s.dialect }

// Now returns the store's clock reading in UTC.
func (s *Store) Now() time.Time { return s.now().UTC() }

// RunInTx runs fn inside one transaction; a returned error rolls it back.
// Inside fn use tx for every statement: on SQLite other connections wait for
// the transaction to end.
func (s *Store) RunInTx(ctx context.Context, fn func(ctx context.Context, tx bun.Tx) error) error {
	return s.db.RunInTx(ctx, nil, fn)
}

func isLoopback(host string) bool {
	if host == "" || host == "localhost" || strings.HasPrefix(host, "/") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func isPostgres(dsn string) bool {
	return strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://")
}

func sqlitePath(dsn string) string {
	p := dsn
	for _, prefix := range []string{"sqlite://", "sqlite3://", "file:"} {
		if strings.HasPrefix(p, prefix) {
			p = strings.TrimPrefix(p, prefix)
			break
		}
	}
	if i := strings.IndexByte(p, '?'); i >= 0 {
		p = p[:i]
	}
	return p
}

// sqliteDSN is the modernc DSN: pragmas must live in the DSN so that every
// pooled connection gets them (a PRAGMA through Exec reaches one connection).
func sqliteDSN(path string) string {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_txlock", "immediate")
	q.Add("_time_format", "sqlite")
	return "file:" + path + "?" + q.Encode()
}

// restrictSQLiteFiles makes the database at path readable by its owner
// only: it creates the file 0600 if it is missing (SQLite's unix VFS then
// gives the -wal and -shm files it creates the database file's mode, see
// findCreateFileMode in os_unix.c), and takes group and other permissions
// off an existing database, -wal, -shm or lock file, with a warning.
func restrictSQLiteFiles(path string, log *slog.Logger) error {
	if path == "" || path == ":memory:" {
		return nil // openSQLite refuses it
	}
	if _, err := os.Lstat(path); errors.Is(err, os.ErrNotExist) {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return fmt.Errorf("create sqlite %s: %w", path, err)
		}
		// Chmod too: the mode given to open is narrowed by the umask.
		err = f.Chmod(0o600)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("create sqlite %s: %w", path, err)
		}
	}
	for _, p := range []string{path, path + "-wal", path + "-shm", path + ".lock"} {
		fi, err := os.Stat(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("check mode of %s: %w", p, err)
		}
		if perm := fi.Mode().Perm(); perm&0o077 != 0 {
			if err := os.Chmod(p, 0o600); err != nil {
				return fmt.Errorf("restrict mode of %s: %w", p, err)
			}
			log.Warn("database_file_mode_restricted", "path", p, "was", fmt.Sprintf("%#o", perm), "now", "0600")
		}
	}
	return nil
}

func openSQLite(path string, maxConns int) (*bun.DB, error) {
	if path == "" || path == ":memory:" {
		return nil, errors.New("sqlite needs a file path (in-memory databases are not supported)")
	}
	sqldb, err := sql.Open("sqlite", sqliteDSN(path))
	if err != nil {
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	if maxConns <= 0 {
		maxConns = 4
	}
	sqldb.SetMaxOpenConns(maxConns)
	sqldb.SetMaxIdleConns(maxConns)
	sqldb.SetConnMaxIdleTime(0)
	return bun.NewDB(sqldb, sqliteDialect{sqlitedialect.New()}), nil
}

func openPostgres(dsn string, maxConns int) (*bun.DB, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		// url.Error repeats the whole DSN, password included.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("parse postgres dsn: %w", err)
	}
	// Unknown DSN options become session settings: ask for UTC unless the
	// caller chose a zone. Times are timestamptz, so this only affects text.
	q := u.Query()
	hasTZ := false
	for k := range q {
		hasTZ = hasTZ || strings.EqualFold(k, "timezone")
	}
	if !hasTZ {
		q.Set("TimeZone", "UTC")
	}
	// pgdriver insists on TLS unless told otherwise (libpq would fall back);
	// on loopback, where servers rarely have TLS, default to plain.
	if !q.Has("sslmode") && isLoopback(u.Hostname()) {
		q.Set("sslmode", "disable")
	}
	u.RawQuery = q.Encode()
	opts := []pgdriver.Option{pgdriver.WithDSN(u.String())}
	// pgdriver's default read timeout (10 s) would fail a migration waiting
	// for another replica's advisory lock, or any long query.
	if !q.Has("read_timeout") && !q.Has("timeout") {
		opts = append(opts, pgdriver.WithReadTimeout(5*time.Minute))
	}
	sqldb := sql.OpenDB(pgdriver.NewConnector(opts...))
	if maxConns <= 0 {
		maxConns = 20
	}
	sqldb.SetMaxOpenConns(maxConns)
	sqldb.SetMaxIdleConns(maxConns)
	return bun.NewDB(sqldb, pgdialect.New()), nil
}

// sqliteDialect writes times with a fixed number of fractional digits, so that
// SQLite's text comparison of two timestamps orders them correctly (bun's
// default trims trailing zeros: "…:05.5+00:00" would sort after "…:05.25+00:00").
type sqliteDialect struct{ *sqlitedialect.Dialect }

var _ schema.Dialect = sqliteDialect{}

// AppendTime formats tm in UTC with microseconds and a fixed width.
func (sqliteDialect) AppendTime(b []byte, tm time.Time) []byte {
	b = append(b, '\'')
	b = tm.UTC().AppendFormat(b, "2006-01-02 15:04:05.000000-07:00")
	return append(b, '\'')
}

// newID returns a new time-ordered UUID (version 7) as text.
func newID() string { return uuid.Must(uuid.NewV7()).String() }

func notFound(err error, what string) error {
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%s: %w", what, ErrNotFound)
	}
	return fmt.Errorf("%s: %w", what, err)
}
