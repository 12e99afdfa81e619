package store

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestMembers_setListRemove(t *testing.T) {
	forEachDB(t, func(t *testing.T, s *Store, clock *fakeClock) {
		ctx := t.Context()
		ann, err := s.CreateUser(ctx, "ann", RoleUser)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.CreateUser(ctx, "bob", RoleUser); err != nil {
			t.Fatal(err)
		}
		if _, err := s.CreateUser(ctx, "vic", RoleViewer); err == nil {
			t.Error("CreateUser with global role viewer: want error (viewer is a project role)")
		}
		if _, err := s.SetMember(ctx, "ml", "ann", RoleManager); err != nil {
			t.Fatal(err)
		}
		if _, err := s.SetMember(ctx, "ml", "bob", RoleViewer); err != nil {
			t.Fatal(err)
		}
		if _, err := s.SetMember(ctx, "web", "ann", RoleViewer); err != nil {
			t.Fatal(err)
		}
		// Setting again changes the role.
		if _, err := s.SetMember(ctx, "web", "ann", RoleUser); err != nil {
			t.Fatal(err)
		}
		if _, err := s.SetMember(ctx, "ml", "nobody", RoleUser); !errors.Is(err, ErrNotFound) {
			t.Errorf("SetMember(unknown user) = %v, want ErrNotFound", err)
		}
		if _, err := s.SetMember(ctx, "ml", "ann", "owner"); err == nil {
			t.Error("SetMember(role owner): want error")
		}
		ms, err := s.ListMembers(ctx, "ml")
		if err != nil || len(ms) != 2 || ms[0].UserName != "ann" || ms[0].Role != RoleManager || ms[1].UserName != "bob" || ms[1].Role != RoleViewer {
			t.Errorf("ListMembers(ml) = %+v, %v", ms, err)
		}
		of, err := s.MembershipsOf(ctx, ann.ID)
		if err != nil || len(of) != 2 || of[0].Project != "ml" || of[1].Project != "web" || of[1].Role != RoleUser {
			t.Errorf("MembershipsOf(ann) = %+v, %v", of, err)
		}
		if err := s.RemoveMember(ctx, "ml", "bob"); err != nil {
			t.Fatal(err)
		}
		if err := s.RemoveMember(ctx, "ml", "bob"); !errors.Is(err, ErrNotFound) {
			t.Errorf("RemoveMember twice = %v, want ErrNotFound", err)
		}
		if ms, _ := s.ListMembers(ctx, "ml"); len(ms) != 1 {
			t.Errorf("after remove: %+v", ms)
		}
	})
}

