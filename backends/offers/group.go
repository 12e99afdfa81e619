package offers

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// GroupKeys are the keys offers can be grouped by, as dstack's
// `dstack offer --group-by`.
var GroupKeys = []string{"gpu", "backend", "region"}

// A Group aggregates offers sharing the values of the grouping keys.
type Group struct {
	// GPU is "name:memGB:count-range" style text ("H100:80GB:1..8"), or
	// "-" for CPU-only offers; empty when not grouped by gpu.
	GPU string `json:"gpu,omitempty"`
	// Backend is set when grouped by backend.
	Backend string `json:"backend,omitempty"`
	// Region is set when grouped by region.
	Region string `json:"region,omitempty"`
	// Backends lists the distinct backends in the group, sorted.
	Backends []string `json:"backends"`
	// Regions counts the distinct regions in the group.
	Regions int `json:"regions"`
	// Count is the number of offers in the group.
	Count int `json:"count"`
	// MinPrice and MaxPrice bound the offers' prices.
	MinPrice float64 `json:"min_price"`
	MaxPrice float64 `json:"max_price"`
	// Spot says whether spot offers are in the group; OnDemand likewise.
	Spot     bool `json:"spot"`
	OnDemand bool `json:"on_demand"`
}

// ParseGroupBy validates a comma-separated list of GroupKeys.
func ParseGroupBy(s string) ([]string, error) {
	var keys []string
	seen := map[string]bool{}
	for _, k := range strings.Split(s, ",") {
		if k = strings.TrimSpace(k); k == "" {
			continue
		}
		keys = append(keys, k)
		if !slices.Contains(GroupKeys, k) {
			return nil, fmt.Errorf("group by %q: want gpu, backend or region", k)
		}
		if seen[k] {
			return nil, fmt.Errorf("group by %q twice", k)
		}
		seen[k] = true
	}
	return keys, nil
}

// GroupBy aggregates offers (cheapest first) by keys, keeping the order in
// which groups first appear, so groups come cheapest first too. Grouping
// by gpu groups on GPU name and memory and reports the span of counts.
func GroupBy(offers []Offer, keys []string) []Group {
	type acc struct {
		g                  Group
		backends, regions  map[string]bool
		minCount, maxCount int
		gpuName            string
		gpuMem             float64
	}
	var order []string
	groups := map[string]*acc{}
	by := func(k string) bool { return slices.Contains(keys, k) }
	for i := range offers {
		o := &offers[i]
		var key strings.Builder
		if by("gpu") {
			fmt.Fprintf(&key, "%s|%g|", strings.ToLower(o.GPUName), o.GPUMemoryGB)
		}
		if by("backend") {
			key.WriteString(o.Backend + "|")
		}
		if by("region") {
			key.WriteString(o.Region + "|")
		}
		a := groups[key.String()]
		if a == nil {
			a = &acc{backends: map[string]bool{}, regions: map[string]bool{}, minCount: o.GPUCount, maxCount: o.GPUCount,
				gpuName: o.GPUName, gpuMem: o.GPUMemoryGB}
			a.g.MinPrice, a.g.MaxPrice = o.Price, o.Price
			if by("backend") {
				a.g.Backend = o.Backend
			}
			if by("region") {
				a.g.Region = o.Region
			}
			groups[key.String()] = a
			order = append(order, key.String())
		}
		a.g.Count++
		a.backends[o.Backend] = true
		a.regions[o.Region] = true
		a.minCount, a.maxCount = min(a.minCount, o.GPUCount), max(a.maxCount, o.GPUCount)
		a.g.MinPrice, a.g.MaxPrice = min(a.g.MinPrice, o.Price), max(a.g.MaxPrice, o.Price)
		if o.Spot {
			a.g.Spot = true
		} else {
			a.g.OnDemand = true
		}
	}
	out := make([]Group, 0, len(order))
	for _, k := range order {
		a := groups[k]
		for b := range a.backends {
			a.g.Backends = append(a.g.Backends, b)
		}
		slices.Sort(a.g.Backends)
		a.g.Regions = len(a.regions)
		if by("gpu") {
			a.g.GPU = "-"
			if a.gpuName != "" {
				counts := strconv.Itoa(a.minCount)
				if a.maxCount != a.minCount {
					counts += ".." + strconv.Itoa(a.maxCount)
				}
				a.g.GPU = fmt.Sprintf("%s:%sGB:%s", a.gpuName, strconv.FormatFloat(a.gpuMem, 'f', -1, 64), counts)
			}
		}
		out = append(out, a.g)
	}
	return out
}
