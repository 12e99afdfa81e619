package web

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v5"

	"hoist/agents/api"
)

// GatewayServerOptions configure a GatewayServer, the server of `hoist gateway`.
type GatewayServerOptions struct {
	// StateDir keeps the last accepted configuration (gateway.json), the
	// ACME account and the certificates (acme/); required.
	StateDir string
	// AdminToken is the bearer token every admin API request must carry;
	// required.
	AdminToken string
	// HTTPSPort is the port of the public HTTPS listener, for the
	// redirects of plain HTTP requests (443 leaves it out of the URL);
	// zero means 443.
	HTTPSPort int
	// DialSSH dials addr as seen from the host a replica's SSH names,
	// through an SSH connection to that host (pinned host key, ProxyJump);
	// cmd/hoist passes a pool of backends/tunnel connections. Nil refuses
	// replicas reached over SSH (their requests get 502).
	DialSSH func(ctx context.Context, host api.GatewaySSH, addr string) (net.Conn, error)
	// Proxy bounds the requests held while a service scaled to zero has no
	// ready replica; zero fields take the service proxy's defaults.
	Proxy ProxyLimits
	// Timeouts bound the public connections (see Timeouts).
	Timeouts Timeouts
	// CertRetry is how often hosts without a certificate ask ACME again;
	// zero means one minute.
	CertRetry time.Duration
	// Logger receives the gateway's logs; nil discards.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// A GatewayServer serves the configuration hoist's server puts through the admin
// API (agents/api GatewayConfig): each service at the root of its own host,
// <run>.<domain>, and the models of the services that declare one at
// gateway.<domain> (dstack's gateway, src/dstack/_internal/proxy/gateway),
// with the service proxy's forwarding, streaming, WebSockets, retries, rate
// limits and holding of requests for services scaled to zero. The server
// learns of held requests from the stats and starts a replica; the gateway
// forwards them once a configuration lists one. Create it with NewGatewayServer,
// serve PublicHandler on the HTTP and HTTPS listeners (TLSConfig on the
// latter) and AdminHandler on the admin socket, and Close it at the end.
type GatewayServer struct {
	opts  GatewayServerOptions
	log   *slog.Logger
	now   func() time.Time
	s     *Server // the service proxy's host: clock, logger, timeouts, token lookup
	proxy *serviceProxy
	meter *Meter
	svcE  *echo.Echo // services, at the root of their hosts
	modE  *echo.Echo // models, at gateway.<domain> (rewritten to /proxy/models/…)

	mu    sync.Mutex // serializes PUTs and saving
	state atomic.Pointer[gatewayState]

	certs *gatewayCerts

	sshMu   sync.Mutex
	sshErrs map[string]string // replica host → why the gateway cannot reach it

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// gatewayState is one accepted configuration, indexed for routing.
type gatewayState struct {
	cfg    api.GatewayConfig
	byHost map[string]*api.GatewayServiceConfig // lower-case host → service
	byRun  map[string]Service                   // project/run → routing view
	tokens map[string]time.Time                 // sha256 hex → expiry (zero: never)
}

// gatewayModelsHost is the host label of the models endpoint, as dstack's
// gateway names it (gateway.<domain>).
const gatewayModelsHost = "gateway"

// NewGatewayServer returns a gateway serving the configuration last saved under
// opts.StateDir, if any.
func NewGatewayServer(opts GatewayServerOptions) (*GatewayServer, error) {
	if opts.StateDir == "" {
		return nil, errors.New("web: gateway state dir is required")
	}
	if opts.AdminToken == "" {
		return nil, errors.New("web: gateway admin token is required")
	}
	if opts.HTTPSPort == 0 {
		opts.HTTPSPort = 443
	}
	if opts.CertRetry <= 0 {
		opts.CertRetry = time.Minute
	}
	if opts.Proxy.RouteTTL == 0 {
		// Routes are read from memory: each request sees the newest
		// configuration.
		opts.Proxy.RouteTTL = -1
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	ctx, cancel := context.WithCancel(context.Background())
	g := &GatewayServer{opts: opts, log: log, now: now, meter: NewMeter(now), ctx: ctx, cancel: cancel}
	g.s = &Server{
		cfg:    Config{Timeouts: opts.Timeouts},
		deps:   Deps{Tokens: gatewayTokens{g}},
		log:    log,
		now:    now,
		logins: newLoginFailures(now),
		ctx:    ctx,
		cancel: cancel,
	}
	g.proxy = newServiceProxy(g.s, gatewayServices{g}, g.meter, opts.Proxy)
	g.svcE = g.newEcho()
	g.svcE.Any("/*", g.serveService)
	g.modE = g.newEcho()
	g.modE.Any("/proxy/models/:project/*", g.proxy.models)
	g.state.Store(indexGateway(api.GatewayConfig{}, nil))
	cfg, err := loadGatewayConfig(opts.StateDir)
	if err != nil {
		cancel()
		return nil, err
	}
	if cfg != nil {
		g.state.Store(indexGateway(*cfg, g.transports(nil)))
		log.Info("gateway_config_loaded", "version", cfg.Version, "services", len(cfg.Services))
	}
	g.certs = newGatewayCerts(g)
	g.certs.apply(g.state.Load().cfg)
	g.wg.Add(1)
	go g.certLoop()
	return g, nil
}

// Close stops the gateway's background work (certificate requests) and
// ends held requests.
func (g *GatewayServer) Close() error {
	g.cancel()
	g.wg.Wait()
	return nil
}

// newEcho returns an echo instance answering errors as JSON.
func (g *GatewayServer) newEcho() *echo.Echo {
	return echo.NewWithConfig(echo.Config{
		Logger:           g.log,
		HTTPErrorHandler: g.handleError,
		// The peer address, not X-Forwarded-For, which clients can forge
		// (login and rate limits rely on it).
		IPExtractor: echo.ExtractIPDirect(),
	})
}

// handleError answers a handler's error as JSON.
func (g *GatewayServer) handleError(c *echo.Context, err error) {
	if r, _ := echo.UnwrapResponse(c.Response()); r != nil && r.Committed {
		return
	}
	code, msg := errorStatus(err)
	if code >= 500 {
		g.log.Error("gateway_request_failed", "method", c.Request().Method, "host", c.Request().Host, "path", c.Request().URL.Path, "error", err)
	}
	if msg == "" {
		msg = strings.ToLower(http.StatusText(code))
	}
	if c.Request().Method == http.MethodHead {
		_ = c.NoContent(code)
		return
	}
	_ = c.JSON(code, APIError{Message: msg})
}

// PublicHandler serves the public listeners, HTTP and HTTPS alike (a
// request's TLS says which): ACME HTTP-01 challenges, 301 from HTTP to
// HTTPS for services served over TLS, each service at its host and the
// models at gateway.<domain>; any other host gets 404.
func (g *GatewayServer) PublicHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil && strings.HasPrefix(r.URL.Path, "/.well-known/acme-challenge/") {
			if h := g.certs.httpHandler(); h != nil {
				h.ServeHTTP(w, r)
				return
			}
		}
		st := g.state.Load()
		host := requestHost(r)
		https := false
		var models bool
		if svc, ok := st.byHost[host]; ok {
			https = svc.HTTPS
		} else if st.cfg.Domain != "" && host == gatewayModelsHost+"."+strings.ToLower(st.cfg.Domain) {
			models, https = true, st.modelsHTTPS()
		} else {
			g.handleError(g.svcE.NewContext(r, w), echo.NewHTTPError(http.StatusNotFound, "no service at this host"))
			return
		}
		if https && st.cfg.TLS != nil && r.TLS == nil {
			u := url.URL{Scheme: "https", Host: host, Path: r.URL.Path, RawPath: r.URL.RawPath, RawQuery: r.URL.RawQuery}
			if g.opts.HTTPSPort != 443 {
				u.Host = net.JoinHostPort(host, strconv.Itoa(g.opts.HTTPSPort))
			}
			http.Redirect(w, r, u.String(), http.StatusMovedPermanently)
			return
		}
		if models {
			// The models endpoint of the in-server proxy serves it
			// (/proxy/models/<project>/…, with its /v1 aliases).
			r2 := r.Clone(r.Context())
			r2.URL.Path = "/proxy/models/" + DefaultProject + "/" + strings.TrimPrefix(r.URL.Path, "/")
			r2.URL.RawPath = ""
			g.modE.ServeHTTP(w, r2)
			return
		}
		g.svcE.ServeHTTP(w, r)
	})
}

