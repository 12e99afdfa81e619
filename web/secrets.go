package web

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/labstack/echo/v5"
)

// Secret is what the API and the page show about a secret: never its value.
type Secret struct {
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Secrets keeps the project's secrets, the values specs reference as
// `${{ secrets.NAME }}`. Optional: without it the secret routes answer 501
// and the page says so.
type Secrets interface {
	// ListSecrets returns every secret's name and times, sorted by name.
	ListSecrets(ctx context.Context) ([]Secret, error)
	// GetSecret returns the value of the named secret, or ErrNotFound.
	GetSecret(ctx context.Context, name string) ([]byte, error)
	// SetSecret creates or replaces the named secret and records an event
	// (object kind "secret") naming it and by, the user who set it; the
	// value is never part of the event.
	SetSecret(ctx context.Context, name string, value []byte, by string) error
	// DeleteSecret removes the named secret and records an event naming it
	// and by, or returns ErrNotFound.
	DeleteSecret(ctx context.Context, name, by string) error
}

// maxSecretBytes bounds a secret's value (a private key is a few KB).
const maxSecretBytes = 64 << 10

// secretNameRE is what `${{ secrets.NAME }}` can reference.
var secretNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,100}$`)

func validSecret(name string, value []byte) error {
	if !secretNameRE.MatchString(name) {
		return echo.NewHTTPError(http.StatusBadRequest, "invalid secret name: use 1 to 100 letters, digits, _ and -")
	}
	if len(value) > maxSecretBytes {
		return echo.NewHTTPError(http.StatusRequestEntityTooLarge, "secret value is larger than 64 KiB")
	}
	return nil
}

// SecretValue is the body of a set (PUT /api/v1/secrets/{name}, or POST
// /api/v1/secrets with Name) and the answer of a get.
type SecretValue struct {
	Name  string `json:"name,omitempty"`
	Value string `json:"value"`
}

func (s *Server) secretsOr501(c *echo.Context) (Secrets, error) {
	if s.proj(c).Secrets == nil {
		return nil, errUnavailable
	}
	return s.proj(c).Secrets, nil
}

func (s *Server) apiListSecrets(c *echo.Context) error {
	sec, err := s.secretsOr501(c)
	if err != nil {
		return err
	}
	list, err := sec.ListSecrets(c.Request().Context())
	if err != nil {
		return err
	}
	if list == nil {
		list = []Secret{}
	}
	return c.JSON(http.StatusOK, list)
}

// apiGetSecret is the one answer that carries a secret's value.
func (s *Server) apiGetSecret(c *echo.Context) error {
	sec, err := s.secretsOr501(c)
	if err != nil {
		return err
	}
	name := c.Param("name")
	v, err := sec.GetSecret(c.Request().Context(), name)
	if err != nil {
		return err
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	s.log.Info("secret_read", "name", name, "by", principal(c).Name)
	return c.JSON(http.StatusOK, SecretValue{Name: name, Value: string(v)})
}

// apiSetSecret creates or replaces a secret: PUT /secrets/:name with
// {"value": ...}, or POST /secrets with {"name": ..., "value": ...}.
func (s *Server) apiSetSecret(c *echo.Context) error {
	sec, err := s.secretsOr501(c)
	if err != nil {
		return err
	}
	b, err := io.ReadAll(io.LimitReader(c.Request().Body, 2*maxSecretBytes+1024))
	if err != nil {
		return err
	}
	var body SecretValue
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	// The decoder's own error may quote the body: it is not passed on.
	if dec.Decode(&body) != nil {
		return echo.NewHTTPError(http.StatusBadRequest, `body must be JSON {"value": "..."}`)
	}
	name := c.Param("name")
	if name == "" {
		name = body.Name
	} else if body.Name != "" && body.Name != name {
		return echo.NewHTTPError(http.StatusBadRequest, "the body's name differs from the path's")
	}
	if err := s.setSecret(c, sec, name, []byte(body.Value)); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]string{"name": name})
}

func (s *Server) setSecret(c *echo.Context, sec Secrets, name string, value []byte) error {
	if err := validSecret(name, value); err != nil {
		return err
	}
	if err := sec.SetSecret(c.Request().Context(), name, value, principal(c).Name); err != nil {
		return err
	}
	s.log.Info("secret_set", "name", name, "by", principal(c).Name)
	return nil
}

func (s *Server) apiDeleteSecret(c *echo.Context) error {
	sec, err := s.secretsOr501(c)
	if err != nil {
		return err
	}
	name := c.Param("name")
	if err := s.deleteSecret(c, sec, name); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]string{"name": name})
}

func (s *Server) deleteSecret(c *echo.Context, sec Secrets, name string) error {
	if err := sec.DeleteSecret(c.Request().Context(), name, principal(c).Name); err != nil {
		return err
	}
	s.log.Info("secret_deleted", "name", name, "by", principal(c).Name)
	return nil
}

func (s *Server) pageSecrets(c *echo.Context) error {
	if s.proj(c).Secrets == nil {
		return s.render(c, http.StatusOK, secretsPage(s.viewer(c), nil, false, c.QueryParam("msg")))
	}
	list, err := s.proj(c).Secrets.ListSecrets(c.Request().Context())
	if err != nil {
		return err
	}
	return s.render(c, http.StatusOK, secretsPage(s.viewer(c), list, true, c.QueryParam("msg")))
}

// formSetSecret is the page's set form. Browsers send a textarea's line
// breaks as CRLF; they are stored as LF.
func (s *Server) formSetSecret(c *echo.Context) error {
	sec, err := s.secretsOr501(c)
	if err != nil {
		return err
	}
	name := strings.TrimSpace(c.FormValue("name"))
	value := strings.ReplaceAll(c.FormValue("value"), "\r\n", "\n")
	if err := s.setSecret(c, sec, name, []byte(value)); err != nil {
		var he *echo.HTTPError
		if errors.As(err, &he) && he.Code < 500 {
			return c.Redirect(http.StatusSeeOther, s.proj(c).Base+"/secrets?msg="+url.QueryEscape(he.Message))
		}
		return err
	}
	return c.Redirect(http.StatusSeeOther, s.proj(c).Base+"/secrets?msg="+url.QueryEscape("secret "+name+" set"))
}

func (s *Server) formDeleteSecret(c *echo.Context) error {
	sec, err := s.secretsOr501(c)
	if err != nil {
		return err
	}
	name := c.Param("name")
	if err := s.deleteSecret(c, sec, name); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, s.proj(c).Base+"/secrets?msg="+url.QueryEscape("secret "+name+" deleted"))
}
