package verda

import (
	"context"
	"slices"
	"sync"
	"time"

	"hoist/backends"
	"hoist/backends/offers"
)

// engine is what the cloud-VM engine's backend of a vm.VolumeProvider
// offers: an instance backend with volumes, SSH connections, host access
// and gateways.
type engine interface {
	backends.VolumeBackend
	backends.Connector
	backends.HostAccess
	backends.GatewayHost
}

// Backend is the cloud-VM engine's backend over Verda, with offers narrowed
// to what GET /instance-availability says can be had now.
type Backend struct {
	engine
	prov *Provider
	name string

	mu    sync.Mutex
	avail map[bool]map[string]map[string]bool // spot → location → instance type
	asked time.Time
}

// Compile-time guards: the capabilities this driver has (volumes, no
// placement groups).
var (
	_ backends.Backend       = (*Backend)(nil)
	_ backends.Connector     = (*Backend)(nil)
	_ backends.VolumeBackend = (*Backend)(nil)
	_ backends.HostAccess    = (*Backend)(nil)
	_ backends.GatewayHost   = (*Backend)(nil)
)

// availabilityTTL is how long an availability answer is reused.
const availabilityTTL = 30 * time.Second

// Offers are the catalog's offers of backend verda in the configured
// locations, kept where the instance type is available now in the offer's
// location for its spot flag, cheapest first (the catalog's order).
func (b *Backend) Offers(ctx context.Context, q offers.Query) ([]offers.Offer, error) {
	limit := q.Limit
	q.Limit = 0
	all, err := b.engine.Offers(ctx, q)
	if err != nil || len(all) == 0 {
		return all, err
	}
	avail, err := b.availability(ctx)
	if err != nil {
		return nil, err
	}
	out := slices.DeleteFunc(all, func(o offers.Offer) bool { return !avail[o.Spot][o.Region][o.Instance] })
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// availability asks GET /instance-availability for on-demand and spot
// (reusing an answer younger than availabilityTTL).
func (b *Backend) availability(ctx context.Context) (map[bool]map[string]map[string]bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.prov.now()
	if b.avail != nil && now.Sub(b.asked) < availabilityTTL {
		return b.avail, nil
	}
	out := map[bool]map[string]map[string]bool{}
	for _, spot := range []bool{false, true} {
		var locs []locationAvailability
		q := "false"
		if spot {
			q = "true"
		}
		if _, err := b.prov.api.do(ctx, "GET", "/instance-availability?is_spot="+q, nil, &locs); err != nil {
			return nil, classify(err)
		}
		out[spot] = map[string]map[string]bool{}
		for _, l := range locs {
			m := map[string]bool{}
			for _, t := range l.Availabilities {
				m[t] = true
			}
			out[spot][l.LocationCode] = m
		}
	}
	b.avail, b.asked = out, now
	return out, nil
}
