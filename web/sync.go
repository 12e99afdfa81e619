package web

import (
	"encoding/json"
	"net/http"

	"github.com/labstack/echo/v5"
)

// heldError starts each held reason that /api/v1/sync also lists in errors,
// as it did before it answered held and held_reasons.
const heldError = "held: "

func (s *Server) apiSyncStatus(c *echo.Context) error {
	st, err := s.proj(c).Syncer.SyncStatus(c.Request().Context())
	if err != nil {
		return err
	}
	st.HeldReasons = nonNil(st.HeldReasons)
	errs := make([]string, 0, len(st.Errors)+len(st.HeldReasons))
	errs = append(errs, st.Errors...)
	for _, r := range st.HeldReasons {
		errs = append(errs, heldError+r)
	}
	st.Errors = errs
	return c.JSON(http.StatusOK, st)
}

// syncAccepted is the answer to POST /api/v1/sync.
type syncAccepted struct {
	Requested uint64 `json:"requested"`
	Message   string `json:"message"`
}

// requestSync asks the Syncer for a sync, counts the request in
// hoist_sync_requests_total and returns its number.
// requestSync asks project p's Syncer for a sync.
func (s *Server) requestSync(p *project) uint64 {
	s.metrics.syncRequests.Inc()
	return p.Syncer.RequestSync()
}

func (s *Server) apiSync(c *echo.Context) error {
	n := s.requestSync(s.proj(c).project)
	if c.QueryParam("wait") == "true" {
		ctx := c.Request().Context()
		// A failed sync is logged and counted by the reconciler; the
		// answer says only that it ran.
		if err := s.proj(c).Syncer.WaitSynced(ctx, n); err != nil && ctx.Err() != nil {
			return err
		}
		return c.JSON(http.StatusOK, syncAccepted{Requested: n, Message: "sync done"})
	}
	return c.JSON(http.StatusAccepted, syncAccepted{Requested: n, Message: "sync requested"})
}

func (s *Server) apiAutoSync(enabled bool) echo.HandlerFunc {
	return func(c *echo.Context) error {
		if s.proj(c).Controller == nil {
			return errUnavailable
		}
		if err := s.proj(c).Controller.SetAutoSync(c.Request().Context(), enabled); err != nil {
			return actionError(err)
		}
		s.log.Info("auto_sync_set", "enabled", enabled, "by", principal(c).Name)
		return c.JSON(http.StatusOK, ActionDone{Message: "auto-sync " + map[bool]string{true: "resumed", false: "suspended"}[enabled]})
	}
}

// confirmRequest is the body of POST /api/v1/sync/confirm.
type confirmRequest struct {
	Revision string `json:"revision"`
}

func (s *Server) apiConfirm(c *echo.Context) error {
	var req confirmRequest
	if err := json.NewDecoder(http.MaxBytesReader(c.Response(), c.Request().Body, 64<<10)).Decode(&req); err != nil || req.Revision == "" {
		return echo.NewHTTPError(http.StatusBadRequest, `body must be {"revision": "<sha>"}`)
	}
	if err := s.confirm(c, req.Revision); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, ActionDone{Message: "held changes confirmed"})
}

// confirm lifts the holds of revision sha's plan.
func (s *Server) confirm(c *echo.Context, sha string) error {
	cf, ok := s.proj(c).Controller.(Confirmer)
	if !ok {
		// 404, not 501: the route is as absent as the capability.
		return echo.NewHTTPError(http.StatusNotFound, "confirming held plans is not available in this hoist")
	}
	if err := s.mayConfirmBudget(c, sha); err != nil {
		return err
	}
	if err := cf.ConfirmRevision(c.Request().Context(), sha); err != nil {
		return actionError(err)
	}
	s.log.Info("revision_confirmed", "sha", sha, "by", principal(c).Name)
	return nil
}

func (s *Server) formAutoSync(enabled bool) echo.HandlerFunc {
	return func(c *echo.Context) error {
		if s.proj(c).Controller == nil {
			return errUnavailable
		}
		if err := s.proj(c).Controller.SetAutoSync(c.Request().Context(), enabled); err != nil {
			return actionError(err)
		}
		return c.Redirect(http.StatusSeeOther, s.proj(c).Base+"/")
	}
}

func (s *Server) formSync(c *echo.Context) error {
	s.requestSync(s.proj(c).project)
	return c.Redirect(http.StatusSeeOther, s.proj(c).Base+"/")
}

func (s *Server) formConfirm(c *echo.Context) error {
	sha := c.FormValue("revision")
	if sha == "" {
		return echo.NewHTTPError(http.StatusBadRequest, "revision is required")
	}
	if err := s.confirm(c, sha); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, s.proj(c).Base+"/")
}
