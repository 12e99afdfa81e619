package store

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/uptrace/bun"
)

func TestMigrations_sameIDsOnBothDialects(t *testing.T) {
	sqlite, err := migrationIDs(DialectSQLite)
	if err != nil {
		t.Fatal(err)
	}
	pg, err := migrationIDs(DialectPostgres)
	if err != nil {
		t.Fatal(err)
	}
	if len(sqlite) == 0 {
		t.Fatal("no sqlite migrations embedded")
	}
	if diff := cmp.Diff(sqlite, pg); diff != "" {
		t.Errorf("migration IDs differ between sqlite and postgres (-sqlite +postgres):\n%s", diff)
	}
}

// migrationIDs lists the IDs of a dialect's embedded migrations in order.
func migrationIDs(dialect string) ([]string, error) {
	ms, err := Migrations(dialect)
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, m := range ms.Sorted() {
		ids = append(ids, m.Name+"_"+m.Comment)
	}
	return ids, nil
}

// allModels lists every model whose columns must exist after migrating.
var allModels = []any{
	(*Project)(nil), (*User)(nil), (*APIToken)(nil), (*Revision)(nil), (*SyncState)(nil),
	(*Resource)(nil), (*Run)(nil), (*Job)(nil), (*Instance)(nil), (*Fleet)(nil), (*Volume)(nil),
	(*VolumeAttachment)(nil), (*Gateway)(nil), (*Event)(nil), (*logChunk)(nil), (*logState)(nil),
	(*secretRow)(nil),
}

func TestMigrations_schemaMatchesModels(t *testing.T) {
	forEachDB(t, func(t *testing.T, s *Store, clock *fakeClock) {
		ctx := t.Context()
		for _, m := range allModels {
			// Selecting every model column fails if the migrated table lacks one.
			if err := s.db.NewSelect().Model(m).Limit(1).Scan(ctx); err != nil && !isNoRows(err) {
				t.Errorf("%T: %v", m, err)
			}
		}
		// And every table column is known to its model.
		for _, m := range allModels {
			table := s.db.Table(modelType(m))
			cols := tableColumns(t, s, table.Name)
			for _, c := range cols {
				if _, ok := table.FieldMap[c]; !ok {
					t.Errorf("table %s has column %s that model %T lacks", table.Name, c, m)
				}
			}
		}
	})
}

// TestMigrations_unusedTablesAreDropped checks that the tables nothing
// wrote (the offers cache, sources) are gone after migrating.
func TestMigrations_unusedTablesAreDropped(t *testing.T) {
	forEachDB(t, func(t *testing.T, s *Store, clock *fakeClock) {
		for _, table := range []string{"offers_cache", "sources"} {
			var n int64
			var err error
			if s.Dialect() == DialectPostgres {
				n, err = s.db.NewSelect().Table("information_schema.tables").
					Where("table_name = ? AND table_schema = current_schema()", table).Count(t.Context())
			} else {
				n, err = s.db.NewSelect().Table("sqlite_master").Where("type = 'table' AND name = ?", table).Count(t.Context())
			}
			if err != nil || n != 0 {
				t.Errorf("table %s: %d found, %v; want it dropped", table, n, err)
			}
		}
	})
}

