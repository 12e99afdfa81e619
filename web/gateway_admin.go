package web

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"hoist/agents/api"
)

// gatewayConfigFile is the file under the state dir holding the last
// accepted configuration (with private keys: mode 0600).
const gatewayConfigFile = "gateway.json"

// maxGatewayConfig bounds a PUT configuration's body.
const maxGatewayConfig = 32 << 20

// GatewayVersion is the gateway binary's version reported by its health
// check; cmd/hoist sets it from the build.
var GatewayVersion = "dev"

// AdminHandler serves the admin API (agents/api gateway.go): every request
// carries the admin token, every answer the API version.
func (g *GatewayServer) AdminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+api.HealthPath, func(w http.ResponseWriter, _ *http.Request) {
		writeGatewayJSON(w, http.StatusOK, api.Health{Service: api.GatewayService, Version: GatewayVersion, APIVersion: api.GatewayAPIVersion})
	})
	mux.HandleFunc("PUT /api/v1/config", g.putConfig)
	mux.HandleFunc("GET /api/v1/status", func(w http.ResponseWriter, _ *http.Request) {
		writeGatewayJSON(w, http.StatusOK, g.Status())
	})
	mux.HandleFunc("GET /api/v1/stats", func(w http.ResponseWriter, _ *http.Request) {
		writeGatewayJSON(w, http.StatusOK, g.Stats())
	})
	want := []byte("Bearer " + g.opts.AdminToken)
	version := strconv.Itoa(api.GatewayAPIVersion)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(api.APIVersionHeader, version)
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			g.log.Warn("gateway_admin_unauthorized", "method", r.Method, "path", r.URL.Path)
			writeGatewayJSON(w, http.StatusUnauthorized, api.Error{Message: "missing or wrong admin token"})
			return
		}
		mux.ServeHTTP(w, r)
	})
}

func writeGatewayJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// putConfig replaces the configuration served: 409 for an older Version,
// nothing done for an equal one.
func (g *GatewayServer) putConfig(w http.ResponseWriter, r *http.Request) {
	var cfg api.GatewayConfig
	dec := json.NewDecoder(io.LimitReader(r.Body, maxGatewayConfig))
	if err := dec.Decode(&cfg); err != nil {
		writeGatewayJSON(w, http.StatusBadRequest, api.Error{Message: "decoding the configuration: " + err.Error()})
		return
	}
	err := g.Apply(cfg)
	var stale *staleConfigError
	switch {
	case errors.As(err, &stale):
		writeGatewayJSON(w, http.StatusConflict, api.Error{Message: err.Error()})
		return
	case err != nil:
		g.log.Error("gateway_config_failed", "version", cfg.Version, "error", err)
		writeGatewayJSON(w, http.StatusInternalServerError, api.Error{Message: err.Error()})
		return
	}
	writeGatewayJSON(w, http.StatusOK, g.Status())
}

// staleConfigError refuses a configuration older than the one served.
type staleConfigError struct{ got, have int64 }

func (e *staleConfigError) Error() string {
	return fmt.Sprintf("configuration version %d is older than the version served, %d", e.got, e.have)
}

// Apply replaces the configuration served by cfg, after saving it: an
// older Version is refused, an equal one ignored.
func (g *GatewayServer) Apply(cfg api.GatewayConfig) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	old := g.state.Load()
	if cfg.Version < old.cfg.Version {
		return &staleConfigError{got: cfg.Version, have: old.cfg.Version}
	}
	if cfg.Version == old.cfg.Version && old.cfg.Version != 0 {
		return nil
	}
	if err := validateGatewayConfig(cfg); err != nil {
		return err
	}
	if err := saveGatewayConfig(g.opts.StateDir, cfg); err != nil {
		return err
	}
	st := indexGateway(cfg, g.transports(old))
	g.state.Store(st)
	closeDropped(old, st)
	g.log.Info("gateway_config_applied", "version", cfg.Version, "services", len(cfg.Services))
	g.certs.apply(cfg)
	return nil
}

// closeDropped closes the idle connections of the SSH transports old used
// and cur no longer does (replica hosts gone from the configuration).
func closeDropped(old, cur *gatewayState) {
	keep := map[*sshTransport]bool{}
	for _, svc := range cur.byRun {
		for _, r := range svc.Replicas {
			if t, ok := r.Transport.(*sshTransport); ok {
				keep[t] = true
			}
		}
	}
	for _, svc := range old.byRun {
		for _, r := range svc.Replicas {
			if t, ok := r.Transport.(*sshTransport); ok && !keep[t] {
				t.CloseIdleConnections()
			}
		}
	}
}

