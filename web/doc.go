// Package web serves hoist's HTTP surface: the server-rendered dashboard
// (echo v5 + templ, readable without JavaScript; /static/hoist.js adds live
// logs and auto-refresh), the JSON API under /api/v1, the signed webhook
// receivers under /hooks, live logs over server-sent events, and Prometheus
// /metrics. API.md in this directory is the reference of every route.
//
// Handlers hold no logic of their own: they call the small interfaces this
// package declares (Store, Syncer, Tokens, Inventory, Planner, Controller,
// Offers, Secrets, and the optional RunCounter, JobGetter and LogTailer) and render
// the result. Sync requests go to the Syncer, which coalesces them.
//
// Everything but login, webhooks, the proxy and the runner download belongs
// to a project (project.go): each project has its own collaborators
// (ProjectDeps; Deps' own per-project fields are the default project's),
// its routes are registered as written for the default project and below
// /projects/:project for any, and the inProject middleware resolves the
// project and checks the caller's role in it (404 for a project the caller
// has no role in, as for an unknown one; 403 when the role is too low).
// Handlers reach the project only through Server.proj.
// New(Config, Deps) builds a Server; HTTPServer serves it; Close ends live
// streams. NotifyLogs and NotifyChange let the reconciler wake live pages;
// Metrics is fed by the reconciler.
//
// Files are laid out by resource: routes.go holds the one route table, and
// each resource's pages, forms and API handlers live together (runs.go,
// logs.go, infra.go, offers.go, history.go, sync.go, previews.go for plans
// of uncommitted files and pull requests, overview.go, spend.go, secrets.go,
// auth.go, hooks.go, project.go); a pull request's preview is posted back
// through forge.go (forge_github.go with go-github, forge_gitlab.go with
// GitLab's client-go: a commit status and one comment edited on each push)
// as preview_comment.go renders it; server.go builds the Server and maps
// errors;
// render.go renders templ pages and static files.
//
// The gateway (`hoist gateway`, dstack's gateway) is also served from here,
// so that it reuses the service proxy (proxy*.go): NewGatewayServer builds a
// GatewayServer that routes by host over the configuration the server puts
// through its admin API (agents/api gateway.go), keeps that configuration on
// disk and gets certificates by ACME (gateway.go, gateway_admin.go,
// gateway_tls.go).
//
// Sub-packages: storeview adapts *store.Store to these interfaces;
// internal/fixture seeds a store for tests.
//
// Only cmd/hoist imports this package (and storeview).
package web
