package web

import (
	"context"
	"errors"
	"net/http"
	"sort"
	"strconv"
	"time"

	"github.com/labstack/echo/v5"

	"hoist/backends/offers"
	"hoist/reconciler/plan"
)

func (s *Server) pageRoutes(pages *echo.Group) {
	pages.GET("/", s.pageOverview)
	pages.GET("/runs", s.pageRuns)
	pages.GET("/runs/:name", s.pageRun)
	pages.GET("/runs/:name/logs/stream", s.pageLogStream)
	pages.POST("/runs/:name/:action", s.formRunAction, s.requireAct)
	pages.GET("/fleets", s.pageFleets)
	pages.GET("/volumes", s.pageVolumes)
	pages.GET("/gateways", s.pageGateways)
	pages.GET("/offers", s.pageOffers)
	pages.GET("/history", s.pageHistory)
	pages.GET("/history/diff", s.pageDiff)
	pages.GET("/history/:sha", s.pageRevision)
	pages.POST("/history/:sha/apply", s.formApply, s.requireAct)
	pages.POST("/sync", s.formSync, s.requireAct)
	pages.POST("/sync/confirm", s.formConfirm, s.requireAct)
	pages.POST("/sync/suspend", s.formAutoSync(false), s.requireAct)
	pages.POST("/sync/resume", s.formAutoSync(true), s.requireAct)
	pages.GET("/secrets", s.pageSecrets)
	pages.POST("/secrets", s.formSetSecret, s.requireAct)
	pages.POST("/secrets/:name/delete", s.formDeleteSecret, s.requireAct)
}

func (s *Server) pageOverview(c *echo.Context) error {
	ctx := c.Request().Context()
	st, err := s.deps.Syncer.SyncStatus(ctx)
	if err != nil {
		return err
	}
	_, canConfirm := s.deps.Controller.(Confirmer)
	d := overviewData{Sync: st, Controls: s.deps.Controller != nil, CanConfirm: canConfirm}
	if st.Errors == nil {
		d.Sync.Errors = []string{}
	}
	for _, sha := range []string{st.Revision, st.LatestRevision} {
		if sha == "" {
			continue
		}
		if r, err := s.deps.Store.GetRevision(ctx, sha); err == nil {
			if sha == st.Revision {
				d.Applied = &r
			}
			if sha == st.LatestRevision {
				rr := r
				d.Latest = &rr
			}
		}
	}
	counts, err := s.countRuns(ctx)
	if err != nil {
		return err
	}
	for _, stName := range runStatuses {
		if counts[stName] > 0 {
			d.Counts = append(d.Counts, statusCount{stName, counts[stName]})
		}
	}
	if d.SpendPerHour, err = s.spendPerHour(ctx); err != nil {
		return err
	}
	if d.Runs, err = s.runList.list(ctx, s.deps.Store, RunFilter{Limit: 10}); err != nil {
		return err
	}
	pts, err := s.spend(ctx, 24*time.Hour, time.Hour)
	if err != nil {
		return err
	}
	d.Spend = spendBars(pts)
	return s.render(c, http.StatusOK, overviewPage(s.viewer(c), d))
}

func (s *Server) pageRuns(c *echo.Context) error {
	f, err := runFilter(c)
	if err != nil {
		return err
	}
	page, err := int64Param(c, "page", 1)
	if err != nil || page < 1 {
		return echo.NewHTTPError(http.StatusBadRequest, "page must be a positive integer")
	}
	ctx := c.Request().Context()
	f.Limit, f.Offset = runsPerPage+1, int(page-1)*runsPerPage
	runs, err := s.runList.list(ctx, s.deps.Store, f)
	if err != nil {
		return err
	}
	more := len(runs) > runsPerPage
	if more {
		runs = runs[:runsPerPage]
	}
	var fleets []string
	if s.deps.Inventory != nil {
		if fl, err := s.deps.Inventory.ListFleets(ctx); err == nil {
			for _, x := range fl {
				fleets = append(fleets, x.Name)
			}
		}
	}
	return s.render(c, http.StatusOK, runsPage(s.viewer(c), runs, f, fleets, pager{Page: int(page), More: more}))
}

