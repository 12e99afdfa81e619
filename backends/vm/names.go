package vm

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"hoist/backends/offers"
)

// DefaultMaxNameLen is the name length limit when Config.MaxNameLen is 0:
// GCP's (RFC 1035 labels, 63 characters), the strictest of the three.
const DefaultMaxNameLen = 63

// ResourceName returns the provider-visible name of a resource, dstack's
// style hoist-<resource>-<8 hex> (src/dstack/_internal/core/backends/base/compute.py,
// generate_unique_instance_name): resource lowercased with every run of
// characters other than a-z and 0-9 turned into one dash, cut so that the
// whole name fits max, and 8 hex digits of SHA-256(id) so that names are
// unique and the same for the same id. The result starts with a letter, ends
// with a letter or digit and uses only a-z, 0-9 and dashes: a valid name on
// every provider (GCP's RFC 1035 label, Azure's resource names, EC2 tags).
func ResourceName(resource, id string, max int) string {
	if max <= 0 {
		max = DefaultMaxNameLen
	}
	sum := sha256.Sum256([]byte(id))
	suffix := hex.EncodeToString(sum[:4])
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(resource) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			b.WriteRune(r)
			dash = false
			continue
		}
		dash = true
	}
	res := b.String()
	room := max - len("hoist-") - len("-") - len(suffix)
	if room <= 0 {
		return ("hoist-" + suffix)[:min(max, len("hoist-")+len(suffix))]
	}
	if len(res) > room {
		res = strings.TrimRight(res[:room], "-")
	}
	if res == "" {
		return "hoist-" + suffix
	}
	return "hoist-" + res + "-" + suffix
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
