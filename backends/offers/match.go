package offers

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// backendAliases maps gpuhunt provider names and other spellings to hoist
// (dstack) backend names.
var backendAliases = map[string]string{
	"lambdalabs": "lambda",
	"datacrunch": "verda",
	"vast":       "vastai",
}

// BackendName returns the hoist backend name for a gpuhunt provider name or
// an alias (lambdalabs → lambda, datacrunch → verda, vast → vastai); other
// names are returned lower-cased.
func BackendName(provider string) string {
	p := strings.ToLower(strings.TrimSpace(provider))
	if b, ok := backendAliases[p]; ok {
		return b
	}
	return p
}

// Validate reports the first inconsistency in q: an unknown spot policy,
// CPU architecture or vendor, a negative price, or a range whose minimum
// exceeds its maximum.
func (q Query) Validate() error {
	switch q.SpotPolicy {
	case "", SpotPolicySpot, SpotPolicyOnDemand, SpotPolicyAuto:
	default:
		return fmt.Errorf("spot policy %q: want spot, on-demand or auto", q.SpotPolicy)
	}
	switch q.CPUArch {
	case "", ArchX86, ArchARM:
	default:
		return fmt.Errorf("cpu arch %q: want x86 or arm", q.CPUArch)
	}
	switch q.GPUVendor {
	case "", VendorNVIDIA, VendorAMD, VendorGoogle, VendorIntel, VendorTenstorrent:
	default:
		return fmt.Errorf("gpu vendor %q: want nvidia, amd, google, intel or tenstorrent", q.GPUVendor)
	}
	if q.MaxPrice < 0 {
		return fmt.Errorf("max price %v is negative", q.MaxPrice)
	}
	for _, r := range []struct {
		name string
		r    Range
	}{{"cpu", q.CPU}, {"memory", q.Memory}, {"disk", q.Disk}, {"gpu count", q.GPUCount},
		{"gpu memory", q.GPUMemory}, {"gpu total memory", q.GPUTotalMemory}, {"compute capability", q.ComputeCapability}} {
		if r.r.HasMin && r.r.HasMax && r.r.Min > r.r.Max {
			return fmt.Errorf("%s range %s: min exceeds max", r.name, r.r)
		}
	}
	return nil
}

// matcher is a Query compiled for repeated matching of Offers.
type matcher struct {
	q                        Query
	backends, regions, insts map[string]bool
	names                    map[string]bool
	allowed                  map[string]bool
	wantSpot, wantOnDemand   bool
	cpuSkipsGPU              bool
	hasCC                    bool
}

// set builds a lower-cased membership set; nil when list is empty.
func set(list []string, norm func(string) string) map[string]bool {
	if len(list) == 0 {
		return nil
	}
	m := make(map[string]bool, len(list))
	for _, s := range list {
		m[norm(s)] = true
	}
	return m
}

// gpuKeys memoizes gpuKey: catalogs and feeds repeat a few dozen names.
// gpuKeyCount bounds it against feeds inventing names.
var (
	gpuKeys     sync.Map // string → string
	gpuKeyCount atomic.Int32
)

// gpuKey is the case-insensitive key of a GPU name after normalization.
func gpuKey(name string) string {
	if k, ok := gpuKeys.Load(name); ok {
		return k.(string)
	}
	n, _, _ := NormalizeGPUName(name)
	k := strings.ToLower(n)
	if len(name) <= 64 && gpuKeyCount.Add(1) <= 4096 {
		gpuKeys.Store(name, k)
	}
	return k
}

func newMatcher(q Query) *matcher {
	m := &matcher{
		q:        q,
		backends: set(q.Backends, BackendName),
		regions:  set(q.Regions, strings.ToLower),
		insts:    set(q.InstanceTypes, strings.ToLower),
		names:    set(q.GPUNames, gpuKey),
		hasCC:    !q.ComputeCapability.IsZero(),
	}
	if q.AllowedFlags != nil {
		m.allowed = make(map[string]bool, len(q.AllowedFlags))
		for _, f := range q.AllowedFlags {
			m.allowed[f] = true
		}
	}
	switch q.SpotPolicy {
	case SpotPolicySpot:
		m.wantSpot = true
	case SpotPolicyAuto:
		m.wantSpot, m.wantOnDemand = true, true
	default:
		m.wantOnDemand = true
	}
	m.cpuSkipsGPU = q.GPUCount.HasMin && q.GPUCount.Min == 0
	return m
}