func (s *Server) pageRun(c *echo.Context) error {
	ctx := c.Request().Context()
	run, err := s.deps.Store.GetRun(ctx, c.Param("name"))
	if err != nil {
		return err
	}
	after, err := int64Param(c, "after", 0)
	if err != nil {
		return err
	}
	job, ok := pickJob(run, c.QueryParam("job"))
	if !ok && c.QueryParam("job") != "" {
		return echo.NewHTTPError(http.StatusNotFound, "no such job")
	}
	d := runPageData{Run: run, Job: job, After: after, Spec: redactSpec(run.Spec), Controls: s.deps.Controller != nil,
		Timeline: runTimeline(run, s.now())}
	if ok && c.QueryParam("after") == "" {
		// Open on the newest lines when the store can say where they are.
		if lt, isTailer := s.deps.Store.(LogTailer); isTailer {
			if last, err := lt.LastLogSeq(ctx, job.ID); err == nil && last > pageLogLines {
				d.After = last - pageLogLines
			}
		}
	}
	if ok {
		d.Lines, err = s.deps.Store.ReadLogs(ctx, job.ID, d.After, pageLogLines+1)
		if err != nil {
			return err
		}
		if len(d.Lines) > pageLogLines {
			d.Lines, d.More = d.Lines[:pageLogLines], true
		}
		var cut bool
		d.Lines, cut = capLogLines(d.Lines)
		d.More = d.More || cut
	}
	d.Spec, d.SpecFull = capSpec(d.Spec)
	d.Events, err = s.deps.Store.ListEvents(ctx, EventFilter{Kind: "run", Name: run.Name, Limit: 100})
	if err != nil {
		return err
	}
	return s.render(c, http.StatusOK, runPage(s.viewer(c), d))
}

func (s *Server) formRunAction(c *echo.Context) error {
	action := c.Param("action")
	switch action {
	case "stop", "rerun", "suspend", "resume":
	default:
		return echo.NewHTTPError(http.StatusNotFound, "no such action")
	}
	name := c.Param("name")
	if err := s.runAction(c, action, name); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/runs/"+name)
}

func (s *Server) pageFleets(c *echo.Context) error {
	if s.deps.Inventory == nil {
		return s.render(c, http.StatusOK, fleetsPage(s.viewer(c), nil, nil, false))
	}
	ctx := c.Request().Context()
	fl, err := s.deps.Inventory.ListFleets(ctx)
	if err != nil {
		return err
	}
	is, err := s.deps.Inventory.ListInstances(ctx, "")
	if err != nil {
		return err
	}
	return s.render(c, http.StatusOK, fleetsPage(s.viewer(c), fl, is, true))
}

func (s *Server) pageVolumes(c *echo.Context) error {
	if s.deps.Inventory == nil {
		return s.render(c, http.StatusOK, volumesPage(s.viewer(c), nil, false))
	}
	vs, err := s.deps.Inventory.ListVolumes(c.Request().Context())
	if err != nil {
		return err
	}
	return s.render(c, http.StatusOK, volumesPage(s.viewer(c), vs, true))
}

func (s *Server) pageGateways(c *echo.Context) error {
	if s.deps.Inventory == nil {
		return s.render(c, http.StatusOK, gatewaysPage(s.viewer(c), nil, false))
	}
	gs, err := s.deps.Inventory.ListGateways(c.Request().Context())
	if err != nil {
		return err
	}
	return s.render(c, http.StatusOK, gatewaysPage(s.viewer(c), gs, true))
}

// offersPageLimit bounds the ungrouped offers table.
const offersPageLimit = 200

func (s *Server) pageOffers(c *echo.Context) error {
	d := offersData{OK: s.deps.Offers != nil}
	if !d.OK {
		return s.render(c, http.StatusOK, offersPage(s.viewer(c), d))
	}
	form, err := parseOfferForm(c.QueryParams())
	d.Form = form
	status := http.StatusOK
	if err != nil {
		d.Problem = err.Error()
		status = http.StatusBadRequest
		return s.render(c, status, offersPage(s.viewer(c), d))
	}
	q := form.Query
	if len(form.GroupBy) == 0 && (q.Limit == 0 || q.Limit > offersPageLimit) {
		q.Limit = offersPageLimit + 1
	}
	ans := s.deps.Offers.Query(c.Request().Context(), q)
	d.Snapshot = ans.Snapshot
	for name := range ans.Failed {
		d.Failed = append(d.Failed, name)
	}
	sort.Strings(d.Failed)
	if len(form.GroupBy) > 0 {
		d.Groups = offers.GroupBy(ans.Offers, form.GroupBy)
	} else {
		os := ans.Offers
		if len(os) > offersPageLimit {
			os, d.Limited = os[:offersPageLimit], true
		}
		d.Offers = offerViews(os)
	}
	return s.render(c, status, offersPage(s.viewer(c), d))
}

