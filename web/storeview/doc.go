// Package storeview adapts *store.Store to the interfaces package web
// consumes (web.Store, web.Inventory, web.Tokens, and the read half of
// web.Syncer): it maps bun rows to web's JSON-shaped view types, joins
// instance prices into jobs and runs, and never copies secrets (host keys,
// backend data, SSH details) into a view.
//
// Only cmd/hoist and web's own tests import it.
package storeview
