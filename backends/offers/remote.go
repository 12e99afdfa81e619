package offers

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
)

// DefaultRemoteURL is gpuhunt's public v3 catalog prefix.
const DefaultRemoteURL = "https://dstack-gpu-pricing.s3.eu-west-1.amazonaws.com/v3"

// GPUHuntProviders are the offline providers gpuhunt publishes catalogs for.
var GPUHuntProviders = []string{"aws", "azure", "verda", "gcp", "lambdalabs", "nebius", "oci", "runpod", "cloudrift"}

// DefaultRefreshInterval is how often Run refreshes (gpuhunt reloads every 15 minutes).
const DefaultRefreshInterval = 15 * time.Minute

// maxCatalogBytes bounds one downloaded zip and the CSV inside it.
const maxCatalogBytes = 256 << 20

// RemoteConfig configures a Remote.
type RemoteConfig struct {
	// URL is the layout's base: <URL>/<provider>/version names the current
	// version and <URL>/<provider>/<version>/catalog.zip holds <provider>.csv.
	URL string
	// Providers are fetched; default GPUHuntProviders.
	Providers []string
	// Base is the offline catalog the downloaded providers are laid over:
	// a downloaded provider replaces the base rows of the same backend, the
	// base's other providers stay. Nil means none.
	Base *Catalog
	// Client makes the requests; default http.DefaultClient.
	Client *http.Client
	// Logger receives refresh outcomes; default slog.Default().
	Logger *slog.Logger
	// Timeout bounds each provider's fetch (version and zip); default
	// DefaultFetchTimeout.
	Timeout time.Duration
}

// DefaultFetchTimeout bounds one provider's catalog fetch.
const DefaultFetchTimeout = 2 * time.Minute

// A Remote keeps catalogs downloaded from gpuhunt's published layout up to
// date. Each provider is fetched independently: a provider whose version
// did not change is not downloaded again, and a failed download or a
// catalog failing CheckTable keeps that provider's last good copy.
type Remote struct {
	base      string
	providers []string
	client    *http.Client
	log       *slog.Logger
	baseCat   *Catalog
	timeout   time.Duration

	mu      sync.Mutex // serializes Refresh
	loaded  map[string]*Table
	current atomic.Pointer[Catalog]
}

// NewRemote returns a Remote whose Catalog is cfg.Base until the first
// successful Refresh.
func NewRemote(cfg RemoteConfig) (*Remote, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("catalog url %q: want an http(s) URL", cfg.URL)
	}
	r := &Remote{
		base:      strings.TrimRight(cfg.URL, "/"),
		providers: cfg.Providers,
		client:    cfg.Client,
		log:       cfg.Logger,
		baseCat:   cfg.Base,
		timeout:   cfg.Timeout,
		loaded:    map[string]*Table{},
	}
	if r.timeout <= 0 {
		r.timeout = DefaultFetchTimeout
	}
	if len(r.providers) == 0 {
		r.providers = GPUHuntProviders
	}
	if r.client == nil {
		r.client = http.DefaultClient
	}
	if r.log == nil {
		r.log = slog.Default()
	}
	if cfg.Base != nil {
		r.current.Store(cfg.Base)
	} else {
		r.current.Store(New(""))
	}
	return r, nil
}

// Catalog returns the current catalog: the base overlaid with every
// provider downloaded so far.
func (r *Remote) Catalog() *Catalog { return r.current.Load() }

// Refresh checks every provider's version and downloads the changed ones,
// up to 8 at a time. It returns the errors of the providers that failed
// (joined), having kept their previous copies; the catalog is rebuilt when
// any provider changed.
func (r *Remote) Refresh(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	type result struct {
		t   *Table
		err error
	}
	results := make([]result, len(r.providers))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for i, p := range r.providers {
		prev := r.loaded[p]
		g.Go(func() error {
			t, err := r.fetch(gctx, p, prev)
			results[i] = result{t, err}
			return nil // one provider failing must not cancel the others
		})
	}
	_ = g.Wait()
	changed := false
	var errs []error
	for i, p := range r.providers {
		res := results[i]
		switch {
		case res.err != nil:
			errs = append(errs, fmt.Errorf("refresh %s catalog: %w", p, res.err))
			kept := ""
			if prev := r.loaded[p]; prev != nil {
				kept = prev.Version
			}
			r.log.Warn("catalog refresh failed", "provider", p, "kept_version", kept, "err", res.err)
		case res.t != nil:
			r.loaded[p] = res.t
			changed = true
			r.log.Info("catalog updated", "provider", p, "version", res.t.Version,
				"rows", len(res.t.Offers), "skipped", len(res.t.Skipped))
		}
	}
	if changed {
		c := r.build()
		if u := c.UnknownGPUs(); len(u) > 0 {
			r.log.Warn("catalog has unknown gpus", "gpus", u)
		}
		r.current.Store(c)
	}
	return errors.Join(errs...)
}

