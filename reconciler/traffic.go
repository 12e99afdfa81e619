package reconciler

import "time"

// Traffic is what the service proxy measured of each service run: the
// input of `scaling: {metric: rps}` and of scaling to zero. cmd/hoist
// passes the web server's meter; nil means no traffic is known (runs keep
// the low end of their `replicas`).
type Traffic interface {
	// RPS returns the requests per second the proxy forwarded (or held)
	// for the run, averaged over the last window.
	RPS(project, run string, window time.Duration) float64
	// LastRequest returns when the run last got a request (zero when
	// never).
	LastRequest(project, run string) time.Time
}
