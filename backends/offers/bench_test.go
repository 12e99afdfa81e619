package offers

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"
)

// bigTables replicates the embedded snapshot's real rows across synthetic
// regions until there are at least 200,000 rows.
var bigTables = sync.OnceValue(func() []*Table {
	c, err := Embedded()
	if err != nil {
		panic(err)
	}
	var out []*Table
	total := 0
	for rep := 0; total < 200_000; rep++ {
		for _, t := range c.Tables() {
			cp := *t
			cp.Offers = make([]Offer, len(t.Offers))
			for i, o := range t.Offers {
				if rep > 0 {
					o.Region = fmt.Sprintf("%s-syn%02d", o.Region, rep)
				}
				cp.Offers[i] = o
			}
			cp.ProviderData = nil
			total += len(cp.Offers)
			out = append(out, &cp)
		}
	}
	return out
})

var bigCatalog = sync.OnceValue(func() *Catalog { return New("", bigTables()...) })

// benchQueries are the examples plus broad ones.
var benchQueries = []struct {
	name string
	q    Query
}{
	{"A100:80GB:8", Query{GPUNames: []string{"A100"}, GPUMemory: Exactly(80), GPUCount: Exactly(8)}},
	{"24GB..:2", Query{GPUMemory: AtLeast(24), GPUCount: Exactly(2)}},
	{"nvidia:1..8", Query{GPUVendor: VendorNVIDIA, GPUCount: Between(1, 8)}},
	{"MI300X", Query{GPUNames: []string{"MI300X"}, GPUCount: AtLeast(1)}},
	{"H100:8 spot", Query{GPUNames: []string{"H100"}, GPUCount: Exactly(8), SpotPolicy: SpotPolicySpot}},
	{"backend lambda region us-east-1", Query{Backends: []string{"lambda"}, Regions: []string{"us-east-1"}}},
	{"gpu 0 cpu 64.. mem 256GB..", Query{GPUCount: Exactly(0), CPU: AtLeast(64), Memory: AtLeast(256)}},
	{"gpu 0", Query{GPUCount: Exactly(0)}},
	{"gpu 0 limit 50", Query{GPUCount: Exactly(0), Limit: 50}},
	{"gpu 1.. limit 50", Query{GPUCount: AtLeast(1), Limit: 50}},
	{"everything", Query{SpotPolicy: SpotPolicyAuto}},
}

// BenchmarkQuery200k compares the indexed query with a plain
// scan-filter-sort (Filter: match every offer, sort the matches) over the
// same 200,000+ rows. The two run alternately in each iteration so machine
// load affects both alike; index/scan is the ratio of their wall times
// (goal: at most 0.1), index/scan-cpu the ratio of their CPU times on the
// benchmark's thread, which a loaded machine disturbs less.
func BenchmarkQuery200k(b *testing.B) {
	c := bigCatalog()
	all := c.All()
	b.Logf("catalog rows: %d", c.Len())
	for _, bq := range benchQueries {
		n := len(c.Query(bq.q))
		b.Run(bq.name, func(b *testing.B) {
			runtime.LockOSThread() // so threadCPU measures this goroutine
			defer runtime.UnlockOSThread()
			var ti, ts, ci, cs time.Duration
			for b.Loop() {
				m := queryAndScan(c, all, bq.q)
				ti, ts = ti+m.index, ts+m.scan
				ci, cs = ci+m.indexCPU, cs+m.scanCPU
			}
			b.ReportMetric(float64(n), "offers")
			b.ReportMetric(float64(ti.Nanoseconds())/float64(b.N), "index-ns/op")
			b.ReportMetric(float64(ts.Nanoseconds())/float64(b.N), "scan-ns/op")
			b.ReportMetric(float64(ti)/float64(ts), "index/scan")
			if cs > 0 {
				b.ReportMetric(float64(ci)/float64(cs), "index/scan-cpu")
			}
		})
	}
}

// queryTimes are the wall and thread CPU times of one indexed query and of
// the plain scan answering the same query.
type queryTimes struct{ index, scan, indexCPU, scanCPU time.Duration }

// queryAndScan answers q with the catalog's index, then with a plain
// scan-filter-sort of all, and times each. Lock the OS thread for the CPU
// times to be the calling goroutine's.
func queryAndScan(c *Catalog, all []Offer, q Query) queryTimes {
	t0, c0 := time.Now(), threadCPU()
	c.Query(q)
	t1, c1 := time.Now(), threadCPU()
	Filter(all, q)
	t2, c2 := time.Now(), threadCPU()
	return queryTimes{index: t1.Sub(t0), scan: t2.Sub(t1), indexCPU: c1 - c0, scanCPU: c2 - c1}
}

// BenchmarkTable_offersQuery200k answers every benchQueries query over the
// 200,000-row catalog with the index, and with a linear filter and sort of
// the same rows in a slice, alternately, five rounds; it reports the median
// round's total of each. Run with -benchtime 1x; go tool task bench prints
// it in the table.
func BenchmarkTable_offersQuery200k(b *testing.B) {
	c := bigCatalog()
	all := c.All()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var index, scan []float64
	for range 5 {
		var ti, ts time.Duration
		for _, bq := range benchQueries {
			m := queryAndScan(c, all, bq.q)
			ti, ts = ti+m.index, ts+m.scan
		}
		index = append(index, float64(ti)/float64(time.Millisecond))
		scan = append(scan, float64(ts)/float64(time.Millisecond))
	}
	slices.Sort(index)
	slices.Sort(scan)
	b.ReportMetric(index[len(index)/2], "hoist-ms")
	b.ReportMetric(scan[len(scan)/2], "ref-ms")
}

// BenchmarkBuild200k measures building (sort + index) a 200,000-row catalog
// from parsed tables: the cost of swapping in a refreshed catalog.
func BenchmarkBuild200k(b *testing.B) {
	tables := bigTables()
	for b.Loop() {
		New("", tables...)
	}
}

// BenchmarkFirstQuery measures a cold start: parsing the embedded snapshot,
// building its catalog and answering one query (goal: well under 200 ms).
func BenchmarkFirstQuery(b *testing.B) {
	q := Query{GPUNames: []string{"A100"}, GPUMemory: Exactly(80), GPUCount: Exactly(8)}
	for b.Loop() {
		c, err := loadEmbedded()
		if err != nil {
			b.Fatal(err)
		}
		if len(c.Query(q)) == 0 {
			b.Fatal("no offers")
		}
	}
}

// BenchmarkLoadDir200k measures LoadDir of the 200,000-row catalog written
// as gpuhunt CSV files: what `--catalog-dir` with a large catalog costs at
// start.
func BenchmarkLoadDir200k(b *testing.B) {
	dir := b.TempDir()
	byProvider := map[string][]Offer{}
	for _, t := range bigTables() {
		byProvider[t.Provider] = append(byProvider[t.Provider], t.Offers...)
	}
	for p, offers := range byProvider {
		f, err := os.Create(filepath.Join(dir, p+".csv"))
		if err != nil {
			b.Fatal(err)
		}
		if err := WriteCSV(f, offers, nil); err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
	for b.Loop() {
		c, err := LoadDir(dir)
		if err != nil {
			b.Fatal(err)
		}
		if c.Len() < 200_000 {
			b.Fatalf("loaded %d rows", c.Len())
		}
	}
}
