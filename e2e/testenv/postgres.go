package testenv

import (
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"sync"
	"testing"

	"github.com/uptrace/bun/driver/pgdriver"
)

// PostgresEnv is the environment variable that holds the DSN of the throwaway
// PostgreSQL cluster started by postgres.sh.
const PostgresEnv = "HOIST_TEST_POSTGRES"

var (
	adminOnce sync.Once
	adminDB   *sql.DB
	adminErr  error
)

// Postgres returns the DSN of a fresh, empty database on the cluster named by
// HOIST_TEST_POSTGRES, dropped when the test ends. For speed the "database" is
// a new schema selected through the DSN's search_path (creating one takes a
// millisecond, CREATE DATABASE about 300 ms); to the code under test it looks
// like an empty database. Outside CI an unset variable skips the test with a
// loud message; under CI=true it fails it. Start the cluster with
// `eval "$(e2e/testenv/postgres.sh start)"`.
func Postgres(t testing.TB) string {
	t.Helper()
	base := os.Getenv(PostgresEnv)
	if base == "" {
		msg := PostgresEnv + ` is unset; start a cluster with: eval "$(e2e/testenv/postgres.sh start)"`
		Missing(t, "postgres: %s", msg)
	}
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("parse %s: %v", PostgresEnv, err)
	}
	adminOnce.Do(func() {
		adminDB = sql.OpenDB(pgdriver.NewConnector(pgdriver.WithDSN(base)))
		adminErr = adminDB.PingContext(t.Context())
	})
	if adminErr != nil {
		t.Fatalf("connect to %s (%s): %v", PostgresEnv, u.Redacted(), adminErr)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "t_" + hex.EncodeToString(b[:])
	if _, err := adminDB.ExecContext(t.Context(), fmt.Sprintf("CREATE SCHEMA %s", name)); err != nil {
		t.Fatalf("create schema %s: %v", name, err)
	}
	t.Cleanup(func() {
		if _, err := adminDB.Exec(fmt.Sprintf("DROP SCHEMA IF EXISTS %s CASCADE", name)); err != nil {
			t.Errorf("drop schema %s: %v", name, err)
		}
	})
	q := u.Query()
	q.Set("search_path", name)
	u.RawQuery = q.Encode()
	return u.String()
}
