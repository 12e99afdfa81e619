package vultr

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vultr/govultr/v3"

	"hoist/backends"
	"hoist/backends/offers"
	"hoist/backends/vm"
)

// Backend is the cloud-VM engine's backend with live offers: the embedded
// catalog has no vultr rows, so Offers reads the provider's plans.
type Backend struct {
	*vm.Backend
	p *Provider
}

// Traits are the cloud-VM engine's, with live offers.
func (b *Backend) Traits() backends.Traits {
	t := b.Backend.Traits()
	t.LiveOffers = true
	return t
}

// Compile-time guards: the capabilities this driver has.
var (
	_ backends.Backend     = (*Backend)(nil)
	_ backends.Connector   = (*Backend)(nil)
	_ backends.HostAccess  = (*Backend)(nil)
	_ backends.GatewayHost = (*Backend)(nil)
)

// plansTTL is how long the plans read from the API are reused.
const plansTTL = 5 * time.Minute

// hoursPerMonth turns Vultr's monthly cost into an hourly price, as
// gpuhunt's vultr provider does.
const hoursPerMonth = 730

// planPatterns are the plans dstack offers
// (src/dstack/_internal/core/backends/vultr/compute.py): bare-metal GPU and
// AMD plans, bare-metal CPU plans but vbm-4c-32gb (no VPC), cloud GPU
// plans of these GPUs, and the cloud CPU families.
var planPatterns = []*regexp.Regexp{
	regexp.MustCompile(`^vbm-\d+c-\d+gb-\d+-(a100|h100|l40|mi300x)-gpu$`),
	regexp.MustCompile(`^vbm-.*-amd$`),
	regexp.MustCompile(`^vbm-\d+c-\d+gb(-v\d+)?$`),
	regexp.MustCompile(`^vcg-(a16|a40|l40s|a100)-`),
	regexp.MustCompile(`^(vc2|vhf|vhp|voc)-`),
}

// offered says whether dstack offers a plan.
func offered(plan string) bool {
	if plan == "vbm-4c-32gb" {
		return false
	}
	return slices.ContainsFunc(planPatterns, func(re *regexp.Regexp) bool { return re.MatchString(plan) })
}

// metalGPU reads the GPUs of a bare-metal GPU plan from its id
// (vbm-112c-2048gb-8-h100-gpu: 8 H100).
var metalGPU = regexp.MustCompile(`^vbm-\d+c-\d+gb-(\d+)-(a100|h100|l40|mi300x)-gpu$`)

// metalGPUMemory is the memory (GB) of the GPUs of bare-metal plans, which
// the plans do not show.
var metalGPUMemory = map[string]float64{"A100": 80, "H100": 80, "L40": 48, "MI300X": 192}

// Offers returns the plans in the configured regions that match q as
// offers, cheapest first; none when q names other backends only.
func (b *Backend) Offers(ctx context.Context, q offers.Query) ([]offers.Offer, error) {
	return b.p.offers(ctx, b.Name(), q)
}

// OfferSource returns the live offers of a `vultr` entry, for `hoist
// offers --config`: it checks the entry and only reads the plans.
func OfferSource(cfg backends.Config, _ *slog.Logger) (offers.Provider, error) {
	var o Options
	if err := cfg.Decode(&o); err != nil {
		return nil, err
	}
	name := cfg.BackendName()
	p, err := newProvider(name, o, backends.Deps{})
	if err != nil {
		return nil, fmt.Errorf("backend %q (type vultr): %w", name, err)
	}
	return offerSource{name: name, p: p}, nil
}

// offerSource is the offers.Provider of OfferSource.
type offerSource struct {
	name string
	p    *Provider
}

func (s offerSource) Name() string { return s.name }

func (s offerSource) Offers(ctx context.Context, q offers.Query) ([]offers.Offer, error) {
	return s.p.offers(ctx, s.name, q)
}

// offers are the plan offers of backend name in the configured regions
// that match q, cheapest first; none when q names other backends only.
func (p *Provider) offers(ctx context.Context, name string, q offers.Query) ([]offers.Offer, error) {
	if len(q.Backends) > 0 && !slices.ContainsFunc(q.Backends, func(n string) bool {
		return strings.EqualFold(n, name) || strings.EqualFold(n, "vultr")
	}) {
		return nil, nil
	}
	all, err := p.planOffers(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]offers.Offer, 0, len(all))
	avail := map[string]map[string]bool{} // region → plan → deployable now
	for _, o := range all {
		if !vm.InRegions(o.Region, p.regions) || !vm.InRegions(o.Region, q.Regions) {
			continue
		}
		plans, ok := avail[o.Region]
		if !ok {
			if plans, err = p.available(ctx, o.Region); err != nil {
				return nil, err
			}
			avail[o.Region] = plans
		}
		if plans[o.Instance] {
			o.Backend = name
			out = append(out, o)
		}
	}
	q.Backends = nil
	out = offers.Filter(out, q)
	offers.SortOffers(out)
	return out, nil
}

// plansCache keeps the offers read from the plans for plansTTL, and each
// region's available plans for availabilityTTL.
type plansCache struct {
	mu     sync.Mutex
	at     time.Time
	offers []offers.Offer
	avail  map[string]availability
}

// availability is what a region can deploy now, as read at at.
type availability struct {
	at    time.Time
	plans map[string]bool
}

// availabilityTTL is how long a region's available plans are reused: the
// live part of the offers, re-read often.
const availabilityTTL = 30 * time.Second

