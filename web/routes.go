package web

import (
	"net/http"

	"github.com/labstack/echo/v5"
)

// routes is hoist's one route table: every page, API route and webhook, by
// resource. API.md documents each API route. Pages authenticate by session
// cookie, the API by session or bearer token, webhooks by signature; a
// project's routes need a role in the project (read, act or manage, see
// project.go and API.md's *Roles*).
func (s *Server) routes() *echo.Echo {
	e := echo.NewWithConfig(echo.Config{
		Logger:           s.log,
		HTTPErrorHandler: s.handleError,
		// The peer address, not X-Forwarded-For, which clients can forge
		// (login limits and logs rely on it).
		IPExtractor: echo.ExtractIPDirect(),
	})
	e.Use(s.logRequests, s.recoverPanics, s.rejectBadBytes)
	cop := http.NewCrossOriginProtection()

	e.GET("/metrics", s.metricsHandler())
	e.GET("/healthz", func(c *echo.Context) error { return c.String(http.StatusOK, "ok\n") })
	e.GET("/static/*", s.static)
	// Container clouds' pods fetch the runner with a per-task grant
	// (runnerdownload.go), not a session or API token.
	e.GET("/agents/runner/:arch", s.runnerDownload)

	// Services' replicas (proxy.go) authenticate by bearer token when the
	// service asks for it; any method, any path below the run.
	e.Any("/proxy/services/:project/:run", s.proxy.serve)
	e.Any("/proxy/services/:project/:run/*", s.proxy.serve)
	e.Any("/proxy/models/:project/*", s.proxy.models)

	// Webhooks authenticate by signature, not by session or token.
	e.POST("/hooks/github", s.hookGitHub)
	e.POST("/hooks/gitlab", s.hookGitLab)
	e.POST("/hooks/generic", s.hookGeneric)

	// Login is open but cross-origin protected.
	open := e.Group("", echo.WrapMiddleware(cop.Handler))
	open.GET("/login", s.loginPage)
	open.POST("/login", s.login)
	open.POST("/logout", s.logout)
	open.GET("/login/oidc", s.oidcBegin) // oidc.go
	open.GET("/login/oidc/callback", s.oidcCallback)

	api := e.Group("/api/v1", s.authenticate(false), echo.WrapMiddleware(cop.Handler), s.csrf)
	pages := e.Group("", s.authenticate(true), echo.WrapMiddleware(cop.Handler), s.csrf)

	// The caller and its projects (project.go).
	api.GET("/whoami", s.apiWhoami)
	api.GET("/projects", s.apiProjects)

	// Everything below belongs to a project: each route is served for the
	// default project as written and for any project below
	// /projects/:project (project.go checks the caller's role there).
	pp := projectRoutes{s: s, groups: []*echo.Group{pages, pages.Group("/projects/:project")}}
	pa := projectRoutes{s: s, groups: []*echo.Group{api, api.Group("/projects/:project")}}

	// Overview (overview.go) and spend (spend.go).
	pp.add(http.MethodGet, "/", accessRead, s.pageOverview)
	projectRoutes{s: s, groups: []*echo.Group{pages}}.add(http.MethodGet, "/projects/:project", accessRead, s.pageOverview)
	pa.add(http.MethodGet, "/spend", accessRead, s.apiSpend)
	pa.add(http.MethodGet, "/budget", accessRead, s.apiBudget)

	// Runs, their jobs, logs and artifacts (runs.go, logs.go, artifacts.go).
	pp.add(http.MethodGet, "/runs", accessRead, s.pageRuns)
	pp.add(http.MethodGet, "/runs/:name", accessRead, s.pageRun)
	pp.add(http.MethodGet, "/runs/:name/logs/stream", accessRead, s.pageLogStream)
	pp.add(http.MethodPost, "/runs/:name/:action", accessAct, s.formRunAction)
	pa.add(http.MethodGet, "/runs", accessRead, s.apiListRuns)
	pa.add(http.MethodGet, "/runs/:name", accessRead, s.apiGetRun)
	pa.add(http.MethodGet, "/runs/:name/jobs", accessRead, s.apiRunJobs)
	pa.add(http.MethodGet, "/runs/:name/logs", accessRead, s.apiRunLogs)
	pa.add(http.MethodGet, "/runs/:name/events", accessRead, s.apiRunEvents)
	pa.add(http.MethodGet, "/runs/:name/artifacts", accessRead, s.apiRunArtifacts)
	pa.add(http.MethodGet, "/runs/:name/artifacts/:job/*", accessRead, s.apiRunArtifact)
	pa.add(http.MethodPost, "/runs/:name/stop", accessAct, s.apiRunAction("stop"))
	pa.add(http.MethodPost, "/runs/:name/rerun", accessAct, s.apiRunAction("rerun"))
	pa.add(http.MethodPost, "/runs/:name/suspend", accessAct, s.apiRunAction("suspend"))
	pa.add(http.MethodPost, "/runs/:name/resume", accessAct, s.apiRunAction("resume"))
	pa.add(http.MethodGet, "/runs/:name/ssh", accessAct, s.apiRunSSH) // ssh.go
	pa.add(http.MethodGet, "/jobs", accessRead, s.apiListJobs)

	// Fleets, instances, volumes and gateways (infra.go).
	pp.add(http.MethodGet, "/fleets", accessRead, s.pageFleets)
	pp.add(http.MethodGet, "/volumes", accessRead, s.pageVolumes)
	pp.add(http.MethodGet, "/gateways", accessRead, s.pageGateways)
	pa.add(http.MethodGet, "/fleets", accessRead, s.apiListFleets)
	pa.add(http.MethodGet, "/fleets/:name", accessRead, s.apiGetFleet)
	pa.add(http.MethodGet, "/instances", accessRead, s.apiListInstances)
	pa.add(http.MethodGet, "/volumes", accessRead, s.apiListVolumes)
	pa.add(http.MethodGet, "/gateways", accessRead, s.apiListGateways)
	pa.add(http.MethodGet, "/audit", accessManage, s.apiAudit) // audit.go

	// Offers (offers.go): the backends are the server's, not a project's,
	// but the pages sit in the project the caller is looking at.
	pp.add(http.MethodGet, "/offers", accessRead, s.pageOffers)
	pa.add(http.MethodGet, "/offers", accessRead, s.apiOffers)

	// Revisions, their diffs and events (history.go).
	pp.add(http.MethodGet, "/history", accessRead, s.pageHistory)
	pp.add(http.MethodGet, "/history/diff", accessRead, s.pageDiff)
	pp.add(http.MethodGet, "/history/:sha", accessRead, s.pageRevision)
	pp.add(http.MethodPost, "/history/:sha/apply", accessAct, s.formApply)
	pa.add(http.MethodGet, "/revisions", accessRead, s.apiListRevisions)
	pa.add(http.MethodGet, "/revisions/:sha", accessRead, s.apiGetRevision)
	pa.add(http.MethodPost, "/revisions/:sha/apply", accessAct, s.apiApplyRevision)
	pa.add(http.MethodGet, "/diff", accessRead, s.apiDiff)
	pa.add(http.MethodGet, "/events", accessRead, s.apiListEvents)

	// Plans of uncommitted files and pull requests (previews.go).
	pa.add(http.MethodPost, "/plan", accessAct, s.apiPlan, s.limitPlans)
	pa.add(http.MethodGet, "/pulls", accessRead, s.apiPulls)

	// Syncing from Git (sync.go). Confirming a held plan lets through
	// the changes the project's managers chose to hold.
	pp.add(http.MethodPost, "/sync", accessAct, s.formSync)
	pp.add(http.MethodPost, "/sync/confirm", accessManage, s.formConfirm)
	pp.add(http.MethodPost, "/sync/suspend", accessAct, s.formAutoSync(false))
	pp.add(http.MethodPost, "/sync/resume", accessAct, s.formAutoSync(true))
	pa.add(http.MethodGet, "/sync", accessRead, s.apiSyncStatus)
	pa.add(http.MethodPost, "/sync", accessAct, s.apiSync)
	pa.add(http.MethodPost, "/sync/confirm", accessManage, s.apiConfirm)
	pa.add(http.MethodPost, "/sync/suspend", accessAct, s.apiAutoSync(false))
	pa.add(http.MethodPost, "/sync/resume", accessAct, s.apiAutoSync(true))

	// Secrets (secrets.go): names are readable, values and changes are
	// the managers'.
	pp.add(http.MethodGet, "/secrets", accessRead, s.pageSecrets)
	pp.add(http.MethodPost, "/secrets", accessManage, s.formSetSecret)
	pp.add(http.MethodPost, "/secrets/:name/delete", accessManage, s.formDeleteSecret)
	pa.add(http.MethodGet, "/secrets", accessRead, s.apiListSecrets)
	pa.add(http.MethodGet, "/secrets/:name", accessManage, s.apiGetSecret)
	pa.add(http.MethodPut, "/secrets/:name", accessManage, s.apiSetSecret)
	pa.add(http.MethodPost, "/secrets", accessManage, s.apiSetSecret)
	pa.add(http.MethodDelete, "/secrets/:name", accessManage, s.apiDeleteSecret)

	// Users, project members and API tokens (users_api.go, admin.go); each
	// handler checks the caller's global or project role itself.
	pages.GET("/admin", s.pageAdmin)
	pages.POST("/admin/users", s.formCreateUser)
	pages.POST("/admin/users/:name/delete", s.formDeleteUser)
	pages.POST("/admin/projects/:project/members", s.formSetMember)
	pages.POST("/admin/projects/:project/members/:user/delete", s.formRemoveMember)
	pages.POST("/admin/tokens", s.formCreateToken)
	pages.POST("/admin/tokens/:id/revoke", s.formRevokeToken)
	api.GET("/users", s.apiListUsers)
	api.POST("/users", s.apiCreateUser)
	api.DELETE("/users/:name", s.apiDeleteUser)
	api.GET("/projects/:project/members", s.apiListMembers)
	api.POST("/projects/:project/members", s.apiSetMember)
	api.DELETE("/projects/:project/members/:user", s.apiRemoveMember)
	api.GET("/tokens", s.apiListTokens)
	api.POST("/tokens", s.apiCreateToken)
	api.DELETE("/tokens/:id", s.apiRevokeToken)

	// Go's runtime profiles, for global admins (pprof.go).
	e.GET("/debug/pprof/*", s.debugPprof, s.authenticate(false))
	return e
}

// projectRoutes registers a project's routes in each of its groups: as
// written (the default project) and below /projects/:project. Each route
// is named "project:<access>" (read, act or manage), so that the route
// table says what every project route needs.
type projectRoutes struct {
	s      *Server
	groups []*echo.Group
}

func (r projectRoutes) add(method, path string, need access, h echo.HandlerFunc, mw ...echo.MiddlewareFunc) {
	m := append([]echo.MiddlewareFunc{r.s.inProject(need)}, mw...)
	for _, g := range r.groups {
		if _, err := g.AddRoute(echo.Route{Method: method, Path: path, Name: projectRouteName(need),
			Handler: h, Middlewares: m}); err != nil {
			panic(err) // a programming error in the table above, as echo's own Add
		}
	}
}

// projectRouteName names a project route by what it needs.
func projectRouteName(need access) string { return "project:" + need.String() }
