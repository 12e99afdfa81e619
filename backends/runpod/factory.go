package runpod

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

// Factory builds the RunPod backend from its server-config entry: it checks
// the options and the API key (a refused key fails the entry; RunPod being
// unreachable only logs), then gives the Provider to the container-cloud
// engine.
func Factory(cfg backends.Config, deps backends.Deps) (backends.Backend, error) {
	var o Options
	if err := cfg.Decode(&o); err != nil {
		return nil, err
	}
	name := cfg.BackendName()
	log := deps.Logger
	if log == nil {
		log = slog.Default()
	}
	p, err := NewProvider(o, nil, log)
	if err != nil {
		return nil, fmt.Errorf("backend %q (type runpod): %w", name, err)
	}
	p.name = name
	ctx, cancel := context.WithTimeout(context.Background(), checkTimeout)
	defer cancel()
	if err := p.Check(ctx); backends.IsStalled(err) {
		return nil, fmt.Errorf("backend %q (type runpod): checking the API key: %w", name, err)
	} else if err != nil {
		log.Warn("api_key_not_checked", "err", err)
	}
	b, err := podcloud.New(name, "runpod", p, deps)
	if err != nil {
		return nil, err
	}
	return b, nil
}

// OfferSource returns the live offers of a `runpod` entry, for `hoist
// offers --config`: the options checked, no call made until asked.
func OfferSource(cfg backends.Config, log *slog.Logger) (offers.Provider, error) {
	var o Options
	if err := cfg.Decode(&o); err != nil {
		return nil, err
	}
	name := cfg.BackendName()
	p, err := NewProvider(o, nil, log)
	if err != nil {
		return nil, fmt.Errorf("backend %q (type runpod): %w", name, err)
	}
	p.name = name
	return podcloud.OfferSource(name, p), nil
}
