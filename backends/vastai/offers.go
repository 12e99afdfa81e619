package vastai

import (
	"context"
	"encoding/json"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"hoist/backends/offers"
)

// Offers are cached per distinct search as dstack's
// ComputeWithFilteredOffersCached does
// (src/dstack/_internal/core/backends/base/compute.py): 10 searches, each
// for 180 s.
const (
	offersCacheSize = 10
	offersCacheTTL  = 180 * time.Second
)

// A filter is one field's conditions of a bundles search, {op: value}
// with Vast.ai's operators (eq, neq, gt, gte, lt, lte, in, notin).
type filter map[string]any

// searchQuery returns the body of POST /bundles/ for q: dstack's fixed
// filters (src/dstack/_internal/core/backends/vastai/compute.py, extra
// filters of gpuhunt's VastAIProvider), q's requirements as gpuhunt's
// VastAIProvider.make_filters turns them into Vast.ai's fields
// (src/gpuhunt/providers/vastai.py), ordered by score, best first. gpuNames
// are the GPU names to keep locally when a requested name has no Vast.ai
// spelling (the search then fetches up to 3000 asks, as gpuhunt does).
func (p *Provider) searchQuery(q offers.Query) (body map[string]any, gpuNames []string) {
	body = map[string]any{
		"direct_port_count": filter{"gte": 1},
		"reliability2":      filter{"gte": 0.9},
		"inet_down":         filter{"gt": 128},
		"verified":          filter{"eq": true},
		"cuda_max_good":     filter{"gte": 12.8},
		"compute_cap":       filter{"gte": 600},
		"rentable":          filter{"eq": true},
		"rented":            filter{"eq": false},
		"order":             [][]string{{"score", "desc"}},
	}
	if !p.community {
		body["datacenter"] = filter{"eq": true}
	}
	rng := func(field string, r offers.Range, scale float64) {
		f := filter{}
		if r.HasMin {
			f["gte"] = r.Min * scale
		}
		if r.HasMax {
			f["lte"] = r.Max * scale
		}
		if len(f) > 0 {
			body[field] = f
		}
	}
	// An ask rents a share of its host: cpu_cores_effective of the
	// host's cpu_cores and as much of its cpu_ram (MB). gpuhunt bounds
	// cpu_cores and cpu_ram, the host's; the driver bounds the share's
	// cores and only the least host RAM, so that no ask that fits is
	// left out (the Market filters the offers again).
	rng("cpu_cores_effective", q.CPU, 1)
	if q.Memory.HasMin {
		body["cpu_ram"] = filter{"gte": q.Memory.Min * 1000}
	}
	rng("num_gpus", q.GPUCount, 1)
	rng("disk_space", q.Disk, 1)
	// gpu_ram is MB per GPU; gpuhunt widens the bounds by 7% for the
	// difference between the marketed and the reported size.
	if r := q.GPUMemory; r.HasMin || r.HasMax {
		f := filter{}
		if r.HasMin {
			f["gte"] = r.Min * 1024 * 0.93
		}
		if r.HasMax {
			f["lte"] = r.Max * 1024 * 1.07
		}
		body["gpu_ram"] = f
	}
	if q.MaxPrice > 0 {
		body["dph_total"] = filter{"lte": q.MaxPrice}
	}
	if len(q.GPUNames) > 0 {
		var vast []string
		mapped := true
		for _, g := range q.GPUNames {
			n, _, _ := offers.NormalizeGPUName(g)
			names := vastGPUNames(n)
			if len(names) == 0 {
				mapped = false
			}
			vast = append(vast, names...)
		}
		if mapped {
			body["gpu_name"] = filter{"in": vast}
		} else {
			body["limit"] = 3000
			for _, g := range q.GPUNames {
				n, _, _ := offers.NormalizeGPUName(g)
				gpuNames = append(gpuNames, strings.ToUpper(n))
			}
		}
	}
	return body, gpuNames
}

// Offers implements podcloud.Provider: Vast.ai's asks for q in the
// configured regions, an on-demand offer per ask and a spot (bid) one when
// the ask has a min_bid. A search is cached for offersCacheTTL. The result
// is filtered by q (offers.Filter); a query naming other backends gets
// none (the entry's name or the type, as the runpod and vultr drivers).
func (p *Provider) Offers(ctx context.Context, q offers.Query) ([]offers.Offer, error) {
	if len(q.Backends) > 0 && !slices.ContainsFunc(q.Backends, func(n string) bool {
		return strings.EqualFold(n, p.backend) || strings.EqualFold(offers.BackendName(n), backendType)
	}) {
		return nil, nil
	}
	q.Backends = nil // checked; the engine names the offers' backend
	if q.GPUVendor != "" && q.GPUVendor != offers.VendorNVIDIA {
		return nil, nil // Vast.ai's hosts the driver admits are NVIDIA (compute_cap, cuda_max_good)
	}
	body, gpuNames := p.searchQuery(q)
	kb, err := json.Marshal(body) // map keys marshal sorted: one key per search
	if err != nil {
		return nil, err
	}
	key := string(kb) + "|" + strconv.FormatFloat(diskFor(q), 'f', -1, 64)
	if v, ok := p.cache.Get(key); ok {
		return offers.Filter(slices.Clone(v.([]offers.Offer)), q), nil
	}
	asks, err := p.api.bundles(ctx, body)
	if err != nil {
		return nil, classify(err)
	}
	out := make([]offers.Offer, 0, 2*len(asks))
	for _, a := range asks {
		o := p.offerOf(a, diskFor(q))
		if len(gpuNames) > 0 && !slices.Contains(gpuNames, strings.ToUpper(o.GPUName)) {
			continue
		}
		if !p.inRegions(a.Geolocation) {
			continue
		}
		out = append(out, o)
		if a.MinBid != nil {
			s := o
			s.Spot, s.Price = true, *a.MinBid
			out = append(out, s)
		}
	}
	p.cache.Add(key, out, offersCacheTTL)
	p.log.Debug("offers_searched", "asks", len(asks), "offers", len(out))
	return offers.Filter(slices.Clone(out), q), nil
}

