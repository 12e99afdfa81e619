package web

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"regexp"
	"time"

	"github.com/labstack/echo/v5"
)

// bootstrapAdmin names the principal of the admin token (Config.AdminToken);
// no user may take the name, so a session of it cannot be confused with a
// user's.
const bootstrapAdmin = "admin"

// userNameRE is what a user name may be: a login name or an e-mail address
// (what OpenID Connect providers map to).
var userNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@+-]{0,99}$`)

// tokenNameRE is what a token name may be.
var tokenNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

func (s *Server) usersOr501() (Users, error) {
	if s.deps.Users == nil {
		return nil, errUnavailable
	}
	return s.deps.Users, nil
}

// current re-reads a session's principal so that a changed role or a
// removed membership applies at once, without logging out. The admin
// token's principal is kept as it is.
func (s *Server) current(c *echo.Context, p Principal) (Principal, bool) {
	if s.deps.Users == nil || (p.Name == bootstrapAdmin && p.Role == RoleAdmin) {
		return p, true
	}
	cur, err := s.deps.Users.Principal(c.Request().Context(), p.Name)
	if err != nil {
		if !errors.Is(err, ErrNotFound) {
			s.log.Warn("principal_lookup_failed", "error", err)
		}
		return Principal{}, false
	}
	return cur, true
}

// decodeBody reads a small JSON body into v, refusing unknown fields.
func decodeBody(c *echo.Context, v any, shape string) error {
	dec := json.NewDecoder(io.LimitReader(c.Request().Body, 64<<10))
	dec.DisallowUnknownFields()
	if dec.Decode(v) != nil {
		return echo.NewHTTPError(http.StatusBadRequest, "body must be JSON "+shape)
	}
	return nil
}

// conflict turns ErrConflict into 409 with msg.
func conflict(err error, msg string) error {
	if errors.Is(err, ErrConflict) {
		return echo.NewHTTPError(http.StatusConflict, msg)
	}
	return err
}

// requireGlobalAdmin refuses everyone but global admins.
func requireGlobalAdmin(c *echo.Context) error {
	if principal(c).Role != RoleAdmin {
		return echo.NewHTTPError(http.StatusForbidden, "only global admins manage users")
	}
	return nil
}

// NewUser is the body of POST /api/v1/users.
type NewUser struct {
	Name string `json:"name"`
	// Role is "admin" or "user" (the default).
	Role Role `json:"role,omitempty"`
}

func (s *Server) apiListUsers(c *echo.Context) error {
	us, err := s.usersOr501()
	if err != nil {
		return err
	}
	if err := requireGlobalAdmin(c); err != nil {
		return err
	}
	list, err := us.ListUsers(c.Request().Context())
	if err != nil {
		return err
	}
	if list == nil {
		list = []Account{}
	}
	return c.JSON(http.StatusOK, list)
}

func (s *Server) apiCreateUser(c *echo.Context) error {
	us, err := s.usersOr501()
	if err != nil {
		return err
	}
	if err := requireGlobalAdmin(c); err != nil {
		return err
	}
	var body NewUser
	if err := decodeBody(c, &body, `{"name": "...", "role": "admin|user"}`); err != nil {
		return err
	}
	a, err := s.createUser(c, us, body)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, a)
}

func (s *Server) createUser(c *echo.Context, us Users, body NewUser) (Account, error) {
	if body.Role == "" {
		body.Role = RoleUser
	}
	if !userNameRE.MatchString(body.Name) || body.Name == bootstrapAdmin {
		return Account{}, echo.NewHTTPError(http.StatusBadRequest, `invalid user name: use 1 to 100 letters, digits, ".", "_", "@", "+" and "-" ("admin" names the admin token)`)
	}
	if body.Role != RoleAdmin && body.Role != RoleUser {
		return Account{}, echo.NewHTTPError(http.StatusBadRequest, `a user's global role is "admin" or "user"; project roles are given with members`)
	}
	a, err := us.CreateUser(c.Request().Context(), body.Name, body.Role)
	if err != nil {
		return a, conflict(err, "user "+body.Name+" exists")
	}
	s.log.Info("user_created", "user", body.Name, "role", string(body.Role), "by", principal(c).Name)
	return a, nil
}

