package web

import (
	"context"
	"errors"
	"time"
)

// ErrConflict is what Users returns when a name is taken (a user, or a
// token name among the user's tokens).
var ErrConflict = errors.New("conflict")

// Account is a user as the users API and the admin page show it.
type Account struct {
	Name string `json:"name"`
	// Role is the global role: RoleAdmin or RoleUser.
	Role Role `json:"role"`
	// Projects are the user's roles by project name.
	Projects  map[string]Role `json:"projects,omitempty"`
	CreatedAt time.Time       `json:"created_at"`
}

// Member is a user's role in one project.
type Member struct {
	User string `json:"user"`
	Role Role   `json:"role"`
}

// Token describes an API token: never its secret, which is shown once, when
// it is created.
type Token struct {
	ID         string     `json:"id"`
	Name       string     `json:"name"`
	User       string     `json:"user"`
	CreatedAt  time.Time  `json:"created_at"`
	ExpiresAt  *time.Time `json:"expires_at,omitempty"`
	LastUsedAt *time.Time `json:"last_used_at,omitempty"`
	Revoked    bool       `json:"revoked"`
}

// Users keeps users, their project memberships and their API tokens.
// Optional: without it the users, members and tokens routes answer 501, and
// sessions keep the principal they were created with.
type Users interface {
	// Principal returns the named user's current global role and
	// memberships, or ErrNotFound when the user is gone or disabled.
	Principal(ctx context.Context, name string) (Principal, error)
	// ListUsers returns every user with its memberships, by name.
	ListUsers(ctx context.Context) ([]Account, error)
	// CreateUser adds a user with global role RoleAdmin or RoleUser, or
	// returns ErrConflict.
	CreateUser(ctx context.Context, name string, role Role) (Account, error)
	// DeleteUser removes the user, its tokens and memberships, or returns
	// ErrNotFound.
	DeleteUser(ctx context.Context, name string) error
	// ListMembers returns the project's members by user name.
	ListMembers(ctx context.Context, project string) ([]Member, error)
	// SetMember gives the user the role in the project (ErrNotFound for
	// an unknown user).
	SetMember(ctx context.Context, project, user string, role Role) error
	// RemoveMember takes the user out of the project, or returns
	// ErrNotFound.
	RemoveMember(ctx context.Context, project, user string) error
	// ListProjects returns the names of the projects members can be given
	// (every project hoist knows), sorted.
	ListProjects(ctx context.Context) ([]string, error)
	// ListTokens returns the named user's tokens, or everyone's when user
	// is empty, newest first.
	ListTokens(ctx context.Context, user string) ([]Token, error)
	// GetToken returns the token with the given id, or ErrNotFound.
	GetToken(ctx context.Context, id string) (Token, error)
	// CreateToken issues a token for the user and returns its secret
	// (stored only hashed); a zero expires never expires. A name the
	// user's tokens have returns ErrConflict.
	CreateToken(ctx context.Context, user, name string, expires time.Time) (string, Token, error)
	// RevokeToken revokes the token with the given id, or returns
	// ErrNotFound.
	RevokeToken(ctx context.Context, id string) error
}