// serveService forwards a request to the service of its host, at the same
// path: dstack serves a gateway's service at the root of its domain.
func (g *GatewayServer) serveService(c *echo.Context) error {
	r := c.Request()
	svc, ok := g.state.Load().byHost[requestHost(r)]
	if !ok {
		return echo.NewHTTPError(http.StatusNotFound, "no service at this host")
	}
	return g.proxy.serveRun(c, svc.Project, svc.Run, r.URL.Path, "")
}

// requestHost is the request's host, lower case, without a port.
func requestHost(r *http.Request) string {
	h := r.Host
	if hh, _, err := net.SplitHostPort(h); err == nil {
		h = hh
	}
	return strings.ToLower(strings.TrimSuffix(h, "."))
}

// modelsHTTPS reports whether gateway.<domain> is served over TLS: when a
// service with a model is.
func (st *gatewayState) modelsHTTPS() bool {
	for _, s := range st.cfg.Services {
		if s.Model != nil && s.HTTPS {
			return true
		}
	}
	return false
}

// httpsHosts returns the hosts served over TLS.
func (st *gatewayState) httpsHosts() []string {
	if st.cfg.TLS == nil {
		return nil
	}
	var hs []string
	for _, s := range st.cfg.Services {
		if s.HTTPS {
			hs = append(hs, strings.ToLower(s.Host))
		}
	}
	if st.modelsHTTPS() && st.cfg.Domain != "" {
		hs = append(hs, gatewayModelsHost+"."+strings.ToLower(st.cfg.Domain))
	}
	slices.Sort(hs)
	return slices.Compact(hs)
}