func TestUsers_deleteTakesTokensAndMemberships(t *testing.T) {
	forEachDB(t, func(t *testing.T, s *Store, clock *fakeClock) {
		ctx := t.Context()
		ann, _ := s.CreateUser(ctx, "ann", RoleUser)
		if _, err := s.SetMember(ctx, "ml", "ann", RoleUser); err != nil {
			t.Fatal(err)
		}
		plain, _, err := s.CreateToken(ctx, ann.ID, "ci", time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteUser(ctx, "ann"); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteUser(ctx, "ann"); !errors.Is(err, ErrNotFound) {
			t.Errorf("DeleteUser twice = %v, want ErrNotFound", err)
		}
		if _, err := s.LookupToken(ctx, plain); !errors.Is(err, ErrNotFound) {
			t.Errorf("LookupToken of a deleted user's token = %v, want ErrNotFound", err)
		}
		if ms, _ := s.ListMembers(ctx, "ml"); len(ms) != 0 {
			t.Errorf("members after delete: %+v", ms)
		}
		if ts, _ := s.ListTokens(ctx, ""); len(ts) != 0 {
			t.Errorf("tokens after delete: %+v", ts)
		}
	})
}

func TestTokens_listNamesAndRevoke(t *testing.T) {
	forEachDB(t, func(t *testing.T, s *Store, clock *fakeClock) {
		ctx := t.Context()
		ann, _ := s.CreateUser(ctx, "ann", RoleUser)
		bob, _ := s.CreateUser(ctx, "bob", RoleAdmin)
		_, a1, err := s.CreateToken(ctx, ann.ID, "ci", clock.Now().Add(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.CreateToken(ctx, ann.ID, "ci", time.Time{}); !errors.Is(err, ErrConflict) {
			t.Errorf("second token named ci = %v, want ErrConflict", err)
		}
		if _, _, err := s.CreateToken(ctx, bob.ID, "ci", time.Time{}); err != nil {
			t.Errorf("bob's token named ci: %v (names are unique per user only)", err)
		}
		mine, err := s.ListTokens(ctx, ann.ID)
		if err != nil || len(mine) != 1 || mine[0].ID != a1.ID || mine[0].UserName != "ann" || !mine[0].ExpiresAt.Equal(a1.ExpiresAt) {
			t.Errorf("ListTokens(ann) = %+v, %v", mine, err)
		}
		all, err := s.ListTokens(ctx, "")
		if err != nil || len(all) != 2 {
			t.Errorf("ListTokens(all) = %+v, %v", all, err)
		}
		if err := s.RevokeToken(ctx, a1.ID); err != nil {
			t.Fatal(err)
		}
		got, err := s.GetToken(ctx, a1.ID)
		if err != nil || !got.Revoked || got.UserName != "ann" {
			t.Errorf("GetToken after revoke = %+v, %v", got, err)
		}
		if _, err := s.GetToken(ctx, "nope"); !errors.Is(err, ErrNotFound) {
			t.Errorf("GetToken(nope) = %v", err)
		}
	})
}

// TestTokens_plaintextNeverStored scans the whole SQLite database, WAL
// included, for the token's secret.
func TestTokens_plaintextNeverStored(t *testing.T) {
	dir := t.TempDir()
	clock := newFakeClock()
	s := openTest(t, filepath.Join(dir, "hoist.db"), Options{Now: clock.Now, SecretKey: testKey})
	ctx := t.Context()
	u, _ := s.CreateUser(ctx, "ann", RoleUser)
	plain, _, err := s.CreateToken(ctx, u.ID, "ci", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.LookupToken(ctx, plain); err != nil {
		t.Fatal(err)
	}
	secret := []byte(plain[len(TokenPrefix):])
	files, _ := filepath.Glob(filepath.Join(dir, "hoist.db*"))
	if len(files) == 0 {
		t.Fatal("no database files")
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, secret) {
			t.Errorf("%s holds the token's secret in clear", filepath.Base(f))
		}
	}
}

// TestMigrations_viewersAndUsersBecomeMembersOfMain migrates users made
// before project roles: users and viewers keep their access to main as
// members, and every non-admin's global role becomes user.
func TestMigrations_viewersAndUsersBecomeMembersOfMain(t *testing.T) {
	forEachDSN(t, func(t *testing.T, dsn string) {
		ctx := t.Context()
		db := rawDB(t, dsn)
		if err := migrateDB(ctx, db, dialectOf(dsn), "20261125090002", nil); err != nil {
			t.Fatal(err)
		}
		for _, u := range []struct{ id, name, role string }{{"u1", "ann", "admin"}, {"u2", "bob", "user"}, {"u3", "vic", "viewer"}} {
			if _, err := db.ExecContext(ctx, "INSERT INTO users (id, name, role, disabled, created_at) VALUES (?, ?, ?, ?, ?)",
				u.id, u.name, u.role, false, time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)); err != nil {
				t.Fatal(err)
			}
		}
		db.Close()
		s := openTest(t, dsn, Options{})
		roles := map[string]string{}
		us, err := s.ListUsers(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range us {
			roles[u.Name] = u.Role
		}
		if roles["ann"] != RoleAdmin || roles["bob"] != RoleUser || roles["vic"] != RoleUser {
			t.Errorf("global roles after migration: %v", roles)
		}
		ms, err := s.ListMembers(ctx, DefaultProject)
		if err != nil || len(ms) != 2 || ms[0].UserName != "bob" || ms[0].Role != RoleUser || ms[1].UserName != "vic" || ms[1].Role != RoleViewer {
			t.Errorf("members of main after migration: %+v, %v", ms, err)
		}
	})
}
