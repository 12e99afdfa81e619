package query

import (
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"hoist/backends/offers"
	"hoist/schema"
)

func TestFilters_Query_grammar(t *testing.T) {
	tests := []struct {
		name string
		f    Filters
		want offers.Query
	}{
		{"A100:80GB:8", Filters{GPU: "A100:80GB:8"}, offers.Query{
			GPUNames: []string{"A100"}, GPUMemory: offers.Exactly(80), GPUCount: offers.Exactly(8)}},
		{"24GB..:2", Filters{GPU: "24GB..:2"}, offers.Query{
			GPUMemory: offers.AtLeast(24), GPUCount: offers.Exactly(2)}},
		{"nvidia:1..8", Filters{GPU: "nvidia:1..8"}, offers.Query{
			GPUVendor: "nvidia", GPUCount: offers.Between(1, 8)}},
		{"MI300X defaults count to 1..", Filters{GPU: "MI300X"}, offers.Query{
			GPUNames: []string{"MI300X"}, GPUCount: offers.AtLeast(1)}},
		{"gpu 0 is CPU-only", Filters{GPU: "0"}, offers.Query{GPUCount: offers.Exactly(0)}},
		{"tpu vendor alias", Filters{GPU: "tpu:v5litepod-8"}, offers.Query{
			GPUVendor: "google", GPUNames: []string{"v5litepod-8"}, GPUCount: offers.AtLeast(1)}},
		{"cpu, memory, disk", Filters{CPU: "arm:8..", Memory: "64GB..512GB", Disk: "1TB.."}, offers.Query{
			CPU: offers.AtLeast(8), CPUArch: "arm", Memory: offers.Between(64, 512), Disk: offers.AtLeast(1024)}},
		{"spot flag and lists", Filters{Spot: true, Backends: []string{"aws,gcp", " lambda "}, Regions: []string{"us-east-1"}, MaxPrice: 2.5, Limit: 10},
			offers.Query{SpotPolicy: "spot", Backends: []string{"aws", "gcp", "lambda"}, Regions: []string{"us-east-1"}, MaxPrice: 2.5, Limit: 10}},
		{"spot policy auto", Filters{SpotPolicy: "AUTO"}, offers.Query{SpotPolicy: "auto"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.f.Query()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Query (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFilters_Query_errors(t *testing.T) {
	for _, f := range []Filters{
		{GPU: "A100:H100"},
		{GPU: "8..2"},
		{CPU: "sparc:4"},
		{Memory: "lots"},
		{Disk: "10XB"},
		{SpotPolicy: "sometimes"},
		{Spot: true, SpotPolicy: "on-demand"},
		{Limit: -1},
		{MaxPrice: -1},
	} {
		if q, err := f.Query(); err == nil {
			t.Errorf("Filters%+v.Query() = %+v, want an error", f, q)
		}
	}
}

// TestFilters_Query_overEmbeddedCatalog runs the examples through
// the grammar against the embedded snapshot; counts were computed
// independently (backends/offers/testdata/expected.py).
func TestFilters_Query_overEmbeddedCatalog(t *testing.T) {
	c, err := offers.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		gpu   string
		count int
	}{
		{"A100:80GB:8", 42},
		{"24GB..:2", 209},
		{"nvidia:1..8", 1584},
		{"MI300X", 0},
		{"0", 11075},
		{"amd", 40},
	} {
		q, err := Filters{GPU: tt.gpu}.Query()
		if err != nil {
			t.Fatal(err)
		}
		if n := c.Count(q); n != tt.count {
			t.Errorf("--gpu %s: %d offers, want %d", tt.gpu, n, tt.count)
		}
	}
}

func TestParseValues(t *testing.T) {
	v, _ := url.ParseQuery("gpu=A100:80GB:8&cpu=32..&memory=256GB..&backend=aws&backend=lambda,verda&region=us-east-1&spot_policy=auto&max_price=30&limit=5&group_by=gpu")
	got, err := ParseValues(v)
	if err != nil {
		t.Fatal(err)
	}
	want := offers.Query{
		GPUNames: []string{"A100"}, GPUMemory: offers.Exactly(80), GPUCount: offers.Exactly(8),
		CPU: offers.AtLeast(32), Memory: offers.AtLeast(256),
		Backends: []string{"aws", "lambda", "verda"}, Regions: []string{"us-east-1"},
		SpotPolicy: "auto", MaxPrice: 30, Limit: 5,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ParseValues (-want +got):\n%s", diff)
	}
	for _, bad := range []string{"gpu=A100:H100", "spot=perhaps", "max_price=cheap", "limit=-2", "gpus=8"} {
		v, _ := url.ParseQuery(bad)
		if _, err := ParseValues(v); err == nil {
			t.Errorf("ParseValues(%s) succeeded", bad)
		}
	}
	if v, _ := url.ParseQuery("spot=true"); true {
		q, err := ParseValues(v)
		if err != nil || q.SpotPolicy != "spot" {
			t.Errorf("spot=true gave %+v, %v", q, err)
		}
	}
}

func TestFromResources_usesSpecDefaults(t *testing.T) {
	gpu, err := schema.ParseGPU("H100:80GB:8")
	if err != nil {
		t.Fatal(err)
	}
	cpu, _ := schema.ParseCPU("x86:96..")
	mem, _ := schema.ParseMemoryRange("1TB..")
	disk, _ := schema.ParseMemoryRange("500GB..")
	gpu.ComputeCapability = []int{9, 0}
	r := schema.Resources{CPU: cpu, Memory: mem, GPU: gpu, Disk: &schema.Disk{Size: disk}}
	got := FromResources(r)
	want := offers.Query{
		CPU: offers.AtLeast(96), CPUArch: "x86", Memory: offers.AtLeast(1024), Disk: offers.AtLeast(500),
		GPUNames: []string{"H100"}, GPUMemory: offers.Exactly(80), GPUCount: offers.Exactly(8),
		ComputeCapability: offers.AtLeast(9),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("FromResources (-want +got):\n%s", diff)
	}
	c, err := offers.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range c.Query(got) {
		if o.GPUName != "H100" || o.GPUCount != 8 || o.CPUs < 96 || o.MemoryGB < 1024 || !strings.EqualFold(o.CPUArch, "x86") {
			t.Fatalf("offer %+v does not satisfy %+v", o, r)
		}
	}
}

func TestFromSpec_addsProfile(t *testing.T) {
	g, err := schema.ParseGPU("A100:8")
	if err != nil {
		t.Fatal(err)
	}
	price := 20.0
	q := FromSpec(schema.Resources{GPU: g}, schema.Profile{Backends: []string{"lambda"}, Regions: []string{"us-east-1"},
		InstanceTypes: []string{"gpu_8x_a100"}, SpotPolicy: "auto", MaxPrice: &price})
	want := offers.Query{GPUNames: []string{"A100"}, GPUCount: offers.Exactly(8), Backends: []string{"lambda"},
		Regions: []string{"us-east-1"}, InstanceTypes: []string{"gpu_8x_a100"}, SpotPolicy: "auto", MaxPrice: 20}
	if diff := cmp.Diff(want, q); diff != "" {
		t.Errorf("FromSpec (-want +got):\n%s", diff)
	}
}