func TestMigrations_olderDatabaseIsMigrated(t *testing.T) {
	forEachDSN(t, func(t *testing.T, dsn string) {
		ctx := t.Context()
		ids, err := migrationIDs(dialectOf(dsn))
		if err != nil {
			t.Fatal(err)
		}
		if len(ids) < 2 {
			t.Skip("SKIP: needs two migrations")
		}
		first := strings.SplitN(ids[0], "_", 2)[0]
		// Build a database as the first release of hoist left it.
		db := rawDB(t, dsn)
		if err := migrateDB(ctx, db, dialectOf(dsn), first, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := db.NewInsert().Model(&Run{ID: "old-run", Project: "main", Name: "train", Type: "task", Status: RunRunning, Version: 1}).
			ExcludeColumn(leaseColumnNames...).ExcludeColumn("submit_key").Exec(ctx); err != nil {
			t.Fatal(err)
		}
		db.Close()

		s := openTest(t, dsn, Options{})
		r, err := s.GetRun(ctx, "old-run")
		if err != nil || r.Status != RunRunning {
			t.Fatalf("old run after migration = %+v, %v", r, err)
		}
		var applied []string
		if err := s.db.NewSelect().Table("bun_migrations").Column("name").OrderExpr("name").Scan(ctx, &applied); err != nil {
			t.Fatal(err)
		}
		if len(applied) != len(ids) {
			t.Errorf("applied %v, want all of %v", applied, ids)
		}
	})
}

func TestMigrations_newerDatabaseIsRefused(t *testing.T) {
	forEachDSN(t, func(t *testing.T, dsn string) {
		ctx := t.Context()
		s := openTest(t, dsn, Options{})
		if _, err := s.db.NewRaw("INSERT INTO bun_migrations (name, group_id, migrated_at) VALUES (?, ?, ?)",
			"29991231000000", 99, s.Now()).Exec(ctx); err != nil {
			t.Fatal(err)
		}
		s.Close()
		_, err := Open(ctx, dsn, Options{})
		if !errors.Is(err, ErrSchemaTooNew) {
			t.Fatalf("Open of a newer database = %v, want ErrSchemaTooNew", err)
		}
		if !strings.Contains(err.Error(), "29991231000000") || !strings.Contains(err.Error(), "newer") {
			t.Errorf("error %q should name the unknown migration and say newer", err)
		}
	})
}

func TestMigrations_reopenIsNoOp(t *testing.T) {
	forEachDSN(t, func(t *testing.T, dsn string) {
		s := openTest(t, dsn, Options{})
		if err := s.CreateRun(t.Context(), &Run{Name: "keep", Type: "task", Status: RunPending}); err != nil {
			t.Fatal(err)
		}
		s.Close()
		s2 := openTest(t, dsn, Options{})
		if _, err := s2.GetRunByName(t.Context(), "", "keep"); err != nil {
			t.Errorf("data lost across reopen: %v", err)
		}
	})
}

func dialectOf(dsn string) string {
	if isPostgres(dsn) {
		return DialectPostgres
	}
	return DialectSQLite
}

// rawDB opens dsn without the owner lock or migrations.
func rawDB(t testing.TB, dsn string) *bun.DB {
	t.Helper()
	var db *bun.DB
	var err error
	if isPostgres(dsn) {
		db, err = openPostgres(dsn, 0)
	} else {
		db, err = openSQLite(sqlitePath(dsn), 0)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func tableColumns(t *testing.T, s *Store, table string) []string {
	t.Helper()
	ctx := context.Background()
	var cols []string
	var err error
	if s.Dialect() == DialectPostgres {
		err = s.db.NewSelect().Table("information_schema.columns").Column("column_name").
			Where("table_name = ? AND table_schema = current_schema()", table).Scan(ctx, &cols)
	} else {
		err = s.db.NewRaw("SELECT name FROM pragma_table_info(?)", table).Scan(ctx, &cols)
	}
	if err != nil {
		t.Fatalf("columns of %s: %v", table, err)
	}
	if len(cols) == 0 {
		t.Fatalf("table %s has no columns", table)
	}
	return cols
}

// TestMigrations_heldSyncErrorsBecomeHeld: a sync state whose errors said
// "held: …" (before migration 20261122000011) is held after it, with no
// errors; an invalid revision's errors stay.
func TestMigrations_heldSyncErrorsBecomeHeld(t *testing.T) {
	for name, tc := range map[string]struct {
		errors     string
		wantHeld   bool
		wantErrors int
	}{
		"held plan":         {`["held: would delete 2 of 3 runs"]`, true, 0},
		"rejected revision": {`["a.dstack.yml:1:1: bad"]`, false, 1},
	} {
		t.Run(name, func(t *testing.T) {
			forEachDSN(t, func(t *testing.T, dsn string) {
				ctx := t.Context()
				db := rawDB(t, dsn)
				if err := migrateDB(ctx, db, dialectOf(dsn), "20261122000010", nil); err != nil {
					t.Fatal(err)
				}
				if _, err := db.ExecContext(ctx, "INSERT INTO sync_state (id, status, errors) VALUES (1, 'syncing', ?)", tc.errors); err != nil {
					t.Fatal(err)
				}
				db.Close()
				s := openTest(t, dsn, Options{})
				st, err := s.GetSyncState(ctx, DefaultProject)
				if err != nil {
					t.Fatal(err)
				}
				if st.Held != tc.wantHeld || len(st.Errors) != tc.wantErrors || len(st.HeldReasons) != 0 {
					t.Errorf("sync state after migration: held %v, reasons %q, errors %q", st.Held, st.HeldReasons, st.Errors)
				}
			})
		})
	}
}