func (s *Server) apiDeleteUser(c *echo.Context) error {
	us, err := s.usersOr501()
	if err != nil {
		return err
	}
	if err := requireGlobalAdmin(c); err != nil {
		return err
	}
	if err := s.deleteUser(c, us, c.Param("name")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (s *Server) deleteUser(c *echo.Context, us Users, name string) error {
	if err := us.DeleteUser(c.Request().Context(), name); err != nil {
		return err
	}
	s.log.Info("user_deleted", "user", name, "by", principal(c).Name)
	return nil
}

// requireManager refuses callers who may not manage the project's members:
// its admins and managers may, and global admins. A project the server
// does not serve, or one the caller has no role in, is not found (as on
// every project route).
func (s *Server) requireManager(c *echo.Context, project string) error {
	_, role, err := s.projectRole(c, project)
	if err != nil {
		return err
	}
	if !role.CanManage() {
		return echo.NewHTTPError(http.StatusForbidden, "only the project's admins and managers manage its members")
	}
	return nil
}

func (s *Server) apiListMembers(c *echo.Context) error {
	us, err := s.usersOr501()
	if err != nil {
		return err
	}
	project := c.Param("project")
	if err := s.requireManager(c, project); err != nil {
		return err
	}
	list, err := us.ListMembers(c.Request().Context(), project)
	if err != nil {
		return err
	}
	if list == nil {
		list = []Member{}
	}
	return c.JSON(http.StatusOK, list)
}

func (s *Server) apiSetMember(c *echo.Context) error {
	us, err := s.usersOr501()
	if err != nil {
		return err
	}
	var body Member
	if err := decodeBody(c, &body, `{"user": "...", "role": "admin|manager|user|viewer"}`); err != nil {
		return err
	}
	if err := s.setMember(c, us, c.Param("project"), body); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, body)
}

// setMember gives a user a role in a project. Managers may give any role
// but admin, and may not change an admin's role (dstack's managers likewise
// manage members but not admins).
func (s *Server) setMember(c *echo.Context, us Users, project string, m Member) error {
	if err := s.requireManager(c, project); err != nil {
		return err
	}
	switch m.Role {
	case RoleAdmin, RoleManager, RoleUser, RoleViewer:
	default:
		return echo.NewHTTPError(http.StatusBadRequest, `role must be "admin", "manager", "user" or "viewer"`)
	}
	if err := s.guardAdmins(c, us, project, m.User, m.Role); err != nil {
		return err
	}
	if err := us.SetMember(c.Request().Context(), project, m.User, m.Role); err != nil {
		if errors.Is(err, ErrNotFound) {
			return echo.NewHTTPError(http.StatusNotFound, "no user "+m.User+"; a global admin adds users first")
		}
		return err
	}
	s.log.Info("member_set", "project", project, "user", m.User, "role", string(m.Role), "by", principal(c).Name)
	return nil
}

// guardAdmins refuses a caller who is not an admin of the project the
// granting of admin, and any change to an admin member.
func (s *Server) guardAdmins(c *echo.Context, us Users, project, user string, role Role) error {
	if principal(c).RoleIn(project) == RoleAdmin {
		return nil
	}
	if role == RoleAdmin {
		return echo.NewHTTPError(http.StatusForbidden, "managers may not make admins")
	}
	ms, err := us.ListMembers(c.Request().Context(), project)
	if err != nil {
		return err
	}
	for _, m := range ms {
		if m.User == user && m.Role == RoleAdmin {
			return echo.NewHTTPError(http.StatusForbidden, "managers may not change or remove the project's admins")
		}
	}
	return nil
}

func (s *Server) apiRemoveMember(c *echo.Context) error {
	us, err := s.usersOr501()
	if err != nil {
		return err
	}
	if err := s.removeMember(c, us, c.Param("project"), c.Param("user")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (s *Server) removeMember(c *echo.Context, us Users, project, user string) error {
	if err := s.requireManager(c, project); err != nil {
		return err
	}
	if err := s.guardAdmins(c, us, project, user, ""); err != nil {
		return err
	}
	if err := us.RemoveMember(c.Request().Context(), project, user); err != nil {
		return err
	}
	s.log.Info("member_removed", "project", project, "user", user, "by", principal(c).Name)
	return nil
}

// NewToken is the body of POST /api/v1/tokens.
type NewToken struct {
	Name string `json:"name"`
	// User owns the token: the caller when empty; only global admins may
	// name another user.
	User string `json:"user,omitempty"`
	// ExpiresAt ends the token; absent means it never expires.
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
}

// CreatedToken is the answer of POST /api/v1/tokens: the only time the
// secret is shown.
type CreatedToken struct {
	Token
	Secret string `json:"secret"`
}

func (s *Server) apiListTokens(c *echo.Context) error {
	us, err := s.usersOr501()
	if err != nil {
		return err
	}
	list, err := s.listTokens(c, us)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, list)
}

// listTokens returns the caller's tokens, or everyone's for a global admin.
func (s *Server) listTokens(c *echo.Context, us Users) ([]Token, error) {
	p := principal(c)
	user := p.Name
	if p.Role == RoleAdmin {
		user = ""
	}
	list, err := us.ListTokens(c.Request().Context(), user)
	if list == nil {
		list = []Token{}
	}
	return list, err
}

func (s *Server) apiCreateToken(c *echo.Context) error {
	us, err := s.usersOr501()
	if err != nil {
		return err
	}
	var body NewToken
	if err := decodeBody(c, &body, `{"name": "...", "user": "...", "expires_at": "RFC 3339 time"}`); err != nil {
		return err
	}
	ct, err := s.createToken(c, us, body)
	if err != nil {
		return err
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.JSON(http.StatusCreated, ct)
}

func (s *Server) createToken(c *echo.Context, us Users, body NewToken) (CreatedToken, error) {
	p := principal(c)
	if body.User == "" {
		body.User = p.Name
	}
	if body.User != p.Name && p.Role != RoleAdmin {
		return CreatedToken{}, echo.NewHTTPError(http.StatusForbidden, "only global admins create tokens for other users")
	}
	if body.User == bootstrapAdmin && p.Name == bootstrapAdmin {
		return CreatedToken{}, echo.NewHTTPError(http.StatusBadRequest, `the admin token is no user: name the token's "user"`)
	}
	if !tokenNameRE.MatchString(body.Name) {
		return CreatedToken{}, echo.NewHTTPError(http.StatusBadRequest, `invalid token name: use 1 to 64 letters, digits, ".", "_" and "-"`)
	}
	var exp time.Time
	if body.ExpiresAt != nil {
		exp = *body.ExpiresAt
		if !exp.After(s.now()) {
			return CreatedToken{}, echo.NewHTTPError(http.StatusBadRequest, "expires_at is not in the future")
		}
	}
	secret, t, err := us.CreateToken(c.Request().Context(), body.User, body.Name, exp)
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return CreatedToken{}, echo.NewHTTPError(http.StatusNotFound, "no user "+body.User)
		}
		return CreatedToken{}, conflict(err, "user "+body.User+" has a token named "+body.Name)
	}
	s.log.Info("token_created", "id", t.ID, "user", body.User, "name", body.Name, "by", p.Name)
	return CreatedToken{Token: t, Secret: secret}, nil
}

func (s *Server) apiRevokeToken(c *echo.Context) error {
	us, err := s.usersOr501()
	if err != nil {
		return err
	}
	if err := s.revokeToken(c, us, c.Param("id")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// revokeToken revokes one of the caller's tokens, or anyone's for a global
// admin; others' tokens are not found.
func (s *Server) revokeToken(c *echo.Context, us Users, id string) error {
	p := principal(c)
	t, err := us.GetToken(c.Request().Context(), id)
	if err != nil {
		return err
	}
	if t.User != p.Name && p.Role != RoleAdmin {
		return ErrNotFound
	}
	if err := us.RevokeToken(c.Request().Context(), id); err != nil {
		return err
	}
	s.log.Info("token_revoked", "id", id, "user", t.User, "by", p.Name)
	return nil
}
