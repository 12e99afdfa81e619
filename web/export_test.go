package web

import "github.com/labstack/echo/v5"

// RoutesOf is the server's route table, for the external tests that walk
// every route.
func RoutesOf(s *Server) echo.Routes { return s.echo.Router().Routes() }