// available returns the plans region can deploy now (GET
// /v2/regions/{region}/availability): a sold-out plan is left out of the
// offers, as dstack drops offers that are not available before
// provisioning.
func (p *Provider) available(ctx context.Context, region string) (map[string]bool, error) {
	p.plans.mu.Lock()
	a, ok := p.plans.avail[region]
	p.plans.mu.Unlock()
	if ok && p.now().Sub(a.at) < availabilityTTL {
		return a.plans, nil
	}
	ctx, c := track(ctx)
	pa, _, err := p.c.Region.Availability(ctx, region, "all")
	if err != nil {
		return nil, classify(c, "plan availability in "+region, err)
	}
	plans := make(map[string]bool, len(pa.AvailablePlans))
	for _, id := range pa.AvailablePlans {
		plans[id] = true
	}
	p.plans.mu.Lock()
	if p.plans.avail == nil {
		p.plans.avail = map[string]availability{}
	}
	p.plans.avail[region] = availability{at: p.now(), plans: plans}
	p.plans.mu.Unlock()
	return plans, nil
}

// planOffers returns an offer per offered plan and location (GET
// /v2/plans and /v2/plans-metal, every page), cached for plansTTL.
func (p *Provider) planOffers(ctx context.Context) ([]offers.Offer, error) {
	p.plans.mu.Lock()
	defer p.plans.mu.Unlock()
	if p.plans.offers != nil && p.now().Sub(p.plans.at) < plansTTL {
		return slices.Clone(p.plans.offers), nil
	}
	var out []offers.Offer
	opts := &govultr.ListOptions{PerPage: 500}
	for {
		lctx, c := track(ctx)
		plans, meta, _, err := p.c.Plan.List(lctx, "", opts)
		if err != nil {
			return nil, classify(c, "list plans", err)
		}
		for _, pl := range plans {
			if offered(pl.ID) {
				out = append(out, cloudOffers(pl)...)
			}
		}
		if meta == nil || meta.Links == nil || meta.Links.Next == "" {
			break
		}
		opts.Cursor = meta.Links.Next
	}
	opts = &govultr.ListOptions{PerPage: 500}
	for {
		lctx, c := track(ctx)
		plans, meta, _, err := p.c.Plan.ListBareMetal(lctx, opts)
		if err != nil {
			return nil, classify(c, "list bare-metal plans", err)
		}
		for _, pl := range plans {
			if offered(pl.ID) {
				out = append(out, metalOffers(pl)...)
			}
		}
		if meta == nil || meta.Links == nil || meta.Links.Next == "" {
			break
		}
		opts.Cursor = meta.Links.Next
	}
	p.plans.at, p.plans.offers = p.now(), out
	return slices.Clone(out), nil
}

func price(monthly float32) float64 {
	return math.Round(float64(monthly)/hoursPerMonth*1e5) / 1e5
}

// cloudOffers are a cloud plan's offers: one per location. A cloud GPU
// plan (vcg-*) has one GPU, or a slice of one, of its gpu_vram_gb.
func cloudOffers(pl govultr.Plan) []offers.Offer {
	o := offers.Offer{
		Instance: pl.ID, Price: price(pl.MonthlyCost), CPUs: pl.VCPUCount, CPUArch: "x86",
		MemoryGB: float64(pl.RAM) / 1024, DiskGB: float64(pl.Disk), Availability: offers.AvailabilityAvailable,
	}
	if pl.GPUType != "" {
		vendor, name := gpuOf(pl.GPUType)
		o.GPUVendor, o.GPUName, o.GPUCount, o.GPUMemoryGB = vendor, name, 1, float64(pl.GPUVRAM)
	}
	return perLocation(o, pl.Locations)
}

// metalOffers are a bare-metal plan's offers: one per location, the GPUs
// read from the plan id.
func metalOffers(pl govultr.BareMetalPlan) []offers.Offer {
	cpus := pl.CPUThreads
	if cpus == 0 {
		cpus = pl.CPUCount
	}
	o := offers.Offer{
		Instance: pl.ID, Price: price(pl.MonthlyCost), CPUs: cpus, CPUArch: "x86",
		MemoryGB: float64(pl.RAM) / 1024, DiskGB: float64(pl.Disk * max(pl.DiskCount, 1)), Availability: offers.AvailabilityAvailable,
	}
	if m := metalGPU.FindStringSubmatch(pl.ID); m != nil {
		n, _ := strconv.Atoi(m[1])
		name := strings.ToUpper(m[2])
		o.GPUVendor, o.GPUName, o.GPUCount, o.GPUMemoryGB = "nvidia", name, n, metalGPUMemory[name]
		if name == "MI300X" {
			o.GPUVendor = "amd"
		}
	}
	return perLocation(o, pl.Locations)
}

// gpuOf reads Vultr's gpu_type (NVIDIA_A100, AMD_MI300X) as a vendor and
// the compact GPU name.
func gpuOf(t string) (vendor, name string) {
	v, n, ok := strings.Cut(t, "_")
	if !ok {
		return "nvidia", strings.ToUpper(t)
	}
	return strings.ToLower(v), strings.ToUpper(strings.ReplaceAll(n, "_", ""))
}

func perLocation(o offers.Offer, locations []string) []offers.Offer {
	out := make([]offers.Offer, 0, len(locations))
	for _, l := range locations {
		x := o
		x.Region = l
		out = append(out, x)
	}
	return out
}
