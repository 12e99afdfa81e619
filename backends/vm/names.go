package vm

import (
	"strings"

	"hoist/backends"
	"hoist/backends/offers"
)

// DefaultMaxNameLen is the name length limit when Config.MaxNameLen is 0:
// GCP's (RFC 1035 labels, 63 characters), the strictest of the three.
const DefaultMaxNameLen = 63

// ResourceName is backends.ResourceName with the engine's default limit.
func ResourceName(resource, id string, max int) string {
	if max <= 0 {
		max = DefaultMaxNameLen
	}
	return backends.ResourceName(resource, id, max)
}

// InRegions reports whether an offer's region (a region or a zone) lies in
// one of regions: equal, or a zone of it (GCP's us-central1-a and AWS's
// us-east-1a are zones of us-central1 and us-east-1). Empty regions admit
// every region.
func InRegions(region string, regions []string) bool {
	if len(regions) == 0 {
		return true
	}
	region = strings.ToLower(region)
	for _, r := range regions {
		r = strings.ToLower(r)
		rest, ok := strings.CutPrefix(region, r)
		if !ok {
			continue
		}
		rest = strings.TrimPrefix(rest, "-")
		if rest == "" || len(rest) == 1 && rest[0] >= 'a' && rest[0] <= 'z' {
			return true
		}
	}
	return false
}

// catalogOffers returns the catalog rows of backend typ matching q, narrowed
// to regions and to q.Regions (both admitting zones of the regions they
// name), cheapest first (the catalog's order), at most q.Limit of them.
func catalogOffers(c *offers.Catalog, typ string, regions []string, q offers.Query) []offers.Offer {
	if c == nil {
		return nil
	}
	limit, asked := q.Limit, q.Regions
	q.Backends, q.Regions, q.Limit = []string{typ}, nil, 0
	var out []offers.Offer
	for _, o := range c.Query(q) {
		if !InRegions(o.Region, regions) || !InRegions(o.Region, asked) {
			continue
		}
		// The drivers launch x86 images (dstack's defaults, whose AWS
		// offers leave the Graviton families out too), so an arm offer
		// would boot an image it cannot run.
		if o.CPUArch == "arm" {
			continue
		}
		out = append(out, o)
		if limit > 0 && len(out) == limit {
			break
		}
	}
	return out
}
