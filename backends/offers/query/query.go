package query

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"hoist/backends/offers"
	"hoist/schema"
)

// Filters are the user-facing offer filters shared by `hoist offers` flags
// and GET /api/v1/offers query parameters, in dstack's grammar. Unlike a
// run's resources, they apply no hidden defaults: an empty field does not
// constrain.
type Filters struct {
	// GPU is dstack's GPU shorthand ("A100:80GB:8", "24GB..:2", "nvidia:1..8", "0").
	GPU string
	// CPU is the CPU shorthand ("8", "4..16", "arm:8").
	CPU string
	// Memory is a RAM range ("64GB..", "16GB..256GB").
	Memory string
	// Disk is a disk size range ("100GB..").
	Disk string
	// Spot asks for spot offers only (same as SpotPolicy "spot").
	Spot bool
	// SpotPolicy is spot, on-demand or auto; empty means on-demand.
	SpotPolicy string
	// MaxPrice is the highest price per hour; 0 means no limit.
	MaxPrice float64
	// Backends, Regions and InstanceTypes accept any of the listed values.
	Backends, Regions, InstanceTypes []string
	// Limit caps the number of offers; 0 means no limit.
	Limit int
}

// Query parses the filters into an offers.Query using schema's resources grammar.
func (f Filters) Query() (offers.Query, error) {
	var q offers.Query
	if s := strings.TrimSpace(f.GPU); s != "" {
		g, err := schema.ParseGPU(s)
		if err != nil {
			return q, fmt.Errorf("gpu %q: %w", s, err)
		}
		applyGPU(&q, g)
	}
	if s := strings.TrimSpace(f.CPU); s != "" {
		c, err := schema.ParseCPU(s)
		if err != nil {
			return q, fmt.Errorf("cpu %q: %w", s, err)
		}
		q.CPU, q.CPUArch = rangeOf(c.Count), c.Arch
	}
	var err error
	if q.Memory, err = memoryRange("memory", f.Memory); err != nil {
		return q, err
	}
	if q.Disk, err = memoryRange("disk", f.Disk); err != nil {
		return q, err
	}
	q.SpotPolicy = strings.ToLower(strings.TrimSpace(f.SpotPolicy))
	if f.Spot {
		if q.SpotPolicy != "" && q.SpotPolicy != offers.SpotPolicySpot {
			return q, fmt.Errorf("spot conflicts with spot policy %q", q.SpotPolicy)
		}
		q.SpotPolicy = offers.SpotPolicySpot
	}
	q.MaxPrice = f.MaxPrice
	q.Backends = splitList(f.Backends)
	q.Regions = splitList(f.Regions)
	q.InstanceTypes = splitList(f.InstanceTypes)
	if f.Limit < 0 {
		return q, fmt.Errorf("limit %d is negative", f.Limit)
	}
	q.Limit = f.Limit
	return q, q.Validate()
}

func memoryRange(field, s string) (offers.Range, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return offers.Range{}, nil
	}
	r, err := schema.ParseMemoryRange(s)
	if err != nil {
		return offers.Range{}, fmt.Errorf("%s %q: %w", field, s, err)
	}
	return rangeOf(r), nil
}

// splitList flattens repeated and comma-separated values, dropping empties.
func splitList(vals []string) []string {
	var out []string
	for _, v := range vals {
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
	}
	return out
}

// rangeOf converts schema's pointer range.
func rangeOf(r schema.Range) offers.Range {
	var out offers.Range
	if r.Min != nil {
		out.Min, out.HasMin = *r.Min, true
	}
	if r.Max != nil {
		out.Max, out.HasMax = *r.Max, true
	}
	return out
}

func applyGPU(q *offers.Query, g schema.GPU) {
	q.GPUVendor = g.Vendor
	q.GPUNames = g.Names
	q.GPUCount = rangeOf(g.Count)
	if g.Memory != nil {
		q.GPUMemory = rangeOf(*g.Memory)
	}
	if g.TotalMemory != nil {
		q.GPUTotalMemory = rangeOf(*g.TotalMemory)
	}
	if len(g.ComputeCapability) == 2 {
		q.ComputeCapability = offers.AtLeast(float64(g.ComputeCapability[0]) + float64(g.ComputeCapability[1])/10)
	}
}

// FromResources converts a normalized resources block (dstack's
// defaults already applied by schema) into the resource part of an offers.Query,
// as dstack's requirements_to_query_filter does. The caller adds backends,
// regions, instance types, spot policy and max price from the profile.
func FromResources(r schema.Resources) offers.Query {
	var q offers.Query
	q.CPU, q.CPUArch = rangeOf(r.CPU.Count), r.CPU.Arch
	q.Memory = rangeOf(r.Memory)
	if r.Disk != nil {
		q.Disk = rangeOf(r.Disk.Size)
	}
	applyGPU(&q, r.GPU)
	return q
}

// FromSpec is FromResources plus the profile's placement and price
// settings (backends, regions, instance types, spot policy, max price):
// everything dstack's get_offers_by_requirements filters on.
func FromSpec(r schema.Resources, p schema.Profile) offers.Query {
	q := FromResources(r)
	q.Backends = p.Backends
	q.Regions = p.Regions
	q.InstanceTypes = p.InstanceTypes
	q.SpotPolicy = p.SpotPolicy
	if p.MaxPrice != nil {
		q.MaxPrice = *p.MaxPrice
	}
	return q
}

// ParseValues reads GET /api/v1/offers query parameters into a Query:
// gpu, cpu, memory, disk (dstack grammar), spot (true/false), spot_policy,
// max_price, backend, region, instance_type (repeatable or
// comma-separated) and limit. Unknown parameters are rejected so typos
// do not silently widen a query; group_by and output are left to the caller.
func ParseValues(v url.Values) (offers.Query, error) {
	var f Filters
	for key, vals := range v {
		last := ""
		if len(vals) > 0 {
			last = vals[len(vals)-1]
		}
		switch key {
		case "gpu":
			f.GPU = last
		case "cpu":
			f.CPU = last
		case "memory":
			f.Memory = last
		case "disk":
			f.Disk = last
		case "spot":
			b, err := strconv.ParseBool(last)
			if err != nil {
				return offers.Query{}, fmt.Errorf("spot %q: want true or false", last)
			}
			f.Spot = b
		case "spot_policy":
			f.SpotPolicy = last
		case "max_price":
			p, err := strconv.ParseFloat(last, 64)
			if err != nil || p < 0 {
				return offers.Query{}, fmt.Errorf("max_price %q: want a non-negative number", last)
			}
			f.MaxPrice = p
		case "backend":
			f.Backends = vals
		case "region":
			f.Regions = vals
		case "instance_type":
			f.InstanceTypes = vals
		case "limit":
			n, err := strconv.Atoi(last)
			if err != nil || n < 0 {
				return offers.Query{}, fmt.Errorf("limit %q: want a non-negative integer", last)
			}
			f.Limit = n
		case "group_by", "output":
		default:
			return offers.Query{}, fmt.Errorf("unknown offers parameter %q", key)
		}
	}
	return f.Query()
}
