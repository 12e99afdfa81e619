package reconciler

import (
	"context"
	"time"

	"hoist/agents/api"
	"hoist/store"
)

// gatewayTraffic is what a gateway last reported of one service it serves:
// the input of the autoscaler for services on a gateway, in place of the
// in-server proxy's meter (dstack pulls its gateways' stats for the
// RPSAutoscaler, src/dstack/_internal/server/services/services/autoscalers.py).
type gatewayTraffic struct {
	// gateway is the reporting gateway's id.
	gateway string
	// stats are the service's frames, last request and held requests.
	stats api.GatewayServiceStats
	// at is when they were pulled.
	at time.Time
}

// pullGatewayStats asks gateway g for its traffic, keeps it for the
// autoscaler, and wakes a service at zero replicas that has requests held
// or a recent request (as WakeService does for the in-server proxy).
func (c *Controller) pullGatewayStats(ctx context.Context, g *store.Gateway, cl *api.GatewayClient, served []api.GatewayServiceConfig) {
	st, err := cl.Stats(ctx)
	if err != nil {
		c.log.Warn("gateway stats failed", "gateway", g.Name, "error", err)
		return
	}
	now := c.now()
	ready := map[string]int{}
	for _, s := range served {
		ready[s.Project+"/"+s.Run] = len(s.Replicas)
	}
	c.gwMu.Lock()
	for _, s := range st.Services {
		c.gwStats[s.Project+"/"+s.Run] = gatewayTraffic{gateway: g.ID, stats: s, at: now}
	}
	c.gwMu.Unlock()
	for _, s := range st.Services {
		n, ok := ready[s.Project+"/"+s.Run]
		if !ok || n > 0 {
			continue
		}
		if s.Waiting > 0 || (!s.LastRequest.IsZero() && now.Sub(s.LastRequest) < gatewayWakeWindow) {
			if err := c.WakeService(ctx, s.Project, s.Run); err != nil {
				c.log.Warn("wake service failed", "project", s.Project, "run", s.Run, "error", err)
			}
		}
	}
}

// forgetGatewayStats drops what gateway id reported.
func (c *Controller) forgetGatewayStats(id string) {
	c.gwMu.Lock()
	defer c.gwMu.Unlock()
	for k, t := range c.gwStats {
		if t.gateway == id {
			delete(c.gwStats, k)
		}
	}
}

// gatewayMeter returns the gateway's measure of a service run, when a
// gateway reported it.
func (c *Controller) gatewayMeter(project, run string) (gatewayTraffic, bool) {
	c.gwMu.Lock()
	defer c.gwMu.Unlock()
	t, ok := c.gwStats[project+"/"+run]
	return t, ok
}

// RPS returns the requests per second over the last window (the frames
// within it, summed, over the window).
func (t gatewayTraffic) RPS(window time.Duration, now time.Time) float64 {
	if window <= 0 {
		return 0
	}
	from := now.Add(-window).Unix()
	var n int64
	for _, f := range t.stats.Frames {
		if f.Unix > from {
			n += f.Requests
		}
	}
	return float64(n) / window.Seconds()
}
