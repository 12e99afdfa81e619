package offers

import (
	"embed"
	"fmt"
	"io/fs"
	"maps"
	"math"
	mathbits "math/bits"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

//go:embed snapshot/*.csv snapshot/VERSION
var snapshotFS embed.FS

// Source describes one provider table a Catalog was built from.
type Source struct {
	// Provider is the provider (file) name, e.g. lambdalabs.
	Provider string
	// Backend is the hoist backend name the rows carry, e.g. lambda.
	Backend string
	// Version is the catalog version (gpuhunt's YYYYMMDD-N) when known.
	Version string
	// Origin says where the rows came from: "embedded", a file path or a URL.
	Origin string
	// Rows is the number of offers loaded.
	Rows int
	// Skipped is the number of malformed rows left out.
	Skipped int
}

// A Catalog is an immutable, indexed set of offers from offline provider
// tables. Offers are kept in one strict cheapest-first order, and posting
// lists per backend, region, instance type, GPU name, vendor, GPU count and
// spot let a query visit only candidate rows. A Catalog is safe for
// concurrent use.
type Catalog struct {
	offers []Offer // strictly cheapest first (less)
	rows   []row   // compact copy of offers for filtering
	prices []float64

	tables   []*Table
	sources  []Source
	snapshot string
	unknown  map[string]int

	backendIDs, regionIDs, instIDs, gpuIDs, vendorIDs dict
	gpuCC                                             []float64           // by gpu id; 0 = unknown or not NVIDIA
	regionGroups                                      map[string][]uint32 // region key → its id and its zones' ids

	byBackend, byRegion, byInst, byGPU, byVendor [][]int32
	byCount                                      map[int32][]int32
	bySpot                                       [2][]int32 // [0] on-demand, [1] spot
}

// row is the part of an Offer a query filters on, with strings replaced by
// dictionary ids so the scan touches 64 bytes per offer.
type row struct {
	price, mem, gpuMem, disk   float64
	cpus, gpus                 int32
	region, inst, backend, gpu uint32
	vendor                     uint32
	arm, spot, flags           bool
}

// dict interns strings (by a case-insensitive key) to dense ids; id 0 is
// reserved for the empty string.
type dict struct {
	ids  map[string]uint32
	vals []string
}

func newDict() dict { return dict{ids: map[string]uint32{"": 0}, vals: []string{""}} }

func (d *dict) id(key string) uint32 {
	if id, ok := d.ids[key]; ok {
		return id
	}
	id := uint32(len(d.vals))
	d.ids[key] = id
	d.vals = append(d.vals, key)
	return id
}

func (d *dict) lookup(key string) (uint32, bool) {
	id, ok := d.ids[key]
	return id, ok
}

// New builds a catalog from provider tables: GPU names are normalized
// through the knowledge table (unknown ones kept and counted in
// UnknownGPUs), offers are sorted strictly cheapest first and indexed.
// snapshot is the date shown to users ("2026-11-21"); it may be empty.
func New(snapshot string, tables ...*Table) *Catalog {
	n := 0
	for _, t := range tables {
		n += len(t.Offers)
	}
	c := &Catalog{
		tables:   slices.Clone(tables),
		snapshot: snapshot,
		unknown:  map[string]int{},
	}
	all := make([]Offer, 0, n)
	for _, t := range tables {
		c.sources = append(c.sources, Source{
			Provider: t.Provider, Backend: BackendName(t.Provider), Version: t.Version,
			Origin: t.Origin(), Rows: len(t.Offers), Skipped: len(t.Skipped),
		})
		for _, o := range t.Offers {
			if o.Backend == "" {
				o.Backend = BackendName(t.Provider)
			}
			if !NormalizeOffer(&o) {
				c.unknown[o.GPUName]++
			}
			all = append(all, o)
		}
	}
	// Sort a permutation rather than the 200-byte offers themselves.
	perm := make([]int32, len(all))
	for i := range perm {
		perm[i] = int32(i)
	}
	slices.SortFunc(perm, func(a, b int32) int { return less(&all[a], &all[b]) })
	c.offers = make([]Offer, len(all))
	for i, p := range perm {
		c.offers[i] = all[p]
	}
	c.index()
	return c
}

// Origin reports where a table came from (set by the loaders).
func (t *Table) Origin() string {
	if t.origin == "" {
		return "memory"
	}
	return t.origin
}

// NormalizeOffer canonicalizes an offer's GPU fields through the knowledge
// table: the name is normalized, a missing vendor or memory is filled in,
// a reported memory within 7% of a known size snaps to it, and a GPU row
// without vendor defaults to nvidia (gpuhunt's back-compat rule). It
// returns false when the offer has a GPU the table does not know; the
// offer is still usable and keeps its (compacted) name.
func NormalizeOffer(o *Offer) bool {
	if o.Availability == "" {
		o.Availability = AvailabilityUnknown
	}
	o.CPUArch = archOrDefault(strings.ToLower(o.CPUArch))
	o.GPUVendor = strings.ToLower(o.GPUVendor)
	if o.GPUCount <= 0 && o.GPUName == "" {
		o.GPUCount, o.GPUVendor, o.GPUMemoryGB = 0, "", 0
		return true
	}
	name, memHint, known := NormalizeGPUName(o.GPUName)
	o.GPUName = name
	info := gpuByKey[strings.ToUpper(name)]
	if m := tpuSlice.FindStringSubmatch(name); known && info == nil && m != nil {
		info = gpuByKey[strings.ToUpper(m[1])] // TPU slice: v5litepod-8 → v5litepod
	}
	if known && info != nil && info.Vendor == VendorGoogle && o.GPUVendor == "" {
		o.GPUVendor = VendorGoogle
	}
	if known && info != nil && o.GPUVendor != VendorGoogle {
		if o.GPUVendor == "" {
			o.GPUVendor = info.Vendor
		}
		if o.GPUMemoryGB <= 0 {
			switch {
			case memHint > 0:
				o.GPUMemoryGB = memHint
			case len(info.MemoryGB) == 1:
				o.GPUMemoryGB = info.MemoryGB[0]
			}
		}
		if o.GPUMemoryGB > 0 {
			o.GPUMemoryGB = snapMemory(info, o.GPUMemoryGB)
		}
	}
	if o.GPUVendor == "" && o.GPUCount > 0 {
		o.GPUVendor = VendorNVIDIA
	}
	return known || name == ""
}

func (c *Catalog) index() {
	n := len(c.offers)
	c.rows = make([]row, n)
	c.prices = make([]float64, n)
	c.backendIDs, c.regionIDs, c.instIDs, c.gpuIDs, c.vendorIDs = newDict(), newDict(), newDict(), newDict(), newDict()
	c.byCount = map[int32][]int32{}
	add := func(lists *[][]int32, id uint32, i int32) {
		for uint32(len(*lists)) <= id {
			*lists = append(*lists, nil)
		}
		(*lists)[id] = append((*lists)[id], i)
	}
	for i := range c.offers {
		o := &c.offers[i]
		r := row{
			price: o.Price, mem: o.MemoryGB, gpuMem: o.GPUMemoryGB, disk: o.DiskGB,
			cpus: int32(o.CPUs), gpus: int32(o.GPUCount),
			backend: c.backendIDs.id(o.Backend),
			region:  c.regionIDs.id(strings.ToLower(o.Region)),
			inst:    c.instIDs.id(strings.ToLower(o.Instance)),
			gpu:     c.gpuIDs.id(strings.ToLower(o.GPUName)),
			vendor:  c.vendorIDs.id(o.GPUVendor),
			arm:     o.CPUArch == ArchARM,
			spot:    o.Spot,
			flags:   len(o.Flags) > 0,
		}
		if r.gpus == 0 {
			r.gpuMem = 0
		}
		c.rows[i] = r
		c.prices[i] = o.Price
		id := int32(i)
		add(&c.byBackend, r.backend, id)
		add(&c.byRegion, r.region, id)
		add(&c.byInst, r.inst, id)
		add(&c.byGPU, r.gpu, id)
		add(&c.byVendor, r.vendor, id)
		c.byCount[r.gpus] = append(c.byCount[r.gpus], id)
		if r.spot {
			c.bySpot[1] = append(c.bySpot[1], id)
		} else {
			c.bySpot[0] = append(c.bySpot[0], id)
		}
	}
	c.regionGroups = make(map[string][]uint32, len(c.regionIDs.vals))
	for id, key := range c.regionIDs.vals[1:] {
		c.regionGroups[key] = append(c.regionGroups[key], uint32(id+1))
		if p := zoneParent(key); p != "" {
			c.regionGroups[p] = append(c.regionGroups[p], uint32(id+1))
		}
	}
	c.gpuCC = make([]float64, len(c.gpuIDs.vals))
	for id, key := range c.gpuIDs.vals {
		if cc, ok := computeCapability(key); ok {
			c.gpuCC[id] = cc
		}
	}
}

// Len returns the number of offers in the catalog.
func (c *Catalog) Len() int { return len(c.offers) }

// All returns a copy of every offer, cheapest first.
func (c *Catalog) All() []Offer { return slices.Clone(c.offers) }

// Tables returns the provider tables the catalog was built from; callers
// must not modify them.
func (c *Catalog) Tables() []*Table { return slices.Clone(c.tables) }

// Sources describes the provider tables the catalog was built from.
func (c *Catalog) Sources() []Source { return slices.Clone(c.sources) }

// SnapshotDate is the date the catalog's data was collected, for display
// next to prices; empty when unknown.
func (c *Catalog) SnapshotDate() string { return c.snapshot }

// UnknownGPUs returns the GPU names the knowledge table does not know with
// the number of offers carrying each. Those offers are kept in the catalog.
func (c *Catalog) UnknownGPUs() map[string]int { return maps.Clone(c.unknown) }

// Backends returns the backend names present, sorted.
func (c *Catalog) Backends() []string {
	var out []string
	for _, b := range c.backendIDs.vals[1:] {
		out = append(out, b)
	}
	slices.Sort(out)
	return out
}

var embedded = sync.OnceValues(loadEmbedded)

// Embedded returns the catalog built from the snapshot compiled into the
// binary (one gpuhunt CSV per provider). It is parsed once, on first use,
// and shared: a Catalog is immutable.
func Embedded() (*Catalog, error) { return embedded() }

// EmbeddedVersion is the version of the embedded snapshot (YYYYMMDD-N).
func EmbeddedVersion() string {
	b, err := snapshotFS.ReadFile("snapshot/VERSION")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func loadEmbedded() (*Catalog, error) {
	version := EmbeddedVersion()
	sub, err := fs.Sub(snapshotFS, "snapshot")
	if err != nil {
		return nil, fmt.Errorf("open embedded catalog: %w", err)
	}
	tables, err := readTables(sub, version, "embedded")
	if err != nil {
		return nil, err
	}
	return New(versionDate(version), tables...), nil
}

// LoadDir builds a catalog from a directory holding one PROVIDER.csv per
// provider (gpuhunt's GPUHUNT_CATALOG_DIR layout). An optional file
// VERSION holds the version; otherwise the newest file's modification
// date is the snapshot date. Malformed rows are skipped (see Sources);
// an unreadable file or a directory without catalogs is an error.
func LoadDir(dir string) (*Catalog, error) {
	fsys := os.DirFS(dir)
	version := ""
	if b, err := fs.ReadFile(fsys, "VERSION"); err == nil {
		version = strings.TrimSpace(string(b))
	}
	tables, err := readTables(fsys, version, dir)
	if err != nil {
		return nil, err
	}
	date := versionDate(version)
	if date == "" {
		var newest time.Time
		for _, t := range tables {
			if fi, err := os.Stat(filepath.Join(dir, t.Provider+".csv")); err == nil && fi.ModTime().After(newest) {
				newest = fi.ModTime()
			}
		}
		if !newest.IsZero() {
			date = newest.UTC().Format(time.DateOnly)
		}
	}
	return New(date, tables...), nil
}

// readTables reads every *.csv at the top of fsys.
func readTables(fsys fs.FS, version, origin string) ([]*Table, error) {
	names, err := fs.Glob(fsys, "*.csv")
	if err != nil {
		return nil, fmt.Errorf("list catalogs in %s: %w", origin, err)
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("no PROVIDER.csv catalogs in %s", origin)
	}
	sort.Strings(names)
	var tables []*Table
	for _, name := range names {
		f, err := fsys.Open(name)
		if err != nil {
			return nil, fmt.Errorf("open catalog: %w", err)
		}
		hint := 0
		if fi, err := f.Stat(); err == nil {
			hint = int(fi.Size() / 80) // gpuhunt rows run 50-110 bytes
		}
		t, err := readCSV(f, strings.TrimSuffix(name, ".csv"), hint)
		f.Close()
		if err != nil {
			return nil, err
		}
		t.Version = version
		t.origin = origin
		if origin != "embedded" {
			t.origin = filepath.Join(origin, name)
		}
		tables = append(tables, t)
	}
	return tables, nil
}

// versionDate turns "20261121-3" into "2026-11-21"; "" when not a gpuhunt version.
func versionDate(v string) string {
	d, _, _ := strings.Cut(v, "-")
	t, err := time.Parse("20060102", d)
	if err != nil {
		return ""
	}
	return t.Format(time.DateOnly)
}

// Query returns the offers matching q, strictly cheapest first (ties in a
// fixed order: backend, region, instance type, on-demand before spot). It
// picks the cheapest way to visit candidates (one index, a union of index
// lists, or the price-ordered rows), and stops at q.Limit.
func (c *Catalog) Query(q Query) []Offer {
	rm := c.compile(q)
	if rm.none {
		return nil
	}
	var ids []int32
	c.walk(rm, q.Limit, func(i int32) bool {
		ids = append(ids, i)
		return q.Limit <= 0 || len(ids) < q.Limit
	})
	if len(ids) == 0 {
		return nil
	}
	// Copy runs of consecutive rows in bulk: broad answers are long runs.
	out := make([]Offer, len(ids))
	for k := 0; k < len(ids); {
		j := k + 1
		for j < len(ids) && ids[j] == ids[j-1]+1 {
			j++
		}
		copy(out[k:j], c.offers[ids[k]:ids[j-1]+1])
		k = j
	}
	return out
}

// Count returns how many offers match q (ignoring q.Limit) without copying them.
func (c *Catalog) Count(q Query) int {
	rm := c.compile(q)
	if rm.none {
		return 0
	}
	n := 0
	c.walk(rm, 0, func(int32) bool { n++; return true })
	return n
}

// walk calls fn with the id of every matching row in ascending order (so
// cheapest first) until fn returns false. limit (0 = none) only informs
// the choice of access path.
func (c *Catalog) walk(rm *rowMatcher, limit int, fn func(int32) bool) {
	end := len(c.rows)
	if rm.m.q.MaxPrice > 0 {
		end = sort.SearchFloat64s(c.prices, nextUp(rm.m.q.MaxPrice))
	}
	visit := func(i int32) bool {
		if rm.match(&c.rows[i], c, int(i)) {
			return fn(i)
		}
		return true
	}
	lists, size := c.plan(rm, end, limit)
	switch {
	case lists == nil:
		for i := range int32(end) {
			if !visit(i) {
				return
			}
		}
	case len(lists) == 1:
		for _, i := range lists[0] {
			if int(i) >= end || !visit(i) {
				return
			}
		}
	case size < end/64:
		ids := make([]int32, 0, size)
		for _, p := range lists {
			for _, i := range p {
				if int(i) >= end {
					break
				}
				ids = append(ids, i)
			}
		}
		slices.Sort(ids)
		for _, i := range ids {
			if !visit(i) {
				return
			}
		}
	default:
		// Union through a bitset: no sort, one pass over end/64 words.
		bits := make([]uint64, (end+63)/64)
		for _, p := range lists {
			for _, i := range p {
				if int(i) >= end {
					break
				}
				bits[i>>6] |= 1 << (i & 63)
			}
		}
		for w, word := range bits {
			for word != 0 {
				b := int32(mathbits.TrailingZeros64(word))
				word &= word - 1
				if !visit(int32(w)<<6 | b) {
					return
				}
			}
		}
	}
}

// plan picks the access path: nil to scan rows [0,end), or the posting
// lists of the cheapest index dimension (their union is a superset of the
// answer) with their total size. Costs are in rows visited, assuming the
// matches (at most the smallest dimension's size) are spread evenly.
func (c *Catalog) plan(rm *rowMatcher, end, limit int) ([][]int32, int) {
	sizes := make([]int, len(rm.cand))
	matches := end // upper bound on the number of matches
	for d, lists := range rm.cand {
		for _, p := range lists {
			sizes[d] += sort.Search(len(p), func(i int) bool { return int(p[i]) >= end })
		}
		matches = min(matches, sizes[d])
	}
	// With a limit, a walk over n rows holding the matches stops after
	// about limit×n/matches of them.
	walked := func(n int) int {
		if limit <= 0 || matches == 0 {
			return n
		}
		return min(n, limit*n/matches+1)
	}
	scanCost := walked(end)
	var best [][]int32
	bestSize, bestCost := 0, math.MaxInt
	for d, lists := range rm.cand {
		cost := 2 * walked(sizes[d]) // random access costs about twice a sequential step
		if len(lists) > 1 {
			cost = 2*sizes[d] + end/64 // a union is built whole
		}
		if cost < bestCost {
			best, bestSize, bestCost = lists, sizes[d], cost
		}
	}
	if best == nil || bestCost >= scanCost {
		return nil, 0
	}
	if bestSize == 0 {
		return [][]int32{nil}, 0
	}
	return best, bestSize
}

// rowMatcher is a Query compiled against one catalog's dictionaries.
type rowMatcher struct {
	m                                  *matcher
	none                               bool // provably empty result
	backendOK, regionOK, instOK, gpuOK []bool
	vendor                             uint32
	hasVendor                          bool
	wantSpot, wantOnDemand             bool
	arch                               int8 // 0 any, 1 x86, 2 arm
	cpuSkipsGPU                        bool
	// cand lists the index dimensions that constrain q: posting ids per dimension.
	cand [][][]int32
}

// idSet marks the dictionary ids of wanted keys; none is true when no key exists.
func idSet(d *dict, keys []string, norm func(string) string) (ok []bool, ids []uint32, none bool) {
	if len(keys) == 0 {
		return nil, nil, false
	}
	ok = make([]bool, len(d.vals))
	for _, k := range keys {
		if id, found := d.lookup(norm(k)); found && id != 0 {
			if !ok[id] {
				ok[id] = true
				ids = append(ids, id)
			}
		}
	}
	return ok, ids, len(ids) == 0
}

func (c *Catalog) compile(q Query) *rowMatcher {
	m := newMatcher(q)
	rm := &rowMatcher{m: m, wantSpot: m.wantSpot, wantOnDemand: m.wantOnDemand, cpuSkipsGPU: m.cpuSkipsGPU}
	switch q.CPUArch {
	case ArchX86:
		rm.arch = 1
	case ArchARM:
		rm.arch = 2
	}
	lists := func(all [][]int32, ids []uint32) [][]int32 {
		out := make([][]int32, 0, len(ids)+1)
		for _, id := range ids {
			if int(id) < len(all) {
				out = append(out, all[id])
			}
		}
		return out
	}
	var ids []uint32
	var none bool
	if rm.backendOK, ids, none = idSet(&c.backendIDs, q.Backends, BackendName); none {
		rm.none = true
	} else if ids != nil {
		rm.cand = append(rm.cand, lists(c.byBackend, ids))
	}
	if len(q.Regions) > 0 {
		// Regions also select their zones (regionGroups).
		rm.regionOK = make([]bool, len(c.regionIDs.vals))
		ids = ids[:0]
		for key := range m.regions {
			for _, id := range c.regionGroups[key] {
				if !rm.regionOK[id] {
					rm.regionOK[id] = true
					ids = append(ids, id)
				}
			}
		}
		if len(ids) == 0 {
			rm.none = true
		} else {
			rm.cand = append(rm.cand, lists(c.byRegion, ids))
		}
	}
	if rm.instOK, ids, none = idSet(&c.instIDs, q.InstanceTypes, strings.ToLower); none {
		rm.none = true
	} else if ids != nil {
		rm.cand = append(rm.cand, lists(c.byInst, ids))
	}
	cpuRows := c.byCount[0]
	gpuNames, ids, none := idSet(&c.gpuIDs, q.GPUNames, gpuKey)
	rm.gpuOK = gpuNames
	if len(q.GPUNames) > 0 {
		if none && !rm.cpuSkipsGPU {
			rm.none = true
		} else {
			l := lists(c.byGPU, ids)
			if rm.cpuSkipsGPU {
				l = append(l, cpuRows)
			}
			rm.cand = append(rm.cand, l)
		}
	}
	if q.GPUVendor != "" {
		id, ok := c.vendorIDs.lookup(strings.ToLower(q.GPUVendor))
		rm.vendor, rm.hasVendor = id, true
		switch {
		case ok:
			l := lists(c.byVendor, []uint32{id})
			if rm.cpuSkipsGPU {
				l = append(l, cpuRows)
			}
			rm.cand = append(rm.cand, l)
		case rm.cpuSkipsGPU:
			rm.vendor = math.MaxUint32 // no GPU row matches
			rm.cand = append(rm.cand, [][]int32{cpuRows})
		default:
			rm.none = true
		}
	}
	if !q.GPUCount.IsZero() {
		var l [][]int32
		for n, posting := range c.byCount {
			if q.GPUCount.Contains(float64(n)) || (n == 0 && rm.cpuSkipsGPU) {
				l = append(l, posting)
			}
		}
		rm.cand = append(rm.cand, l)
	}
	switch {
	case rm.wantSpot && !rm.wantOnDemand:
		rm.cand = append(rm.cand, [][]int32{c.bySpot[1]})
	case rm.wantOnDemand && !rm.wantSpot:
		rm.cand = append(rm.cand, [][]int32{c.bySpot[0]})
	}
	return rm
}

// match is matcher.match over a compact row; i indexes c.offers for the
// rare checks that need the full offer (flags).
func (rm *rowMatcher) match(r *row, c *Catalog, i int) bool {
	q := &rm.m.q
	if rm.backendOK != nil && !rm.backendOK[r.backend] {
		return false
	}
	if q.MaxPrice > 0 && r.price > q.MaxPrice {
		return false
	}
	if (r.spot && !rm.wantSpot) || (!r.spot && !rm.wantOnDemand) {
		return false
	}
	if rm.arch != 0 && r.arm != (rm.arch == 2) {
		return false
	}
	if !q.CPU.Contains(float64(r.cpus)) || !q.Memory.Contains(r.mem) {
		return false
	}
	if !(rm.cpuSkipsGPU && r.gpus == 0) {
		if rm.hasVendor && r.vendor != rm.vendor {
			return false
		}
		if !q.GPUCount.Contains(float64(r.gpus)) {
			return false
		}
		if rm.gpuOK != nil && (r.gpu == 0 || !rm.gpuOK[r.gpu]) {
			return false
		}
		if rm.m.hasCC {
			cc := c.gpuCC[r.gpu]
			if cc == 0 || c.vendorIDs.vals[r.vendor] != VendorNVIDIA || !q.ComputeCapability.Contains(cc) {
				return false
			}
		}
		if !q.GPUMemory.Contains(r.gpuMem) || !q.GPUTotalMemory.Contains(r.gpuMem*float64(r.gpus)) {
			return false
		}
	}
	if r.disk > 0 && !q.Disk.Contains(r.disk) {
		return false
	}
	if r.flags && rm.m.allowed != nil {
		for _, f := range c.offers[i].Flags {
			if !rm.m.allowed[f] {
				return false
			}
		}
	}
	if rm.regionOK != nil && !rm.regionOK[r.region] {
		return false
	}
	if rm.instOK != nil && !rm.instOK[r.inst] {
		return false
	}
	return true
}

// nextUp returns the smallest float64 greater than v, so that a search for
// it finds the first price strictly above v.
func nextUp(v float64) float64 { return math.Nextafter(v, math.Inf(1)) }
