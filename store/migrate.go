package store

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"slices"
	"strings"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/migrate"
)

//go:embed migrations/sqlite/*.sql migrations/postgres/*.sql
var migrationFiles embed.FS

// migrationsLockKey is the pg_advisory_lock key that serializes migrations
// between hoist replicas starting at the same time.
const migrationsLockKey = 7_355_608_042

// Migrations returns the embedded migration chain of a dialect ("sqlite" or
// "postgres"). Both chains carry the same IDs and names.
func Migrations(dialect string) (*migrate.Migrations, error) {
	sub, err := fs.Sub(migrationFiles, "migrations/"+dialect)
	if err != nil {
		return nil, fmt.Errorf("migrations for %s: %w", dialect, err)
	}
	ms := migrate.NewMigrations()
	if err := ms.Discover(sub); err != nil {
		return nil, fmt.Errorf("discover %s migrations: %w", dialect, err)
	}
	if dialect == DialectSQLite {
		for _, m := range sqliteGoMigrations() {
			ms.Add(m)
		}
	}
	return ms, nil
}

func (s *Store) migrate(ctx context.Context) error {
	if s.dialect == DialectPostgres {
		conn, err := s.db.Conn(ctx)
		if err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		defer conn.Close()
		if _, err := conn.ExecContext(ctx, "SELECT pg_advisory_lock(?)", migrationsLockKey); err != nil {
			return fmt.Errorf("migrate: take advisory lock: %w", err)
		}
		defer conn.ExecContext(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock(?)", migrationsLockKey)
	}
	return migrateDB(ctx, s.db, s.dialect, "", s)
}

// migrateDB applies the dialect's migrations up to and including target (all
// of them when target is empty). It refuses a database that records
// migrations this binary does not know.
func migrateDB(ctx context.Context, db *bun.DB, dialect, target string, s *Store) error {
	ms, err := Migrations(dialect)
	if err != nil {
		return err
	}
	if target != "" {
		trimmed := migrate.NewMigrations()
		for _, m := range ms.Sorted() {
			if m.Name <= target {
				trimmed.Add(m)
			}
		}
		ms = trimmed
	}
	m := migrate.NewMigrator(db, ms, migrate.WithMarkAppliedOnSuccess(true))
	if err := m.Init(ctx); err != nil {
		return fmt.Errorf("migrate: init: %w", err)
	}
	if target == "" {
		missing, err := m.MissingMigrations(ctx)
		if err != nil {
			return fmt.Errorf("migrate: read applied migrations: %w", err)
		}
		if len(missing) > 0 {
			var names []string
			for _, mm := range missing {
				names = append(names, mm.Name+"_"+mm.Comment)
			}
			slices.Sort(names)
			return fmt.Errorf("%w: it has migrations %s that this binary does not know; run a hoist at least as new as the one that wrote it",
				ErrSchemaTooNew, strings.Join(names, ", "))
		}
	}
	group, err := m.Migrate(ctx)
	if err != nil {
		return fmt.Errorf("migrate %s: %w", dialect, err)
	}
	if s != nil && !group.IsZero() {
		s.log.Info("database migrated", "dialect", dialect, "group", group.ID, "migrations", group.Migrations.String())
	}
	return nil
}
