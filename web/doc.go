// Package web serves hoist's HTTP surface: the server-rendered dashboard
// (echo v5 + templ), the JSON API under /api/v1, the signed webhook receivers
// under /hooks, live logs over server-sent events, and Prometheus /metrics.
//
// Handlers hold no logic of their own: they call the small interfaces this
// package declares (Store, Syncer, Offers, Tokens) and render the result.
// Only cmd/hoist imports this package; it wires the store, the reconciler and
// the offers catalog into Deps.
package web
