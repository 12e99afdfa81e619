package hostoffer

import (
	"math"

	"hoist/agents/api"
	"hoist/backends/offers"
)

// Offer describes host h as an idle, free offer of backend in region: its
// CPUs and architecture, memory and disk (GB to one decimal), and its GPUs
// of the first GPU's model, their name normalized through offers' GPU
// table.
func Offer(h api.HostInfo, backend, region string) offers.Offer {
	o := offers.Offer{
		Backend:      backend,
		Instance:     h.Hostname,
		Region:       region,
		CPUs:         h.CPUs,
		CPUArch:      offers.ArchX86,
		MemoryGB:     gb(h.MemoryBytes),
		DiskGB:       gb(h.DiskBytes),
		Availability: offers.AvailabilityIdle,
	}
	if h.Arch == "arm64" || h.Arch == "arm" {
		o.CPUArch = offers.ArchARM
	}
	if len(h.GPUs) > 0 {
		first := h.GPUs[0]
		for _, g := range h.GPUs {
			if g.Name == first.Name {
				o.GPUCount++
			}
		}
		o.GPUVendor, o.GPUName, o.GPUMemoryGB = h.GPUVendor, first.Name, float64(first.MemoryBytes)/(1<<30)
		offers.NormalizeOffer(&o)
	}
	return o
}

// gb returns n bytes in GiB, rounded to one decimal.
func gb(n int64) float64 { return math.Round(float64(n)/(1<<30)*10) / 10 }
