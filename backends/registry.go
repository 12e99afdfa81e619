package backends

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sort"
	"time"

	"hoist/backends/offers"
)

// A Factory builds a backend from its configuration. It validates the
// configuration (and the credentials, when the provider allows a cheap check)
// and fails with a message that names the backend and the field.
type Factory func(cfg Config, deps Deps) (Backend, error)

// An OfferSource lists the live offers of a backend entry without building
// the backend: no records, no change at the provider (`hoist offers
// --config`). Drivers whose offers are catalog rows have none.
type OfferSource func(cfg Config, log *slog.Logger) (offers.Provider, error)

// A Driver is one backend type as the Registry holds it: its Factory, and
// for a driver whose offers are live (Traits.LiveOffers) its OfferSource.
type Driver struct {
	Open   Factory
	Offers OfferSource
}

// A Registry maps backend types ("local", "ssh", "aws", ...) to drivers. It
// is built explicitly in cmd/hoist, one line per driver; nothing registers
// itself.
type Registry map[string]Driver

// Config is one backend entry of the server's config file.
type Config struct {
	// Name is the entry's name, what Backend.Name returns and what specs
	// refer to in `backends:`; it defaults to Type.
	Name string `json:"name"`
	// Type selects the factory in the Registry.
	Type string `json:"type"`
	// Options are the driver's own settings, decoded by the driver with
	// Config.Decode.
	Options json.RawMessage `json:"options,omitempty"`
}

// Decode decodes Options into v, rejecting unknown fields. Empty options
// leave v untouched.
func (c Config) Decode(v any) error {
	if len(bytes.TrimSpace(c.Options)) == 0 || string(bytes.TrimSpace(c.Options)) == "null" {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(c.Options))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("backend %q (type %s): options: %w", c.BackendName(), c.Type, err)
	}
	return nil
}

// BackendName is the entry's name, its type when it has none (what Open
// gives the factory; drivers called directly get the same default).
func (c Config) BackendName() string {
	if c.Name != "" {
		return c.Name
	}
	return c.Type
}

// AgentBinaries returns the paths of the hoist-shim and hoist-runner binaries
// built for a Linux architecture in Go's spelling (amd64, arm64).
type AgentBinaries func(arch string) (shim, runner string, err error)

// Records keeps what drivers know about their instances (hosts, pinned host
// keys, what they reserved) where every hoist server sharing the database
// sees it, so a second server observing an instance finds its record. A
// record is the driver's JSON, keyed by backend name and instance id. The
// store implements it (encrypted at rest: records may hold private keys);
// cmd/hoist passes it in Deps.
type Records interface {
	// GetBackendRecord returns the record of instance id; ok is false when
	// there is none.
	GetBackendRecord(ctx context.Context, backend, id string) (value json.RawMessage, ok bool, err error)
	// PutBackendRecord stores (or replaces) the record of instance id.
	PutBackendRecord(ctx context.Context, backend, id string, value json.RawMessage) error
	// DeleteBackendRecord removes the record of instance id; absent is
	// success.
	DeleteBackendRecord(ctx context.Context, backend, id string) error
	// ListBackendRecords returns every record of a backend by instance id.
	ListBackendRecords(ctx context.Context, backend string) (map[string]json.RawMessage, error)
}

// Deps are what cmd/hoist hands every factory.
type Deps struct {
	// Logger is the backend's logger.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// StateDir is a directory of this server the backend may keep local
	// files in (one per backend entry); records every server must see go
	// to Records.
	StateDir string
	// Records keeps the instance records shared by all servers.
	Records Records
	// Agents locates the agent binaries to deploy or run.
	Agents AgentBinaries
	// Catalog returns the server's current offline offer catalog (the
	// Market's); cloud drivers answer Offers from it. Nil when the server
	// has none.
	Catalog func() *offers.Catalog
	// GatewayBinary is the path of the hoist binary, run as `hoist
	// gateway` on gateway instances (GatewayHost) of this server's OS and
	// architecture; empty when unknown (StartGateway then fails saying so).
	GatewayBinary string
	// RunnerDownload grants one task a download of the hoist-runner
	// binary for a Linux architecture in Go's spelling (amd64, arm64):
	// the URL on the server's external URL and the bearer token the
	// request must carry, valid for that task only and for a limited
	// time (the container clouds' start command fetches the runner with
	// it, backends/podcloud). Nil when the server serves no downloads.
	RunnerDownload func(taskID, arch string) (url, token string, err error)
}

// Open builds the backend an entry configures. An unknown type is an error
// naming the types known.
func (r Registry) Open(cfg Config, deps Deps) (Backend, error) {
	if cfg.Name == "" {
		cfg.Name = cfg.Type
	}
	d, ok := r[cfg.Type]
	if !ok || d.Open == nil {
		return nil, fmt.Errorf("backend %q: unknown type %q (known: %v)", cfg.Name, cfg.Type, r.Types())
	}
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	if deps.Now == nil {
		deps.Now = time.Now
	}
	b, err := d.Open(cfg, deps)
	if err != nil {
		return nil, fmt.Errorf("backend %q: %w", cfg.Name, err)
	}
	return b, nil
}

// LiveOffers opens the live offers of an entry whose driver has an
// OfferSource; ok is false for any other entry (its offers are the
// catalog's).
func (r Registry) LiveOffers(cfg Config, log *slog.Logger) (p offers.Provider, ok bool, err error) {
	d, found := r[cfg.Type]
	if !found || d.Offers == nil {
		return nil, false, nil
	}
	if cfg.Name == "" {
		cfg.Name = cfg.Type
	}
	p, err = d.Offers(cfg, log)
	return p, true, err
}

// Types returns the registered backend types, sorted.
func (r Registry) Types() []string {
	out := make([]string, 0, len(r))
	for t := range r {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}
