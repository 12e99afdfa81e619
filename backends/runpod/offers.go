package runpod

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"sync"

	"hoist/backends/offers"
)

// maxStockQueries is how many stock queries run at once.
const maxStockQueries = 8

// A place is where pods run: a secure datacenter or a community country.
type place struct {
	region string
	secure bool
}

// Offers returns the GPU pods RunPod has in stock now, as gpuhunt reads
// them (src/gpuhunt/providers/runpod.py): the GPU types and places
// (queryCatalog), then each type's stock for each GPU count in each place
// (stockQuery, one request per place: lowestPrice with stockStatus,
// minVcpu, minMemory). An offer's price is the GPU type's price per GPU
// (securePrice or communityPrice, the spot prices for spot offers) times
// the count; an offer is available while stockStatus is not null, and
// left out otherwise. Places are the configured regions, else every listed
// datacenter (and every country with community_cloud), narrowed by
// q.Regions; counts are 1 to the types' maxGpuCount within q.GPUCount.
// The result is filtered by q (offers.Filter); a query naming other
// backends only gets none (the vultr driver's rule: the entry's name or
// the type).
func (p *Provider) Offers(ctx context.Context, q offers.Query) ([]offers.Offer, error) {
	if p.name != "" && len(q.Backends) > 0 && !slices.ContainsFunc(q.Backends, func(n string) bool {
		return strings.EqualFold(n, p.name) || strings.EqualFold(n, "runpod")
	}) {
		return nil, nil
	}
	var cat wireCatalog
	if err := p.api.do(ctx, "gpuTypes", queryCatalog, nil, &cat); err != nil {
		return nil, classify(err)
	}
	places := p.places(cat, q.Regions)
	maxCount := 0
	types := map[string]wireGPUType{}
	for _, g := range cat.GPUTypes {
		types[g.ID] = g
		maxCount = max(maxCount, g.MaxGPUCount)
	}
	var counts []int
	for n := 1; n <= maxCount; n++ {
		if q.GPUCount.Contains(float64(n)) {
			counts = append(counts, n)
		}
	}
	if len(counts) == 0 {
		return nil, nil
	}
	query := stockQuery(counts)
	var (
		mu       sync.Mutex
		out      []offers.Offer
		firstErr error
		wg       sync.WaitGroup
		sem      = make(chan struct{}, maxStockQueries)
	)
	for _, pl := range places {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			vars := map[string]any{}
			for _, n := range counts {
				in := map[string]any{"gpuCount": n, "secureCloud": pl.secure, "minCudaVersion": minCUDAVersion}
				if pl.secure {
					in["dataCenterId"] = pl.region
				} else {
					in["countryCode"] = pl.region
				}
				vars["c"+strconv.Itoa(n)] = in
			}
			var st wireStock
			err := p.api.do(ctx, "gpuTypes.lowestPrice", query, vars, &st)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if firstErr == nil {
					firstErr = err
				}
				return
			}
			for _, s := range st.GPUTypes {
				var id string
				_ = json.Unmarshal(s["id"], &id)
				g, ok := types[id]
				if !ok {
					continue
				}
				for _, n := range counts {
					var lp *wireLowestPrice
					if err := json.Unmarshal(s["c"+strconv.Itoa(n)], &lp); err != nil || lp == nil || lp.StockStatus == nil || n > g.MaxGPUCount {
						continue
					}
					out = append(out, offersOf(g, pl, n, lp.MinVcpu, lp.MinMemory)...)
				}
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return nil, classify(firstErr)
	}
	q.Backends = nil // checked above; the engine names the offers' backend
	return offers.Filter(out, q), nil
}

// places returns where to look: the configured regions or every listed
// datacenter (and country, with the community cloud), narrowed by the
// query's regions.
func (p *Provider) places(cat wireCatalog, want []string) []place {
	var all []place
	if len(p.regions) > 0 {
		for _, r := range p.regions {
			all = append(all, place{region: r, secure: secureRegion(r)})
		}
	} else {
		for _, dc := range cat.DataCenters {
			if dc.Listed {
				all = append(all, place{region: dc.ID, secure: true})
			}
		}
		if p.community {
			for _, c := range cat.CountryCodes {
				if c != nil && *c != "" {
					all = append(all, place{region: *c})
				}
			}
		}
	}
	var out []place
	for _, pl := range all {
		if !pl.secure && !p.community {
			continue
		}
		if len(want) > 0 && !slices.ContainsFunc(want, func(w string) bool { return strings.EqualFold(w, pl.region) }) {
			continue
		}
		out = append(out, pl)
	}
	return out
}

// offersOf returns the on-demand and spot offers of count GPUs of g in pl.
func offersOf(g wireGPUType, pl place, count int, minVCPU, minMemory *float64) []offers.Offer {
	demand, spot := g.SecurePrice, g.SecureSpotPrice
	if !pl.secure {
		demand, spot = g.CommunityPrice, g.CommunitySpotPrice
	}
	name, _, _ := offers.NormalizeGPUName(g.DisplayName)
	base := offers.Offer{
		Backend:      "runpod",
		Instance:     g.ID,
		Region:       pl.region,
		CPUArch:      offers.ArchX86,
		GPUVendor:    vendor(g.Manufacturer),
		GPUName:      name,
		GPUCount:     count,
		GPUMemoryGB:  g.MemoryInGB,
		Availability: offers.AvailabilityAvailable,
	}
	if minVCPU != nil {
		base.CPUs = int(*minVCPU)
	}
	if minMemory != nil {
		base.MemoryGB = *minMemory
	}
	var out []offers.Offer
	if demand != nil && *demand > 0 {
		o := base
		o.Price = *demand * float64(count)
		out = append(out, o)
	}
	if spot != nil && *spot > 0 {
		o := base
		o.Price, o.Spot = *spot*float64(count), true
		out = append(out, o)
	}
	return out
}

// vendor maps RunPod's manufacturer to gpuhunt's vendor.
func vendor(m string) string {
	switch strings.ToLower(m) {
	case "nvidia":
		return offers.VendorNVIDIA
	case "amd":
		return offers.VendorAMD
	}
	return strings.ToLower(m)
}