// validateGatewayConfig refuses a configuration the gateway cannot serve.
func validateGatewayConfig(cfg api.GatewayConfig) error {
	hosts := map[string]bool{}
	for _, s := range cfg.Services {
		if s.Host == "" || s.Project == "" || s.Run == "" {
			return fmt.Errorf("service %s/%s: host, project and run are required", s.Project, s.Run)
		}
		if hosts[s.Host] {
			return fmt.Errorf("service %s/%s: host %s is served twice", s.Project, s.Run, s.Host)
		}
		hosts[s.Host] = true
	}
	if cfg.TLS != nil && (cfg.TLS.CertPEM == "") != (cfg.TLS.KeyPEM == "") {
		return errors.New("tls: cert_pem and key_pem go together")
	}
	return nil
}

// loadGatewayConfig reads the configuration saved under dir; nil when
// there is none.
func loadGatewayConfig(dir string) (*api.GatewayConfig, error) {
	b, err := os.ReadFile(filepath.Join(dir, gatewayConfigFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read gateway config: %w", err)
	}
	var cfg api.GatewayConfig
	if err := json.Unmarshal(b, &cfg); err != nil {
		return nil, fmt.Errorf("decode gateway config %s: %w", filepath.Join(dir, gatewayConfigFile), err)
	}
	return &cfg, nil
}

// saveGatewayConfig writes cfg under dir atomically (a temporary file
// renamed over the old one), readable by the owner only.
func saveGatewayConfig(dir string, cfg api.GatewayConfig) error {
	b, err := json.Marshal(cfg)
	if err != nil {
		return fmt.Errorf("encode gateway config: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("save gateway config: %w", err)
	}
	f, err := os.CreateTemp(dir, gatewayConfigFile+".*")
	if err != nil {
		return fmt.Errorf("save gateway config: %w", err)
	}
	defer os.Remove(f.Name())
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return fmt.Errorf("save gateway config: %w", err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return fmt.Errorf("save gateway config: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("save gateway config: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("save gateway config: %w", err)
	}
	if err := os.Rename(f.Name(), filepath.Join(dir, gatewayConfigFile)); err != nil {
		return fmt.Errorf("save gateway config: %w", err)
	}
	return nil
}

// Status returns the version served, the certificates held and the
// problems of the hosts served.
func (g *GatewayServer) Status() api.GatewayStatus {
	st := api.GatewayStatus{Version: g.state.Load().cfg.Version}
	st.Certificates, st.Errors = g.certs.status()
	g.sshMu.Lock()
	for _, h := range slices.Sorted(maps.Keys(g.sshErrs)) {
		st.Errors = append(st.Errors, api.GatewayError{Host: h, Message: "reaching replicas: " + g.sshErrs[h]})
	}
	g.sshMu.Unlock()
	return st
}

// Stats returns each service's requests per second over the last
// api.GatewayStatsWindow, its last request and its held requests.
func (g *GatewayServer) Stats() api.GatewayStats {
	var out api.GatewayStats
	since := g.now().Add(-api.GatewayStatsWindow).Unix()
	for _, sc := range g.state.Load().cfg.Services {
		ss := api.GatewayServiceStats{Project: sc.Project, Run: sc.Run}
		ss.Frames = g.meter.frames(sc.Project, sc.Run, since)
		ss.LastRequest = g.meter.LastRequest(sc.Project, sc.Run)
		if w, ok := g.proxy.waiting.Load(sc.Project + "/" + sc.Run); ok {
			ss.Waiting = int(w.(*atomic.Int64).Load())
		}
		out.Services = append(out.Services, ss)
	}
	return out
}

// frames returns the run's per-second counts after the unix second since,
// oldest first, seconds without requests left out.
func (m *Meter) frames(project, run string, since int64) []api.GatewayFrame {
	now := m.now().Unix()
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.m[meterKey(project, run)]
	if r == nil {
		return nil
	}
	var out []api.GatewayFrame
	for s := since + 1; s <= now; s++ {
		i := s % meterSeconds
		if r.secs[i] == s && r.counts[i] > 0 {
			out = append(out, api.GatewayFrame{Unix: s, Requests: r.counts[i]})
		}
	}
	return out
}

// certLoop asks ACME again, every CertRetry, for the hosts without a
// certificate.
func (g *GatewayServer) certLoop() {
	defer g.wg.Done()
	t := time.NewTicker(g.opts.CertRetry)
	defer t.Stop()
	for {
		select {
		case <-g.ctx.Done():
			return
		case <-t.C:
			g.certs.ensure()
		}
	}
}
