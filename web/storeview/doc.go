// Package storeview adapts *store.Store to the interfaces package web
// consumes (web.Store, web.Inventory, web.Tokens, and the read half of
// web.Syncer): it maps the rows that store's methods return to web's
// JSON-shaped view types (it runs no SQL of its own), joins instance prices
// into jobs and runs, and never copies secrets (host keys, backend data, SSH
// details) into a view.
//
// Only cmd/hoist and web's own tests import it.
package storeview
