package fake

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"hoist/agents/api"
	"hoist/backends"
)

var _ backends.GatewayHost = (*Backend)(nil)

// Gateway is the stand-in for `hoist gateway` the fake runs on an
// instance (StartGateway): it serves the gateway's admin API on a Unix
// socket, demands the admin token, records every configuration put, and
// reports the stats a test sets. It serves no traffic.
type Gateway struct {
	token string
	sock  string
	dir   string
	srv   *http.Server

	mu      sync.Mutex
	configs []api.GatewayConfig
	stats   api.GatewayStats
	errs    []api.GatewayError
	stopped bool
}

// StartGateway starts the stand-in gateway on inst, or leaves it running
// when it runs with the same token.
func (b *Backend) StartGateway(_ context.Context, inst backends.Instance, spec backends.GatewayProcess) (backends.GatewayEndpoint, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.insts[inst.ID]; !ok {
		return backends.GatewayEndpoint{}, fmt.Errorf("fake instance %s: %w", inst.ID, backends.ErrNotFound)
	}
	if b.gateways == nil {
		b.gateways = map[string]*Gateway{}
	}
	if g, ok := b.gateways[inst.ID]; ok && g.token == spec.Token {
		return g.endpoint(), nil
	} else if ok {
		g.stop()
	}
	g, err := startGateway(spec.Token)
	if err != nil {
		return backends.GatewayEndpoint{}, fmt.Errorf("fake backend: start gateway: %w", err)
	}
	b.gateways[inst.ID] = g
	return g.endpoint(), nil
}

// StopGateway stops the stand-in gateway on inst; not running is success.
func (b *Backend) StopGateway(_ context.Context, inst backends.Instance) error {
	b.mu.Lock()
	g, ok := b.gateways[inst.ID]
	delete(b.gateways, inst.ID)
	b.mu.Unlock()
	if ok {
		g.stop()
	}
	return nil
}

// Gateway returns the stand-in gateway running on instance id, if any.
func (b *Backend) Gateway(id string) (*Gateway, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	g, ok := b.gateways[id]
	return g, ok
}

// GatewayInstances returns the ids of the instances a gateway runs on.
func (b *Backend) GatewayInstances() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for id := range b.gateways {
		out = append(out, id)
	}
	return out
}

func startGateway(token string) (*Gateway, error) {
	dir, err := os.MkdirTemp("", "fakegw")
	if err != nil {
		return nil, err
	}
	g := &Gateway{token: token, dir: dir, sock: filepath.Join(dir, "admin.sock")}
	ln, err := net.Listen("unix", g.sock)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	g.srv = &http.Server{Handler: http.HandlerFunc(g.serve)}
	go func() { _ = g.srv.Serve(ln) }()
	return g, nil
}

func (g *Gateway) endpoint() backends.GatewayEndpoint {
	return backends.GatewayEndpoint{AdminURL: "unix://" + g.sock, PublicAddr: "127.0.0.1", HTTPPort: 80, HTTPSPort: 443}
}

func (g *Gateway) stop() {
	g.mu.Lock()
	g.stopped = true
	g.mu.Unlock()
	_ = g.srv.Close()
	_ = os.RemoveAll(g.dir)
}

func (g *Gateway) serve(w http.ResponseWriter, r *http.Request) {
	w.Header().Set(api.APIVersionHeader, strconv.Itoa(api.GatewayAPIVersion))
	w.Header().Set("Content-Type", "application/json")
	if r.Header.Get("Authorization") != "Bearer "+g.token {
		w.WriteHeader(http.StatusUnauthorized)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": "bad admin token"})
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case r.URL.Path == api.HealthPath:
		_ = json.NewEncoder(w).Encode(api.Health{Service: api.GatewayService, Version: "fake", APIVersion: api.GatewayAPIVersion})
	case r.URL.Path == "/api/v1/config" && r.Method == http.MethodPut:
		var cfg api.GatewayConfig
		if err := json.NewDecoder(r.Body).Decode(&cfg); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
			return
		}
		if n := len(g.configs); n > 0 && cfg.Version < g.configs[n-1].Version {
			w.WriteHeader(http.StatusConflict)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": "older configuration"})
			return
		}
		if n := len(g.configs); n == 0 || cfg.Version > g.configs[n-1].Version {
			g.configs = append(g.configs, cfg)
		}
		_ = json.NewEncoder(w).Encode(g.statusLocked())
	case r.URL.Path == "/api/v1/status":
		_ = json.NewEncoder(w).Encode(g.statusLocked())
	case r.URL.Path == "/api/v1/stats":
		_ = json.NewEncoder(w).Encode(g.stats)
	default:
		w.WriteHeader(http.StatusNotFound)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": "not found"})
	}
}

func (g *Gateway) statusLocked() api.GatewayStatus {
	st := api.GatewayStatus{Errors: g.errs}
	if n := len(g.configs); n > 0 {
		st.Version = g.configs[n-1].Version
	}
	return st
}

// Configs returns the configurations put, oldest first.
func (g *Gateway) Configs() []api.GatewayConfig {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]api.GatewayConfig(nil), g.configs...)
}

// Config returns the configuration served (the last put).
func (g *Gateway) Config() (api.GatewayConfig, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.configs) == 0 {
		return api.GatewayConfig{}, false
	}
	return g.configs[len(g.configs)-1], true
}

// SetStats sets what the stats endpoint reports.
func (g *Gateway) SetStats(st api.GatewayStats) {
	g.mu.Lock()
	g.stats = st
	g.mu.Unlock()
}

// SetErrors sets the per-host errors the status reports.
func (g *Gateway) SetErrors(errs []api.GatewayError) {
	g.mu.Lock()
	g.errs = errs
	g.mu.Unlock()
}

// Stopped reports whether the gateway was stopped.
func (g *Gateway) Stopped() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.stopped
}
