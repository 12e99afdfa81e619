package offers

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"
)

// brief identifies an offer in expectations.
type brief struct {
	Backend, Instance, Region string
	Price                     float64
}

func briefOf(o Offer) brief { return brief{o.Backend, o.Instance, o.Region, o.Price} }

func mustEmbedded(t testing.TB) *Catalog {
	t.Helper()
	c, err := Embedded()
	if err != nil {
		t.Fatalf("Embedded: %v", err)
	}
	return c
}

// TestCatalog_Query_handComputed checks query semantics against answers
// computed independently over the shared CSVs (testdata/expected.py):
// the number of offers, the three cheapest and the most expensive.
func TestCatalog_Query_handComputed(t *testing.T) {
	c := mustEmbedded(t)
	tests := []struct {
		name  string
		q     Query
		count int
		want  []brief // three cheapest, then the most expensive
	}{
		{
			name:  "A100:80GB:8 is eight 80 GB A100s on demand",
			q:     Query{GPUNames: []string{"A100"}, GPUMemory: Exactly(80), GPUCount: Exactly(8)},
			count: 42,
			want: []brief{
				{"primeintellect", "latitude__8xA100_80GB__128__1536", "FRA", 8.28},
				{"gcp", "a2-ultragpu-8g", "us-central1", 8.79698},
				{"gcp", "a2-ultragpu-8g", "us-east5", 8.79698},
				{"aws", "p4de.24xlarge", "il-central-1", 53.09472},
			},
		},
		{
			name:  "24GB..:2 is two GPUs of at least 24 GB each",
			q:     Query{GPUMemory: AtLeast(24), GPUCount: Exactly(2)},
			count: 209,
			want: []brief{
				{"vastai", "2x-RTX_3090-32-65536", "Quebec, CA, NA", 0.33},
				{"cudo", "ice-lake-rtx-a5000_2x8v16gb", "ca-montreal-3", 0.6592},
				{"cudo", "ice-lake-rtx-a5000_2x16v32gb", "ca-montreal-3", 0.7384},
				{"azure", "Standard_NC80adis_H100_v5", "southcentralus", 16.76},
			},
		},
		{
			name:  "nvidia:1..8 excludes CPU rows and AMD Radeon rows",
			q:     Query{GPUVendor: VendorNVIDIA, GPUCount: Between(1, 8)},
			count: 1584,
			want: []brief{
				{"vastai", "1x-RTX_4060_Ti-32-65536", "United Kingdom, GB, EU", 0.13},
				{"verda", "1V100.6V", "FIN-01", 0.1381},
				{"primeintellect", "datacrunch__1xV100_16GB__6__23", "FIN-01", 0.14},
				{"aws", "p5.48xlarge", "us-west-2", 98.32},
			},
		},
		{
			name:  "MI300X matches nothing in the snapshot",
			q:     Query{GPUNames: []string{"MI300X"}, GPUCount: AtLeast(1)},
			count: 0,
		},
		{
			name:  "gpu 0 is every CPU-only on-demand offer",
			q:     Query{GPUCount: Exactly(0)},
			count: 11075,
			want: []brief{
				{"aws", "t4g.nano", "ap-south-1", 0.0028},
				{"aws", "t4g.nano", "ap-south-2", 0.0028},
				{"aws", "t3a.nano", "ap-south-1", 0.0031},
				{"aws", "u-24tb1.112xlarge", "ap-northeast-2", 263.47},
			},
		},
		{
			name:  "amd finds the Radeon Pro V520 rows the legacy file left vendor-less",
			q:     Query{GPUVendor: VendorAMD, GPUCount: AtLeast(1)},
			count: 40,
			want: []brief{
				{"aws", "g4ad.xlarge", "us-east-1", 0.37853},
				{"aws", "g4ad.xlarge", "us-east-2", 0.37853},
				{"aws", "g4ad.xlarge", "us-west-2", 0.37853},
				{"aws", "g4ad.16xlarge", "ap-northeast-1", 4.68},
			},
		},
		{
			name:  "cpu-only with 64.. vCPUs and 256GB.. memory",
			q:     Query{GPUCount: Exactly(0), CPU: AtLeast(64), Memory: AtLeast(256)},
			count: 2275,
			want: []brief{
				{"verda", "CPU.180V.720G", "FIN-02", 1.256},
				{"nebius", "cpu-d3_64vcpu-256gb", "eu-north1", 1.5872},
				{"nebius", "cpu-e2_64vcpu-256gb", "eu-north1", 1.5872},
				{"aws", "u-24tb1.112xlarge", "ap-northeast-2", 263.47},
			},
		},
		{
			name:  "spot policy spot keeps only spot rows",
			q:     Query{GPUNames: []string{"h100"}, GPUCount: AtLeast(1), SpotPolicy: SpotPolicySpot},
			count: 64,
			want: []brief{
				{"gcp", "a3-highgpu-1g", "europe-north1", 0.2022},
				{"gcp", "a3-highgpu-1g", "europe-west8", 0.2469},
				{"gcp", "a3-highgpu-1g", "us-east4", 0.26996},
				{"azure", "Standard_NC80adis_H100_v5", "southcentralus", 16.76},
			},
		},
		{
			name:  "spot policy auto mixes spot and on-demand, backend alias resolved",
			q:     Query{GPUNames: []string{"B300"}, GPUCount: AtLeast(1), SpotPolicy: SpotPolicyAuto, Backends: []string{"datacrunch"}},
			count: 5,
			want: []brief{
				{"verda", "1B300.30V", "FIN-03", 2.447},
				{"verda", "2B300.60V", "FIN-03", 4.893},
				{"verda", "1B300.30V", "FIN-03", 6.99},
				{"verda", "4B300.120V", "FIN-03", 27.96},
			},
		},
		{
			name:  "arm CPUs on lambda (GH200) via the lambdalabs alias",
			q:     Query{CPUArch: ArchARM, Backends: []string{"lambdalabs"}},
			count: 17,
			want: []brief{
				{"lambda", "gpu_1x_gh200", "asia-northeast-1", 2.29},
				{"lambda", "gpu_1x_gh200", "asia-northeast-2", 2.29},
				{"lambda", "gpu_1x_gh200", "asia-south-1", 2.29},
				{"lambda", "gpu_1x_gh200", "us-west-3", 2.29},
			},
		},
		{
			name:  "max price is inclusive",
			q:     Query{GPUCount: AtLeast(1), MaxPrice: 0.5},
			count: 54,
			want: []brief{
				{"vastai", "1x-RTX_4060_Ti-32-65536", "United Kingdom, GB, EU", 0.13},
				{"verda", "1V100.6V", "FIN-01", 0.1381},
				{"primeintellect", "datacrunch__1xV100_16GB__6__23", "FIN-01", 0.14},
				{"primeintellect", "hyperstack__1xA6000_48GB__28__58", "CANADA-1", 0.5},
			},
		},
		{
			name:  "total GPU memory 640GB..",
			q:     Query{GPUCount: AtLeast(1), GPUTotalMemory: AtLeast(640)},
			count: 134,
			want: []brief{
				{"cudo", "intel-ice-lake-a800-pci_8x64v128gb", "us-carlsbad-1", 7.1488},
				{"cudo", "intel-ice-lake-a800-pci_8x96v192gb", "us-carlsbad-1", 7.5232},
				{"mithril", "h100-80gb.sxm.8x", "us-central2-a", 8.0},
				{"aws", "p5.48xlarge", "us-west-2", 98.32},
			},
		},
		{
			name:  "gpu 0.. with a name keeps CPU rows, as gpuhunt",
			q:     Query{GPUNames: []string{"H100"}, GPUCount: AtLeast(0)},
			count: 11282,
			want: []brief{
				{"aws", "t4g.nano", "ap-south-1", 0.0028},
				{"aws", "t4g.nano", "ap-south-2", 0.0028},
				{"aws", "t3a.nano", "ap-south-1", 0.0031},
				{"aws", "u-24tb1.112xlarge", "ap-northeast-2", 263.47},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := c.Query(tt.q)
			if len(got) != tt.count {
				t.Fatalf("Query returned %d offers, want %d", len(got), tt.count)
			}
			if n := c.Count(tt.q); n != tt.count {
				t.Errorf("Count = %d, want %d", n, tt.count)
			}
			if tt.count == 0 {
				return
			}
			var gotBrief []brief
			for _, o := range append(got[:3:3], got[len(got)-1]) {
				gotBrief = append(gotBrief, briefOf(o))
			}
			if diff := cmp.Diff(tt.want, gotBrief); diff != "" {
				t.Errorf("cheapest three and most expensive (-want +got):\n%s", diff)
			}
			checkSorted(t, got)
		})
	}
}

