package verda

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"hoist/backends"
	"hoist/backends/vm"
)

// Options are dstack's Verda backend entry
// (src/dstack/_internal/core/backends/verda/models.py) plus endpoint_url.
type Options struct {
	// Creds are api_key {client_id, client_secret}: the API's OAuth2
	// client credentials.
	Creds *Creds `json:"creds"`
	// Regions are the location codes to offer and launch in (FIN-01,
	// ICE-01, ...); empty means every location of the catalog.
	Regions []string `json:"regions"`
	// EndpointURL overrides the API base URL (the simulator); empty means
	// https://api.verda.com/v1.
	EndpointURL string `json:"endpoint_url"`
}

// Creds are dstack's Verda credentials.
type Creds struct {
	// Type is api_key.
	Type         string `json:"type"`
	ClientID     string `json:"client_id"`
	ClientSecret string `json:"client_secret"`
}

// checkTimeout bounds the credentials check at start.
const checkTimeout = 30 * time.Second

// Factory builds the Verda backend from its server-config entry (type
// verda, or datacrunch as dstack still accepts): it checks the options,
// then the credentials (a token and one availability call).
func Factory(cfg backends.Config, deps backends.Deps) (backends.Backend, error) {
	var o Options
	if err := cfg.Decode(&o); err != nil {
		return nil, err
	}
	name := cfg.BackendName()
	p, err := newProvider(name, o, deps)
	if err != nil {
		return nil, fmt.Errorf("backend %q (type verda): %w", name, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), checkTimeout)
	defer cancel()
	if err := p.check(ctx); err != nil {
		return nil, fmt.Errorf("backend %q (type verda): checking credentials: %w", name, err)
	}
	b, err := vm.New(vm.Config{
		Name:     name,
		Type:     "verda",
		Provider: p,
		Regions:  p.regions,
		User:     "root",
		Deps:     deps,
		// Verda hostnames: letters, digits and dashes, at most 60 here.
		MaxNameLen: 60,
	})
	if err != nil {
		return nil, fmt.Errorf("backend %q (type verda): %w", name, err)
	}
	eb, ok := b.(engine)
	if !ok {
		return nil, fmt.Errorf("backend %q (type verda): the engine gave a %T", name, b)
	}
	return &Backend{engine: eb, prov: p, name: name}, nil
}

// newProvider validates o and builds the API client.
func newProvider(name string, o Options, deps backends.Deps) (*Provider, error) {
	c := o.Creds
	switch {
	case c == nil:
		return nil, errors.New("creds is required (type api_key with client_id and client_secret)")
	case c.Type != "api_key":
		return nil, fmt.Errorf("creds: type %q is not supported (api_key)", c.Type)
	case c.ClientID == "" || c.ClientSecret == "":
		return nil, errors.New("creds: client_id and client_secret are required")
	}
	if err := backends.CheckRegions(o.Regions, "location code"); err != nil {
		return nil, err
	}
	endpoint, err := backends.EndpointURL(o.EndpointURL, DefaultEndpoint)
	if err != nil {
		return nil, err
	}
	now := deps.Now
	if now == nil {
		now = time.Now
	}
	return &Provider{
		backend: name,
		regions: slices.Clone(o.Regions),
		api:     newClient(endpoint, c.ClientID, c.ClientSecret, now),
		now:     now,
	}, nil
}

// check gets a token and makes one cheap authenticated call.
func (p *Provider) check(ctx context.Context) error {
	var out []locationAvailability
	if _, err := p.api.do(ctx, "GET", "/instance-availability?is_spot=false", nil, &out); err != nil {
		return classify(err)
	}
	return nil
}
