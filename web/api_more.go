package web

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v5"

	"hoist/backends/offers"
)

func (s *Server) apiRoutes(api *echo.Group) {
	api.GET("/runs", s.apiListRuns)
	api.GET("/runs/:name", s.apiGetRun)
	api.GET("/runs/:name/jobs", s.apiRunJobs)
	api.GET("/runs/:name/logs", s.apiRunLogs)
	api.GET("/runs/:name/events", s.apiRunEvents)
	api.POST("/runs/:name/stop", s.apiRunAction("stop"), s.requireAct)
	api.POST("/runs/:name/rerun", s.apiRunAction("rerun"), s.requireAct)
	api.POST("/runs/:name/suspend", s.apiRunAction("suspend"), s.requireAct)
	api.POST("/runs/:name/resume", s.apiRunAction("resume"), s.requireAct)
	api.GET("/jobs", s.apiListJobs)
	api.GET("/fleets", s.apiListFleets)
	api.GET("/fleets/:name", s.apiGetFleet)
	api.GET("/instances", s.apiListInstances)
	api.GET("/volumes", s.apiListVolumes)
	api.GET("/gateways", s.apiListGateways)
	api.GET("/offers", s.apiOffers)
	api.GET("/revisions", s.apiListRevisions)
	api.GET("/revisions/:sha", s.apiGetRevision)
	api.POST("/revisions/:sha/apply", s.apiApplyRevision, s.requireAct)
	api.GET("/diff", s.apiDiff)
	api.GET("/events", s.apiListEvents)
	api.POST("/plan", s.apiPlan, s.requireAct, s.limitPlans)
	api.GET("/pulls", s.apiPulls)
	api.GET("/spend", s.apiSpend)
	api.GET("/sync", s.apiSyncStatus)
	api.POST("/sync", s.apiSync, s.requireAct)
	api.POST("/sync/confirm", s.apiConfirm, s.requireAct)
	api.POST("/sync/suspend", s.apiAutoSync(false), s.requireAct)
	api.POST("/sync/resume", s.apiAutoSync(true), s.requireAct)
	api.GET("/whoami", s.apiWhoami)
	api.GET("/secrets", s.apiListSecrets)
	api.GET("/secrets/:name", s.apiGetSecret, s.requireAct)
	api.PUT("/secrets/:name", s.apiSetSecret, s.requireAct)
	api.POST("/secrets", s.apiSetSecret, s.requireAct)
	api.DELETE("/secrets/:name", s.apiDeleteSecret, s.requireAct)
}

var errUnavailable = echo.NewHTTPError(http.StatusNotImplemented, "not available in this hoist")

// apiRun is a run as the API returns it: the spec with secrets redacted.
func apiRun(r Run) Run {
	r.Spec = redactJSON(r.Spec)
	if r.Jobs == nil {
		r.Jobs = []Job{}
	}
	return r
}

func (s *Server) apiRunJobs(c *echo.Context) error {
	run, err := s.deps.Store.GetRun(c.Request().Context(), c.Param("name"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, apiRun(run).Jobs)
}

func (s *Server) apiRunEvents(c *echo.Context) error {
	limit, err := int64Param(c, "limit", 200)
	if err != nil {
		return err
	}
	evs, err := s.deps.Store.ListEvents(c.Request().Context(), EventFilter{Kind: "run", Name: c.Param("name"), Limit: int(limit)})
	if err != nil {
		return err
	}
	if evs == nil {
		evs = []Event{}
	}
	return c.JSON(http.StatusOK, evs)
}

// actionDone is the answer to an action.
type actionDone struct {
	Message string `json:"message"`
}

func (s *Server) runAction(c *echo.Context, action, name string) error {
	if s.deps.Controller == nil {
		return errUnavailable
	}
	ctx := c.Request().Context()
	if _, err := s.deps.Store.GetRun(ctx, name); err != nil {
		return err
	}
	var err error
	switch action {
	case "stop":
		err = s.deps.Controller.StopRun(ctx, name)
	case "rerun":
		err = s.deps.Controller.RerunRun(ctx, name)
	case "suspend":
		err = s.deps.Controller.SetRunSuspended(ctx, name, true)
	case "resume":
		err = s.deps.Controller.SetRunSuspended(ctx, name, false)
	}
	if err != nil {
		return actionError(err)
	}
	s.log.Info("run_action", "action", action, "run", name, "by", principal(c).Name)
	return nil
}

// actionError maps a controller refusal to 409 and keeps ErrNotFound 404.
func actionError(err error) error {
	if errors.Is(err, ErrNotFound) {
		return err
	}
	return &echo.HTTPError{Code: http.StatusConflict, Message: err.Error()}
}

func (s *Server) apiRunAction(action string) echo.HandlerFunc {
	return func(c *echo.Context) error {
		if err := s.runAction(c, action, c.Param("name")); err != nil {
			return err
		}
		return c.JSON(http.StatusOK, actionDone{Message: action + " requested"})
	}
}

func (s *Server) apiListJobs(c *echo.Context) error {
	f := JobFilter{}
	if v := c.QueryParam("since"); v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return echo.NewHTTPError(http.StatusBadRequest, "since must be an RFC 3339 time")
		}
		f.Since = t
	}
	limit, err := int64Param(c, "limit", 1000)
	if err != nil {
		return err
	}
	f.Limit = int(limit)
	jobs, err := s.deps.Store.ListJobs(c.Request().Context(), f)
	if err != nil {
		return err
	}
	if jobs == nil {
		jobs = []Job{}
	}
	return c.JSON(http.StatusOK, jobs)
}

