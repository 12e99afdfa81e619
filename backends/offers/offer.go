package offers

import (
	"context"
	"strconv"
)

// Availability values an Offer can carry. Catalog rows are "unknown": an
// offline catalog only says what a provider sells, not what is free now.
const (
	AvailabilityUnknown      = "unknown"
	AvailabilityAvailable    = "available"
	AvailabilityIdle         = "idle"
	AvailabilityBusy         = "busy"
	AvailabilityNotAvailable = "not_available"
)

// CPU architectures as gpuhunt spells them.
const (
	ArchX86 = "x86"
	ArchARM = "arm"
)

// GoArch spells an offer's CPU architecture as Go does (the agents'
// builds): arm64 for ArchARM (and arm64, aarch64), amd64 otherwise.
func GoArch(cpuArch string) string {
	switch cpuArch {
	case ArchARM, "arm64", "aarch64":
		return "arm64"
	}
	return "amd64"
}

// GPU vendors as gpuhunt spells them.
const (
	VendorNVIDIA      = "nvidia"
	VendorAMD         = "amd"
	VendorGoogle      = "google"
	VendorIntel       = "intel"
	VendorTenstorrent = "tenstorrent"
)

// Spot policies, as in dstack's spot_policy.
const (
	SpotPolicySpot     = "spot"
	SpotPolicyOnDemand = "on-demand"
	SpotPolicyAuto     = "auto"
)

// An Offer is one thing that can be rented: an instance type in a region
// (or zone) of a backend at a price per hour, spot or on demand. It is one
// row of a gpuhunt catalog with the provider made explicit. GPU fields are
// all zero for CPU-only offers. Its JSON form is lossless (stores persist
// it); `hoist offers --output json` prints a fixed subset of the keys.
type Offer struct {
	// Backend is the hoist backend name (aws, lambda, vastai, local, ...).
	Backend string `json:"backend"`
	// Instance is the provider's instance type (or host name for fleets).
	Instance string `json:"instance"`
	// Region is the region or zone the offer is in.
	Region string `json:"region"`
	// Price is USD per hour for the whole instance.
	Price float64 `json:"price"`
	// Spot is true for interruptible offers.
	Spot bool `json:"spot"`
	// CPUs is the number of vCPUs.
	CPUs int `json:"cpus"`
	// CPUArch is x86 or arm.
	CPUArch string `json:"cpu_arch,omitempty"`
	// MemoryGB is RAM in GB (GiB in practice, as gpuhunt).
	MemoryGB float64 `json:"memory_gb"`
	// GPUVendor is nvidia, amd, google, intel or tenstorrent; empty without GPUs.
	GPUVendor string `json:"gpu_vendor"`
	// GPUName is the canonical compact GPU name (H100, A10G, RTX4090).
	GPUName string `json:"gpu_name"`
	// GPUCount is the number of GPUs; 0 for CPU-only offers.
	GPUCount int `json:"gpu_count"`
	// GPUMemoryGB is memory per GPU in GB.
	GPUMemoryGB float64 `json:"gpu_memory_gb"`
	// DiskGB is the root disk size; 0 when the catalog does not say.
	DiskGB float64 `json:"disk_gb"`
	// Availability is one of the Availability* constants.
	Availability string `json:"availability"`
	// Flags are gpuhunt's kebab-case row flags (e.g. lambda-arm).
	Flags []string `json:"flags,omitempty"`
}

// Range is an inclusive range of a non-negative quantity, as dstack's
// Range[T]: either bound may be open. The zero Range matches everything.
type Range struct {
	// Min is the lower bound, meaningful when HasMin is true.
	Min float64
	// Max is the upper bound, meaningful when HasMax is true.
	Max float64
	// HasMin says whether Min bounds the range.
	HasMin bool
	// HasMax says whether Max bounds the range.
	HasMax bool
}

// AtLeast returns the range min.. .
func AtLeast(min float64) Range { return Range{Min: min, HasMin: true} }

// AtMost returns the range ..max.
func AtMost(max float64) Range { return Range{Max: max, HasMax: true} }

// Between returns the range min..max.
func Between(min, max float64) Range { return Range{Min: min, Max: max, HasMin: true, HasMax: true} }

// Exactly returns the range v..v.
func Exactly(v float64) Range { return Between(v, v) }

// IsZero reports whether the range has no bound at all.
func (r Range) IsZero() bool { return !r.HasMin && !r.HasMax }

// Contains reports whether v lies within the range, bounds included.
func (r Range) Contains(v float64) bool {
	return (!r.HasMin || v >= r.Min) && (!r.HasMax || v <= r.Max)
}

// String renders the range in dstack's grammar ("2..8", "24..", "..4", "8").
func (r Range) String() string {
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
	switch {
	case r.HasMin && r.HasMax && r.Min == r.Max:
		return f(r.Min)
	case r.HasMin && r.HasMax:
		return f(r.Min) + ".." + f(r.Max)
	case r.HasMin:
		return f(r.Min) + ".."
	case r.HasMax:
		return ".." + f(r.Max)
	}
	return ".."
}

// Query selects offers. Resource fields follow dstack's resources spec
// converted the way dstack converts it to a gpuhunt QueryFilter; every range
// is inclusive. The zero Query matches every on-demand offer.
type Query struct {
	// CPU is the vCPU count range.
	CPU Range
	// CPUArch is x86 or arm; empty accepts both.
	CPUArch string
	// Memory is the RAM range in GB.
	Memory Range
	// Disk is the disk range in GB; offers whose size is unknown always pass.
	Disk Range
	// GPUVendor restricts GPU offers to one vendor; empty accepts all.
	GPUVendor string
	// GPUNames accepts any of these GPU names (case-insensitive, normalized).
	GPUNames []string
	// GPUCount is the range of GPUs per instance. When its lower bound is
	// set to 0 (dstack's default "0.."), CPU-only offers pass every GPU
	// filter, as in gpuhunt; with an open lower bound they are held to the
	// GPU filters like any other offer.
	GPUCount Range
	// GPUMemory is the per-GPU memory range in GB.
	GPUMemory Range
	// GPUTotalMemory is the range of GPUCount×GPUMemory in GB.
	GPUTotalMemory Range
	// ComputeCapability is the NVIDIA compute capability range written as
	// major.minor (8.0, 8.6, 12.0); it only admits GPUs the knowledge table knows.
	ComputeCapability Range

	// Backends accepts any of these backends (case-insensitive, aliases resolved).
	Backends []string
	// Regions accepts any of these regions (case-insensitive).
	Regions []string
	// InstanceTypes accepts any of these instance types (case-insensitive).
	InstanceTypes []string
	// SpotPolicy is spot, on-demand or auto (both); empty means on-demand.
	SpotPolicy string
	// MaxPrice is the highest acceptable price per hour; 0 means no limit.
	MaxPrice float64
	// AllowedFlags, when non-nil, rejects rows carrying any flag not listed.
	AllowedFlags []string
	// Limit caps the number of offers returned; 0 means no limit.
	Limit int
}

// A Provider is an online source of offers queried live (a marketplace such
// as vast.ai, or a fleet of hosts). Offers should honor q where cheap to do
// so; the caller filters and sorts the result again, so a provider may
// return a superset in any order. Implementations must respect ctx.
type Provider interface {
	// Name is the backend name the offers belong to.
	Name() string
	// Offers returns the provider's current offers for q.
	Offers(ctx context.Context, q Query) ([]Offer, error)
}
