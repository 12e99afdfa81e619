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
// HOIST_TEST_POSTGRES; the database is dropped when the test ends. Outside CI an
// unset variable skips the test with a loud message; under CI=true it fails it.
// Start the cluster with `eval "$(e2e/testenv/postgres.sh start)"`.
func Postgres(t testing.TB) string {
	t.Helper()
	base := os.Getenv(PostgresEnv)
	if base == "" {
		msg := PostgresEnv + ` is unset; start a cluster with: eval "$(e2e/testenv/postgres.sh start)"`
		if InCI() {
			t.Fatalf("postgres required in CI: %s", msg)
		}
		t.Skipf("SKIP: postgres tests skipped: %s", msg)
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
	if _, err := adminDB.ExecContext(t.Context(), fmt.Sprintf("CREATE DATABASE %s TEMPLATE template0", name)); err != nil {
		t.Fatalf("create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		// WITH (FORCE) ends connections a test may have leaked (PostgreSQL 13+).
		if _, err := adminDB.Exec(fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", name)); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})
	u.Path = "/" + name
	return u.String()
}
