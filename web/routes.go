package web

import (
	"net/http"

	"github.com/labstack/echo/v5"
)

// routes is hoist's one route table: every page, API route and webhook, by
// resource. API.md documents each API route. Pages authenticate by session
// cookie, the API by session or bearer token, webhooks by signature; every
// route that changes state needs the user role (requireAct).
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

	api.GET("/whoami", s.apiWhoami)

	// Overview (overview.go) and spend (spend.go).
	pages.GET("/", s.pageOverview)
	api.GET("/spend", s.apiSpend)
	api.GET("/budget", s.apiBudget)

	// Runs, their jobs, logs and artifacts (runs.go, logs.go, artifacts.go).
	pages.GET("/runs", s.pageRuns)
	pages.GET("/runs/:name", s.pageRun)
	pages.GET("/runs/:name/logs/stream", s.pageLogStream)
	pages.POST("/runs/:name/:action", s.formRunAction, s.requireAct)
	api.GET("/runs", s.apiListRuns)
	api.GET("/runs/:name", s.apiGetRun)
	api.GET("/runs/:name/jobs", s.apiRunJobs)
	api.GET("/runs/:name/logs", s.apiRunLogs)
	api.GET("/runs/:name/events", s.apiRunEvents)
	api.GET("/runs/:name/artifacts", s.apiRunArtifacts)
	api.GET("/runs/:name/artifacts/:job/*", s.apiRunArtifact)
	api.POST("/runs/:name/stop", s.apiRunAction("stop"), s.requireAct)
	api.POST("/runs/:name/rerun", s.apiRunAction("rerun"), s.requireAct)
	api.POST("/runs/:name/suspend", s.apiRunAction("suspend"), s.requireAct)
	api.POST("/runs/:name/resume", s.apiRunAction("resume"), s.requireAct)
	api.GET("/runs/:name/ssh", s.apiRunSSH, s.requireAct) // ssh.go
	api.GET("/jobs", s.apiListJobs)

	// Fleets, instances, volumes and gateways (infra.go).
	pages.GET("/fleets", s.pageFleets)
	pages.GET("/volumes", s.pageVolumes)
	pages.GET("/gateways", s.pageGateways)
	api.GET("/fleets", s.apiListFleets)
	api.GET("/fleets/:name", s.apiGetFleet)
	api.GET("/instances", s.apiListInstances)
	api.GET("/volumes", s.apiListVolumes)
	api.GET("/gateways", s.apiListGateways)

	// Offers (offers.go).
	pages.GET("/offers", s.pageOffers)
	api.GET("/offers", s.apiOffers)

	// Revisions, their diffs and events (history.go).
	pages.GET("/history", s.pageHistory)
	pages.GET("/history/diff", s.pageDiff)
	pages.GET("/history/:sha", s.pageRevision)
	pages.POST("/history/:sha/apply", s.formApply, s.requireAct)
	api.GET("/revisions", s.apiListRevisions)
	api.GET("/revisions/:sha", s.apiGetRevision)
	api.POST("/revisions/:sha/apply", s.apiApplyRevision, s.requireAct)
	api.GET("/diff", s.apiDiff)
	api.GET("/events", s.apiListEvents)

	// Plans of uncommitted files and pull requests (previews.go).
	api.POST("/plan", s.apiPlan, s.requireAct, s.limitPlans)
	api.GET("/pulls", s.apiPulls)

	// Syncing from Git (sync.go).
	pages.POST("/sync", s.formSync, s.requireAct)
	pages.POST("/sync/confirm", s.formConfirm, s.requireAct)
	pages.POST("/sync/suspend", s.formAutoSync(false), s.requireAct)
	pages.POST("/sync/resume", s.formAutoSync(true), s.requireAct)
	api.GET("/sync", s.apiSyncStatus)
	api.POST("/sync", s.apiSync, s.requireAct)
	api.POST("/sync/confirm", s.apiConfirm, s.requireAct)
	api.POST("/sync/suspend", s.apiAutoSync(false), s.requireAct)
	api.POST("/sync/resume", s.apiAutoSync(true), s.requireAct)

	// Secrets (secrets.go).
	pages.GET("/secrets", s.pageSecrets)
	pages.POST("/secrets", s.formSetSecret, s.requireAct)
	pages.POST("/secrets/:name/delete", s.formDeleteSecret, s.requireAct)
	api.GET("/secrets", s.apiListSecrets)
	api.GET("/secrets/:name", s.apiGetSecret, s.requireAct)
	api.PUT("/secrets/:name", s.apiSetSecret, s.requireAct)
	api.POST("/secrets", s.apiSetSecret, s.requireAct)
	api.DELETE("/secrets/:name", s.apiDeleteSecret, s.requireAct)

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
	return e
}
