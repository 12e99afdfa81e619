package offers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"
)

// Defaults for online providers.
const (
	// DefaultProviderTimeout bounds one online provider call.
	DefaultProviderTimeout = 10 * time.Second
	// DefaultProviderCacheTTL is how long an online answer is reused.
	DefaultProviderCacheTTL = 30 * time.Second
	// maxStale is how long a cached answer may stand in for a failing provider.
	maxStale = 10 * time.Minute
	// maxCacheEntries bounds each provider's cache.
	maxCacheEntries = 64
)

// MarketConfig configures a Market.
type MarketConfig struct {
	// Catalog is the offline catalog; SetCatalog replaces it later. Nil
	// means an empty catalog until one is set.
	Catalog *Catalog
	// Online are providers queried live, each behind Timeout and CacheTTL.
	Online []Provider
	// Hosts are sources of already-managed hosts (hoist serve's store):
	// queried on every call with Timeout, never cached.
	Hosts []Provider
	// Timeout bounds each provider call; default DefaultProviderTimeout.
	Timeout time.Duration
	// CacheTTL is how long an online answer is reused; default
	// DefaultProviderCacheTTL, negative disables the cache.
	CacheTTL time.Duration
	// Logger receives provider failures; default slog.Default().
	Logger *slog.Logger
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// A Market answers queries from every offer source at once: the offline
// catalog, online providers and managed hosts. A failing or slow provider
// is reported in the Answer and never breaks the query; when an online
// provider answers, its live offers replace the catalog's rows for the
// same backend. A Market is safe for concurrent use.
type Market struct {
	catalog  atomic.Pointer[Catalog]
	online   []*cachedProvider
	hosts    []Provider
	timeout  time.Duration
	log      *slog.Logger
	now      func() time.Time
	inflight singleflight.Group
	unknown  sync.Map // provider + "/" + GPU name already reported
}

// reportUnknown logs, once per provider and name, a GPU the knowledge
// table does not know; the offer itself is kept.
func (m *Market) reportUnknown(provider, gpu string) {
	if _, seen := m.unknown.LoadOrStore(provider+"/"+gpu, true); !seen {
		m.log.Warn("offer with unknown gpu kept", "provider", provider, "gpu", gpu)
	}
}

// Answer is the result of Market.Query.
type Answer struct {
	// Offers match the query, strictly cheapest first.
	Offers []Offer
	// Snapshot is the offline catalog's snapshot date ("" when unknown).
	Snapshot string
	// Failed maps a provider name to the error it returned (or its timeout).
	Failed map[string]error
	// Stale lists online providers answered from a cached copy after failing.
	Stale []string
}

// NewMarket returns a Market over cfg's sources.
func NewMarket(cfg MarketConfig) *Market {
	m := &Market{hosts: cfg.Hosts, timeout: cfg.Timeout, log: cfg.Logger, now: cfg.Now}
	if m.timeout <= 0 {
		m.timeout = DefaultProviderTimeout
	}
	if m.log == nil {
		m.log = slog.Default()
	}
	if m.now == nil {
		m.now = time.Now
	}
	ttl := cfg.CacheTTL
	if ttl == 0 {
		ttl = DefaultProviderCacheTTL
	}
	for _, p := range cfg.Online {
		m.online = append(m.online, &cachedProvider{p: p, ttl: ttl, entries: map[string]cacheEntry{}})
	}
	if cfg.Catalog != nil {
		m.catalog.Store(cfg.Catalog)
	} else {
		m.catalog.Store(New(""))
	}
	return m
}

// SetCatalog atomically replaces the offline catalog (after a refresh).
func (m *Market) SetCatalog(c *Catalog) { m.catalog.Store(c) }

// Catalog returns the current offline catalog.
func (m *Market) Catalog() *Catalog { return m.catalog.Load() }

// Query asks every source for q concurrently and merges the answers
// strictly cheapest first, cut at q.Limit.
func (m *Market) Query(ctx context.Context, q Query) Answer {
	cat := m.catalog.Load()
	ans := Answer{Snapshot: cat.SnapshotDate()}
	mt := newMatcher(q)
	type part struct {
		name   string
		offers []Offer
		err    error
		stale  bool
		live   bool // replaces catalog rows of its backend
	}
	var sources []func(context.Context) part
	for _, cp := range m.online {
		if mt.backends != nil && !mt.backends[BackendName(cp.p.Name())] {
			continue
		}
		sources = append(sources, func(ctx context.Context) part {
			o, stale, err := m.ask(ctx, cp, q)
			return part{name: cp.p.Name(), offers: o, err: err, stale: stale, live: err == nil || stale}
		})
	}
	for _, h := range m.hosts {
		sources = append(sources, func(ctx context.Context) part {
			o, err := m.call(ctx, h, q)
			return part{name: h.Name(), offers: o, err: err}
		})
	}
	parts := make([]part, len(sources))
	var wg sync.WaitGroup
	for i, src := range sources {
		wg.Go(func() { parts[i] = src(ctx) })
	}
	wg.Wait()

	lists := make([][]Offer, 0, len(parts)+1)
	live := map[string]bool{}
	for _, p := range parts {
		if p.err != nil && !p.stale {
			if ans.Failed == nil {
				ans.Failed = map[string]error{}
			}
			ans.Failed[p.name] = p.err
			m.log.Warn("offer provider failed", "provider", p.name, "err", p.err)
			continue
		}
		if p.stale {
			ans.Stale = append(ans.Stale, p.name)
		}
		if p.live {
			live[BackendName(p.name)] = true
		}
		var keep []Offer
		for _, o := range p.offers {
			if o.Backend == "" {
				o.Backend = BackendName(p.name)
			}
			if !NormalizeOffer(&o) {
				m.reportUnknown(p.name, o.GPUName)
			}
			if mt.match(&o) {
				keep = append(keep, o)
			}
		}
		slices.SortFunc(keep, func(a, b Offer) int { return less(&a, &b) })
		lists = append(lists, keep)
	}
	catQ := q
	if len(live) > 0 {
		// Live answers replace the catalog's rows of their backends.
		from := q.Backends
		if len(from) == 0 {
			from = cat.Backends()
		}
		catQ.Backends = nil
		for _, b := range from {
			if !live[BackendName(b)] {
				catQ.Backends = append(catQ.Backends, b)
			}
		}
	}
	if len(live) == 0 || len(catQ.Backends) > 0 {
		lists = append(lists, cat.Query(catQ))
	}
	ans.Offers = mergeSorted(lists, q.Limit)
	return ans
}

// mergeSorted merges lists each sorted by less into one, cut at limit (0 = all).
func mergeSorted(lists [][]Offer, limit int) []Offer {
	lists = slices.DeleteFunc(lists, func(l []Offer) bool { return len(l) == 0 })
	n := 0
	for _, l := range lists {
		n += len(l)
	}
	if limit > 0 && n > limit {
		n = limit
	}
	if len(lists) == 1 {
		return lists[0][:n]
	}
	out := make([]Offer, 0, n)
	pos := make([]int, len(lists))
	for len(out) < n {
		best := -1
		for i, l := range lists {
			if pos[i] < len(l) && (best < 0 || less(&l[pos[i]], &lists[best][pos[best]]) < 0) {
				best = i
			}
		}
		out = append(out, lists[best][pos[best]])
		pos[best]++
	}
	return out
}

// call runs one provider with the market's timeout.
func (m *Market) call(ctx context.Context, p Provider, q Query) ([]Offer, error) {
	ctx, cancel := context.WithTimeout(ctx, m.timeout)
	defer cancel()
	type result struct {
		offers []Offer
		err    error
	}
	done := make(chan result, 1) // buffered: a late provider never blocks
	go func() {
		var r result
		defer func() {
			if v := recover(); v != nil {
				r = result{err: fmt.Errorf("provider %s panicked: %v", p.Name(), v)}
			}
			done <- r
		}()
		r.offers, r.err = p.Offers(ctx, q)
	}()
	select {
	case r := <-done:
		return r.offers, r.err
	case <-ctx.Done():
		// A provider ignoring ctx keeps running; its result is dropped.
		return nil, fmt.Errorf("provider %s: %w", p.Name(), ctx.Err())
	}
}

// cachedProvider is an online provider with a short per-query cache.
type cachedProvider struct {
	p       Provider
	ttl     time.Duration
	mu      sync.Mutex
	entries map[string]cacheEntry
}

type cacheEntry struct {
	at     time.Time
	offers []Offer
}

// ask returns the provider's answer for q from the cache when fresh,
// otherwise by calling it (one call per key at a time). On failure a
// cached answer younger than maxStale stands in (stale = true) and err is
// still returned for reporting.
func (m *Market) ask(ctx context.Context, cp *cachedProvider, q Query) (offers []Offer, stale bool, err error) {
	q.Limit = 0
	key := fmt.Sprintf("%s|%+v", cp.p.Name(), q)
	now := m.now()
	cp.mu.Lock()
	e, ok := cp.entries[key]
	cp.mu.Unlock()
	if ok && cp.ttl > 0 && now.Sub(e.at) < cp.ttl {
		return e.offers, false, nil
	}
	v, err, _ := m.inflight.Do(key, func() (any, error) {
		return m.call(context.WithoutCancel(ctx), cp.p, q)
	})
	if err != nil {
		if ok && now.Sub(e.at) < maxStale {
			return e.offers, true, err
		}
		return nil, false, err
	}
	offers = v.([]Offer)
	if cp.ttl > 0 {
		cp.mu.Lock()
		if len(cp.entries) >= maxCacheEntries {
			oldest := ""
			for k, old := range cp.entries {
				if now.Sub(old.at) >= maxStale {
					delete(cp.entries, k)
				} else if oldest == "" || old.at.Before(cp.entries[oldest].at) {
					oldest = k
				}
			}
			if len(cp.entries) >= maxCacheEntries {
				delete(cp.entries, oldest)
			}
		}
		cp.entries[key] = cacheEntry{at: now, offers: offers}
		cp.mu.Unlock()
	}
	return offers, false, nil
}

// ErrNoOffers is returned by callers that need at least one offer.
var ErrNoOffers = errors.New("no offers match the requirements")
