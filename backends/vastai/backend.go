package vastai

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"hoist/backends"
	"hoist/backends/offers"
	"hoist/backends/podcloud"
)

// checkTimeout bounds the credentials check at start.
const checkTimeout = 30 * time.Second

// Factory builds the Vast.ai backend from its server-config entry: it
// checks the options, then the API key (GET /instances/, dstack's
// configurator auth_test): a refused key fails the backend, an API that
// does not answer is only logged.
func Factory(cfg backends.Config, deps backends.Deps) (backends.Backend, error) {
	var o Options
	if err := cfg.Decode(&o); err != nil {
		return nil, err
	}
	name := cfg.BackendName()
	p, err := NewProvider(o, nil, deps.Logger)
	if err != nil {
		return nil, fmt.Errorf("backend %q (type vastai): %w", name, err)
	}
	p.backend = name
	ctx, cancel := context.WithTimeout(context.Background(), checkTimeout)
	defer cancel()
	if _, err := p.api.instances(ctx); err != nil {
		if err := classify(err); backends.IsStalled(err) {
			return nil, fmt.Errorf("backend %q (type vastai): checking the API key: %w", name, err)
		}
		p.log.Warn("api_key_not_checked", "backend", name, "err", err)
	}
	b, err := podcloud.New(name, backendType, p, deps)
	if err != nil {
		return nil, fmt.Errorf("backend %q (type vastai): %w", name, err)
	}
	return b, nil
}

// OfferSource returns the live offers of a `vastai` entry, for `hoist
// offers --config`: the options checked, no call made until asked.
func OfferSource(cfg backends.Config, log *slog.Logger) (offers.Provider, error) {
	var o Options
	if err := cfg.Decode(&o); err != nil {
		return nil, err
	}
	name := cfg.BackendName()
	p, err := NewProvider(o, nil, log)
	if err != nil {
		return nil, fmt.Errorf("backend %q (type vastai): %w", name, err)
	}
	p.backend = name
	return podcloud.OfferSource(name, p), nil
}
