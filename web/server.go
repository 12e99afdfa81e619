package web

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v5"
	"github.com/prometheus/client_golang/prometheus"

	"hoist/reconciler/plan"
)

// Config holds the settings of the web server.
type Config struct {
	// AdminToken is the bootstrap bearer token; it always authenticates as
	// an admin. Empty disables it.
	AdminToken string
	// WebhookSecret authenticates /hooks/*; empty disables the receivers
	// (they answer 404).
	WebhookSecret string
	// Branch is the tracked branch; a GitHub or GitLab push to any other
	// branch is acknowledged but does not trigger a sync. Empty accepts all.
	Branch string
	// GitHubToken, when set, lets hoist post a pull request's plan back to
	// GitHub: a commit status and one comment edited on each push.
	GitHubToken string
	// GitHubAPI is the GitHub REST API base URL; empty means
	// https://api.github.com. Tests point it at a local fake.
	GitHubAPI string
	// GitLabToken, when set, lets hoist post a merge request's plan back
	// to GitLab: a commit status and one note edited on each push.
	GitLabToken string
	// GitLabAPI is the GitLab REST API base URL (the /api/v4 suffix is
	// added when missing); empty means https://gitlab.com/api/v4.
	GitLabAPI string
	// ExternalURL is hoist's own base URL as users reach it, used in links
	// posted to GitHub and GitLab; empty leaves target_url out.
	ExternalURL string
	// HTTPClient makes outgoing calls (GitHub and GitLab); nil means a
	// client with a 10 s timeout.
	HTTPClient *http.Client
	// Logger receives request and error logs; nil discards.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// SessionTTL is how long a login cookie stays valid; zero means 12h.
	SessionTTL time.Duration
	// ListCacheTTL is how long a run list may be shared between viewers
	// (NotifyChange clears it early); zero means 1s, negative disables.
	ListCacheTTL time.Duration
	// Proxy bounds the requests the service proxy holds while a service
	// scaled to zero starts a replica; zero fields take defaults.
	Proxy ProxyLimits
	// Timeouts bound the connections of the server HTTPServer builds;
	// zero fields take the values of DefaultTimeouts.
	Timeouts Timeouts
	// Budgets are the projects' budgets by project name (the server
	// config's `projects[].budget`), shown beside their spend on the
	// overview, in GET /api/v1/budget and as
	// hoist_project_budget_dollars_per_hour; a project without one has no
	// limit.
	Budgets map[string]plan.Budget
	// DefaultProject is the project of Deps' own per-project fields, which
	// the unprefixed routes (/runs, /api/v1/runs, …) address; empty means
	// DefaultProject ("main").
	DefaultProject string
}

// Timeouts bound each connection, so that slow or idle clients cannot hold
// the server's connections (see net/http.Server for each field). Live
// streams (server-sent events, ?follow=true and log downloads) lift the
// read deadline and give each batch they write a fresh Write.
type Timeouts struct {
	// ReadHeader is how long a client may take to send the request headers.
	ReadHeader time.Duration
	// Read is how long a client may take to send the whole request.
	Read time.Duration
	// Write is how long an answer may take, from the end of the headers.
	Write time.Duration
	// Idle is how long a kept-alive connection waits for the next request.
	Idle time.Duration
	// MaxHeaderBytes bounds the size of the request headers.
	MaxHeaderBytes int
}

// DefaultTimeouts are the timeouts of a zero Config.Timeouts: generous for
// a dashboard page, a plan request or a webhook body, short for a client
// that sends nothing.
var DefaultTimeouts = Timeouts{
	ReadHeader:     10 * time.Second,
	Read:           time.Minute,
	Write:          2 * time.Minute,
	Idle:           2 * time.Minute,
	MaxHeaderBytes: 256 << 10,
}

func (t Timeouts) withDefaults() Timeouts {
	d := DefaultTimeouts
	if t.ReadHeader > 0 {
		d.ReadHeader = t.ReadHeader
	}
	if t.Read > 0 {
		d.Read = t.Read
	}
	if t.Write > 0 {
		d.Write = t.Write
	}
	if t.Idle > 0 {
		d.Idle = t.Idle
	}
	if t.MaxHeaderBytes > 0 {
		d.MaxHeaderBytes = t.MaxHeaderBytes
	}
	return d
}

