package offers

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestGroupBy(t *testing.T) {
	list := []Offer{
		{Backend: "aws", Region: "us-east-1", Price: 0.1, CPUs: 2, MemoryGB: 8},
		{Backend: "lambda", Region: "us-east-1", Price: 1.1, GPUCount: 1, GPUName: "A100", GPUMemoryGB: 40},
		{Backend: "aws", Region: "us-west-2", Price: 1.5, GPUCount: 1, GPUName: "A100", GPUMemoryGB: 40, Spot: true},
		{Backend: "lambda", Region: "us-east-1", Price: 8.8, GPUCount: 8, GPUName: "A100", GPUMemoryGB: 40},
		{Backend: "lambda", Region: "us-east-1", Price: 9.0, GPUCount: 8, GPUName: "A100", GPUMemoryGB: 80},
	}
	tests := []struct {
		keys []string
		want []Group
	}{
		{[]string{"gpu"}, []Group{
			{GPU: "-", Backends: []string{"aws"}, Regions: 1, Count: 1, MinPrice: 0.1, MaxPrice: 0.1, OnDemand: true},
			{GPU: "A100:40GB:1..8", Backends: []string{"aws", "lambda"}, Regions: 2, Count: 3, MinPrice: 1.1, MaxPrice: 8.8, Spot: true, OnDemand: true},
			{GPU: "A100:80GB:8", Backends: []string{"lambda"}, Regions: 1, Count: 1, MinPrice: 9, MaxPrice: 9, OnDemand: true},
		}},
		{[]string{"backend", "region"}, []Group{
			{Backend: "aws", Region: "us-east-1", Backends: []string{"aws"}, Regions: 1, Count: 1, MinPrice: 0.1, MaxPrice: 0.1, OnDemand: true},
			{Backend: "lambda", Region: "us-east-1", Backends: []string{"lambda"}, Regions: 1, Count: 3, MinPrice: 1.1, MaxPrice: 9, OnDemand: true},
			{Backend: "aws", Region: "us-west-2", Backends: []string{"aws"}, Regions: 1, Count: 1, MinPrice: 1.5, MaxPrice: 1.5, Spot: true},
		}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, GroupBy(list, tt.keys)); diff != "" {
			t.Errorf("GroupBy(%v) (-want +got):\n%s", tt.keys, diff)
		}
	}
}

func TestParseGroupBy(t *testing.T) {
	got, err := ParseGroupBy(" gpu, region ")
	if err != nil || !cmp.Equal(got, []string{"gpu", "region"}) {
		t.Errorf("ParseGroupBy = %v, %v", got, err)
	}
	for _, bad := range []string{"price", "gpu,gpu"} {
		if _, err := ParseGroupBy(bad); err == nil {
			t.Errorf("ParseGroupBy(%q) succeeded", bad)
		}
	}
	if got, err := ParseGroupBy(""); err != nil || got != nil {
		t.Errorf("ParseGroupBy(\"\") = %v, %v", got, err)
	}
}

func TestQuery_Validate(t *testing.T) {
	if err := (Query{SpotPolicy: SpotPolicyAuto, CPU: Between(2, 8), GPUVendor: VendorAMD}).Validate(); err != nil {
		t.Errorf("valid query rejected: %v", err)
	}
	for _, q := range []Query{
		{SpotPolicy: "sometimes"},
		{CPUArch: "sparc"},
		{GPUVendor: "3dfx"},
		{MaxPrice: -1},
		{Memory: Between(64, 8)},
	} {
		if err := q.Validate(); err == nil {
			t.Errorf("Validate(%+v) accepted", q)
		}
	}
}

func TestRange_String(t *testing.T) {
	for r, want := range map[Range]string{
		Exactly(8): "8", Between(1, 8): "1..8", AtLeast(24): "24..", AtMost(4): "..4", {}: "..",
	} {
		if got := r.String(); got != want {
			t.Errorf("%+v.String() = %q, want %q", r, got, want)
		}
	}
}
