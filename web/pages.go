package web

import (
	"embed"
	"fmt"
	"io/fs"
	"net/http"
	"strconv"
	"time"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v5"
)

//go:embed static
var staticFS embed.FS

// runStatuses is dstack's run vocabulary, in lifecycle order.
var runStatuses = []string{"pending", "submitted", "provisioning", "running", "terminating", "terminated", "failed", "done"}

// pageLogLines is how many log lines one page of the run page shows.
const pageLogLines = 500

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

// Template helpers.

func short(rev string) string {
	if len(rev) > 12 {
		return rev[:12]
	}
	return rev
}

func money(v float64) string {
	if v == 0 {
		return "—"
	}
	return "$" + strconv.FormatFloat(v, 'f', 3, 64)
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

func fmtTimePtr(t *time.Time) string {
	if t == nil {
		return ""
	}
	return fmtTime(*t)
}

func exitCode(c *int) string {
	if c == nil {
		return ""
	}
	return strconv.Itoa(*c)
}

// age renders how long before now t was.
func age(now, t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return humanDuration(now.Sub(t))
}

func humanDuration(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Minute:
		return strconv.Itoa(int(d.Seconds())) + "s"
	case d < time.Hour:
		return strconv.Itoa(int(d.Minutes())) + "m"
	case d < 48*time.Hour:
		return strconv.Itoa(int(d.Hours())) + "h"
	default:
		return strconv.Itoa(int(d.Hours()/24)) + "d"
	}
}

func lastSeq(lines []LogLine, after int64) int64 {
	if len(lines) == 0 {
		return after
	}
	return lines[len(lines)-1].Seq
}

// liveLogsURL is the SSE stream that continues after the lines shown, or
// empty when this page is not the last one (the script then stays idle).
func liveLogsURL(r Run, j Job, lines []LogLine, after int64, more bool) string {
	if more {
		return ""
	}
	return fmt.Sprintf("/runs/%s/logs/stream?job=%s&after=%d", r.Name, j.ID, lastSeq(lines, after))
}
