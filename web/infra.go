package web

import (
	"net/http"

	"github.com/labstack/echo/v5"
)

func (s *Server) apiListFleets(c *echo.Context) error {
	if s.proj(c).Inventory == nil {
		return errUnavailable
	}
	fl, err := s.proj(c).Inventory.ListFleets(c.Request().Context())
	if err != nil {
		return err
	}
	for i := range fl {
		fl[i].Spec = redactJSON(fl[i].Spec)
	}
	return c.JSON(http.StatusOK, nonNil(fl))
}

// fleetDetail is a fleet with its instances.
type fleetDetail struct {
	Fleet
	InstanceList []Instance `json:"instance_list"`
}

func (s *Server) apiGetFleet(c *echo.Context) error {
	if s.proj(c).Inventory == nil {
		return errUnavailable
	}
	ctx := c.Request().Context()
	fl, err := s.proj(c).Inventory.ListFleets(ctx)
	if err != nil {
		return err
	}
	for _, f := range fl {
		if f.Name == c.Param("name") {
			is, err := s.proj(c).Inventory.ListInstances(ctx, f.Name)
			if err != nil {
				return err
			}
			f.Spec = redactJSON(f.Spec)
			return c.JSON(http.StatusOK, fleetDetail{Fleet: f, InstanceList: nonNil(is)})
		}
	}
	return echo.NewHTTPError(http.StatusNotFound, "no such fleet")
}

func (s *Server) apiListInstances(c *echo.Context) error {
	if s.proj(c).Inventory == nil {
		return errUnavailable
	}
	is, err := s.proj(c).Inventory.ListInstances(c.Request().Context(), c.QueryParam("fleet"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, nonNil(is))
}

func (s *Server) apiListVolumes(c *echo.Context) error {
	if s.proj(c).Inventory == nil {
		return errUnavailable
	}
	vs, err := s.proj(c).Inventory.ListVolumes(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, nonNil(vs))
}

func (s *Server) apiListGateways(c *echo.Context) error {
	if s.proj(c).Inventory == nil {
		return errUnavailable
	}
	gs, err := s.proj(c).Inventory.ListGateways(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, nonNil(gs))
}

func (s *Server) pageFleets(c *echo.Context) error {
	if s.proj(c).Inventory == nil {
		return s.render(c, http.StatusOK, fleetsPage(s.viewer(c), nil, nil, false))
	}
	ctx := c.Request().Context()
	fl, err := s.proj(c).Inventory.ListFleets(ctx)
	if err != nil {
		return err
	}
	is, err := s.proj(c).Inventory.ListInstances(ctx, "")
	if err != nil {
		return err
	}
	return s.render(c, http.StatusOK, fleetsPage(s.viewer(c), fl, is, true))
}

func (s *Server) pageVolumes(c *echo.Context) error {
	if s.proj(c).Inventory == nil {
		return s.render(c, http.StatusOK, volumesPage(s.viewer(c), nil, false))
	}
	vs, err := s.proj(c).Inventory.ListVolumes(c.Request().Context())
	if err != nil {
		return err
	}
	return s.render(c, http.StatusOK, volumesPage(s.viewer(c), vs, true))
}

func (s *Server) pageGateways(c *echo.Context) error {
	if s.proj(c).Inventory == nil {
		return s.render(c, http.StatusOK, gatewaysPage(s.viewer(c), nil, false))
	}
	gs, err := s.proj(c).Inventory.ListGateways(c.Request().Context())
	if err != nil {
		return err
	}
	return s.render(c, http.StatusOK, gatewaysPage(s.viewer(c), gs, true))
}
