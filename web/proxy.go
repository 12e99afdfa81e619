package web

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v5"
)

// DefaultProject is the project of every hoist run: dstack's URLs name a
// project, hoist serves one.
const DefaultProject = "main"

// ServicePath returns the path of a service run's URL on the in-server
// proxy (dstack's /proxy/services/<project>/<run>/).
func ServicePath(project, run string) string {
	return "/proxy/services/" + url.PathEscape(project) + "/" + url.PathEscape(run) + "/"
}

// ProxyLimits bound the requests the service proxy holds while a service
// scaled to zero starts a replica.
type ProxyLimits struct {
	// Hold is how long a request waits for a ready replica; zero means 2
	// minutes. It then gets 503.
	Hold time.Duration
	// Queue is how many requests may wait at once, over all services; zero
	// means 256. Beyond it a request gets 503 at once.
	Queue int
	// Poll is how often a held request asks for a ready replica; zero
	// means 250 ms.
	Poll time.Duration
	// RouteTTL is how long the proxy reuses a service's route (its
	// settings and ready replicas) before asking Services again; zero
	// means 1 s, negative asks on every request. A replica whose probe
	// starts failing gets traffic for at most this long.
	RouteTTL time.Duration
}

// serviceProxy forwards /proxy/services/<project>/<run>/… to the run's
// ready replicas, as dstack's in-server proxy does (dstack
// src/dstack/_internal/server/services/proxy/routers/service_proxy.py), with
// WebSockets and holding requests while a run scaled to zero wakes, which
// dstack's does not do.
type serviceProxy struct {
	s      *Server
	svc    Services
	meter  *Meter
	limits *rateLimits
	lim    ProxyLimits
	held   chan struct{} // one slot per held request
	// templates are the compiled chat templates of tgi models.
	templates chatTemplates
	next      sync.Map // project/run → *atomic.Uint64, the round robin
	// waiting counts the requests held per run (project/run →
	// *atomic.Int64), for a gateway's stats.
	waiting sync.Map

	mu     sync.Mutex
	routes map[string]cachedRoute // project/run → its route while fresh
}

// cachedRoute is a service's route and when it was read.
type cachedRoute struct {
	svc Service
	at  time.Time
}

func newServiceProxy(s *Server, svc Services, meter *Meter, lim ProxyLimits) *serviceProxy {
	if lim.Hold <= 0 {
		lim.Hold = 2 * time.Minute
	}
	if lim.Queue <= 0 {
		lim.Queue = 256
	}
	if lim.Poll <= 0 {
		lim.Poll = 250 * time.Millisecond
	}
	if lim.RouteTTL == 0 {
		lim.RouteTTL = time.Second
	}
	return &serviceProxy{s: s, svc: svc, meter: meter, limits: newRateLimits(s.now), lim: lim,
		held: make(chan struct{}, lim.Queue), routes: map[string]cachedRoute{}}
}

// serve is the handler of /proxy/services/:project/:run and everything
// below it.
func (p *serviceProxy) serve(c *echo.Context) error {
	if p.svc == nil {
		return echo.NewHTTPError(http.StatusNotFound, "no service proxy in this hoist")
	}
	r := c.Request()
	// The path, not echo's parameters, names the run and what follows it,
	// so that the forwarded path is exactly the one asked for.
	parts := strings.SplitN(strings.TrimPrefix(r.URL.Path, "/proxy/services/"), "/", 3)
	if len(parts) < 2 || parts[0] == "" || parts[1] == "" {
		return echo.NewHTTPError(http.StatusNotFound, "no such service")
	}
	project, run := parts[0], parts[1]
	base := "/proxy/services/" + project + "/" + run
	if len(parts) == 2 {
		// dstack answers 308 to the trailing-slash URL, which keeps the
		// method and body.
		u := *r.URL
		u.Path, u.RawPath = r.URL.Path+"/", ""
		return c.Redirect(http.StatusPermanentRedirect, u.RequestURI())
	}
	return p.serveRun(c, project, run, "/"+parts[2], base)
}

