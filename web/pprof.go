package web

import (
	"net/http"
	"net/http/pprof"
	"strings"

	"github.com/labstack/echo/v5"
)

// debugPprof serves Go's runtime profiles (net/http/pprof) below
// /debug/pprof/ to global admins alone, as Nomad's /v1/agent/pprof does
// for operators: /debug/pprof/profile?seconds=30 is a CPU profile,
// /debug/pprof/goroutine?debug=1 the goroutines, /debug/pprof/heap the
// heap (https://pkg.go.dev/net/http/pprof).
func (s *Server) debugPprof(c *echo.Context) error {
	if principal(c).Role != RoleAdmin {
		return echo.NewHTTPError(http.StatusForbidden, "only global admins read profiles")
	}
	w, r := c.Response(), c.Request()
	switch name := strings.TrimPrefix(r.URL.Path, "/debug/pprof/"); name {
	case "cmdline":
		pprof.Cmdline(w, r)
	case "profile":
		pprof.Profile(w, r)
	case "symbol":
		pprof.Symbol(w, r)
	case "trace":
		pprof.Trace(w, r)
	case "":
		pprof.Index(w, r)
	default:
		pprof.Handler(name).ServeHTTP(w, r)
	}
	return nil
}