// Deps are the collaborators the server consumes. The fields that
// ProjectDeps also has (Store, Syncer, Inventory, Planner, Controller,
// Secrets, Artifacts, ServiceStatuses, JobMetrics) are the default project's
// (Config.DefaultProject); Projects holds every other project's. Store and
// Syncer are required in each project; the others are optional and their
// routes answer 501 without them.
type Deps struct {
	// Projects are the projects other than the default one, by name (a
	// plain URL path segment); their routes live below /projects/<name>
	// and /api/v1/projects/<name>. An entry named like the default project
	// is refused.
	Projects map[string]ProjectDeps
	// Store reads runs, jobs, logs, events and revisions (required).
	Store Store
	// Syncer reports sync status and syncs (required).
	Syncer Syncer
	// Tokens resolves API tokens other than the admin token.
	Tokens Tokens
	// Inventory lists fleets, instances, volumes and gateways.
	Inventory Inventory
	// Planner computes plans and reads specs of past revisions.
	Planner Planner
	// Controller carries out actions (stop, re-run, suspend, apply).
	Controller Controller
	// Offers answers offer queries; the backends are the server's, so
	// every project shows the same offers.
	Offers Offers
	// Secrets keeps the project's secrets (the /secrets page and API).
	Secrets Secrets
	// Services routes /proxy/services to service runs' ready replicas;
	// nil answers 404 there.
	Services Services
	// ServiceStatuses shows service runs' replicas, traffic and its
	// history on the run page and in the run API; nil leaves them out.
	ServiceStatuses ServiceStatuses
	// JobMetrics shows running jobs' CPU, memory and GPU use on the run
	// page, in the run API and as hoist_job_* on /metrics; nil leaves them
	// out.
	JobMetrics JobMetrics
	// Meter counts the proxy's requests per service run (give the same one
	// to the reconciler's autoscaling); nil means a Meter of the server's
	// own.
	Meter *Meter
	// RunnerDownloads serves the runner to container clouds' pods
	// (GET /agents/runner/<arch>); nil answers 404 there.
	RunnerDownloads *RunnerDownloads
	// Artifacts serves jobs' artifact files (GET
	// /api/v1/runs/{name}/artifacts…) and lists them on the run page; nil
	// answers 501 there and leaves the page's section out.
	Artifacts Artifacts
	// OIDC logs people in through an OpenID Connect provider (oidc.go);
	// nil offers tokens only.
	OIDC *OIDCLogin
	// Users keeps users, project members and API tokens (the users,
	// members and tokens API and the /admin page); nil answers 501 there.
	Users Users
	// Shared keeps sessions, webhook deliveries and pull-request plans
	// where every server on the database sees them; nil keeps them in this
	// process.
	Shared Shared
}

// Server is hoist's HTTP server. Create it with New, serve it with
// HTTPServer (or Handler), and Close it when shutting down.
type Server struct {
	cfg  Config
	deps Deps
	// defaultProject names the project of the unprefixed routes; projects
	// holds every project, the default one included.
	defaultProject string
	projects       map[string]*project
	log            *slog.Logger
	now            func() time.Time
	echo           *echo.Echo
	sess           *sessions
	logs           broadcast
	// notifying is set once NotifyLogs was called: followers then poll slowly.
	notifying atomic.Bool
	metrics   *Metrics
	seen      *deliveries
	logins    *loginFailures
	plans     *planLimiter
	prs       *prPlans
	// forges post pull requests' previews, by provider ("github",
	// "gitlab"), for the providers with a token.
	forges map[string]forge
	proxy  *serviceProxy
	bg     sync.WaitGroup
	ctx    context.Context
	cancel context.CancelFunc
	once   sync.Once
}

// New builds a server.
func New(cfg Config, deps Deps) (*Server, error) {
	def, projects, err := buildProjects(cfg, deps)
	if err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	if cfg.GitHubAPI == "" {
		cfg.GitHubAPI = "https://api.github.com"
	}
	if cfg.GitLabAPI == "" {
		cfg.GitLabAPI = "https://gitlab.com/api/v4"
	}
	forges, err := newForges(cfg)
	if err != nil {
		return nil, fmt.Errorf("web: %w", err)
	}
	if cfg.ListCacheTTL == 0 {
		cfg.ListCacheTTL = time.Second
	}
	if cfg.SessionTTL == 0 {
		cfg.SessionTTL = 12 * time.Hour
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		cfg:            cfg,
		deps:           deps,
		defaultProject: def,
		projects:       projects,
		log:            log,
		now:            now,
		sess:           newSessions(now, cfg.SessionTTL),
		seen:           newDeliveries(now, deliveryTTL, deliveryMax),
		prs:            newPRPlans(),
		forges:         forges,
		logins:         newLoginFailures(now),
		plans:          newPlanLimiter(now),
		cancel:         cancel,
	}
	s.sess.shared, s.sess.log = deps.Shared, log
	s.seen.shared, s.seen.log = deps.Shared, log
	s.prs.shared, s.prs.log = deps.Shared, log
	s.metrics = NewMetrics()
	s.metrics.reg.MustRegister(runsCollector{s: s, desc: prometheus.NewDesc(
		"hoist_runs", "Runs by status.", []string{"project", "status"}, nil)})
	s.metrics.reg.MustRegister(newAccountingCollector(s))
	s.metrics.reg.MustRegister(newJobMetricsCollector(s))
	s.ctx = ctx
	if deps.Meter == nil {
		deps.Meter = NewMeter(now)
		s.deps.Meter = deps.Meter
	}
	s.proxy = newServiceProxy(s, deps.Services, deps.Meter, cfg.Proxy)
	s.echo = s.routes()
	return s, nil
}