// serveRun forwards a request for the service run: rest is the path below
// the service's URL (for rate limits and strip_prefix), base the service's
// URL path ("" when the service is served at the root of a host of its own,
// as on a gateway).
func (p *serviceProxy) serveRun(c *echo.Context, project, run, rest, base string) error {
	r := c.Request()
	ctx := r.Context()
	svc, err := p.route(ctx, project, run)
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return echo.NewHTTPError(http.StatusNotFound, "no such service")
		}
		return err
	}
	if svc.Auth {
		if err := p.authorize(c, project); err != nil {
			return err
		}
		// The token is hoist's, not the service's: never forwarded.
		r.Header.Del("Authorization")
	}
	dropSessionCookie(r)
	if i, ok := matchLimit(svc.RateLimits, rest); ok {
		// A request without the header a rule counts by is not limited.
		if key, counted := limitKey(svc.RateLimits[i], r, c.RealIP()); counted {
			if allowed, wait := p.limits.allow(project+"/"+run, i, svc.RateLimits[i], key); !allowed {
				p.meter.record(project, run)
				c.Response().Header().Set("Retry-After", strconv.Itoa(int(wait/time.Second)+1))
				return echo.NewHTTPError(http.StatusTooManyRequests, "rate limit exceeded")
			}
		}
	}
	p.meter.record(project, run)
	target, prefix := rest, base
	if !svc.StripPrefix {
		target, prefix = r.URL.Path, ""
	}
	return p.forward(c, svc, target, prefix)
}

// forward sends the request to one of svc's ready replicas at path
// target (prefix, when not empty, goes along as X-Forwarded-Prefix),
// holding it while a run scaled to zero wakes.
func (p *serviceProxy) forward(c *echo.Context, svc Service, target, prefix string) error {
	r := c.Request()
	ctx := r.Context()
	project, run := svc.Project, svc.Run

	// Live answers (SSE, long downloads, WebSockets) and long uploads are
	// not cut at the server's read and write timeouts; each write renews
	// the write deadline, so a client that stops reading is still let go.
	renew := p.s.streamDeadlines(c.Response())
	// A replica may answer while the client still sends (an upload with
	// progress, a streamed chat): without full duplex, net/http's HTTP/1
	// server reads the rest of the body before the answer's headers.
	_ = http.NewResponseController(c.Response()).EnableFullDuplex()
	if r.Header.Get("Upgrade") != "" {
		// A WebSocket keeps the connection after the answer: no deadline.
		rc := http.NewResponseController(c.Response())
		renew = func() { _ = rc.SetWriteDeadline(time.Time{}) }
	}
	rep, err := p.replica(ctx, svc)
	if err != nil {
		return err
	}
	renew()
	rp := &httputil.ReverseProxy{
		FlushInterval: -1, // streamed answers (SSE, chunked) reach the client at once
		ErrorLog:      slog.NewLogLogger(p.s.log.Handler(), slog.LevelWarn),
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host = "http", rep.Addr
			pr.Out.URL.Path, pr.Out.URL.RawPath = target, ""
			pr.Out.Host = rep.Addr
			pr.SetXForwarded()
			if prefix != "" {
				pr.Out.Header.Set("X-Forwarded-Prefix", prefix)
			}
		},
		ErrorHandler: func(w http.ResponseWriter, req *http.Request, err error) {
			code := http.StatusBadGateway
			if errors.Is(err, context.DeadlineExceeded) {
				code = http.StatusGatewayTimeout
			}
			// The replica may be gone (stopped, retired): the next request
			// reads the route afresh.
			p.forget(project, run)
			if req.Context().Err() == nil {
				p.s.log.Warn("service_proxy_failed", "project", project, "run", run, "job_id", rep.JobID, "error", err)
			}
			w.WriteHeader(code)
		},
	}
	rp.Transport = &retryTransport{p: p, project: project, run: run, rep: rep}
	rp.ServeHTTP(&renewingWriter{ResponseWriter: c.Response(), renew: renew}, r)
	return nil
}