// match applies gpuhunt's matches() semantics plus dstack's region and
// instance-type filters to one offer.
func (m *matcher) match(o *Offer) bool {
	q := &m.q
	if m.backends != nil && !m.backends[BackendName(o.Backend)] {
		return false
	}
	if q.MaxPrice > 0 && o.Price > q.MaxPrice {
		return false
	}
	if (o.Spot && !m.wantSpot) || (!o.Spot && !m.wantOnDemand) {
		return false
	}
	if q.CPUArch != "" && !strings.EqualFold(q.CPUArch, archOrDefault(o.CPUArch)) {
		return false
	}
	if !q.CPU.Contains(float64(o.CPUs)) || !q.Memory.Contains(o.MemoryGB) {
		return false
	}
	if !(m.cpuSkipsGPU && o.GPUCount == 0) && !m.matchGPU(o) {
		return false
	}
	if o.DiskGB > 0 && !q.Disk.Contains(o.DiskGB) {
		return false
	}
	if m.allowed != nil {
		for _, f := range o.Flags {
			if !m.allowed[f] {
				return false
			}
		}
	}
	if m.regions != nil && !regionWanted(m.regions, strings.ToLower(o.Region)) {
		return false
	}
	if m.insts != nil && !m.insts[strings.ToLower(o.Instance)] {
		return false
	}
	return true
}

func (m *matcher) matchGPU(o *Offer) bool {
	q := &m.q
	if q.GPUVendor != "" && !strings.EqualFold(q.GPUVendor, o.GPUVendor) {
		return false
	}
	if !q.GPUCount.Contains(float64(o.GPUCount)) {
		return false
	}
	if m.names != nil && (o.GPUName == "" || !m.names[gpuKey(o.GPUName)]) {
		return false
	}
	if m.hasCC {
		if !strings.EqualFold(o.GPUVendor, VendorNVIDIA) {
			return false
		}
		cc, ok := computeCapability(o.GPUName)
		if !ok || !q.ComputeCapability.Contains(cc) {
			return false
		}
	}
	mem := 0.0
	if o.GPUCount > 0 {
		mem = o.GPUMemoryGB
	}
	if !q.GPUMemory.Contains(mem) || !q.GPUTotalMemory.Contains(mem*float64(o.GPUCount)) {
		return false
	}
	return true
}

// regionWanted reports whether a lower-cased region, or the region of a
// zone ("us-central1-a" → "us-central1", as gpuhunt's GCP rows are per
// zone), is in the wanted set.
func regionWanted(wanted map[string]bool, region string) bool {
	if wanted[region] {
		return true
	}
	if p := zoneParent(region); p != "" {
		return wanted[p]
	}
	return false
}

// zoneParent returns the region of a GCP-style zone name ("us-central1-a"
// → "us-central1"), or "" when the name is not one.
func zoneParent(region string) string {
	if n := len(region); n > 3 && region[n-2] == '-' && region[n-1] >= 'a' && region[n-1] <= 'z' &&
		region[n-3] >= '0' && region[n-3] <= '9' {
		return region[:n-2]
	}
	return ""
}

func archOrDefault(a string) string {
	if a == "" {
		return ArchX86
	}
	return a
}

// less is the strict total order of offers: cheapest first, ties broken by
// backend, region, instance, on-demand before spot, then resources.
func less(a, b *Offer) int {
	if c := cmpFloat(a.Price, b.Price); c != 0 {
		return c
	}
	if c := strings.Compare(a.Backend, b.Backend); c != 0 {
		return c
	}
	if c := strings.Compare(a.Region, b.Region); c != 0 {
		return c
	}
	if c := strings.Compare(a.Instance, b.Instance); c != 0 {
		return c
	}
	if a.Spot != b.Spot {
		if !a.Spot {
			return -1
		}
		return 1
	}
	if c := a.GPUCount - b.GPUCount; c != 0 {
		return c
	}
	if c := a.CPUs - b.CPUs; c != 0 {
		return c
	}
	if c := cmpFloat(a.MemoryGB, b.MemoryGB); c != 0 {
		return c
	}
	if c := strings.Compare(a.GPUName, b.GPUName); c != 0 {
		return c
	}
	if c := cmpFloat(a.GPUMemoryGB, b.GPUMemoryGB); c != 0 {
		return c
	}
	if c := cmpFloat(a.DiskGB, b.DiskGB); c != 0 {
		return c
	}
	if c := strings.Compare(a.Availability, b.Availability); c != 0 {
		return c
	}
	if c := strings.Compare(a.CPUArch, b.CPUArch); c != 0 {
		return c
	}
	if c := strings.Compare(a.GPUVendor, b.GPUVendor); c != 0 {
		return c
	}
	return slices.Compare(a.Flags, b.Flags)
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// SortOffers sorts offers strictly cheapest first with hoist's tie-breaks
// (a total order: offers comparing equal are identical).
func SortOffers(offers []Offer) {
	slices.SortFunc(offers, func(a, b Offer) int { return less(&a, &b) })
}

// Filter returns the offers matching q, cheapest first. It is the
// reference semantics the catalog's index must agree with, and what
// online providers' results go through.
func Filter(offers []Offer, q Query) []Offer {
	m := newMatcher(q)
	var out []Offer
	for i := range offers {
		if m.match(&offers[i]) {
			out = append(out, offers[i])
		}
	}
	SortOffers(out)
	if q.Limit > 0 && len(out) > q.Limit {
		out = out[:q.Limit]
	}
	return out
}
