package web

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v5"
)

func (s *Server) apiListRuns(c *echo.Context) error {
	f, err := runFilter(c)
	if err != nil {
		return err
	}
	runs, err := s.proj(c).runList.list(c.Request().Context(), s.proj(c).Store, f)
	if err != nil {
		return err
	}
	out := make([]Run, len(runs)) // the cached slice is shared
	for i, r := range runs {
		if r.Jobs == nil {
			r.Jobs = []Job{}
		}
		s.setServiceURL(c.Request().Context(), s.proj(c).project, &r)
		out[i] = r
	}
	return c.JSON(http.StatusOK, out)
}

func runFilter(c *echo.Context) (RunFilter, error) {
	f := RunFilter{Status: c.QueryParam("status"), Type: c.QueryParam("type"), Fleet: c.QueryParam("fleet")}
	if v := c.QueryParam("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return f, echo.NewHTTPError(http.StatusBadRequest, "limit must be a non-negative integer")
		}
		f.Limit = n
	}
	return f, nil
}

func (s *Server) apiGetRun(c *echo.Context) error {
	run, err := s.proj(c).Store.GetRun(c.Request().Context(), c.Param("name"))
	if err != nil {
		return err
	}
	s.setServiceURL(c.Request().Context(), s.proj(c).project, &run)
	run.Service = s.serviceStatus(c.Request().Context(), s.proj(c).project, run)
	for i, j := range run.Jobs {
		if j.FinishedAt == nil {
			run.Jobs[i].Metrics = s.jobMetrics(c.Request().Context(), s.proj(c).project, j)
		}
	}
	return c.JSON(http.StatusOK, apiRun(run))
}

// serviceStatus is a service run's dashboard, or nil for other runs, when
// the server has no ServiceStatuses, or when it cannot say (logged).
func (s *Server) serviceStatus(ctx context.Context, p *project, r Run) *ServiceStatus {
	if r.Type != "service" || p.ServiceStatuses == nil {
		return nil
	}
	st, err := p.ServiceStatuses.ServiceStatus(ctx, p.name, r.Name)
	if err != nil {
		if !errors.Is(err, ErrNotFound) {
			s.log.Warn("service status failed", "run", r.Name, "error", err)
		}
		return nil
	}
	if st.Replicas == nil {
		st.Replicas = []ServiceReplicaStatus{}
	}
	if st.History == nil {
		st.History = []ServiceSample{}
	}
	for i := range st.Replicas {
		if st.Replicas[i].Probes == nil {
			st.Replicas[i].Probes = []ProbeStatus{}
		}
	}
	return &st
}

// setServiceURL sets a service run's URL (and its model's base URL): at
// the gateway that serves it, else on the proxy; nothing for other runs
// and when this hoist has no proxy.
func (s *Server) setServiceURL(ctx context.Context, p *project, r *Run) {
	if r.Type != "service" || s.deps.Services == nil {
		return
	}
	if gs, isGS := s.deps.Services.(GatewayServices); isGS {
		if u, ok, err := gs.GatewayURLs(ctx, p.name, r.Name); err == nil && ok {
			r.ServiceURL, r.ModelURL = u.Service, u.Model
			return
		}
	}
	base := strings.TrimRight(s.cfg.ExternalURL, "/")
	r.ServiceURL = base + ServicePath(p.name, r.Name)
	// The model's base URL, when the spec is at hand (a single run): an
	// openai model's is the service's with its prefix, others' the model
	// endpoint (dstack's table, without a gateway).
	var spec struct {
		Model *struct {
			Format string `json:"format"`
			Prefix string `json:"prefix"`
		} `json:"model"`
	}
	if len(r.Spec) == 0 || json.Unmarshal(r.Spec, &spec) != nil || spec.Model == nil {
		return
	}
	if spec.Model.Format == "openai" || spec.Model.Format == "" {
		r.ModelURL = r.ServiceURL + strings.TrimPrefix(spec.Model.Prefix, "/")
	} else {
		r.ModelURL = base + "/proxy/models/" + url.PathEscape(p.name) + "/"
	}
}

// pickJob returns the job of run that ?job= (an id or submission id) names,
// or the newest.
func pickJob(run Run, id string) (Job, bool) {
	if len(run.Jobs) == 0 {
		return Job{}, false
	}
	if id == "" {
		return run.Jobs[0], true
	}
	for _, j := range run.Jobs {
		if j.ID == id || j.SubmissionID == id || strconv.Itoa(j.SubmissionNum) == id {
			return j, true
		}
	}
	return Job{}, false
}

// apiRun is a run as the API returns it: the spec with secrets redacted.
func apiRun(r Run) Run {
	r.Spec = redactJSON(r.Spec)
	if r.Jobs == nil {
		r.Jobs = []Job{}
	}
	return r
}

func (s *Server) apiRunJobs(c *echo.Context) error {
	run, err := s.proj(c).Store.GetRun(c.Request().Context(), c.Param("name"))
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
	evs, err := s.proj(c).Store.ListEvents(c.Request().Context(), EventFilter{Kind: "run", Name: c.Param("name"), Limit: int(limit)})
	if err != nil {
		return err
	}
	if evs == nil {
		evs = []Event{}
	}
	return c.JSON(http.StatusOK, evs)
}

