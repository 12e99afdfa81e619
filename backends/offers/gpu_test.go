package offers

import (
	"strings"
	"testing"
)

func TestNormalizeGPUName(t *testing.T) {
	tests := []struct {
		raw   string
		name  string
		mem   float64
		known bool
	}{
		{"A100", "A100", 0, true},
		{"a100", "A100", 0, true},
		{"A100-80GB", "A100", 80, true},
		{"A100-80G-PCIe", "A100", 80, true},
		{"A100 80GB PCIe NVLink", "A100", 80, true},
		{"NVIDIA A100-SXM4-40GB", "A100", 40, true},
		{"RTX-A6000", "A6000", 0, true},
		{"RTX A6000", "A6000", 0, true},
		{"RTXA5000", "A5000", 0, true},
		{"Tesla V100-SXM2-16GB", "V100", 16, true},
		{"H100 NVL", "H100NVL", 0, true},
		{"H100-SXM", "H100", 0, true},
		{"H100_80GB_HBM3", "H100", 80, true},
		{"RTX 6000 Ada", "RTX6000Ada", 0, true},
		{"RTX-6000-Ada", "RTX6000Ada", 0, true},
		{"RTX-PRO-6000", "RTXPRO6000", 0, true},
		{"RTXPRO6000S", "RTXPRO6000", 0, true},
		{"RTX 4090", "RTX4090", 0, true},
		{"rtx4070ti", "RTX4070Ti", 0, true},
		{"Radeon Pro V520", "V520", 0, true},
		{"AMD Instinct MI300X", "MI300X", 0, true},
		{"mi300x", "MI300X", 0, true},
		{"v5litepod-8", "v5litepod-8", 0, true},
		{"tpu-v3-8", "v3-8", 0, true},
		{"Gaudi2", "Gaudi2", 0, true},
		{"n150", "n150", 0, true},
		{"FancyGPU 9000", "FancyGPU9000", 0, false},
		{"", "", 0, false},
	}
	for _, tt := range tests {
		name, mem, known := NormalizeGPUName(tt.raw)
		if name != tt.name || mem != tt.mem || known != tt.known {
			t.Errorf("NormalizeGPUName(%q) = %q, %v, %v; want %q, %v, %v", tt.raw, name, mem, known, tt.name, tt.mem, tt.known)
		}
	}
}

func TestNormalizeOffer(t *testing.T) {
	tests := []struct {
		name  string
		in    Offer
		want  Offer
		known bool
	}{
		{"memory within 7% snaps to the table", Offer{GPUCount: 1, GPUName: "H200", GPUMemoryGB: 140.4},
			Offer{GPUCount: 1, GPUName: "H200", GPUMemoryGB: 141, GPUVendor: "nvidia"}, true},
		{"memory far from the table is kept", Offer{GPUCount: 1, GPUName: "RTX4090", GPUMemoryGB: 48},
			Offer{GPUCount: 1, GPUName: "RTX4090", GPUMemoryGB: 48, GPUVendor: "nvidia"}, true},
		{"missing memory comes from the name", Offer{GPUCount: 1, GPUName: "A100-80GB"},
			Offer{GPUCount: 1, GPUName: "A100", GPUMemoryGB: 80, GPUVendor: "nvidia"}, true},
		{"missing vendor comes from the table", Offer{GPUCount: 1, GPUName: "MI300X"},
			Offer{GPUCount: 1, GPUName: "MI300X", GPUMemoryGB: 192, GPUVendor: "amd"}, true},
		{"unknown GPU is kept, vendor defaults to nvidia", Offer{GPUCount: 2, GPUName: "X 1", GPUMemoryGB: 7},
			Offer{GPUCount: 2, GPUName: "X1", GPUMemoryGB: 7, GPUVendor: "nvidia"}, false},
		{"CPU rows are cleared", Offer{GPUVendor: "nvidia", GPUMemoryGB: 3},
			Offer{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.in
			known := NormalizeOffer(&got)
			tt.want.CPUArch, tt.want.Availability = ArchX86, AvailabilityUnknown
			if known != tt.known || got.GPUName != tt.want.GPUName || got.GPUMemoryGB != tt.want.GPUMemoryGB ||
				got.GPUVendor != tt.want.GPUVendor || got.GPUCount != tt.want.GPUCount || got.CPUArch != tt.want.CPUArch {
				t.Errorf("NormalizeOffer = %+v, %v; want %+v, %v", got, known, tt.want, tt.known)
			}
		})
	}
}

// lookupGPU returns the knowledge-table entry for a GPU name, compared
// case-insensitively after normalization.
func lookupGPU(name string) (GPUInfo, bool) {
	n, _, ok := NormalizeGPUName(name)
	if !ok {
		return GPUInfo{}, false
	}
	return *gpuByKey[strings.ToUpper(n)], true
}

func TestGPUTable_computeCapability(t *testing.T) {
	for name, want := range map[string]float64{"A100": 8.0, "rtx4090": 8.9, "H100 NVL": 9.0, "B200": 10.0, "RTX5090": 12.0} {
		info, ok := lookupGPU(name)
		if !ok || info.ComputeCapability != want {
			t.Errorf("lookupGPU(%q) = %+v, %v; want compute capability %v", name, info, ok, want)
		}
	}
	if _, ok := lookupGPU("MI300X"); !ok {
		t.Error("MI300X unknown")
	}
}