func checkSorted(t *testing.T, got []Offer) {
	t.Helper()
	for i := 1; i < len(got); i++ {
		if less(&got[i-1], &got[i]) > 0 {
			t.Fatalf("offers %d and %d out of order: %+v then %+v", i-1, i, got[i-1], got[i])
		}
		if got[i-1].Price > got[i].Price {
			t.Fatalf("offer %d costs %v, more than the next one (%v)", i-1, got[i-1].Price, got[i].Price)
		}
	}
}

func TestCatalog_Query_limitStopsAtCheapest(t *testing.T) {
	c := mustEmbedded(t)
	q := Query{GPUCount: AtLeast(1)}
	all := c.Query(q)
	q.Limit = 5
	got := c.Query(q)
	if diff := cmp.Diff(all[:5], got); diff != "" {
		t.Errorf("limited query is not the head of the full one (-want +got):\n%s", diff)
	}
}

func TestCatalog_Query_filters(t *testing.T) {
	c := mustEmbedded(t)
	tests := []struct {
		name  string
		q     Query
		check func(Offer) bool
	}{
		{"regions are case-insensitive", Query{Regions: []string{"FIN-01", "eu-NORTH1"}},
			func(o Offer) bool { return o.Region == "FIN-01" || o.Region == "eu-north1" }},
		{"a region selects its zones", Query{Regions: []string{"us-central2"}, SpotPolicy: SpotPolicyAuto},
			func(o Offer) bool { return o.Region == "us-central2-a" || o.Region == "us-central2-b" }},
		{"instance types are case-insensitive", Query{InstanceTypes: []string{"P4DE.24XLARGE"}},
			func(o Offer) bool { return o.Instance == "p4de.24xlarge" }},
		{"compute capability 9.0.. means Hopper or newer", Query{GPUCount: AtLeast(1), ComputeCapability: AtLeast(9)},
			func(o Offer) bool { cc, ok := computeCapability(o.GPUName); return ok && cc >= 9 }},
		{"names are normalized on both sides", Query{GPUNames: []string{"RTX-A6000"}, GPUCount: AtLeast(1)},
			func(o Offer) bool { return o.GPUName == "A6000" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := c.Query(tt.q)
			if len(got) == 0 {
				t.Fatal("no offers")
			}
			for _, o := range got {
				if !tt.check(o) {
					t.Fatalf("offer %+v does not satisfy the filter", o)
				}
			}
			checkSorted(t, got)
		})
	}
}