// indexGateway indexes cfg for routing; transport returns the transport of
// a replica reached over SSH.
func indexGateway(cfg api.GatewayConfig, transport func(api.GatewaySSH) http.RoundTripper) *gatewayState {
	st := &gatewayState{cfg: cfg, byHost: map[string]*api.GatewayServiceConfig{}, byRun: map[string]Service{}, tokens: map[string]time.Time{}}
	for _, t := range cfg.Tokens {
		st.tokens[strings.ToLower(t.SHA256)] = t.ExpiresAt
	}
	for i := range cfg.Services {
		sc := &cfg.Services[i]
		st.byHost[strings.ToLower(sc.Host)] = sc
		svc := Service{Project: sc.Project, Run: sc.Run, Auth: sc.Auth, StripPrefix: true, MinReplicas: sc.MinReplicas}
		if sc.Model != nil {
			svc.Model = &ServiceModel{Name: sc.Model.Name, Format: sc.Model.Format, Prefix: sc.Model.Prefix,
				ChatTemplate: sc.Model.ChatTemplate, EOSToken: sc.Model.EOSToken}
		}
		for _, l := range sc.RateLimits {
			svc.RateLimits = append(svc.RateLimits, ServiceRateLimit{Prefix: l.Prefix, RPS: l.RPS, Burst: l.Burst, Header: l.Header})
		}
		for _, rep := range sc.Replicas {
			r := Replica{JobID: rep.JobID, Addr: rep.Addr}
			if rep.SSH != nil && transport != nil {
				r.Transport = transport(*rep.SSH)
			}
			svc.Replicas = append(svc.Replicas, r)
		}
		st.byRun[sc.Project+"/"+sc.Run] = svc
	}
	return st
}

// transports returns a function giving each SSH host one transport,
// reusing those of old (so that kept-alive connections survive a new
// configuration).
func (g *GatewayServer) transports(old *gatewayState) func(api.GatewaySSH) http.RoundTripper {
	prev := map[string]http.RoundTripper{}
	if old != nil {
		for _, svc := range old.byRun {
			for _, r := range svc.Replicas {
				if t, ok := r.Transport.(*sshTransport); ok {
					prev[t.key] = t
				}
			}
		}
	}
	return func(h api.GatewaySSH) http.RoundTripper {
		k := sshKey(h)
		if t, ok := prev[k]; ok {
			return t
		}
		t := &sshTransport{key: k}
		t.Transport = &http.Transport{
			DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
				if g.opts.DialSSH == nil {
					return nil, fmt.Errorf("replica %s is reached over ssh, which this gateway cannot do", addr)
				}
				c, err := g.opts.DialSSH(ctx, h, addr)
				g.noteSSH(h.Hostname, err)
				return c, err
			},
			MaxIdleConnsPerHost: 16,
			IdleConnTimeout:     90 * time.Second,
		}
		prev[k] = t
		return t
	}
}