// replica picks one of svc's ready replicas, holding the request while a
// run scaled to zero wakes.
func (p *serviceProxy) replica(ctx context.Context, svc Service) (Replica, error) {
	if len(svc.Replicas) == 0 {
		if svc.MinReplicas > 0 {
			return Replica{}, echo.NewHTTPError(http.StatusServiceUnavailable, "no ready replica")
		}
		var err error
		if svc, err = p.hold(ctx, svc.Project, svc.Run); err != nil {
			return Replica{}, err
		}
	}
	return p.pick(svc.Project, svc.Run, svc.Replicas), nil
}

// route returns the service's route, from the cache while it is fresh
// and lists a ready replica (a run with none is asked again, so that a
// woken replica is seen at once).
func (p *serviceProxy) route(ctx context.Context, project, run string) (Service, error) {
	key := project + "/" + run
	now := p.s.now()
	p.mu.Lock()
	c, ok := p.routes[key]
	p.mu.Unlock()
	if ok && now.Sub(c.at) < p.lim.RouteTTL && len(c.svc.Replicas) > 0 {
		return c.svc, nil
	}
	svc, err := p.svc.Service(ctx, project, run)
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		delete(p.routes, key)
		return Service{}, err
	}
	if p.lim.RouteTTL > 0 {
		if len(p.routes) >= 4096 { // stale entries of deleted runs: start over
			clear(p.routes)
		}
		p.routes[key] = cachedRoute{svc: svc, at: now}
	}
	return svc, nil
}

// forget drops the service's cached route.
func (p *serviceProxy) forget(project, run string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.routes, project+"/"+run)
}

// authorize requires a hoist token as Authorization: Bearer (dstack's
// `auth: true`) of a member of project: every role of a dstack project,
// the viewer included, may call its services. A failed token counts
// against the client's login limit; a token of no role in the project is
// 404, as the project's API routes answer it.
func (p *serviceProxy) authorize(c *echo.Context, project string) error {
	tok := bearer(c.Request())
	if tok == "" {
		c.Response().Header().Set("WWW-Authenticate", `Bearer realm="hoist"`)
		return echo.NewHTTPError(http.StatusUnauthorized, "this service requires a hoist token (Authorization: Bearer)")
	}
	ip := c.RealIP()
	if !p.s.logins.allow(ip) {
		c.Response().Header().Set("Retry-After", "60")
		return echo.NewHTTPError(http.StatusTooManyRequests, "too many failed attempts; wait a minute")
	}
	who, ok := p.s.lookup(c, tok)
	if !ok {
		p.s.logins.fail(ip)
		c.Response().Header().Set("WWW-Authenticate", `Bearer realm="hoist"`)
		return echo.NewHTTPError(http.StatusUnauthorized, "invalid token")
	}
	if !who.RoleIn(project).CanRead() {
		return errNoProject
	}
	return nil
}

