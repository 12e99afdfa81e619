package sim

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// ServeConfig configures Serve.
type ServeConfig struct {
	// Config configures the Sim that Serve makes.
	Config
	// Listen is host:port for the admin API; every provider listens on the
	// same host, on a port of its own. A port 0 means the port this listener
	// had in the previous run over the same StateDir when it is free (so
	// that a restarted simulator keeps its URLs), else any.
	Listen string
}

// Ready is what the cloudsim command prints, as one JSON line, once it
// serves.
type Ready struct {
	// Endpoints are the providers' API base URLs, by provider name.
	Endpoints map[string]string `json:"endpoints"`
	// Admin is the base URL of the admin API (/_sim/...).
	Admin string `json:"admin"`
	// CAFile is the PEM file of the CA of the https endpoints.
	CAFile string `json:"ca_file"`
}

// A Server is a running simulator: a Sim, the admin API and one listener
// per provider.
type Server struct {
	Ready
	// Sim is the simulator's state.
	Sim *Sim

	providers map[string]Provider
	servers   []*http.Server
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

// listenersFile keeps, in the state directory, the address each listener
// had ("admin" and the providers' names).
const listenersFile = "listeners.json"

// Serve loads the state in cfg.StateDir (booting again the VMs that were
// running), starts the admin API on cfg.Listen and one listener per
// provider (https with a certificate of the state directory's CA when the
// provider asks for TLS), and returns once they accept connections. It
// serves until ctx is done or Close is called.
func Serve(ctx context.Context, cfg ServeConfig, providers ...Provider) (*Server, error) {
	host, port, err := net.SplitHostPort(cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("sim: listen address %q: %w", cfg.Listen, err)
	}
	s, err := New(cfg.Config)
	if err != nil {
		return nil, err
	}
	srv := &Server{Sim: s, providers: map[string]Provider{},
		Ready: Ready{Endpoints: map[string]string{}, CAFile: filepath.Join(s.StateDir(), CAFile)}}
	fail := func(err error) (*Server, error) {
		srv.Close()
		return nil, err
	}
	prev := map[string]string{}
	if b, err := os.ReadFile(filepath.Join(s.StateDir(), listenersFile)); err == nil {
		_ = json.Unmarshal(b, &prev)
	}
	listen := func(name string) (net.Listener, error) {
		if name != "admin" || port == "0" {
			if a := prev[name]; a != "" {
				if h, _, err := net.SplitHostPort(a); err == nil && h == host {
					if ln, err := net.Listen("tcp", a); err == nil {
						return ln, nil
					}
				}
			}
			return net.Listen("tcp", net.JoinHostPort(host, "0"))
		}
		return net.Listen("tcp", cfg.Listen)
	}
	addrs := map[string]string{}
	serve := func(ln net.Listener, h http.Handler) {
		hs := &http.Server{Handler: h, ReadHeaderTimeout: 30 * time.Second}
		srv.servers = append(srv.servers, hs)
		srv.wg.Go(func() { _ = hs.Serve(ln) })
	}
	ln, err := listen("admin")
	if err != nil {
		return fail(err)
	}
	addrs["admin"] = ln.Addr().String()
	srv.Admin = "http://" + ln.Addr().String()
	serve(ln, srv.adminHandler())
	if _, _, err := loadCA(s.StateDir()); err != nil {
		return fail(err)
	}
	for _, p := range providers {
		name := p.Name()
		if _, dup := srv.providers[name]; dup {
			return fail(fmt.Errorf("sim: provider %s given twice", name))
		}
		srv.providers[name] = p
		ln, err := listen(name)
		if err != nil {
			return fail(err)
		}
		addrs[name] = ln.Addr().String()
		if p.TLS() {
			tc, err := serverTLS(s.StateDir(), host)
			if err != nil {
				ln.Close()
				return fail(err)
			}
			serve(tls.NewListener(ln, tc), p.Handler(s))
			srv.Endpoints[name] = "https://" + ln.Addr().String()
		} else {
			serve(ln, p.Handler(s))
			srv.Endpoints[name] = "http://" + ln.Addr().String()
		}
	}
	b, _ := json.MarshalIndent(addrs, "", "  ")
	if err := writeFileAtomic(filepath.Join(s.StateDir(), listenersFile), b, 0o644); err != nil {
		return fail(err)
	}
	context.AfterFunc(ctx, func() { srv.Close() })
	return srv, nil
}

// Close stops the listeners and every VM's sshd (leaving the state for the
// next run) and waits for the servers to return.
func (srv *Server) Close() error {
	srv.closeOnce.Do(func() {
		var errs []error
		// In-flight calls finish first (for at most 5 s), so that none boots
		// a VM after the Sim has stopped them.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for _, hs := range srv.servers {
			if hs.Shutdown(ctx) != nil {
				errs = append(errs, hs.Close())
			}
		}
		srv.wg.Wait()
		errs = append(errs, srv.Sim.Close())
		srv.closeErr = errors.Join(errs...)
	})
	return srv.closeErr
}