func (s *Server) runAction(c *echo.Context, action, name string) error {
	if s.proj(c).Controller == nil {
		return errUnavailable
	}
	ctx := c.Request().Context()
	if _, err := s.proj(c).Store.GetRun(ctx, name); err != nil {
		return err
	}
	var err error
	switch action {
	case "stop":
		err = s.proj(c).Controller.StopRun(ctx, name, false)
	case "abort":
		err = s.proj(c).Controller.StopRun(ctx, name, true)
	case "rerun":
		err = s.proj(c).Controller.RerunRun(ctx, name)
	case "suspend":
		err = s.proj(c).Controller.SetRunSuspended(ctx, name, true)
	case "resume":
		err = s.proj(c).Controller.SetRunSuspended(ctx, name, false)
	}
	if err != nil {
		return actionError(err)
	}
	s.log.Info("run_action", "action", action, "run", name, "by", principal(c).Name)
	return nil
}

func (s *Server) apiRunAction(action string) echo.HandlerFunc {
	return func(c *echo.Context) error {
		act := action // this request's: a stop may be an abort
		if action == "stop" {
			// ?abort=true: dstack's `stop --abort`, no graceful stop.
			switch c.QueryParam("abort") {
			case "", "false":
			case "true":
				act = "abort"
			default:
				return echo.NewHTTPError(http.StatusBadRequest, "abort must be true or false")
			}
		}
		if err := s.runAction(c, act, c.Param("name")); err != nil {
			return err
		}
		return c.JSON(http.StatusOK, ActionDone{Message: act + " requested"})
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
	jobs, err := s.proj(c).Store.ListJobs(c.Request().Context(), f)
	if err != nil {
		return err
	}
	if jobs == nil {
		jobs = []Job{}
	}
	return c.JSON(http.StatusOK, jobs)
}

// runStatuses is dstack's run vocabulary, in lifecycle order.
var runStatuses = []string{"pending", "submitted", "provisioning", "running", "terminating", "terminated", "failed", "done"}

// pageArtifacts is how many artifact files the run page lists.
const pageArtifacts = 200

// pageLogLines is how many log lines one page of the run page shows.
const pageLogLines = 500

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
	runs, err := s.proj(c).runList.list(ctx, s.proj(c).Store, f)
	if err != nil {
		return err
	}
	more := len(runs) > runsPerPage
	if more {
		runs = runs[:runsPerPage]
	}
	fleets := s.fleetNames(ctx, s.proj(c).Inventory)
	return s.render(c, http.StatusOK, runsPage(s.viewer(c), runs, f, fleets, pager{Page: int(page), More: more}))
}

// fleetNames lists the fleet names for the runs page's filter: through
// FleetNamer when inv has it, the fleets that hold runs, else the live
// fleets from ListFleets; none when inv is nil or fails.
func (s *Server) fleetNames(ctx context.Context, inv Inventory) []string {
	if inv == nil {
		return nil
	}
	if n, ok := inv.(FleetNamer); ok {
		names, err := n.RunFleetNames(ctx)
		if err != nil {
			return nil
		}
		return names
	}
	fl, err := inv.ListFleets(ctx)
	if err != nil {
		return nil
	}
	names := make([]string, len(fl))
	for i, x := range fl {
		names[i] = x.Name
	}
	return names
}

func (s *Server) pageRun(c *echo.Context) error {
	ctx := c.Request().Context()
	run, err := s.proj(c).Store.GetRun(ctx, c.Param("name"))
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
	s.setServiceURL(ctx, s.proj(c).project, &run)
	run.Service = s.serviceStatus(ctx, s.proj(c).project, run)
	d := runPageData{Run: run, Job: job, After: after, Spec: redactSpec(run.Spec), Controls: s.proj(c).Controller != nil,
		Timeline: runTimeline(run, s.now())}
	if run.Service != nil {
		d.ServiceChart = serviceChart(run.Service.History)
	}
	if ok && job.FinishedAt == nil {
		d.Usage = jobUsageCharts(s.jobMetrics(ctx, s.proj(c).project, job))
	}
	if ok && c.QueryParam("after") == "" {
		// Open on the newest lines when the store can say where they are.
		if lt, isTailer := s.proj(c).Store.(LogTailer); isTailer {
			if last, err := lt.LastLogSeq(ctx, job.ID); err == nil && last > pageLogLines {
				d.After = last - pageLogLines
			}
		}
	}
	if ok {
		d.Lines, err = s.proj(c).Store.ReadLogs(ctx, job.ID, d.After, pageLogLines+1)
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
	if s.proj(c).Artifacts != nil {
		// The page is still worth showing without its artifacts.
		if d.Artifacts, err = s.proj(c).Artifacts.ListArtifacts(ctx, run.Name, -1); err != nil {
			s.log.Warn("artifacts not listed", "run", run.Name, "error", err)
			d.Artifacts = nil
		}
		if len(d.Artifacts) > pageArtifacts {
			d.Artifacts, d.ArtifactsTotal = d.Artifacts[:pageArtifacts], len(d.Artifacts)
		}
	}
	d.Spec, d.SpecFull = capSpec(d.Spec)
	d.Events, err = s.proj(c).Store.ListEvents(ctx, EventFilter{Kind: "run", Name: run.Name, Limit: 100})
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
	return c.Redirect(http.StatusSeeOther, s.proj(c).Base+"/runs/"+name)
}

// runsPerPage is how many runs one page of /runs lists.
const runsPerPage = 100

// pager is the position in a paged list.
type pager struct {
	Page int
	More bool
}

// countRuns counts a project's runs by status, through RunCounter when its
// store has it.
func (s *Server) countRuns(ctx context.Context, p *project) (map[string]int, error) {
	if rc, ok := p.Store.(RunCounter); ok {
		return rc.CountRuns(ctx)
	}
	runs, err := p.Store.ListRuns(ctx, RunFilter{})
	if err != nil {
		return nil, err
	}
	counts := map[string]int{}
	for _, r := range runs {
		counts[r.Status]++
	}
	return counts, nil
}
