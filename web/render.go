package web

import (
	"embed"
	"fmt"
	"io/fs"
	"net/http"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v5"
)

//go:embed static
var staticFS embed.FS

// render writes component as HTML through a pooled buffer, so a render
// error becomes a clean error answer rather than half a page.
func (s *Server) render(c *echo.Context, status int, component templ.Component) error {
	buf := templ.GetBuffer()
	defer templ.ReleaseBuffer(buf)
	if err := component.Render(c.Request().Context(), buf); err != nil {
		return fmt.Errorf("render: %w", err)
	}
	h := c.Response().Header()
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
	return c.HTMLBlob(status, buf.Bytes())
}

func (s *Server) static(c *echo.Context) error {
	sub, _ := fs.Sub(staticFS, "static")
	name := c.Param("*")
	b, err := fs.ReadFile(sub, name)
	if err != nil {
		return echo.NewHTTPError(http.StatusNotFound, "no such file")
	}
	ctype := "application/octet-stream"
	switch {
	case len(name) > 3 && name[len(name)-3:] == ".js":
		ctype = "text/javascript; charset=utf-8"
	case len(name) > 4 && name[len(name)-4:] == ".css":
		ctype = "text/css; charset=utf-8"
	case len(name) > 4 && name[len(name)-4:] == ".svg":
		ctype = "image/svg+xml"
	}
	c.Response().Header().Set("Cache-Control", "public, max-age=300")
	c.Response().Header().Set("X-Content-Type-Options", "nosniff")
	return c.Blob(http.StatusOK, ctype, b)
}
