package web

import (
	"fmt"
	"net/http"
	"net/url"
	"runtime/debug"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/labstack/echo/v5"
)

// recoverPanics turns a handler panic into a 500 answer and an error log
// (http.ErrAbortHandler is re-raised, as net/http expects).
func (s *Server) recoverPanics(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c *echo.Context) (err error) {
		defer func() {
			if r := recover(); r != nil {
				if r == http.ErrAbortHandler {
					panic(r)
				}
				s.log.Error("http_panic", "method", c.Request().Method, "path", c.Request().URL.Path,
					"panic", fmt.Sprint(r), "stack", string(debug.Stack()))
				err = echo.NewHTTPError(http.StatusInternalServerError, "internal error")
			}
		}()
		return next(c)
	}
}

// logRequests logs each request at debug level and feeds the HTTP latency
// histogram, labelled by route pattern (never by raw path).
func (s *Server) logRequests(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c *echo.Context) error {
		start := s.now()
		err := next(c)
		if err != nil {
			c.Echo().HTTPErrorHandler(c, err)
		}
		_, status := echo.ResolveResponseStatus(c.Response(), err)
		d := time.Since(start)
		route := c.Path()
		if route == "" {
			route = "unmatched"
		}
		s.metrics.observeHTTP(c.Request().Method, route, status, d)
		s.log.Debug("http_request", "method", c.Request().Method, "route", route,
			"path", c.Request().URL.Path, "status", status, "duration", d)
		return nil
	}
}

// rejectBadBytes answers 400 to a request whose decoded path holds a control
// character (NUL included) or invalid UTF-8, or whose query holds a NUL or
// invalid UTF-8: no name hoist stores can contain them, and the databases
// refuse them (PostgreSQL rejects NUL in text), which would otherwise be a
// 500.
func (s *Server) rejectBadBytes(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c *echo.Context) error {
		u := c.Request().URL
		if !utf8.ValidString(u.Path) || strings.ContainsFunc(u.Path, unicode.IsControl) {
			return echo.NewHTTPError(http.StatusBadRequest, "invalid bytes in the URL path")
		}
		// A malformed pair is dropped here as it is by c.QueryParam.
		q, _ := url.ParseQuery(u.RawQuery)
		for k, vs := range q {
			if !cleanText(k) {
				return echo.NewHTTPError(http.StatusBadRequest, "invalid bytes in the query string")
			}
			for _, v := range vs {
				if !cleanText(v) {
					return echo.NewHTTPError(http.StatusBadRequest, "invalid bytes in the query string")
				}
			}
		}
		return next(c)
	}
}

// cleanText reports whether s is valid UTF-8 without NUL.
func cleanText(s string) bool {
	return utf8.ValidString(s) && !strings.ContainsRune(s, 0)
}
