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

// serviceTraffic is the reconciler's one view of a service's traffic: its
// requests per second over window, when it last got a request, and
// whether it is measured at all (no meter: zero rps, zero time, false).
// The autoscaler and the service dashboard (ServiceStatus) both read it,
// so they always agree.
func (c *Controller) serviceTraffic(project, run string, window time.Duration) (rps float64, last time.Time, measured bool) {
	if c.traffic == nil {
		return 0, time.Time{}, false
	}
	return c.traffic.RPS(project, run, window), c.traffic.LastRequest(project, run), true
}