// Handler returns the root HTTP handler.
func (s *Server) Handler() http.Handler { return s.echo }

// Close ends live streams (SSE, ?follow=true) and waits for background
// work (pull-request plans). Call it when shutting down, before or
// alongside http.Server.Shutdown, which otherwise waits for open streams.
func (s *Server) Close() error {
	s.once.Do(func() {
		s.cancel()
		s.bg.Wait()
	})
	return nil
}

// HTTPServer returns an http.Server for Handler with Config.Timeouts set.
// Use it rather than a bare http.Server, which waits forever for
// slow clients.
func (s *Server) HTTPServer() *http.Server {
	t := s.cfg.Timeouts.withDefaults()
	return &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: t.ReadHeader,
		ReadTimeout:       t.Read,
		WriteTimeout:      t.Write,
		IdleTimeout:       t.Idle,
		MaxHeaderBytes:    t.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
}

// streamDeadlines frees a live stream from the connection's deadlines,
// which would otherwise cut it at Timeouts.Read (net/http cancels the
// request when its background read times out) and Timeouts.Write. It
// returns renew, which gives the next writes Timeouts.Write from now: call
// it before each batch, so that a client that stops reading is still cut
// off. Deadlines are wall-clock time, whatever Config.Now says.
func (s *Server) streamDeadlines(w http.ResponseWriter) (renew func()) {
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{})
	write := s.cfg.Timeouts.withDefaults().Write
	return func() { _ = rc.SetWriteDeadline(time.Now().Add(write)) }
}

// errorStatus is the HTTP status of a handler's error (an echo error's own,
// 404 for ErrNotFound, else 500) and the message an echo error carries.
func errorStatus(err error) (int, string) {
	var he *echo.HTTPError
	switch {
	case errors.As(err, &he):
		return he.Code, he.Message
	case errors.Is(err, ErrNotFound):
		return http.StatusNotFound, ""
	}
	if sc := echo.StatusCode(err); sc != 0 {
		return sc, ""
	}
	return http.StatusInternalServerError, ""
}

// handleError turns handler errors into JSON for API and hook callers and a
// small HTML page for browsers.
func (s *Server) handleError(c *echo.Context, err error) {
	if r, _ := echo.UnwrapResponse(c.Response()); r != nil && r.Committed {
		return
	}
	code, msg := errorStatus(err)
	if code >= 500 {
		s.log.Error("http_error", "method", c.Request().Method, "path", c.Request().URL.Path, "error", err)
	}
	if msg == "" {
		if code < 500 && errors.Is(err, ErrNotFound) {
			msg = "not found"
		} else {
			msg = strings.ToLower(http.StatusText(code))
		}
	}
	if c.Request().Method == http.MethodHead {
		_ = c.NoContent(code)
		return
	}
	if wantsHTML(c.Request()) {
		_ = s.render(c, code, errorPage(s.viewer(c), code, msg))
		return
	}
	_ = c.JSON(code, APIError{Message: msg})
}

// APIError is the JSON body of every error answer; Message says what went
// wrong to people.
type APIError struct {
	Message string `json:"message"`
}

func wantsHTML(r *http.Request) bool {
	p := r.URL.Path
	if strings.HasPrefix(p, "/api/") || strings.HasPrefix(p, "/hooks/") || p == "/metrics" {
		return false
	}
	return strings.Contains(r.Header.Get("Accept"), "text/html")
}

var errUnavailable = echo.NewHTTPError(http.StatusNotImplemented, "not available in this hoist")

// ActionDone is the answer to an action (POST /api/v1/runs/{name}/stop and
// the like): Message says what was requested.
type ActionDone struct {
	Message string `json:"message"`
}

// actionError maps a controller refusal to 409 and keeps ErrNotFound 404.
func actionError(err error) error {
	if errors.Is(err, ErrNotFound) {
		return err
	}
	return &echo.HTTPError{Code: http.StatusConflict, Message: err.Error()}
}
