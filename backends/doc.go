// Package backends is where hoist meets compute: the small, consumer-owned
// driver interface every backend implements (Backend), the optional
// capabilities a backend may add (VolumeBackend, GatewayHost), how the
// server reaches the shim of an instance (Connector, Conn), the typed error
// kinds callers decide on (stalled, wait, transient), the ownership tags
// every created resource carries, and the Registry of driver factories that
// cmd/hoist builds explicitly (no init() registration).
//
// Drivers live in sub-packages, one per provider (local, sshfleet, ...), and
// prove themselves with the conformance kit in backends/conformance.
//
// The reconciler and cmd/hoist import this package; drivers import it. It
// imports only backends/offers of ours and no provider SDK.
package backends