func TestCatalog_Query_unknownValuesMatchNothing(t *testing.T) {
	c := mustEmbedded(t)
	for _, q := range []Query{
		{Backends: []string{"nosuchcloud"}},
		{Regions: []string{"mars-1"}},
		{InstanceTypes: []string{"x9.huge"}},
		{GPUVendor: VendorIntel, GPUCount: AtLeast(1)},
	} {
		if got := c.Query(q); len(got) != 0 {
			t.Errorf("Query(%+v) = %d offers, want none", q, len(got))
		}
	}
}

// genQuery draws queries over the values present in the catalog.
func genQuery(c *Catalog) *rapid.Generator[Query] {
	backends := c.Backends()
	regions := []string{"us-east-1", "FIN-01", "eu-north1", "us-west-2", "CANADA-1", "Texas, US, NA", "us-central2", "us-east1-a"}
	names := []string{"A100", "H100", "t4", "RTX4090", "L40S", "V520", "B200"}
	rng := func(t *rapid.T, label string, hi float64) Range {
		var r Range
		if rapid.Bool().Draw(t, label+"_hasmin") {
			r.Min, r.HasMin = float64(rapid.IntRange(0, int(hi)).Draw(t, label+"_min")), true
		}
		if rapid.Bool().Draw(t, label+"_hasmax") {
			r.Max, r.HasMax = float64(rapid.IntRange(int(r.Min), int(hi)).Draw(t, label+"_max")), true
		}
		return r
	}
	return rapid.Custom(func(t *rapid.T) Query {
		q := Query{
			CPU:            rng(t, "cpu", 256),
			Memory:         rng(t, "mem", 2048),
			GPUCount:       rng(t, "gpus", 9),
			GPUMemory:      rng(t, "gmem", 200),
			GPUTotalMemory: rng(t, "tmem", 1600),
			Disk:           rng(t, "disk", 1000),
			SpotPolicy:     rapid.SampledFrom([]string{"", SpotPolicySpot, SpotPolicyOnDemand, SpotPolicyAuto}).Draw(t, "spot"),
			CPUArch:        rapid.SampledFrom([]string{"", ArchX86, ArchARM}).Draw(t, "arch"),
			GPUVendor:      rapid.SampledFrom([]string{"", "", VendorNVIDIA, VendorAMD}).Draw(t, "vendor"),
			Limit:          rapid.SampledFrom([]int{0, 0, 1, 10}).Draw(t, "limit"),
		}
		if rapid.Bool().Draw(t, "price") {
			q.MaxPrice = rapid.Float64Range(0.01, 50).Draw(t, "maxprice")
		}
		if rapid.Bool().Draw(t, "cc") {
			q.ComputeCapability = AtLeast(rapid.SampledFrom([]float64{7, 8, 8.6, 9, 10}).Draw(t, "ccmin"))
		}
		sub := func(label string, from []string) []string {
			if !rapid.Bool().Draw(t, label) {
				return nil
			}
			return rapid.SliceOfNDistinct(rapid.SampledFrom(from), 1, 3, rapid.ID).Draw(t, label+"_vals")
		}
		q.Backends = sub("backends", backends)
		q.Regions = sub("regions", regions)
		q.GPUNames = sub("names", names)
		return q
	})
}

