package store

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"time"
)

// TokenPrefix starts every API token hoist issues, so leaked tokens are easy
// to recognize.
const TokenPrefix = "hoist_"

// CreateUser adds a user with the global role admin or user (a user sees
// only the projects it is a member of). A taken name returns ErrConflict.
func (s *Store) CreateUser(ctx context.Context, name, role string) (User, error) {
	u := User{ID: newID(), Name: name, Role: role, CreatedAt: s.Now()}
	if name == "" {
		return u, fmt.Errorf("create user: %w", errEmptyName)
	}
	switch role {
	case RoleAdmin, RoleUser:
	default:
		return u, fmt.Errorf("create user %s: global role %q is not admin or user", name, role)
	}
	if _, err := s.db.NewInsert().Model(&u).Exec(ctx); err != nil {
		return u, fmt.Errorf("create user %s: %w", name, mapConstraint(err))
	}
	return u, nil
}

// GetUser returns the user with the given name, or ErrNotFound.
func (s *Store) GetUser(ctx context.Context, name string) (User, error) {
	var u User
	if err := s.db.NewSelect().Model(&u).Where("name = ?", name).Scan(ctx); err != nil {
		return u, notFound(err, "get user "+name)
	}
	return u, nil
}

// ListUsers returns all users ordered by name.
func (s *Store) ListUsers(ctx context.Context) ([]User, error) {
	var us []User
	if err := s.db.NewSelect().Model(&us).OrderExpr("name").Scan(ctx); err != nil {
		return nil, fmt.Errorf("list users: %w", err)
	}
	return us, nil
}

// CreateToken issues a new API token for the user and returns its plaintext,
// which is shown once: only its SHA-256 hash is stored. A zero expiresAt
// never expires. A name the user's tokens already have returns
// ErrConflict.
func (s *Store) CreateToken(ctx context.Context, userID, name string, expiresAt time.Time) (string, APIToken, error) {
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", APIToken{}, fmt.Errorf("create token: %w", err)
	}
	plain := TokenPrefix + base64.RawURLEncoding.EncodeToString(raw[:])
	t := APIToken{ID: newID(), UserID: userID, Name: name, TokenHash: hashToken(plain), CreatedAt: s.Now(), ExpiresAt: expiresAt.UTC()}
	if expiresAt.IsZero() {
		t.ExpiresAt = time.Time{}
	}
	if _, err := s.db.NewInsert().Model(&t).Exec(ctx); err != nil {
		return "", t, fmt.Errorf("create token %q for user %s: %w", name, userID, mapConstraint(err))
	}
	return plain, t, nil
}

func hashToken(plain string) string {
	sum := sha256.Sum256([]byte(plain))
	return hex.EncodeToString(sum[:])
}

// LookupToken returns the user a plaintext token belongs to and records the
// token's use (at most once a minute). Unknown, revoked and expired tokens,
// and disabled users, return ErrNotFound.
func (s *Store) LookupToken(ctx context.Context, plain string) (User, error) {
	var t APIToken
	if err := s.db.NewSelect().Model(&t).Where("token_hash = ?", hashToken(plain)).Scan(ctx); err != nil {
		return User{}, notFound(err, "lookup token")
	}
	now := s.Now()
	if t.Revoked || (!t.ExpiresAt.IsZero() && !now.Before(t.ExpiresAt)) {
		return User{}, fmt.Errorf("lookup token: revoked or expired: %w", ErrNotFound)
	}
	var u User
	if err := s.db.NewSelect().Model(&u).Where("id = ?", t.UserID).Scan(ctx); err != nil {
		return u, notFound(err, "lookup token user")
	}
	if u.Disabled {
		return User{}, fmt.Errorf("lookup token: user disabled: %w", ErrNotFound)
	}
	// Record use at most once a minute: a write per API call would contend
	// with the reconciler on SQLite.
	if t.LastUsedAt.IsZero() || now.Sub(t.LastUsedAt) >= time.Minute {
		_, _ = s.db.NewUpdate().Model((*APIToken)(nil)).Set("last_used_at = ?", now).Where("id = ?", t.ID).Exec(ctx)
	}
	return u, nil
}

