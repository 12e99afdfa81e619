package offers

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"time"
)

// Sources configures where a daemon's offers come from; it mirrors the
// `hoist serve` flags (--catalog-dir, --catalog-url).
type Sources struct {
	// CatalogDir, when set, replaces the embedded snapshot with the
	// PROVIDER.csv files of that directory.
	CatalogDir string
	// CatalogURL, when set, is gpuhunt's published layout, laid over the
	// offline catalog and refreshed every RefreshInterval.
	CatalogURL string
	// RefreshInterval defaults to DefaultRefreshInterval.
	RefreshInterval time.Duration
	// Online and Hosts are passed to the Market (see MarketConfig).
	Online, Hosts []Provider
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Client makes catalog downloads; default http.DefaultClient.
	Client *http.Client
}

// Open builds a Market over s: the offline catalog (CatalogDir, or the
// embedded snapshot) is ready when Open returns; when CatalogURL is set,
// the remote catalogs are downloaded in the background and refreshed until
// ctx ends, each good refresh replacing the Market's catalog.
func Open(ctx context.Context, s Sources) (*Market, error) {
	log := s.Logger
	if log == nil {
		log = slog.Default()
	}
	var base *Catalog
	var err error
	if s.CatalogDir != "" {
		base, err = LoadDir(s.CatalogDir)
	} else {
		base, err = Embedded()
	}
	if err != nil {
		return nil, fmt.Errorf("open offer catalog: %w", err)
	}
	for _, src := range base.Sources() {
		if src.Skipped > 0 {
			log.Warn("catalog rows skipped", "origin", src.Origin, "skipped", src.Skipped)
		}
	}
	if u := base.UnknownGPUs(); len(u) > 0 {
		log.Warn("catalog has unknown gpus", "gpus", u)
	}
	m := NewMarket(MarketConfig{Catalog: base, Online: s.Online, Hosts: s.Hosts, Logger: log})
	if s.CatalogURL == "" {
		return m, nil
	}
	r, err := NewRemote(RemoteConfig{URL: s.CatalogURL, Base: base, Client: s.Client, Logger: log})
	if err != nil {
		return nil, err
	}
	go r.Run(ctx, s.RefreshInterval, m.SetCatalog)
	return m, nil
}
