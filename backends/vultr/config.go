package vultr

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/vultr/govultr/v3"

	"hoist/backends"
	"hoist/backends/vm"
)

// Options are dstack's vultr backend entry
// (src/dstack/_internal/core/backends/vultr/models.py,
// VultrBackendConfigWithCreds) plus endpoint_url.
type Options struct {
	// Creds are the API key: {type: api_key, api_key}.
	Creds *Creds `json:"creds"`
	// Regions are the Vultr regions (ewr, ord, ams, ...) to offer and
	// launch in; empty means every location of the plans.
	Regions []string `json:"regions"`
	// EndpointURL overrides the API's base URL https://api.vultr.com (the
	// simulator).
	EndpointURL string `json:"endpoint_url"`
}

// Creds are dstack's Vultr credentials (VultrAPIKeyCreds).
type Creds struct {
	// Type is api_key.
	Type string `json:"type"`
	// APIKey is the Vultr API key.
	APIKey string `json:"api_key"`
}

// checkTimeout bounds the credentials check at start.
const checkTimeout = 30 * time.Second

// requestTimeout bounds one API request, as dstack's client (30 s).
const requestTimeout = 30 * time.Second

// maxNameLen is the longest label hoist gives (dstack's Vultr limit,
// src/dstack/_internal/core/backends/vultr/compute.py).
const maxNameLen = 64

// Factory builds the Vultr backend from its server-config entry: it checks
// the options, the API key (GET /v2/account) and that the configured
// regions exist (GET /v2/regions).
func Factory(cfg backends.Config, deps backends.Deps) (backends.Backend, error) {
	var o Options
	if err := cfg.Decode(&o); err != nil {
		return nil, err
	}
	name := cfg.BackendName()
	p, err := newProvider(name, o, deps)
	if err != nil {
		return nil, fmt.Errorf("backend %q (type vultr): %w", name, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), checkTimeout)
	defer cancel()
	if err := p.check(ctx); err != nil {
		return nil, fmt.Errorf("backend %q (type vultr): %w", name, err)
	}
	b, err := vm.New(vm.Config{
		Name:       name,
		Type:       "vultr",
		Provider:   p,
		Regions:    p.regions,
		User:       "root",
		Deps:       deps,
		MaxNameLen: maxNameLen,
	})
	if err != nil {
		return nil, fmt.Errorf("backend %q (type vultr): %w", name, err)
	}
	eng, ok := b.(*vm.Backend)
	if !ok {
		return nil, fmt.Errorf("backend %q (type vultr): unexpected engine %T", name, b)
	}
	return &Backend{Backend: eng, p: p}, nil
}

// newProvider validates o and builds the API client.
func newProvider(name string, o Options, deps backends.Deps) (*Provider, error) {
	switch {
	case o.Creds == nil:
		return nil, errors.New("creds is required (type api_key)")
	case o.Creds.Type != "api_key":
		return nil, fmt.Errorf("creds: type %q is not supported (api_key)", o.Creds.Type)
	case o.Creds.APIKey == "":
		return nil, errors.New("creds: api_key is required")
	}
	if err := backends.CheckRegions(o.Regions, "region id"); err != nil {
		return nil, err
	}
	client := func() (*govultr.Client, error) {
		vc := govultr.NewClient(&http.Client{
			Timeout:   requestTimeout,
			Transport: &transport{key: o.Creds.APIKey, base: http.DefaultTransport},
		})
		if o.EndpointURL != "" {
			if err := vc.SetBaseURL(strings.TrimSuffix(o.EndpointURL, "/")); err != nil {
				return nil, fmt.Errorf("endpoint_url: %w", err)
			}
		}
		return vc, nil
	}
	vc, err := client()
	if err != nil {
		return nil, err
	}
	// Creates are not retried by the client: a create answered 5xx may
	// still have made the instance, which the next Launch finds by its
	// tag; a retried POST would make a second one.
	once, err := client()
	if err != nil {
		return nil, err
	}
	once.SetRetryLimit(0)
	now := deps.Now
	if now == nil {
		now = time.Now
	}
	return &Provider{backend: name, c: vc, create: once, regions: slices.Clone(o.Regions), now: now,
		vpcs: map[string]string{}, launching: map[string]chan struct{}{}}, nil
}

// check verifies the API key (GET /v2/account answers 401 or 403 to a bad
// one) and that every configured region is one of Vultr's.
func (p *Provider) check(ctx context.Context) error {
	ctx, c := track(ctx)
	if _, _, err := p.c.Account.Get(ctx); err != nil {
		return fmt.Errorf("checking the API key: %w", classify(c, "get account", err))
	}
	if len(p.regions) == 0 {
		return nil
	}
	known := map[string]bool{}
	opts := &govultr.ListOptions{PerPage: 500}
	for {
		ctx, c := track(ctx)
		rs, meta, _, err := p.c.Region.List(ctx, opts)
		if err != nil {
			return classify(c, "list regions", err)
		}
		for _, r := range rs {
			known[r.ID] = true
		}
		if meta == nil || meta.Links == nil || meta.Links.Next == "" {
			break
		}
		opts.Cursor = meta.Links.Next
	}
	for _, r := range p.regions {
		if !known[r] {
			return backends.Stalled(fmt.Errorf("regions: %q is not a Vultr region", r))
		}
	}
	return nil
}
