package gce

import (
	"net/http"
	"strings"
	"sync"

	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/protobuf/proto"

	"hoist/backends/offers"
	"hoist/e2e/cloudsim/sim"
)

func (p *Provider) getRegion(s *sim.Sim, r *http.Request) (proto.Message, *apiError) {
	rg := r.PathValue("region")
	var zones []string
	for _, z := range Regions[rg] {
		zones = append(zones, zoneLink(z))
	}
	return &computepb.Region{Kind: proto.String("compute#region"), Name: proto.String(rg),
		Status: proto.String("UP"), Zones: zones, SelfLink: proto.String(regionLink(rg))}, nil
}

func zoneView(z string) *computepb.Zone {
	return &computepb.Zone{Kind: proto.String("compute#zone"), Name: proto.String(z), Status: proto.String("UP"),
		Region: proto.String(regionLink(regionOf(z))), SelfLink: proto.String(zoneLink(z))}
}

func (p *Provider) getZone(s *sim.Sim, r *http.Request) (proto.Message, *apiError) {
	return zoneView(r.PathValue("zone")), nil
}

func (p *Provider) listZones(s *sim.Sim, r *http.Request) (proto.Message, *apiError) {
	out := &computepb.ZoneList{Kind: proto.String("compute#zoneList"), SelfLink: proto.String(linkBase + "/zones")}
	for _, rg := range regionNames {
		for _, z := range Regions[rg] {
			out.Items = append(out.Items, zoneView(z))
		}
	}
	return out, nil
}

// fixedPrices are on-demand USD per hour of a few machine types
// (https://cloud.google.com/compute/vm-instance-pricing, us-central1), used
// when the embedded catalog has no gcp row for a type.
var fixedPrices = map[string]float64{
	"e2-medium":     0.0335,
	"e2-standard-2": 0.067,
	"e2-standard-4": 0.134,
	"e2-standard-8": 0.268,
	"n1-standard-4": 0.19,
	"n2-standard-8": 0.3885,
	"g2-standard-4": 0.7068,
	"g2-standard-8": 0.8536,
	"a2-highgpu-1g": 3.6731,
	"a3-highgpu-8g": 88.4916,
}

// catalogPrices maps "type/location/spot" and "type//spot" to the embedded
// catalog's gcp prices.
var catalogPrices = sync.OnceValue(func() map[string]float64 {
	m := map[string]float64{}
	c, err := offers.Embedded()
	if err != nil {
		return m
	}
	for _, o := range c.All() {
		if o.Backend != Name {
			continue
		}
		spot := "od"
		if o.Spot {
			spot = "spot"
		}
		m[o.Instance+"/"+o.Region+"/"+spot] = o.Price
		if _, ok := m[o.Instance+"//"+spot]; !ok {
			m[o.Instance+"//"+spot] = o.Price
		}
	}
	return m
})

// price is the hourly price of machine in zone: the catalog's, else the
// fixed table's (spot at 30 % of on demand), else 0.1.
func price(machine, zone string, spot bool) float64 {
	kind := "od"
	if spot {
		kind = "spot"
	}
	m := catalogPrices()
	for _, k := range []string{machine + "/" + zone + "/" + kind, machine + "/" + regionOf(zone) + "/" + kind, machine + "//" + kind} {
		if v, ok := m[k]; ok {
			return v
		}
	}
	v, ok := fixedPrices[machine]
	if !ok {
		v = 0.1
	}
	if spot {
		v = float64(int(v*0.3*10000)) / 10000
	}
	return v
}

// parseFilter compiles a list filter of the forms Compute Engine accepts
// for labels and names (https://cloud.google.com/compute/docs/reference/rest/v1/instances/aggregatedList):
// `labels.KEY = "VALUE"`, `name = NAME`, `!=`, joined by AND or by spaces
// between parenthesized expressions.
func parseFilter(f string) (func(name string, labels map[string]string) bool, *apiError) {
	type clause struct {
		field, value string
		neg          bool
	}
	var cs []clause
	rest := strings.TrimSpace(f)
	for rest != "" {
		rest = strings.TrimLeft(rest, "( \t")
		if after, ok := strings.CutPrefix(rest, "AND "); ok {
			rest = after
			continue
		}
		if rest == "" {
			break
		}
		i := strings.IndexAny(rest, " !=:")
		if i <= 0 {
			return nil, badRequest("invalid", "Invalid value for field 'filter': '"+f+"'. Invalid list filter expression.")
		}
		field := rest[:i]
		rest = strings.TrimLeft(rest[i:], " ")
		var c clause
		switch {
		case strings.HasPrefix(rest, "!="):
			c.neg, rest = true, rest[2:]
		case strings.HasPrefix(rest, "="), strings.HasPrefix(rest, ":"):
			rest = rest[1:]
		default:
			return nil, badRequest("invalid", "Invalid value for field 'filter': '"+f+"'. Invalid list filter expression.")
		}
		rest = strings.TrimLeft(rest, " ")
		if strings.HasPrefix(rest, `"`) {
			end := strings.IndexByte(rest[1:], '"')
			if end < 0 {
				return nil, badRequest("invalid", "Invalid value for field 'filter': '"+f+"'. Unterminated string.")
			}
			c.value, rest = rest[1:1+end], rest[2+end:]
		} else {
			end := strings.IndexAny(rest, " )")
			if end < 0 {
				end = len(rest)
			}
			c.value, rest = rest[:end], rest[end:]
		}
		rest = strings.TrimLeft(rest, ") \t")
		c.field = field
		if field != "name" && !strings.HasPrefix(field, "labels.") {
			return nil, badRequest("invalid", "Invalid value for field 'filter': '"+f+"'. The simulator filters on name and labels only.")
		}
		cs = append(cs, c)
	}
	return func(name string, labels map[string]string) bool {
		for _, c := range cs {
			var have string
			var ok bool
			if c.field == "name" {
				have, ok = name, true
			} else {
				have, ok = labels[strings.TrimPrefix(c.field, "labels.")]
			}
			if (ok && have == c.value) == c.neg {
				return false
			}
		}
		return true
	}, nil
}