// hold waits, within the queue and the time ProxyLimits allow, until a run
// scaled to zero has a ready replica, asking the reconciler for one first.
func (p *serviceProxy) hold(ctx context.Context, project, run string) (Service, error) {
	select {
	case p.held <- struct{}{}:
		defer func() { <-p.held }()
	default:
		return Service{}, echo.NewHTTPError(http.StatusServiceUnavailable, "too many requests wait for replicas")
	}
	w, _ := p.waiting.LoadOrStore(project+"/"+run, new(atomic.Int64))
	w.(*atomic.Int64).Add(1)
	defer w.(*atomic.Int64).Add(-1)
	if err := p.svc.Wake(ctx, project, run); err != nil {
		return Service{}, err
	}
	p.s.log.Info("service_request_held", "project", project, "run", run)
	ctx, cancel := context.WithTimeout(ctx, p.lim.Hold)
	defer cancel()
	t := time.NewTicker(p.lim.Poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return Service{}, echo.NewHTTPError(http.StatusServiceUnavailable, "no replica became ready in time")
		case <-t.C:
		}
		svc, err := p.svc.Service(ctx, project, run)
		if err != nil {
			if errors.Is(err, ErrNotFound) {
				return Service{}, echo.NewHTTPError(http.StatusNotFound, "no such service")
			}
			if ctx.Err() != nil {
				continue
			}
			return Service{}, err
		}
		if len(svc.Replicas) > 0 {
			return svc, nil
		}
	}
}

// pick returns the run's next replica in turn, in the order of their job
// ids.
func (p *serviceProxy) pick(project, run string, reps []Replica) Replica {
	reps = slices.Clone(reps)
	slices.SortFunc(reps, func(a, b Replica) int { return strings.Compare(a.JobID, b.JobID) })
	v, _ := p.next.LoadOrStore(project+"/"+run, new(atomic.Uint64))
	n := v.(*atomic.Uint64).Add(1) - 1
	return reps[n%uint64(len(reps))]
}

// dropSessionCookie removes hoist's login cookie from a request that leaves
// for a service: it is a credential of hoist.
func dropSessionCookie(r *http.Request) {
	cs := r.Cookies()
	if len(cs) == 0 {
		return
	}
	r.Header.Del("Cookie")
	for _, ck := range cs {
		if ck.Name != sessionCookie {
			r.AddCookie(ck)
		}
	}
}

// renewingWriter gives each write of a proxied answer a fresh write
// deadline. Unwrap lets http.ResponseController reach the connection
// (flush, hijack for WebSockets).
type renewingWriter struct {
	http.ResponseWriter
	renew func()
}

func (w *renewingWriter) Write(b []byte) (int, error) {
	w.renew()
	return w.ResponseWriter.Write(b)
}

func (w *renewingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// retryTransport sends a request to the replica picked for it and, when
// that replica cannot be reached and the request is safe to send again (a
// GET, HEAD or OPTIONS without a body), to another ready replica of a
// fresh route, at most twice: a replica retired during a rolling
// deployment, or stopped since the route was read, fails no such request.
type retryTransport struct {
	p            *serviceProxy
	project, run string
	rep          Replica
}

func (t *retryTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := transportOf(t.rep).RoundTrip(req)
	tried := []string{t.rep.JobID}
	for attempt := 0; err != nil && attempt < 2 && replayable(req) && req.Context().Err() == nil; attempt++ {
		t.p.forget(t.project, t.run)
		svc, rerr := t.p.route(req.Context(), t.project, t.run)
		if rerr != nil {
			break
		}
		i := slices.IndexFunc(svc.Replicas, func(r Replica) bool { return !slices.Contains(tried, r.JobID) })
		if i < 0 {
			break
		}
		next := svc.Replicas[i]
		tried = append(tried, next.JobID)
		t.p.s.log.Info("service_proxy_retried", "project", t.project, "run", t.run, "failed_job_id", t.rep.JobID, "job_id", next.JobID, "error", err)
		out := req.Clone(req.Context())
		out.URL.Host, out.Host = next.Addr, next.Addr
		t.rep = next
		resp, err = transportOf(next).RoundTrip(out)
	}
	return resp, err
}

// transportOf is the replica's transport, or the default one.
func transportOf(r Replica) http.RoundTripper {
	if r.Transport == nil {
		return http.DefaultTransport
	}
	return r.Transport
}

// replayable reports whether req may be sent again to another replica.
func replayable(req *http.Request) bool {
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
	default:
		return false
	}
	return (req.Body == nil || req.Body == http.NoBody) && req.Header.Get("Upgrade") == ""
}