// adminHandler serves the admin API.
func (srv *Server) adminHandler() http.Handler {
	s := srv.Sim
	mux := http.NewServeMux()
	mux.HandleFunc("GET /_sim/instances", func(w http.ResponseWriter, r *http.Request) {
		out := s.List("", "")
		if out == nil {
			out = []Resource{}
		}
		writeJSON(w, http.StatusOK, out)
	})
	mux.HandleFunc("GET /_sim/faults", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, s.Faults())
	})
	mux.HandleFunc("POST /_sim/faults", func(w http.ResponseWriter, r *http.Request) {
		var f Faults
		dec := json.NewDecoder(r.Body)
		dec.DisallowUnknownFields()
		if err := dec.Decode(&f); err != nil {
			httpError(w, http.StatusBadRequest, "faults: %v", err)
			return
		}
		if err := f.Validate(); err != nil {
			httpError(w, http.StatusBadRequest, "faults: %v", err)
			return
		}
		s.SetFaults(f)
		writeJSON(w, http.StatusOK, s.Faults())
	})
	mux.HandleFunc("GET /_sim/stats", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, s.Stats())
	})
	mux.HandleFunc("POST /_sim/interrupt", func(w http.ResponseWriter, r *http.Request) {
		id, prov := r.URL.Query().Get("id"), r.URL.Query().Get("provider")
		var found []Resource
		for _, res := range s.Find(id) {
			if prov == "" || res.Provider == prov {
				found = append(found, res)
			}
		}
		switch {
		case id == "":
			httpError(w, http.StatusBadRequest, "interrupt: id is required")
			return
		case len(found) == 0:
			httpError(w, http.StatusNotFound, "interrupt: no resource %q", id)
			return
		case len(found) > 1:
			httpError(w, http.StatusConflict, "interrupt: %d resources have id %q; say which provider", len(found), id)
			return
		}
		p, ok := srv.providers[found[0].Provider]
		if !ok {
			httpError(w, http.StatusNotFound, "interrupt: provider %s is not served", found[0].Provider)
			return
		}
		if err := p.Interrupt(s, id); err != nil {
			httpError(w, http.StatusConflict, "interrupt: %v", err)
			return
		}
		res, _ := s.Get(found[0].Provider, id)
		writeJSON(w, http.StatusOK, res)
	})
	mux.HandleFunc("GET /_sim/backend/{provider}", func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("provider")
		p, ok := srv.providers[name]
		if !ok {
			httpError(w, http.StatusNotFound, "backend: provider %q is not served (have %s)", name, strings.Join(srv.names(), ", "))
			return
		}
		writeJSON(w, http.StatusOK, p.Backend(s, srv.Endpoints[name]))
	})
	return mux
}

func (srv *Server) names() []string {
	var out []string
	for n := range srv.providers {
		out = append(out, n)
	}
	return out
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func httpError(w http.ResponseWriter, code int, format string, args ...any) {
	writeJSON(w, code, map[string]string{"error": fmt.Sprintf(format, args...)})
}