func (s *Server) pageHistory(c *echo.Context) error {
	ctx := c.Request().Context()
	st, err := s.deps.Syncer.SyncStatus(ctx)
	if err != nil {
		return err
	}
	revs, err := s.deps.Store.ListRevisions(ctx, 200)
	if err != nil {
		return err
	}
	d := historyData{Sync: st, Revisions: revs, Pulls: s.prs.list(), Controls: s.deps.Controller != nil}
	for i, r := range revs {
		if r.Applied {
			d.DiffFrom = previousValid(revs, i)
		}
	}
	return s.render(c, http.StatusOK, historyPage(s.viewer(c), d))
}

func (s *Server) pageRevision(c *echo.Context) error {
	ctx := c.Request().Context()
	rev, err := s.deps.Store.GetRevision(ctx, c.Param("sha"))
	if err != nil {
		return err
	}
	st, err := s.deps.Syncer.SyncStatus(ctx)
	if err != nil {
		return err
	}
	evs, err := s.deps.Store.ListEvents(ctx, EventFilter{Revision: rev.SHA, Limit: 500})
	if err != nil {
		return err
	}
	d := revisionPageData{Rev: rev, Sync: st, Events: evs, Controls: s.deps.Controller != nil, CanPlan: s.deps.Planner != nil}
	if d.CanPlan && c.QueryParam("plan") == "1" {
		// The same work as POST /api/v1/plan, under the same rules.
		if !principal(c).Role.CanAct() {
			d.PlanError = "computing a plan needs the user role"
		} else if ok, wait := s.plans.take(principal(c).Name); !ok {
			d.PlanError = "plan rate limit: retry in " + strconv.Itoa(int((wait+time.Second-1)/time.Second)) + "s"
		} else if p, err := s.deps.Planner.PlanRevision(ctx, "", rev.SHA); err != nil {
			d.PlanError = "planning failed: " + err.Error()
		} else {
			d.Plan = &p
		}
	}
	if revs, err := s.deps.Store.ListRevisions(ctx, 500); err == nil {
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
	return c.Redirect(http.StatusSeeOther, "/history/"+sha)
}

func (s *Server) formAutoSync(enabled bool) echo.HandlerFunc {
	return func(c *echo.Context) error {
		if s.deps.Controller == nil {
			return errUnavailable
		}
		if err := s.deps.Controller.SetAutoSync(c.Request().Context(), enabled); err != nil {
			return actionError(err)
		}
		return c.Redirect(http.StatusSeeOther, "/")
	}
}

func (s *Server) formSync(c *echo.Context) error {
	s.trig.request()
	return c.Redirect(http.StatusSeeOther, "/")
}

// runsPerPage is how many runs one page of /runs lists.
const runsPerPage = 100

// pager is the position in a paged list.
type pager struct {
	Page int
	More bool
}

// countRuns counts runs by status, through RunCounter when the store has it.
func (s *Server) countRuns(ctx context.Context) (map[string]int, error) {
	if rc, ok := s.deps.Store.(RunCounter); ok {
		return rc.CountRuns(ctx)
	}
	runs, err := s.deps.Store.ListRuns(ctx, RunFilter{})
	if err != nil {
		return nil, err
	}
	counts := map[string]int{}
	for _, r := range runs {
		counts[r.Status]++
	}
	return counts, nil
}

// spendPerHour is what the billed instances cost per hour now
// (plan.CostsOf): the same figure as a plan's spend now.
func (s *Server) spendPerHour(ctx context.Context) (float64, error) {
	if s.deps.Inventory == nil {
		return 0, nil
	}
	is, err := s.deps.Inventory.ListInstances(ctx, "")
	if err != nil {
		return 0, err
	}
	in := make([]plan.Instance, 0, len(is))
	for _, i := range is {
		in = append(in, plan.Instance{Fleet: i.Fleet, Status: i.Status, Price: i.Price})
	}
	return plan.CostsOf(in).Total, nil
}

func (s *Server) formConfirm(c *echo.Context) error {
	sha := c.FormValue("revision")
	if sha == "" {
		return echo.NewHTTPError(http.StatusBadRequest, "revision is required")
	}
	if err := s.confirm(c, sha); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/")
}
