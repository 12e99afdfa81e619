package backends

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"sort"
	"time"
)

// A Factory builds a backend from its configuration. It validates the
// configuration (and the credentials, when the provider allows a cheap check)
// and fails with a message that names the backend and the field.
type Factory func(cfg Config, deps Deps) (Backend, error)

// A Registry maps backend types ("local", "ssh", "aws", ...) to factories. It
// is built explicitly in cmd/hoist, one line per driver; nothing registers
// itself.
type Registry map[string]Factory

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
		return fmt.Errorf("backend %q (type %s): options: %w", c.name(), c.Type, err)
	}
	return nil
}

func (c Config) name() string {
	if c.Name != "" {
		return c.Name
	}
	return c.Type
}

// AgentBinaries returns the paths of the hoist-shim and hoist-runner binaries
// built for a Linux architecture in Go's spelling (amd64, arm64).
type AgentBinaries func(arch string) (shim, runner string, err error)

// Deps are what cmd/hoist hands every factory.
type Deps struct {
	// Logger is the backend's logger.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// StateDir is a directory the backend may keep its records in (one per
	// backend entry).
	StateDir string
	// Agents locates the agent binaries to deploy or run.
	Agents AgentBinaries
}

// Open builds the backend an entry configures. An unknown type is an error
// naming the types known.
func (r Registry) Open(cfg Config, deps Deps) (Backend, error) {
	if cfg.Name == "" {
		cfg.Name = cfg.Type
	}
	f, ok := r[cfg.Type]
	if !ok {
		return nil, fmt.Errorf("backend %q: unknown type %q (known: %v)", cfg.Name, cfg.Type, r.Types())
	}
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	if deps.Now == nil {
		deps.Now = time.Now
	}
	b, err := f(cfg, deps)
	if err != nil {
		return nil, fmt.Errorf("backend %q: %w", cfg.Name, err)
	}
	return b, nil
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
