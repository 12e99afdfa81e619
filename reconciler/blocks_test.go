package reconciler

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"hoist/backends/offers"
	"hoist/backends/offers/query"
	"hoist/schema"
	"hoist/store"
)

func TestSplitBlocks(t *testing.T) {
	tests := []struct {
		name             string
		cpus, gpus, want int
		n                int
		ok               bool
	}{
		{"one block", 4, 2, 1, 1, true},
		{"two blocks of cpus and gpus", 4, 2, 2, 2, true},
		{"auto takes the gpus", 8, 2, 0, 2, true},
		{"auto takes the cpus when fewer than gpus", 2, 8, 0, 2, true},
		{"auto without gpus takes the cpus", 6, 0, 0, 6, true},
		{"gpus not divisible", 4, 3, 2, 0, false},
		{"cpus not divisible", 3, 2, 2, 0, false},
		{"more blocks than gpus", 8, 2, 4, 0, false},
		{"cpu-only host split", 8, 0, 4, 4, true},
		{"no cpus", 0, 0, 0, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, ok := splitBlocks(tt.cpus, tt.gpus, tt.want)
			if n != tt.n || ok != tt.ok {
				t.Errorf("splitBlocks(%d, %d, %d) = %d, %t; want %d, %t", tt.cpus, tt.gpus, tt.want, n, ok, tt.n, tt.ok)
			}
		})
	}
}

// gpuHost is a host of 8 CPUs, 32 GB and 2 GPUs.
var gpuHost = offers.Offer{Instance: "host", CPUs: 8, MemoryGB: 32, DiskGB: 100, GPUCount: 2, GPUVendor: "nvidia", GPUName: "A10", GPUMemoryGB: 24}

func TestShareOffer(t *testing.T) {
	tests := []struct {
		name     string
		o        offers.Offer
		k, total int
		want     offers.Offer
	}{
		{"whole instance", gpuHost, 1, 1, gpuHost},
		{"one of two blocks halves cpus, memory and gpus, not the disk", gpuHost, 1, 2,
			offers.Offer{Instance: "host", CPUs: 4, MemoryGB: 16, DiskGB: 100, GPUCount: 1, GPUVendor: "nvidia", GPUName: "A10", GPUMemoryGB: 24}},
		{"both blocks", gpuHost, 2, 2, gpuHost},
		{"a cpu block of a gpu host has no gpu", gpuHost, 1, 8,
			offers.Offer{Instance: "host", CPUs: 1, MemoryGB: 4, DiskGB: 100}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, shareOffer(tt.o, tt.k, tt.total)); diff != "" {
				t.Errorf("shareOffer (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBlocksFor(t *testing.T) {
	gpus := func(n float64) schema.Resources {
		one := 1.0
		var r schema.Resources
		r.CPU.Count = schema.Range{Min: &one}
		r.Memory = schema.Range{Min: &one}
		r.GPU.Count = schema.Range{Min: &n, Max: &n}
		return r
	}
	q := func(r schema.Resources) offers.Query { return query.FromSpec(r, schema.Profile{}) }
	tests := []struct {
		name      string
		total     int
		q         offers.Query
		multinode bool
		want      int
	}{
		{"one gpu takes one of two blocks", 2, q(gpus(1)), false, 1},
		{"two gpus take both blocks", 2, q(gpus(2)), false, 2},
		{"three gpus fit no share", 2, q(gpus(3)), false, 0},
		{"a multi-node job takes the whole instance", 2, q(gpus(1)), true, 0},
		{"a multi-node job asking the whole instance gets it", 2, q(gpus(2)), true, 2},
		{"an unsplit instance is one block", 1, q(gpus(2)), false, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := blocksFor(gpuHost, tt.total, tt.q, tt.multinode); got != tt.want {
				t.Errorf("blocksFor = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestInstanceBlocks(t *testing.T) {
	fleet := func(spec schema.Fleet) store.Fleet {
		b, err := json.Marshal(spec)
		if err != nil {
			t.Fatal(err)
		}
		return store.Fleet{Name: "f", Spec: b}
	}
	auto, one := 0, 1
	ssh := schema.Fleet{Name: "f", Blocks: 2, SSHConfig: &schema.SSHConfig{Hosts: []schema.SSHHost{
		{Hostname: "a"}, {Hostname: "b", Blocks: &auto}, {Hostname: "c", Blocks: &one}}}}
	host := func(name string) store.Instance { return store.Instance{Hostname: name} }
	tests := []struct {
		name    string
		f       store.Fleet
		inst    store.Instance
		o       offers.Offer
		want    int
		wantErr bool
	}{
		{"fleet blocks", fleet(schema.Fleet{Name: "f", Blocks: 2}), host(""), gpuHost, 2, false},
		{"fleet auto", fleet(schema.Fleet{Name: "f", Blocks: 0}), host(""), gpuHost, 2, false},
		{"not divisible", fleet(schema.Fleet{Name: "f", Blocks: 4}), host(""), gpuHost, 0, true},
		{"amd gpus are not split", fleet(schema.Fleet{Name: "f", Blocks: 2}), host(""), offers.Offer{CPUs: 8, GPUCount: 2, GPUVendor: "amd"}, 0, true},
		{"unsplit amd host", fleet(schema.Fleet{Name: "f", Blocks: 1}), host(""), offers.Offer{CPUs: 8, GPUCount: 2, GPUVendor: "amd"}, 1, false},
		{"unsplit fleet", fleet(schema.Fleet{Name: "f", Blocks: 1}), host(""), gpuHost, 1, false},
		{"ssh host takes the fleet's", fleet(ssh), host("a"), gpuHost, 2, false},
		{"ssh host's own auto", fleet(ssh), host("b"), offers.Offer{CPUs: 8}, 8, false},
		{"ssh host's own one", fleet(ssh), host("c"), gpuHost, 1, false},
		{"the server's own fleet has no spec", store.Fleet{Name: "local"}, host(""), gpuHost, 1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := instanceBlocks(tt.f, tt.inst, tt.o)
			if got != tt.want || (err != nil) != tt.wantErr {
				t.Errorf("instanceBlocks = %d, %v; want %d, error %t", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestDivisibleOffers(t *testing.T) {
	three := offers.Offer{Instance: "three", CPUs: 6, GPUCount: 3}
	amd := offers.Offer{Instance: "amd", CPUs: 8, GPUCount: 2, GPUVendor: "amd"}
	all := []offers.Offer{gpuHost, three}
	if got := divisibleOffers([]offers.Offer{gpuHost, amd}, 2); len(got) != 1 || got[0].Instance != "host" {
		t.Errorf("two blocks of nvidia and amd offers kept %v, want the nvidia one", got)
	}
	if got := divisibleOffers(all, 1); len(got) != 2 {
		t.Errorf("one block kept %d offers, want both", len(got))
	}
	if got := divisibleOffers(all, 2); len(got) != 1 || got[0].Instance != "host" {
		t.Errorf("two blocks kept %v, want host only", got)
	}
	if got := divisibleOffers(all, 0); len(got) != 2 {
		t.Errorf("auto kept %d offers, want both", len(got))
	}
}