// build overlays the downloaded tables on the base catalog's tables.
func (r *Remote) build() *Catalog {
	var tables []*Table
	replaced := map[string]bool{}
	for _, p := range r.providers {
		if t := r.loaded[p]; t != nil {
			tables = append(tables, t)
			replaced[BackendName(p)] = true
		}
	}
	if r.baseCat != nil {
		for _, t := range r.baseCat.Tables() {
			if !replaced[BackendName(t.Provider)] {
				tables = append(tables, t)
			}
		}
	}
	dates := make([]string, 0, len(tables))
	for _, t := range tables {
		if d := versionDate(t.Version); d != "" {
			dates = append(dates, d)
		}
	}
	snapshot := ""
	if len(dates) > 0 {
		snapshot = slices.Min(dates) // the oldest data shown
	}
	return New(snapshot, tables...)
}

// fetch returns the provider's table when its version differs from prev's,
// nil when unchanged.
func (r *Remote) fetch(ctx context.Context, provider string, prev *Table) (*Table, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	vb, err := r.get(ctx, r.base+"/"+url.PathEscape(provider)+"/version")
	if err != nil {
		return nil, err
	}
	version := strings.TrimSpace(string(vb))
	if version == "" || strings.ContainsAny(version, "/\\ \n") || version == "." || version == ".." {
		return nil, fmt.Errorf("bad version %q", version)
	}
	if prev != nil && prev.Version == version {
		return nil, nil
	}
	zipURL := r.base + "/" + url.PathEscape(provider) + "/" + url.PathEscape(version) + "/catalog.zip"
	zb, err := r.get(ctx, zipURL)
	if err != nil {
		return nil, err
	}
	t, err := readZip(zb, provider)
	if err != nil {
		return nil, err
	}
	t.Version = version
	t.origin = zipURL
	if err := CheckTable(t); err != nil {
		return nil, err
	}
	return t, nil
}

func (r *Remote) get(ctx context.Context, u string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", u, err)
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("get catalog: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("get %s: %s", u, resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxCatalogBytes+1))
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", u, err)
	}
	if len(b) > maxCatalogBytes {
		return nil, fmt.Errorf("get %s: larger than %d bytes", u, maxCatalogBytes)
	}
	return b, nil
}

// readZip reads <provider>.csv (or the zip's only CSV) from a catalog zip.
func readZip(b []byte, provider string) (*Table, error) {
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		return nil, fmt.Errorf("open catalog zip: %w", err)
	}
	var file *zip.File
	var csvs []*zip.File
	for _, f := range zr.File {
		if strings.HasSuffix(f.Name, ".csv") {
			csvs = append(csvs, f)
		}
		if path.Base(f.Name) == provider+".csv" {
			file = f
		}
	}
	if file == nil && len(csvs) == 1 {
		file = csvs[0]
	}
	if file == nil {
		return nil, fmt.Errorf("catalog zip has no %s.csv", provider)
	}
	rc, err := file.Open()
	if err != nil {
		return nil, fmt.Errorf("open %s in catalog zip: %w", file.Name, err)
	}
	defer rc.Close()
	return ReadCSV(io.LimitReader(rc, maxCatalogBytes), provider)
}

// Run refreshes now and then every interval (DefaultRefreshInterval when
// zero) until ctx ends, calling onUpdate with the new catalog after each
// refresh that changed it. Failures are logged and retried next interval.
func (r *Remote) Run(ctx context.Context, interval time.Duration, onUpdate func(*Catalog)) {
	if interval <= 0 {
		interval = DefaultRefreshInterval
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		before := r.Catalog()
		_ = r.Refresh(ctx) // logged per provider
		if c := r.Catalog(); c != before && onUpdate != nil {
			onUpdate(c)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