// noteSSH records the outcome of a dial through host, for Status.
func (g *GatewayServer) noteSSH(host string, err error) {
	g.sshMu.Lock()
	defer g.sshMu.Unlock()
	if err == nil {
		delete(g.sshErrs, host)
		return
	}
	if g.sshErrs == nil {
		g.sshErrs = map[string]string{}
	}
	if len(g.sshErrs) < 1024 {
		g.sshErrs[host] = err.Error()
	}
}

// sshTransport is the HTTP transport to the replicas of one SSH host.
type sshTransport struct {
	*http.Transport
	key string
}

// sshKey identifies an SSH login, jump hosts, keys and pins included.
func sshKey(h api.GatewaySSH) string {
	var b strings.Builder
	for p := &h; p != nil; p = p.ProxyJump {
		sum := sha256.Sum256([]byte(p.PrivateKey + "\x00" + strings.Join(p.HostKeys, "\x00")))
		fmt.Fprintf(&b, "%s@%s:%d/%x;", p.User, p.Hostname, p.Port, sum[:8])
	}
	return b.String()
}

// gatewayServices is the Services the gateway's proxy routes by: the
// configuration in memory.
type gatewayServices struct{ g *GatewayServer }

// Service returns the run's routing view from the configuration.
func (s gatewayServices) Service(_ context.Context, project, run string) (Service, error) {
	svc, ok := s.g.state.Load().byRun[project+"/"+run]
	if !ok {
		return Service{}, fmt.Errorf("service %s/%s: %w", project, run, ErrNotFound)
	}
	return svc, nil
}

// Models returns the services with a model. A gateway serves one project
// (dstack's gateways belong to one), so project is not asked.
func (s gatewayServices) Models(_ context.Context, _ string) ([]Service, error) {
	st := s.g.state.Load()
	var out []Service
	for _, sc := range st.cfg.Services {
		if sc.Model != nil {
			out = append(out, st.byRun[sc.Project+"/"+sc.Run])
		}
	}
	return out, nil
}

// Wake does nothing: the server reads the held requests in the stats
// (Waiting) and starts a replica, which the next configuration lists.
func (s gatewayServices) Wake(context.Context, string, string) error { return nil }

// gatewayTokens accepts the tokens of the configuration: their hex SHA-256
// listed and not expired. The server lists the tokens of the members of
// the gateway's project (and of global admins), so an accepted token may
// call every service the configuration routes.
type gatewayTokens struct{ g *GatewayServer }

// LookupToken returns a user principal for an accepted token.
func (t gatewayTokens) LookupToken(_ context.Context, token string) (Principal, error) {
	sum := sha256.Sum256([]byte(token))
	h := hex.EncodeToString(sum[:])
	st := t.g.state.Load()
	for k, exp := range st.tokens {
		if subtle.ConstantTimeCompare([]byte(k), []byte(h)) == 1 {
			if !exp.IsZero() && !t.g.now().Before(exp) {
				return Principal{}, ErrNotFound
			}
			p := Principal{Name: "token", Role: RoleUser, Projects: map[string]Role{}}
			for _, sc := range st.cfg.Services {
				p.Projects[sc.Project] = RoleUser
			}
			return p, nil
		}
	}
	return Principal{}, ErrNotFound
}

// HTTPServer returns an http.Server for h (PublicHandler or AdminHandler)
// with GatewayServerOptions.Timeouts set; proxied streams lift them.
func (g *GatewayServer) HTTPServer(h http.Handler) *http.Server {
	t := g.opts.Timeouts.withDefaults()
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: t.ReadHeader,
		ReadTimeout:       t.Read,
		WriteTimeout:      t.Write,
		IdleTimeout:       t.Idle,
		MaxHeaderBytes:    t.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(g.log.Handler(), slog.LevelWarn),
	}
}
