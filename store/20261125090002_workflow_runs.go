package store

import (
	"context"
	"fmt"
	"strings"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/migrate"
)

// sqliteGoMigrations are the SQLite migrations SQL cannot express (SQLite
// cannot alter a table's CHECK constraint); the PostgreSQL chain has a SQL
// file of the same ID for each. bun names a Go migration after the file
// that registers it: this one.
func sqliteGoMigrations() []migrate.Migration {
	ms := migrate.NewMigrations()
	ms.MustRegister(sqliteRunTypeCheck, nil)
	return ms.Sorted()
}

// Run types before and after workflows became runs.
const (
	runTypeCheckOld = "CHECK (type IN ('task', 'service', 'dev-environment'))"
	runTypeCheckNew = "CHECK (type IN ('task', 'service', 'dev-environment', 'workflow'))"
)

// sqliteRunTypeCheck lets the runs table hold workflows. A CHECK
// constraint does not change how rows are stored, so the table's SQL is
// rewritten in place, as SQLite documents for removing or changing CHECK
// constraints (https://www.sqlite.org/lang_altertable.html, "Making Other
// Kinds Of Table Schema Changes": writable_schema, then schema_version + 1
// so that every connection reads the new schema).
func sqliteRunTypeCheck(ctx context.Context, db *bun.DB) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	var table string
	if err := conn.QueryRowContext(ctx, "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'runs'").Scan(&table); err != nil {
		return fmt.Errorf("read the runs table: %w", err)
	}
	if strings.Contains(table, runTypeCheckNew) {
		return nil
	}
	if !strings.Contains(table, runTypeCheckOld) {
		return fmt.Errorf("the runs table has no type constraint to widen: %s", table)
	}
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var version int64
	if err := tx.QueryRowContext(ctx, "PRAGMA schema_version").Scan(&version); err != nil {
		return err
	}
	for _, q := range []string{
		"PRAGMA writable_schema = ON",
		fmt.Sprintf("UPDATE sqlite_master SET sql = replace(sql, %s, %s) WHERE type = 'table' AND name = 'runs'",
			quoteSQL(runTypeCheckOld), quoteSQL(runTypeCheckNew)),
		fmt.Sprintf("PRAGMA schema_version = %d", version+1),
		"PRAGMA writable_schema = OFF",
	} {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	var ok string
	if err := tx.QueryRowContext(ctx, "PRAGMA integrity_check").Scan(&ok); err != nil || ok != "ok" {
		return fmt.Errorf("integrity check after widening the runs type: %q, %v", ok, err)
	}
	return tx.Commit()
}

// quoteSQL quotes s as an SQL string literal.
func quoteSQL(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