// TestCatalog_Query_agreesWithScan checks the indexed query against the
// reference semantics (Filter: scan every offer, then sort).
func TestCatalog_Query_agreesWithScan(t *testing.T) {
	c := mustEmbedded(t)
	all := c.All()
	gen := genQuery(c)
	rapid.Check(t, func(t *rapid.T) {
		q := gen.Draw(t, "q")
		want := Filter(all, q)
		got := c.Query(q)
		if len(want) != len(got) {
			t.Fatalf("Query returned %d offers, scan %d", len(got), len(want))
		}
		for i := range want {
			if less(&want[i], &got[i]) != 0 {
				t.Fatalf("offer %d differs: query %+v, scan %+v", i, got[i], want[i])
			}
		}
	})
}

func TestNew_strictOrderIndependentOfInput(t *testing.T) {
	c := mustEmbedded(t)
	tables := c.Tables()
	rng := rand.New(rand.NewPCG(1, 2))
	var shuffled []*Table
	for _, tb := range tables {
		cp := *tb
		cp.Offers = slices.Clone(tb.Offers)
		rng.Shuffle(len(cp.Offers), func(i, j int) { cp.Offers[i], cp.Offers[j] = cp.Offers[j], cp.Offers[i] })
		shuffled = append(shuffled, &cp)
	}
	slices.Reverse(shuffled)
	c2 := New("", shuffled...)
	a, b := c.All(), c2.All()
	for i := range a {
		if less(&a[i], &b[i]) != 0 {
			t.Fatalf("offer %d differs after shuffling the input: %+v vs %+v", i, a[i], b[i])
		}
	}
}

func TestEmbedded_snapshotDateAndSources(t *testing.T) {
	c := mustEmbedded(t)
	if got := c.SnapshotDate(); got != "2026-11-21" {
		t.Errorf("SnapshotDate = %q, want 2026-11-21", got)
	}
	var names []string
	total := 0
	for _, s := range c.Sources() {
		names = append(names, s.Backend)
		total += s.Rows
		if s.Skipped != 0 {
			t.Errorf("%s: %d rows skipped", s.Provider, s.Skipped)
		}
	}
	want := []string{"aws", "azure", "cudo", "gcp", "hyperstack", "jarvislabs", "lambda", "mithril", "nebius", "primeintellect", "vastai", "verda"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("sources (-want +got):\n%s", diff)
	}
	if total != 13309 || c.Len() != total {
		t.Errorf("rows = %d (catalog %d), want 13309", total, c.Len())
	}
	if u := c.UnknownGPUs(); len(u) != 0 {
		t.Errorf("snapshot has GPUs the knowledge table does not know: %v", u)
	}
}

