package web

import (
	"errors"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v5"
)

// sortedRoles lists a principal's projects as "project: role", by project.
func sortedRoles(m map[string]Role) []string {
	out := make([]string, 0, len(m))
	for _, p := range slices.Sorted(maps.Keys(m)) {
		out = append(out, p+": "+string(m[p]))
	}
	return out
}

func (s *Server) pageAdmin(c *echo.Context) error {
	d, err := s.adminData(c, c.QueryParam("msg"))
	if err != nil {
		return err
	}
	return s.render(c, http.StatusOK, adminPage(s.viewer(c), d))
}

// adminData reads what the admin page shows the caller.
func (s *Server) adminData(c *echo.Context, msg string) (adminData, error) {
	d := adminData{Msg: msg}
	us := s.deps.Users
	if us == nil {
		return d, nil
	}
	d.OK = true
	ctx := c.Request().Context()
	p := principal(c)
	var err error
	if p.Role == RoleAdmin {
		if d.Users, err = us.ListUsers(ctx); err != nil {
			return d, err
		}
	}
	projects, err := us.ListProjects(ctx)
	if err != nil {
		return d, err
	}
	for _, name := range projects {
		role := p.RoleIn(name)
		if !role.CanManage() {
			continue
		}
		ms, err := us.ListMembers(ctx, name)
		if err != nil {
			return d, err
		}
		d.Projects = append(d.Projects, projectMembers{Project: name, Members: ms, Admin: role == RoleAdmin})
	}
	if d.Tokens, err = s.listTokens(c, us); err != nil {
		return d, err
	}
	return d, nil
}

// adminRedirect answers a form: back to the page with msg, or with the
// error's message when the caller got a field wrong; refusals stay 403.
func (s *Server) adminRedirect(c *echo.Context, err error, msg string) error {
	if err != nil {
		var he *echo.HTTPError
		switch {
		case errors.As(err, &he) && he.Code < 500 && he.Code != http.StatusForbidden:
			msg = he.Message
		case errors.Is(err, ErrNotFound):
			msg = "not found"
		default:
			return err
		}
	}
	return c.Redirect(http.StatusSeeOther, "/admin?msg="+url.QueryEscape(msg))
}

func (s *Server) formCreateUser(c *echo.Context) error {
	us, err := s.usersOr501()
	if err != nil {
		return err
	}
	if err := requireGlobalAdmin(c); err != nil {
		return err
	}
	name := strings.TrimSpace(c.FormValue("name"))
	_, err = s.createUser(c, us, NewUser{Name: name, Role: Role(c.FormValue("role"))})
	return s.adminRedirect(c, err, "user "+name+" added")
}

func (s *Server) formDeleteUser(c *echo.Context) error {
	us, err := s.usersOr501()
	if err != nil {
		return err
	}
	if err := requireGlobalAdmin(c); err != nil {
		return err
	}
	name := c.Param("name")
	return s.adminRedirect(c, s.deleteUser(c, us, name), "user "+name+" removed")
}

func (s *Server) formSetMember(c *echo.Context) error {
	us, err := s.usersOr501()
	if err != nil {
		return err
	}
	project := c.Param("project")
	m := Member{User: strings.TrimSpace(c.FormValue("user")), Role: Role(c.FormValue("role"))}
	err = s.setMember(c, us, project, m)
	return s.adminRedirect(c, err, m.User+" is "+string(m.Role)+" of "+project)
}

func (s *Server) formRemoveMember(c *echo.Context) error {
	us, err := s.usersOr501()
	if err != nil {
		return err
	}
	project, user := c.Param("project"), c.Param("user")
	return s.adminRedirect(c, s.removeMember(c, us, project, user), user+" removed from "+project)
}

// formCreateToken creates a token and renders the page with its secret
// (never put in a URL, so not a redirect).
func (s *Server) formCreateToken(c *echo.Context) error {
	us, err := s.usersOr501()
	if err != nil {
		return err
	}
	body := NewToken{Name: strings.TrimSpace(c.FormValue("name")), User: strings.TrimSpace(c.FormValue("user"))}
	if days := strings.TrimSpace(c.FormValue("days")); days != "" && days != "0" {
		n, err := strconv.Atoi(days)
		if err != nil || n < 0 || n > 3650 {
			return s.adminRedirect(c, echo.NewHTTPError(http.StatusBadRequest, "expiry must be 0 to 3650 days"), "")
		}
		exp := s.now().Add(time.Duration(n) * 24 * time.Hour)
		body.ExpiresAt = &exp
	}
	ct, err := s.createToken(c, us, body)
	if err != nil {
		return s.adminRedirect(c, err, "")
	}
	d, err := s.adminData(c, "")
	if err != nil {
		return err
	}
	d.Secret = &ct
	c.Response().Header().Set("Cache-Control", "no-store")
	return s.render(c, http.StatusOK, adminPage(s.viewer(c), d))
}

func (s *Server) formRevokeToken(c *echo.Context) error {
	us, err := s.usersOr501()
	if err != nil {
		return err
	}
	id := c.Param("id")
	return s.adminRedirect(c, s.revokeToken(c, us, id), "token revoked")
}
