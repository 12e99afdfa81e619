package hostoffer_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"hoist/agents/api"
	"hoist/backends/internal/hostoffer"
	"hoist/backends/offers"
)

func TestOffer(t *testing.T) {
	h100 := api.GPU{Vendor: "nvidia", Name: "NVIDIA H100 80GB HBM3", MemoryBytes: 81559 << 20}
	mi300 := api.GPU{Vendor: "amd", Name: "AMD Instinct MI300X", MemoryBytes: 196592 << 20}
	tests := []struct {
		name string
		host api.HostInfo
		want offers.Offer
	}{
		{
			name: "a CPU host is described by its CPUs, memory and disk",
			host: api.HostInfo{Hostname: "box", Arch: "amd64", CPUs: 8, MemoryBytes: 32 << 30, DiskBytes: 100 << 30, GPUs: []api.GPU{}},
			want: offers.Offer{Backend: "ssh", Instance: "box", Region: "remote", CPUs: 8, CPUArch: offers.ArchX86, MemoryGB: 32, DiskGB: 100, Availability: offers.AvailabilityIdle},
		},
		{
			name: "an arm host's memory is rounded to a tenth of a GB",
			host: api.HostInfo{Hostname: "pi", Arch: "arm64", CPUs: 4, MemoryBytes: 263856736 << 10},
			want: offers.Offer{Backend: "ssh", Instance: "pi", Region: "remote", CPUs: 4, CPUArch: offers.ArchARM, MemoryGB: 251.6, Availability: offers.AvailabilityIdle},
		},
		{
			name: "NVIDIA GPUs are named and sized by the GPU table",
			host: api.HostInfo{Hostname: "gpu", Arch: "amd64", CPUs: 64, GPUVendor: "nvidia", GPUs: []api.GPU{h100, h100}},
			want: offers.Offer{Backend: "ssh", Instance: "gpu", Region: "remote", CPUs: 64, CPUArch: offers.ArchX86, Availability: offers.AvailabilityIdle,
				GPUVendor: offers.VendorNVIDIA, GPUName: "H100", GPUCount: 2, GPUMemoryGB: 80},
		},
		{
			name: "an A100 named by its SXM module is an A100 80GB",
			host: api.HostInfo{Hostname: "a100", Arch: "amd64", CPUs: 32, GPUVendor: "nvidia", GPUs: []api.GPU{
				{Vendor: "nvidia", Name: "NVIDIA A100-SXM4-80GB", MemoryBytes: 81920 << 20}, {Vendor: "nvidia", Name: "NVIDIA A100-SXM4-80GB", MemoryBytes: 81920 << 20}}},
			want: offers.Offer{Backend: "ssh", Instance: "a100", Region: "remote", CPUs: 32, CPUArch: offers.ArchX86, Availability: offers.AvailabilityIdle,
				GPUVendor: offers.VendorNVIDIA, GPUName: "A100", GPUCount: 2, GPUMemoryGB: 80},
		},
		{
			name: "AMD GPUs keep their vendor",
			host: api.HostInfo{Hostname: "amd", Arch: "amd64", CPUs: 64, GPUVendor: "amd", GPUs: []api.GPU{mi300}},
			want: offers.Offer{Backend: "ssh", Instance: "amd", Region: "remote", CPUs: 64, CPUArch: offers.ArchX86, Availability: offers.AvailabilityIdle,
				GPUVendor: offers.VendorAMD, GPUName: "MI300X", GPUCount: 1, GPUMemoryGB: 192},
		},
		{
			name: "only GPUs of the first GPU's model are counted",
			host: api.HostInfo{Hostname: "mixed", Arch: "amd64", CPUs: 64, GPUVendor: "nvidia", GPUs: []api.GPU{h100, {Vendor: "nvidia", Name: "NVIDIA A10", MemoryBytes: 23028 << 20}, h100}},
			want: offers.Offer{Backend: "ssh", Instance: "mixed", Region: "remote", CPUs: 64, CPUArch: offers.ArchX86, Availability: offers.AvailabilityIdle,
				GPUVendor: offers.VendorNVIDIA, GPUName: "H100", GPUCount: 2, GPUMemoryGB: 80},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, hostoffer.Offer(tt.host, "ssh", "remote")); diff != "" {
				t.Errorf("Offer (-want +got):\n%s", diff)
			}
		})
	}
}