func (s *Server) apiListFleets(c *echo.Context) error {
	if s.deps.Inventory == nil {
		return errUnavailable
	}
	fl, err := s.deps.Inventory.ListFleets(c.Request().Context())
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
	if s.deps.Inventory == nil {
		return errUnavailable
	}
	ctx := c.Request().Context()
	fl, err := s.deps.Inventory.ListFleets(ctx)
	if err != nil {
		return err
	}
	for _, f := range fl {
		if f.Name == c.Param("name") {
			is, err := s.deps.Inventory.ListInstances(ctx, f.Name)
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
	if s.deps.Inventory == nil {
		return errUnavailable
	}
	is, err := s.deps.Inventory.ListInstances(c.Request().Context(), c.QueryParam("fleet"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, nonNil(is))
}

func (s *Server) apiListVolumes(c *echo.Context) error {
	if s.deps.Inventory == nil {
		return errUnavailable
	}
	vs, err := s.deps.Inventory.ListVolumes(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, nonNil(vs))
}

func (s *Server) apiListGateways(c *echo.Context) error {
	if s.deps.Inventory == nil {
		return errUnavailable
	}
	gs, err := s.deps.Inventory.ListGateways(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, nonNil(gs))
}

func nonNil[T any](xs []T) []T {
	if xs == nil {
		return []T{}
	}
	return xs
}

// offerView is one offer as the API returns it, with the price per GPU.
type offerView struct {
	offers.Offer
	PricePerGPU *float64 `json:"price_per_gpu"`
}

func offerViews(os []offers.Offer) []offerView {
	out := make([]offerView, len(os))
	for i, o := range os {
		out[i] = offerView{Offer: o}
		if o.GPUCount > 0 {
			p := o.Price / float64(o.GPUCount)
			out[i].PricePerGPU = &p
		}
	}
	return out
}

func (s *Server) apiOffers(c *echo.Context) error {
	if s.deps.Offers == nil {
		return errUnavailable
	}
	form, err := parseOfferForm(c.QueryParams())
	if err != nil {
		return echo.NewHTTPError(http.StatusBadRequest, err.Error())
	}
	if form.Query.Limit == 0 {
		form.Query.Limit = 100
	}
	ans := s.deps.Offers.Query(c.Request().Context(), form.Query)
	if len(form.GroupBy) > 0 {
		return c.JSON(http.StatusOK, nonNil(offers.GroupBy(ans.Offers, form.GroupBy)))
	}
	return c.JSON(http.StatusOK, offerViews(ans.Offers))
}

func (s *Server) apiListRevisions(c *echo.Context) error {
	limit, err := int64Param(c, "limit", 100)
	if err != nil {
		return err
	}
	rs, err := s.deps.Store.ListRevisions(c.Request().Context(), int(limit))
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
	r, err := s.deps.Store.GetRevision(ctx, c.Param("sha"))
	if err != nil {
		return err
	}
	evs, err := s.deps.Store.ListEvents(ctx, EventFilter{Revision: r.SHA, Limit: 500})
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
	return c.JSON(http.StatusOK, actionDone{Message: "apply requested"})
}

// applyRevision re-applies an older revision; only while auto-sync is off.
func (s *Server) applyRevision(c *echo.Context, sha string) error {
	if s.deps.Controller == nil {
		return errUnavailable
	}
	ctx := c.Request().Context()
	if _, err := s.deps.Store.GetRevision(ctx, sha); err != nil {
		return err
	}
	st, err := s.deps.Syncer.SyncStatus(ctx)
	if err != nil {
		return err
	}
	if st.AutoSync {
		return echo.NewHTTPError(http.StatusConflict, "suspend auto-sync before applying an older revision; otherwise roll back with git revert")
	}
	if err := s.deps.Controller.ApplyRevision(ctx, sha); err != nil {
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
	evs, err := s.deps.Store.ListEvents(c.Request().Context(), EventFilter{
		Kind: c.QueryParam("kind"), Name: c.QueryParam("name"), Revision: c.QueryParam("revision"), Limit: int(limit),
	})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, nonNil(evs))
}

// planRequest is the body of POST /api/v1/plan: either files or a ref/sha.
type planRequest struct {
	Files map[string]string `json:"files"`
	Ref   string            `json:"ref"`
	SHA   string            `json:"sha"`
}

func (s *Server) apiPlan(c *echo.Context) error {
	if s.deps.Planner == nil {
		return errUnavailable
	}
	var req planRequest
	body := http.MaxBytesReader(c.Response(), c.Request().Body, planBodyMax)
	if err := json.NewDecoder(body).Decode(&req); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return echo.NewHTTPError(http.StatusRequestEntityTooLarge, "body is larger than the limit of "+strconv.Itoa(planBodyMax>>20)+" MiB")
		}
		return echo.NewHTTPError(http.StatusBadRequest, "body must be JSON: {\"files\": {path: content}} or {\"ref\", \"sha\"}")
	}
	// The request's context ends when the client leaves, and the planner
	// stops validating then.
	ctx := c.Request().Context()
	var plan Plan
	var err error
	switch {
	case len(req.Files) > 0:
		files := make(map[string][]byte, len(req.Files))
		for k, v := range req.Files {
			files[k] = []byte(v)
		}
		plan, err = s.deps.Planner.PlanFiles(ctx, files)
	case req.SHA != "":
		plan, err = s.deps.Planner.PlanRevision(ctx, req.Ref, req.SHA)
	default:
		return echo.NewHTTPError(http.StatusBadRequest, "give files or sha")
	}
	if err != nil {
		return &echo.HTTPError{Code: http.StatusUnprocessableEntity, Message: err.Error()}
	}
	plan.Errors = nonNil(plan.Errors)
	plan.Changes = nonNil(plan.Changes)
	return c.JSON(http.StatusOK, plan)
}

func (s *Server) apiPulls(c *echo.Context) error {
	return c.JSON(http.StatusOK, s.prs.list())
}

func (s *Server) apiSpend(c *echo.Context) error {
	window, step, err := spendWindow(c.QueryParam("window"))
	if err != nil {
		return err
	}
	pts, err := s.spend(c.Request().Context(), window, step)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, pts)
}

func (s *Server) apiAutoSync(enabled bool) echo.HandlerFunc {
	return func(c *echo.Context) error {
		if s.deps.Controller == nil {
			return errUnavailable
		}
		if err := s.deps.Controller.SetAutoSync(c.Request().Context(), enabled); err != nil {
			return actionError(err)
		}
		s.log.Info("auto_sync_set", "enabled", enabled, "by", principal(c).Name)
		return c.JSON(http.StatusOK, actionDone{Message: "auto-sync " + map[bool]string{true: "resumed", false: "suspended"}[enabled]})
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
	return c.JSON(http.StatusOK, actionDone{Message: "held changes confirmed"})
}

// confirm lifts the holds of revision sha's plan.
func (s *Server) confirm(c *echo.Context, sha string) error {
	cf, ok := s.deps.Controller.(Confirmer)
	if !ok {
		// 404, not 501: the route is as absent as the capability.
		return echo.NewHTTPError(http.StatusNotFound, "confirming held plans is not available in this hoist")
	}
	if err := cf.ConfirmRevision(c.Request().Context(), sha); err != nil {
		return actionError(err)
	}
	s.log.Info("revision_confirmed", "sha", sha, "by", principal(c).Name)
	return nil
}