func TestLoadDir_replacesEmbeddedAndSkipsBadRows(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "mycloud.csv", strings.Join([]string{
		strings.Join(CSVColumns, ","),
		`big,r1,2.5,8,32.0,1,A100-80GB,,False,,,,x86,{}`,
		`small,r1,0.5,2,8.0,0,,,False,,,,x86,{}`,
		`broken,r1,not-a-price,2,8.0,0,,,False,,,,x86,{}`,
		`weird,r2,1.5,4,16.0,2,FancyGPU 9000,12.0,True,200.0,nvidia,,x86,{}`,
	}, "\n")+"\n")
	write(t, dir, "VERSION", "20261122-7\n")
	c, err := LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if c.SnapshotDate() != "2026-11-22" {
		t.Errorf("SnapshotDate = %q", c.SnapshotDate())
	}
	src := c.Sources()
	if len(src) != 1 || src[0].Rows != 3 || src[0].Skipped != 1 || src[0].Version != "20261122-7" {
		t.Errorf("Sources = %+v, want one with 3 rows, 1 skipped, version 20261122-7", src)
	}
	got := c.Query(Query{SpotPolicy: SpotPolicyAuto})
	var order []string
	for _, o := range got {
		order = append(order, o.Instance)
	}
	if diff := cmp.Diff([]string{"small", "weird", "big"}, order); diff != "" {
		t.Errorf("order (-want +got):\n%s", diff)
	}
	big := got[2]
	if big.GPUName != "A100" || big.GPUMemoryGB != 80 || big.GPUVendor != VendorNVIDIA {
		t.Errorf("A100-80GB normalized to %q %v GB %q, want A100 80 GB nvidia", big.GPUName, big.GPUMemoryGB, big.GPUVendor)
	}
	if diff := cmp.Diff(map[string]int{"FancyGPU9000": 1}, c.UnknownGPUs()); diff != "" {
		t.Errorf("UnknownGPUs (-want +got):\n%s", diff)
	}
	if n := len(c.Query(Query{GPUNames: []string{"FancyGPU 9000"}, GPUCount: AtLeast(1), SpotPolicy: SpotPolicySpot})); n != 1 {
		t.Errorf("unknown GPU is not queryable by its name: %d offers", n)
	}
}

func TestLoadDir_emptyDirFails(t *testing.T) {
	if _, err := LoadDir(t.TempDir()); err == nil {
		t.Fatal("LoadDir of an empty directory succeeded")
	}
}

func TestEmbedded_integrity(t *testing.T) {
	c := mustEmbedded(t)
	for _, tb := range c.Tables() {
		if err := CheckTable(tb); err != nil {
			t.Error(err)
		}
	}
	// gpuhunt-style expectations per provider.
	has := func(backend string, pred func(Offer) bool) int {
		n := 0
		for _, o := range c.Query(Query{Backends: []string{backend}, SpotPolicy: SpotPolicyAuto}) {
			if pred(o) {
				n++
			}
		}
		return n
	}
	lambdaRegions := map[string]bool{}
	for _, o := range c.Query(Query{Backends: []string{"lambda"}}) {
		lambdaRegions[o.Region] = true
	}
	if len(lambdaRegions) != 17 {
		t.Errorf("lambda has %d regions, want 17", len(lambdaRegions))
	}
	for _, gpu := range []string{"A10", "A100", "H100"} {
		if has("lambda", func(o Offer) bool { return o.GPUName == gpu }) == 0 {
			t.Errorf("lambda has no %s offers", gpu)
		}
	}
	if has("lambda", func(o Offer) bool { return o.Spot }) != 0 {
		t.Error("lambda has spot offers")
	}
	for _, region := range []string{"FIN-01", "FIN-02"} {
		if has("verda", func(o Offer) bool { return o.Region == region }) <= 1 {
			t.Errorf("verda has at most one offer in %s", region)
		}
	}
	if has("verda", func(o Offer) bool { return o.Spot }) <= 1 || has("verda", func(o Offer) bool { return !o.Spot }) <= 1 {
		t.Error("verda lacks spot or on-demand offers")
	}
	for _, it := range []string{"m5.large", "p4d.24xlarge", "g5.xlarge"} {
		if has("aws", func(o Offer) bool { return o.Instance == it }) == 0 {
			t.Errorf("aws has no %s", it)
		}
	}
	if has("nebius", func(o Offer) bool { return o.GPUCount == 0 }) == 0 {
		t.Error("nebius has no CPU offers")
	}
}

