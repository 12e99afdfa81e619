// Package web serves hoist's HTTP surface: the server-rendered dashboard
// (echo v5 + templ, readable without JavaScript; /static/hoist.js adds live
// logs and auto-refresh), the JSON API under /api/v1, the signed webhook
// receivers under /hooks, live logs over server-sent events, and Prometheus
// /metrics. API.md in this directory is the reference of every route.
//
// Handlers hold no logic of their own: they call the small interfaces this
// package declares (Store, Syncer, Tokens, Inventory, Planner, Controller,
// Offers, Secrets, and the optional RunCounter, JobGetter and LogTailer) and render
// the result. New(Config, Deps) builds a Server; Handler serves it; Close
// ends live streams and the sync worker. NotifyLogs and NotifyChange let the
// reconciler wake live pages; Metrics is fed by the reconciler.
//
// Sub-packages: storeview adapts *store.Store to these interfaces;
// internal/fixture seeds a store for tests.
//
// Only cmd/hoist imports this package (and storeview).
package web
