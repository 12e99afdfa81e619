package web

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v5"
)

func (s *Server) apiListRevisions(c *echo.Context) error {
	limit, err := int64Param(c, "limit", 100)
	if err != nil {
		return err
	}
	rs, err := s.proj(c).Store.ListRevisions(c.Request().Context(), int(limit))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, nonNil(rs))
}

// revisionDetail is a revision with the events it caused.
type revisionDetail struct {
	Revision
	Events []Event `json:"events"`
}

func (s *Server) apiGetRevision(c *echo.Context) error {
	ctx := c.Request().Context()
	r, err := s.proj(c).Store.GetRevision(ctx, c.Param("sha"))
	if err != nil {
		return err
	}
	evs, err := s.proj(c).Store.ListEvents(ctx, EventFilter{Revision: r.SHA, Limit: 500})
	if err != nil {
		return err
	}
	if r.Errors == nil {
		r.Errors = []string{}
	}
	return c.JSON(http.StatusOK, revisionDetail{Revision: r, Events: nonNil(evs)})
}

func (s *Server) apiApplyRevision(c *echo.Context) error {
	if err := s.applyRevision(c, c.Param("sha")); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, ActionDone{Message: "apply requested"})
}

// applyRevision re-applies an older revision; only while auto-sync is off.
func (s *Server) applyRevision(c *echo.Context, sha string) error {
	if s.proj(c).Controller == nil {
		return errUnavailable
	}
	ctx := c.Request().Context()
	if _, err := s.proj(c).Store.GetRevision(ctx, sha); err != nil {
		return err
	}
	st, err := s.proj(c).Syncer.SyncStatus(ctx)
	if err != nil {
		return err
	}
	if st.AutoSync {
		return echo.NewHTTPError(http.StatusConflict, "suspend auto-sync before applying an older revision; otherwise roll back with git revert")
	}
	if err := s.proj(c).Controller.ApplyRevision(ctx, sha); err != nil {
		return actionError(err)
	}
	s.log.Info("revision_apply", "sha", sha, "by", principal(c).Name)
	return nil
}

func (s *Server) apiDiff(c *echo.Context) error {
	d, err := s.diff(c, c.QueryParam("from"), c.QueryParam("to"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, d)
}

func (s *Server) apiListEvents(c *echo.Context) error {
	limit, err := int64Param(c, "limit", 200)
	if err != nil {
		return err
	}
	evs, err := s.proj(c).Store.ListEvents(c.Request().Context(), EventFilter{
		Kind: c.QueryParam("kind"), Name: c.QueryParam("name"), Revision: c.QueryParam("revision"), Limit: int(limit),
	})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, nonNil(evs))
}

func (s *Server) pageHistory(c *echo.Context) error {
	ctx := c.Request().Context()
	st, err := s.proj(c).Syncer.SyncStatus(ctx)
	if err != nil {
		return err
	}
	revs, err := s.proj(c).Store.ListRevisions(ctx, 200)
	if err != nil {
		return err
	}
	d := historyData{Sync: st, Revisions: revs, Pulls: s.pulls(c), Controls: s.proj(c).Controller != nil}
	for i, r := range revs {
		if r.Applied {
			d.DiffFrom = previousValid(revs, i)
		}
	}
	return s.render(c, http.StatusOK, historyPage(s.viewer(c), d))
}

func (s *Server) pageRevision(c *echo.Context) error {
	ctx := c.Request().Context()
	rev, err := s.proj(c).Store.GetRevision(ctx, c.Param("sha"))
	if err != nil {
		return err
	}
	st, err := s.proj(c).Syncer.SyncStatus(ctx)
	if err != nil {
		return err
	}
	evs, err := s.proj(c).Store.ListEvents(ctx, EventFilter{Revision: rev.SHA, Limit: 500})
	if err != nil {
		return err
	}
	d := revisionPageData{Rev: rev, Sync: st, Events: evs, Controls: s.proj(c).Controller != nil, CanPlan: s.proj(c).Planner != nil}
	if d.CanPlan && c.QueryParam("plan") == "1" {
		// The same work as POST /api/v1/plan, under the same rules.
		if !s.proj(c).Role.CanAct() {
			d.PlanError = "computing a plan needs the user role"
		} else if ok, wait := s.plans.take(principal(c).Name); !ok {
			d.PlanError = "plan rate limit: retry in " + strconv.Itoa(int((wait+time.Second-1)/time.Second)) + "s"
		} else if p, err := s.proj(c).Planner.PlanRevision(ctx, "", rev.SHA); err != nil {
			d.PlanError = "planning failed: " + err.Error()
		} else {
			d.Plan = &p
		}
	}
	if revs, err := s.proj(c).Store.ListRevisions(ctx, 500); err == nil {
		for i, r := range revs {
			if r.SHA == rev.SHA {
				d.Previous = previousValid(revs, i)
			}
		}
	}
	return s.render(c, http.StatusOK, revisionPage(s.viewer(c), d))
}

func (s *Server) pageDiff(c *echo.Context) error {
	d, err := s.diff(c, c.QueryParam("from"), c.QueryParam("to"))
	if err != nil {
		if errors.Is(err, errUnavailable) {
			return echo.NewHTTPError(http.StatusNotImplemented, "spec diffs need the planner, which this hoist lacks")
		}
		return err
	}
	return s.render(c, http.StatusOK, diffPage(s.viewer(c), d))
}

func (s *Server) formApply(c *echo.Context) error {
	sha := c.Param("sha")
	if err := s.applyRevision(c, sha); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, s.proj(c).Base+"/history/"+sha)
}
