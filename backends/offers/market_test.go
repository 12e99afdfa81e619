package offers

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// scripted is an online provider whose answer the test controls.
type scripted struct {
	name   string
	mu     sync.Mutex
	offers []Offer
	err    error
	block  bool // wait for ctx instead of answering
	calls  atomic.Int32
}

func (p *scripted) Name() string { return p.name }

func (p *scripted) Offers(ctx context.Context, q Query) ([]Offer, error) {
	p.calls.Add(1)
	p.mu.Lock()
	offers, err, block := p.offers, p.err, p.block
	p.mu.Unlock()
	if block {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return offers, err
}

func (p *scripted) set(offers []Offer, err error, block bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.offers, p.err, p.block = offers, err, block
}

// clock is a settable test clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *clock) Add(d time.Duration) { c.mu.Lock(); defer c.mu.Unlock(); c.now = c.now.Add(d) }

func names(offers []Offer) []string {
	var out []string
	for _, o := range offers {
		out = append(out, o.Backend+"/"+o.Instance)
	}
	return out
}

func smallCatalog(t *testing.T) *Catalog {
	t.Helper()
	in := strings.Join(CSVColumns, ",") + "\n" +
		"h100x1,r1,2.0,16,128.0,1,H100,80.0,False,,nvidia,,x86,{}\n" +
		"a10x1,r1,0.6,8,32.0,1,A10,24.0,False,,nvidia,,x86,{}\n"
	cloud, err := ReadCSV(strings.NewReader(in), "cloud")
	if err != nil {
		t.Fatal(err)
	}
	in = strings.Join(CSVColumns, ",") + "\n" +
		"snap-4090,Texas,0.5,8,32.0,1,RTX4090,24.0,False,,nvidia,,x86,{}\n"
	vast, err := ReadCSV(strings.NewReader(in), "vast")
	if err != nil {
		t.Fatal(err)
	}
	return New("2026-11-21", cloud, vast)
}

func TestMarket_Query_mergesSourcesAndIsolatesFailures(t *testing.T) {
	clk := &clock{now: time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)}
	live := &scripted{name: "vastai", offers: []Offer{
		{Instance: "live-4090", Region: "Ohio", Price: 0.35, CPUs: 16, MemoryGB: 64, GPUCount: 1, GPUName: "RTX 4090", GPUMemoryGB: 24},
		{Instance: "live-h100", Region: "Ohio", Price: 1.9, CPUs: 16, MemoryGB: 64, GPUCount: 1, GPUName: "H100-80GB"},
		{Instance: "live-cpu", Region: "Ohio", Price: 0.01, CPUs: 2, MemoryGB: 4}, // filtered out below
	}}
	broken := &scripted{name: "flaky", err: errors.New("api down")}
	slow := &scripted{name: "slow", block: true}
	pool := &scripted{name: "hosts", offers: []Offer{{Backend: "ssh", Instance: "gpu-box-1", Region: "fleet-a", CPUs: 32, MemoryGB: 256, GPUCount: 2, GPUName: "A6000", GPUMemoryGB: 48, Availability: AvailabilityIdle}}}
	m := NewMarket(MarketConfig{
		Catalog: smallCatalog(t), Online: []Provider{live, broken, slow}, Hosts: []Provider{pool},
		Timeout: 50 * time.Millisecond, Logger: slog.New(slog.DiscardHandler), Now: clk.Now,
	})
	q := Query{GPUCount: AtLeast(1)}
	ans := m.Query(t.Context(), q)

	want := []string{"ssh/gpu-box-1", "vastai/live-4090", "cloud/a10x1", "vastai/live-h100", "cloud/h100x1"}
	if diff := cmp.Diff(want, names(ans.Offers)); diff != "" {
		t.Errorf("offers (-want +got):\n%s", diff)
	}
	if len(ans.Failed) != 2 || ans.Failed["flaky"] == nil || !errors.Is(ans.Failed["slow"], context.DeadlineExceeded) {
		t.Errorf("Failed = %v, want flaky's error and slow's timeout", ans.Failed)
	}
	if ans.Snapshot != "2026-11-21" {
		t.Errorf("Snapshot = %q", ans.Snapshot)
	}
	if o := ans.Offers[1]; o.GPUName != "RTX4090" || o.GPUVendor != VendorNVIDIA || o.Availability != AvailabilityUnknown {
		t.Errorf("live offer not normalized: %+v", o)
	}
	if o := ans.Offers[0]; o.Availability != AvailabilityIdle {
		t.Errorf("host offer availability = %q, want idle", o.Availability)
	}

	// Within the cache TTL the live provider is not called again.
	calls := live.calls.Load()
	m.Query(t.Context(), q)
	if live.calls.Load() != calls {
		t.Error("live provider called again within the cache TTL")
	}

	// After the TTL it is called again; when it now fails, its cached
	// answer stands in (stale) instead of the stale snapshot rows.
	clk.Add(DefaultProviderCacheTTL + time.Second)
	live.set(nil, errors.New("rate limited"), false)
	ans = m.Query(t.Context(), q)
	if live.calls.Load() == calls {
		t.Error("live provider not called after the cache TTL")
	}
	if diff := cmp.Diff(want, names(ans.Offers)); diff != "" {
		t.Errorf("offers with a stale live answer (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"vastai"}, ans.Stale); diff != "" {
		t.Errorf("Stale (-want +got):\n%s", diff)
	}

	// Once the cached copy is too old, the snapshot's rows for the backend are used.
	clk.Add(maxStale)
	ans = m.Query(t.Context(), q)
	want = []string{"ssh/gpu-box-1", "vastai/snap-4090", "cloud/a10x1", "cloud/h100x1"}
	if diff := cmp.Diff(want, names(ans.Offers)); diff != "" {
		t.Errorf("offers with the live provider down (-want +got):\n%s", diff)
	}
	if ans.Failed["vastai"] == nil {
		t.Error("vastai failure not reported")
	}

	// Limit applies to the merged list; a backend filter skips other providers.
	ans = m.Query(t.Context(), Query{GPUCount: AtLeast(1), Backends: []string{"cloud"}, Limit: 1})
	if diff := cmp.Diff([]string{"cloud/a10x1"}, names(ans.Offers)); diff != "" {
		t.Errorf("limited, filtered offers (-want +got):\n%s", diff)
	}
	if len(ans.Failed) != 0 {
		t.Errorf("providers outside the backend filter were asked: %v", ans.Failed)
	}
}

func TestMarket_SetCatalog(t *testing.T) {
	m := NewMarket(MarketConfig{Logger: slog.New(slog.DiscardHandler)})
	if got := m.Query(t.Context(), Query{}); len(got.Offers) != 0 {
		t.Fatalf("empty market returned %d offers", len(got.Offers))
	}
	m.SetCatalog(smallCatalog(t))
	if got := m.Query(t.Context(), Query{}); len(got.Offers) != 3 {
		t.Fatalf("after SetCatalog: %d offers, want 3", len(got.Offers))
	}
}

func TestMarket_panickingProviderIsIsolated(t *testing.T) {
	m := NewMarket(MarketConfig{Catalog: smallCatalog(t), Online: []Provider{panicky{}}, Logger: slog.New(slog.DiscardHandler)})
	ans := m.Query(t.Context(), Query{})
	if len(ans.Offers) != 3 || ans.Failed["panicky"] == nil {
		t.Fatalf("got %d offers, failures %v", len(ans.Offers), ans.Failed)
	}
}

type panicky struct{}

func (panicky) Name() string { return "panicky" }
func (panicky) Offers(context.Context, Query) ([]Offer, error) {
	panic("boom")
}

func TestMarket_Query_keepsAndReportsUnknownGPUs(t *testing.T) {
	var logs strings.Builder
	p := &scripted{name: "bazaar", offers: []Offer{{Instance: "x", Region: "r", Price: 1, CPUs: 4, MemoryGB: 16,
		GPUCount: 1, GPUName: "Mystery 9000", GPUMemoryGB: 20}}}
	m := NewMarket(MarketConfig{Online: []Provider{p}, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	for range 2 {
		ans := m.Query(t.Context(), Query{GPUNames: []string{"mystery9000"}, GPUCount: AtLeast(1)})
		if len(ans.Offers) != 1 || ans.Offers[0].GPUName != "Mystery9000" {
			t.Fatalf("offers = %+v", ans.Offers)
		}
	}
	if n := strings.Count(logs.String(), "unknown gpu"); n != 1 {
		t.Errorf("unknown GPU reported %d times, want once:\n%s", n, logs.String())
	}
}