// RevokeToken revokes the token with the given id.
func (s *Store) RevokeToken(ctx context.Context, id string) error {
	res, err := s.db.NewUpdate().Model((*APIToken)(nil)).Set("revoked = ?", true).Where("id = ?", id).Exec(ctx)
	if err != nil {
		return fmt.Errorf("revoke token %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("revoke token %s: %w", id, ErrNotFound)
	}
	return nil
}

// EnsureProject returns the project with the given name, creating it first
// when it does not exist.
func (s *Store) EnsureProject(ctx context.Context, name string) (Project, error) {
	p := Project{ID: newID(), Name: name, CreatedAt: s.Now()}
	if _, err := s.db.NewInsert().Model(&p).On("CONFLICT (name) DO NOTHING").Exec(ctx); err != nil {
		return p, fmt.Errorf("ensure project %s: %w", name, err)
	}
	if err := s.db.NewSelect().Model(&p).Where("name = ?", name).Scan(ctx); err != nil {
		return p, fmt.Errorf("ensure project %s: %w", name, err)
	}
	return p, nil
}

// ListProjects returns all projects ordered by name.
func (s *Store) ListProjects(ctx context.Context) ([]Project, error) {
	var ps []Project
	if err := s.db.NewSelect().Model(&ps).OrderExpr("name").Scan(ctx); err != nil {
		return nil, fmt.Errorf("list projects: %w", err)
	}
	return ps, nil
}

// ValidTokens returns the hashes of the API tokens accepted now in
// project: not revoked, not expired, of users not disabled (what
// LookupToken accepts) who are global admins or members of the project,
// for the project's gateways, which check tokens themselves.
func (s *Store) ValidTokens(ctx context.Context, proj string) ([]APIToken, error) {
	var ts []APIToken
	err := s.db.NewSelect().Model(&ts).
		Where("revoked = ?", false).
		Where("(expires_at IS NULL OR expires_at > ?)", s.Now()).
		Where("user_id IN (SELECT id FROM users WHERE disabled = ? AND (role = ? OR id IN (SELECT user_id FROM project_members WHERE project = ?)))",
			false, RoleAdmin, project(proj)).
		Order("token_hash").Scan(ctx)
	if err != nil {
		return nil, fmt.Errorf("list valid tokens of project %s: %w", proj, err)
	}
	return ts, nil
}

// ListTokens returns the tokens of the user with the given ID, or of every
// user when userID is empty, newest first; UserName is filled in.
func (s *Store) ListTokens(ctx context.Context, userID string) ([]TokenInfo, error) {
	var ts []TokenInfo
	q := s.db.NewSelect().Model(&ts).
		ColumnExpr("t.id, t.user_id, t.name, t.created_at, t.expires_at, t.last_used_at, t.revoked, u.name AS user_name").
		ModelTableExpr("api_tokens AS t").
		Join("JOIN users AS u ON u.id = t.user_id").
		OrderExpr("t.created_at DESC, t.id")
	if userID != "" {
		q = q.Where("t.user_id = ?", userID)
	}
	if err := q.Scan(ctx); err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	return ts, nil
}

// GetToken returns the token with the given id (without its hash), or
// ErrNotFound.
func (s *Store) GetToken(ctx context.Context, id string) (TokenInfo, error) {
	var t TokenInfo
	err := s.db.NewSelect().Model(&t).
		ColumnExpr("t.id, t.user_id, t.name, t.created_at, t.expires_at, t.last_used_at, t.revoked, u.name AS user_name").
		ModelTableExpr("api_tokens AS t").
		Join("JOIN users AS u ON u.id = t.user_id").
		Where("t.id = ?", id).Scan(ctx)
	if err != nil {
		return t, notFound(err, "get token "+id)
	}
	return t, nil
}
