package web

import (
	"fmt"
	"net/http"
	"runtime/debug"
	"time"

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