// diskFor is the disk an offer for q gets: q's minimum, else the ask's.
func diskFor(q offers.Query) float64 {
	if q.Disk.HasMin {
		return q.Disk.Min
	}
	return 0
}

// offerOf returns the on-demand offer of ask a (gpuhunt's VastAIProvider.get).
func (p *Provider) offerOf(a ask, disk float64) offers.Offer {
	mem := 0.0
	if a.CPUCores != nil && *a.CPUCores > 0 {
		// cpu_ram is the host's; the ask gets its share of the cores.
		mem = math.Floor(a.CPURAM * a.CPUCoresEffective / *a.CPUCores / 1000)
	}
	if disk == 0 {
		disk = a.DiskSpace
	}
	o := offers.Offer{
		Backend:      p.backend,
		Instance:     strconv.FormatInt(a.ID, 10),
		Region:       a.Geolocation,
		Price:        a.DPHTotal,
		CPUs:         int(a.CPUCoresEffective),
		CPUArch:      offers.ArchX86,
		MemoryGB:     mem,
		DiskGB:       disk,
		Availability: offers.AvailabilityAvailable,
	}
	if a.NumGPUs > 0 {
		name, _, _ := offers.NormalizeGPUName(a.GPUName)
		o.GPUVendor, o.GPUName, o.GPUCount = offers.VendorNVIDIA, name, a.NumGPUs
		o.GPUMemoryGB = math.Round(a.GPURAM / 1024)
	}
	return o
}

// inRegions reports whether a host at geolocation ("Quebec, CA") is in
// the configured regions: the whole location or one of its parts.
func (p *Provider) inRegions(geolocation string) bool {
	if len(p.regions) == 0 {
		return true
	}
	parts := []string{geolocation}
	for s := range strings.SplitSeq(geolocation, ",") {
		parts = append(parts, strings.TrimSpace(s))
	}
	for _, r := range p.regions {
		for _, s := range parts {
			if strings.EqualFold(r, s) {
				return true
			}
		}
	}
	return false
}

// Vast.ai's spellings of hoist's GPU names, as gpuhunt's GPU_MAPPING_RULES
// (src/gpuhunt/providers/vastai.py).
var (
	sameGPUNames  = []string{"L40S", "L40", "A10", "A40", "L4", "A100X", "H200"}
	directGPUName = map[string][]string{
		"H200NVL":  {"H200 NVL"},
		"P100":     {"Tesla P100"},
		"T4":       {"Tesla T4"},
		"P4":       {"Tesla P4"},
		"P40":      {"Tesla P40"},
		"V100":     {"Tesla V100"},
		"A100":     {"A100 PCIE", "A100 SXM4"},
		"A800PCIE": {"A800 PCIE"},
		"H100":     {"H100 PCIE", "H100 SXM"},
		"H100NVL":  {"H100 NVL"},
	}
	rtxNumber  = regexp.MustCompile(`^RTX(\d{4}\D?)$`)
	qrtxNumber = regexp.MustCompile(`^QRTX(\d{4})$`)
	rtxAda     = regexp.MustCompile(`^RTX(\d{4})Ada$`)
	rtxTi      = regexp.MustCompile(`^RTX(\d{4}\D?)Ti$`)
	aNumber    = regexp.MustCompile(`^A(\d{4})`)
)

// vastGPUNames returns Vast.ai's gpu_name values for hoist's GPU name g;
// none when no rule knows it.
func vastGPUNames(g string) []string {
	switch {
	case slices.Contains(sameGPUNames, g):
		return []string{g}
	case directGPUName[g] != nil:
		return directGPUName[g]
	case rtxNumber.MatchString(g):
		return []string{rtxNumber.ReplaceAllString(g, "RTX $1")}
	case qrtxNumber.MatchString(g):
		return []string{qrtxNumber.ReplaceAllString(g, "Q RTX $1")}
	case rtxAda.MatchString(g):
		return []string{rtxAda.ReplaceAllString(g, "RTX ${1}Ada")}
	case rtxTi.MatchString(g):
		return []string{rtxTi.ReplaceAllString(g, "RTX $1 Ti")}
	case aNumber.MatchString(g):
		return []string{aNumber.ReplaceAllString(g, "RTX A$1")}
	}
	return nil
}
