package runpod

import (
	"slices"

	"github.com/vektah/gqlparser/v2/gqlerror"

	"hoist/e2e/cloudsim/sim"
)

// A gpuType is one GPU type of the simulated RunPod: RunPod's fields, the
// datacenters (secure cloud) and countries (community cloud) that have it,
// and the vCPUs and memory a pod gets per GPU.
type gpuType struct {
	ID, DisplayName, Manufacturer string
	MemoryInGB, MaxGPUCount       int
	SecurePrice, CommunityPrice   float64
	SecureSpot, CommunitySpot     float64
	DataCenters, Countries        []string
	VCPUPerGPU, MemoryPerGPU      int
}

// gpuCatalog is the simulator's fixed set of GPU types (ids, display names
// and manufacturers as RunPod spells them; prices of late 2026, rounded).
var gpuCatalog = []gpuType{
	{ID: "NVIDIA RTX A4000", DisplayName: "RTX A4000", Manufacturer: "Nvidia", MemoryInGB: 16, MaxGPUCount: 4,
		SecurePrice: 0.25, CommunityPrice: 0.17, SecureSpot: 0.13, CommunitySpot: 0.09,
		DataCenters: []string{"CA-MTL-1", "EU-RO-1", "US-TX-3"}, Countries: []string{"CZ", "US"}, VCPUPerGPU: 4, MemoryPerGPU: 20},
	{ID: "NVIDIA GeForce RTX 4090", DisplayName: "RTX 4090", Manufacturer: "Nvidia", MemoryInGB: 24, MaxGPUCount: 8,
		SecurePrice: 0.69, CommunityPrice: 0.34, SecureSpot: 0.35, CommunitySpot: 0.2,
		DataCenters: []string{"EU-RO-1", "US-TX-3"}, Countries: []string{"CZ", "US"}, VCPUPerGPU: 6, MemoryPerGPU: 41},
	{ID: "NVIDIA H100 80GB HBM3", DisplayName: "H100 SXM", Manufacturer: "Nvidia", MemoryInGB: 80, MaxGPUCount: 8,
		SecurePrice: 2.69, SecureSpot: 1.75,
		DataCenters: []string{"CA-MTL-1", "US-TX-3"}, VCPUPerGPU: 16, MemoryPerGPU: 125},
}

// dataCenters are the secure cloud's datacenters: id, name, location.
var dataCenters = [][3]string{
	{"CA-MTL-1", "Montreal 1", "CA"},
	{"EU-RO-1", "Romania 1", "RO"},
	{"US-TX-3", "Texas 3", "US"},
}

func findGPU(id string) *gpuType {
	for i := range gpuCatalog {
		if gpuCatalog[i].ID == id {
			return &gpuCatalog[i]
		}
	}
	return nil
}

func dataCentersJSON() []map[string]any {
	out := []map[string]any{}
	for _, dc := range dataCenters {
		out = append(out, map[string]any{"id": dc[0], "name": dc[1], "location": dc[2], "listed": true})
	}
	return out
}

// countryCodes are the community cloud's countries.
func countryCodes() []any {
	var out []string
	for _, g := range gpuCatalog {
		for _, c := range g.Countries {
			if !slices.Contains(out, c) {
				out = append(out, c)
			}
		}
	}
	slices.Sort(out)
	res := make([]any, len(out))
	for i, c := range out {
		res[i] = c
	}
	return res
}

// inStock reports whether the capacity faults leave room for one more pod
// of GPU type id (sim.Faults.Capacity is keyed by RunPod's GPU type id).
func inStock(s *sim.Sim, id string) bool {
	n, limited := s.Faults().Capacity[id]
	return !limited || n > 0
}

// placed reports whether g can run gpuCount GPUs in the secure cloud's
// datacenter dc or, when dc is empty, the community cloud's country (any
// place when both are empty).
func (g *gpuType) placed(secure bool, dc, country string, gpuCount int) bool {
	if gpuCount < 1 || gpuCount > g.MaxGPUCount {
		return false
	}
	switch {
	case dc != "":
		return secure && slices.Contains(g.DataCenters, dc)
	case country != "":
		return !secure && slices.Contains(g.Countries, country)
	case secure:
		return len(g.DataCenters) > 0
	}
	return len(g.Countries) > 0
}

// gpuTypes answers gpuTypes(input: {id}); each type's lowestPrice(input:
// {gpuCount, secureCloud, dataCenterId, countryCode}) says where it is in
// stock: stockStatus null when the type is not in that place or the
// capacity faults left none, per-GPU prices otherwise (gpuhunt's
// src/gpuhunt/providers/runpod.py reads it this way).
func gpuTypes(s *sim.Sim, args map[string]any) []map[string]any {
	filter := input(args)
	out := []map[string]any{}
	for i := range gpuCatalog {
		g := &gpuCatalog[i]
		if id := str(filter, "id"); id != "" && id != g.ID {
			continue
		}
		maxCommunity := 0
		if len(g.Countries) > 0 {
			maxCommunity = g.MaxGPUCount
		}
		out = append(out, map[string]any{
			"__typename":                "GpuType",
			"id":                        g.ID,
			"displayName":               g.DisplayName,
			"manufacturer":              g.Manufacturer,
			"memoryInGb":                g.MemoryInGB,
			"maxGpuCount":               g.MaxGPUCount,
			"maxGpuCountSecureCloud":    g.MaxGPUCount,
			"maxGpuCountCommunityCloud": maxCommunity,
			"secureCloud":               len(g.DataCenters) > 0,
			"communityCloud":            len(g.Countries) > 0,
			"securePrice":               g.SecurePrice,
			"communityPrice":            nullZero(g.CommunityPrice),
			"secureSpotPrice":           g.SecureSpot,
			"communitySpotPrice":        nullZero(g.CommunitySpot),
			"lowestPrice": resolver(func(args map[string]any) (any, *gqlerror.Error) {
				in := input(args)
				count := integer(in, "gpuCount", 1)
				secure := true
				if v, ok := in["secureCloud"].(bool); ok {
					secure = v
				} else if str(in, "countryCode") != "" {
					secure = false
				}
				price, spot := g.SecurePrice, g.SecureSpot
				if !secure {
					price, spot = g.CommunityPrice, g.CommunitySpot
				}
				lp := map[string]any{
					"gpuName": g.DisplayName, "gpuTypeId": g.ID,
					"minimumBidPrice": nullZero(spot), "uninterruptablePrice": nullZero(price),
					"stockStatus": nil, "minVcpu": nil, "minMemory": nil,
					"countryCode": nilIfEmpty(str(in, "countryCode")), "compliance": []any{},
				}
				if g.placed(secure, str(in, "dataCenterId"), str(in, "countryCode"), count) && inStock(s, g.ID) && price > 0 {
					lp["stockStatus"] = "High"
					lp["minVcpu"] = float64(count * g.VCPUPerGPU)
					lp["minMemory"] = float64(count * g.MemoryPerGPU)
				}
				return lp, nil
			}),
		})
	}
	return out
}

func nullZero(f float64) any {
	if f == 0 {
		return nil
	}
	return f
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}