func TestCheckTable_reportsEachProblem(t *testing.T) {
	cols := CSVColumns
	tests := []struct {
		name string
		rows []Offer
		want string
	}{
		{"empty", nil, "no offers"},
		{"bad price", []Offer{{Instance: "i", Region: "us-east-1", Price: 0, CPUs: 1, MemoryGB: 1}}, "price 0 is not positive"},
		{"unknown region shape", []Offer{{Instance: "i", Region: "Mars", Price: 1, CPUs: 1, MemoryGB: 1}}, `not a known aws region`},
		{"gpu without vendor", []Offer{{Instance: "i", Region: "us-east-1", Price: 1, CPUs: 1, MemoryGB: 1, GPUCount: 1, GPUName: "T4", GPUMemoryGB: 16}}, "without gpu_vendor"},
		{"gpu fields on cpu row", []Offer{{Instance: "i", Region: "us-east-1", Price: 1, CPUs: 1, MemoryGB: 1, GPUName: "T4"}}, "GPU fields set"},
		{"gpu without memory", []Offer{{Instance: "i", Region: "us-east-1", Price: 1, CPUs: 1, MemoryGB: 1, GPUCount: 1, GPUName: "T4", GPUVendor: "nvidia"}}, "without name or memory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckTable(&Table{Provider: "aws", Offers: tt.rows, Columns: cols})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("CheckTable = %v, want an error containing %q", err, tt.want)
			}
		})
	}
	good := []Offer{{Instance: "i", Region: "us-east-1", Price: 1, CPUs: 1, MemoryGB: 1, GPUCount: 1, GPUName: "T4", GPUMemoryGB: 16, GPUVendor: "nvidia"}}
	if err := CheckTable(&Table{Provider: "aws", Offers: good, Columns: cols}); err != nil {
		t.Errorf("CheckTable of a good table: %v", err)
	}
}

func BenchmarkEmbeddedLoad(b *testing.B) {
	for b.Loop() {
		if _, err := loadEmbedded(); err != nil {
			b.Fatal(err)
		}
	}
}

func ExampleCatalog_Query() {
	c, _ := Embedded()
	for _, o := range c.Query(Query{GPUNames: []string{"H100"}, GPUCount: Exactly(8), Limit: 2}) {
		fmt.Printf("%s %s %s $%.2f\n", o.Backend, o.Instance, o.Region, o.Price)
	}
	// Output:
	// mithril h100-80gb.sxm.8x us-central2-a $8.00
	// gcp a3-edgegpu-8g us-central1 $9.46
}

// TestCatalog_rowMatch_agreesWithOfferMatch checks the compact-row filter
// against the reference one on every row, independent of index choice.
func TestCatalog_rowMatch_agreesWithOfferMatch(t *testing.T) {
	c := mustEmbedded(t)
	gen := genQuery(c)
	rapid.Check(t, func(t *rapid.T) {
		q := gen.Draw(t, "q")
		rm, m := c.compile(q), newMatcher(q)
		for i := range c.rows {
			if got, want := !rm.none && rm.match(&c.rows[i], c, i), m.match(&c.offers[i]); got != want {
				t.Fatalf("row %d (%+v): row match %v, offer match %v", i, c.offers[i], got, want)
			}
		}
	})
}

func TestOffer_jsonRoundTripIsLossless(t *testing.T) {
	in := Offer{Backend: "lambda", Instance: "gpu_1x_gh200", Region: "us-east-3", Price: 1.49, CPUs: 64, CPUArch: ArchARM,
		MemoryGB: 463, GPUVendor: VendorNVIDIA, GPUName: "GH200", GPUCount: 1, GPUMemoryGB: 96, DiskGB: 4096,
		Availability: AvailabilityIdle, Flags: []string{"lambda-arm"}}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var out Offer
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(in, out); diff != "" {
		t.Errorf("JSON round trip (-in +out):\n%s", diff)
	}
}
