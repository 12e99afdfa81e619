package main

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/sync/errgroup"

	"hoist/backends"
	"hoist/backends/aws"
	"hoist/backends/azure"
	"hoist/backends/gcp"
	"hoist/backends/kubernetes"
	"hoist/backends/lambda"
	"hoist/backends/local"
	"hoist/backends/offers"
	"hoist/backends/runpod"
	"hoist/backends/sshfleet"
	"hoist/backends/vastai"
	"hoist/backends/verda"
	"hoist/backends/vultr"
	"hoist/reconciler"
	"hoist/reconciler/plan"
	"hoist/reconciler/policy"
	"hoist/store"
	"hoist/web"
	"hoist/web/storeview"
)

// registry lists every backend type hoist can drive: its factory and, for
// a driver whose offers are live, its offer source. Adding a backend is one
// line here.
func registry() backends.Registry {
	return backends.Registry{
		"aws":        {Open: aws.Factory},
		"azure":      {Open: azure.Factory},
		"gcp":        {Open: gcp.Factory},
		"kubernetes": {Open: kubernetes.Factory, Offers: kubernetes.OfferSource},
		"lambda":     {Open: lambda.Factory},
		"local":      {Open: local.Factory},
		"runpod":     {Open: runpod.Factory, Offers: runpod.OfferSource},
		"ssh":        {Open: sshfleet.Factory},
		"vastai":     {Open: vastai.Factory, Offers: vastai.OfferSource},
		"verda":      {Open: verda.Factory},
		"datacrunch": {Open: verda.Factory}, // dstack's alias of verda
		"vultr":      {Open: vultr.Factory, Offers: vultr.OfferSource},
	}
}

type serveOptions struct {
	repo, branch, path, listen, dataDir, db string
	pollInterval, resync                    time.Duration
	config, catalogDir, catalogURL          string
	agentsDir                               string
	webhookSecretFile, defaultImage         string
	logLevel, externalURL, installation     string
	noLocalFleet                            bool
	unreachableGrace, validateTimeout       time.Duration
	metricsInterval                         time.Duration
	retention, leakAudit, leakGrace         time.Duration
	// minFreeDisk is --min-free-disk, as given; minFree its bytes.
	minFreeDisk string
	minFree     int64
}

func newServeCmd() *cobra.Command {
	var o serveOptions
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the daemon: sync specs from Git, reconcile, serve the dashboard and API",
		Long: `Run the daemon: sync specs from Git, reconcile, serve the dashboard and API.

Every flag can also be set by an environment variable HOIST_<FLAG>, e.g.
HOIST_REPO, HOIST_DATA_DIR. The admin token is HOIST_ADMIN_TOKEN if set,
otherwise it is generated on first start into <data-dir>/admin-token.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := applyEnv(cmd.Flags()); err != nil {
				return err
			}
			n, err := humanize.ParseBytes(o.minFreeDisk)
			if err != nil {
				return fmt.Errorf("--min-free-disk %q: %w", o.minFreeDisk, err)
			}
			o.minFree = int64(n)
			return serve(cmd.Context(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.repo, "repo", "", "spec repository of project main: a local Git repository, a plain directory (dev mode) or a URL (https://, file://); required unless --config lists projects with their own repo")
	f.StringVar(&o.branch, "branch", "", "branch to track (default: the remote HEAD or the current branch)")
	f.StringVar(&o.path, "path", "", "subdirectory of the repository holding the specs (default: the root)")
	f.StringVar(&o.listen, "listen", "127.0.0.1:8080", "address of the dashboard and API")
	f.StringVar(&o.dataDir, "data-dir", defaultDataDir(), "where hoist keeps its state")
	f.StringVar(&o.db, "db", "", "database: a SQLite file (default <data-dir>/hoist.db) or a postgres:// DSN")
	f.DurationVar(&o.pollInterval, "poll-interval", time.Minute, "how often the repository is polled besides watching and webhooks")
	f.DurationVar(&o.validateTimeout, "validate-timeout", 30*time.Second, "how long validating one revision (or a plan's specs) may take before it is refused")
	f.DurationVar(&o.resync, "resync-interval", 30*time.Second, "how often every active object is re-checked (with jitter)")
	f.StringVar(&o.config, "config", "", "server config file (YAML) with backends, their credentials and the policy for what specs may ask of a host")
	f.StringVar(&o.catalogDir, "catalog-dir", "", "directory of offer catalogs (PROVIDER.csv) replacing the embedded snapshot")
	f.StringVar(&o.catalogURL, "catalog-url", "", "base URL of catalogs in gpuhunt's published layout, refreshed periodically (the last good copy is kept)")
	f.StringVar(&o.agentsDir, "agents-dir", "", "directory holding the hoist-shim and hoist-runner binaries (default: next to hoist)")
	f.StringVar(&o.webhookSecretFile, "webhook-secret-file", "", "file holding the webhook secret (or HOIST_WEBHOOK_SECRET)")
	f.StringVar(&o.defaultImage, "default-image", "", "image for specs that name none")
	f.StringVar(&o.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	f.StringVar(&o.externalURL, "external-url", "", "hoist's base URL as users and pods reach it: links posted to GitHub, and where container clouds' pods fetch the runner (default: the listen address)")
	f.BoolVar(&o.noLocalFleet, "no-local-fleet", false, "do not create the fleet `local` of this whole host (fleets naming the local backend share the host instead)")
	f.DurationVar(&o.retention, "retention", 30*24*time.Hour, "how long events and the logs of finished jobs are kept (0 keeps them forever)")
	f.DurationVar(&o.leakAudit, "leak-audit-interval", 10*time.Minute, "how often backends are checked for instances, network volumes and placement groups tagged as this installation's that hoist does not know, which are deleted (negative: never)")
	f.StringVar(&o.minFreeDisk, "min-free-disk", "64MiB", "free space the data directory must keep for new work: below it a new revision is not synced and a run is not re-run (the sync status says why); running jobs go on (0: no check)")
	f.StringVar(&o.installation, "installation", "hoist", "name of this installation in the ownership tags of everything hoist creates")
	// Hidden: tests shorten how long a silent runner is waited for.
	f.DurationVar(&o.unreachableGrace, "unreachable-grace", 0, "how long a running job's runner may not answer before the job fails as instance_unreachable (default 2m)")
	_ = f.MarkHidden("unreachable-grace")
	f.DurationVar(&o.leakGrace, "leak-grace", 0, "how old a resource tagged as this installation's that hoist does not know must be before the leak audit deletes it (default 10m)")
	f.DurationVar(&o.metricsInterval, "metrics-interval", 0, "how often each running job's CPU, memory and GPU use is sampled from its runner (default 10s)")
	_ = f.MarkHidden("metrics-interval")
	return cmd
}

// applyEnv sets every flag not given on the command line from
// HOIST_<FLAG> (dashes become underscores).
func applyEnv(fs *pflag.FlagSet) error {
	var err error
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Changed || err != nil {
			return
		}
		name := "HOIST_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(name); ok {
			if e := fs.Set(f.Name, v); e != nil {
				err = fmt.Errorf("%s: %w", name, e)
			}
		}
	})
	return err
}

func defaultDataDir() string {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "hoist")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ".hoist"
	}
	return filepath.Join(home, ".local", "state", "hoist")
}

func newLogger(level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l})), nil
}

func serve(ctx context.Context, o serveOptions) error {
	log, err := newLogger(o.logLevel)
	if err != nil {
		return err
	}
	// New entries are private from the start; restrictDataDir fixes the
	// ones made before (or by an older hoist).
	defer syscall.Umask(ownerOnlyUmask())
	if err := restrictDataDir(o.dataDir, log); err != nil {
		return err
	}
	// Check what the user gave before touching any state.
	cfg, err := loadServerConfig(o.config)
	if err != nil {
		return err
	}
	gateways, err := gatewaySettings(cfg.Gateways)
	if err != nil {
		return fmt.Errorf("config %s: %w", o.config, err)
	}
	ideURLs, err := cfg.IDE.downloadURLs()
	if err != nil {
		return fmt.Errorf("config %s: %w", o.config, err)
	}
	projects, err := serverProjects(cfg, o)
	if err != nil {
		return fmt.Errorf("config %s: %w", o.config, err)
	}
	policies := map[string]*policy.Policy{}
	for _, p := range projects {
		if p.repo == "" {
			return fmt.Errorf("project %s: no spec repository: give --repo (or the project's repo in --config)", p.name)
		}
		pol, err := projectPolicy(cfg, p.name, o.dataDir, o.agentsDir)
		if err != nil {
			return fmt.Errorf("config %s: %w", o.config, err)
		}
		policies[p.name] = pol
	}

	owner, unlock, err := claimDataDir(o.dataDir)
	if err != nil {
		return err
	}
	defer unlock()
	token, err := adminToken(o.dataDir)
	if err != nil {
		return err
	}
	webhookSecret, err := readSecret(o.webhookSecretFile, "HOIST_WEBHOOK_SECRET")
	if err != nil {
		return err
	}
	key, err := store.LoadSecretKey(o.dataDir)
	if err != nil {
		return err
	}
	dsn := o.db
	if dsn == "" {
		dsn = filepath.Join(o.dataDir, "hoist.db")
	}
	st, err := store.Open(ctx, dsn, store.Options{Logger: log, SecretKey: key})
	if err != nil {
		return err
	}
	defer st.Close()
	// A restart after a kill takes its own leases back at once instead of
	// waiting for them to expire (SQLite's Open already dropped them all).
	if n, err := st.ReleaseLeasesOf(ctx, owner); err != nil {
		return err
	} else if n > 0 {
		log.Info("leases_released", "owner", owner, "count", n)
	}

	artifacts, artifactRetention, err := openArtifacts(ctx, cfg.Artifacts, o.dataDir)
	if err != nil && o.config != "" {
		return fmt.Errorf("config %s: %w", o.config, err)
	} else if err != nil {
		return err
	}

	// The backends open first: those whose offers are live (a Kubernetes
	// cluster's nodes) are the Market's online providers. Cloud drivers
	// read the Market's catalog only when asked for offers.
	var mkt atomic.Pointer[offers.Market]
	catalog := func() *offers.Catalog {
		if m := mkt.Load(); m != nil {
			return m.Catalog()
		}
		return offers.New("")
	}
	agents := agentLocator(o.agentsDir, o.dataDir)
	// Container clouds' pods fetch the runner from this server with a
	// per-task grant, once it listens (SetBaseURL below).
	downloads := web.NewRunnerDownloads(key, func(arch string) (string, error) {
		_, runner, err := agents(arch)
		return runner, err
	}, nil)
	bes, err := openBackends(allBackends(cfg), o.config != "", o.dataDir, backends.Deps{
		Logger: log, Records: st, Agents: agents, Catalog: catalog, RunnerDownload: downloads.Grant,
	})
	if err != nil {
		return err
	}
	defer closeBackends(bes)
	market, err := offers.Open(ctx, offers.Sources{
		CatalogDir: o.catalogDir, CatalogURL: o.catalogURL, Hosts: []offers.Provider{hostOffers{st}},
		Online: liveOffers(allBackends(cfg), bes), Logger: log.With("component", "offers"),
	})
	if err != nil {
		return err
	}
	mkt.Store(market)
	obs := &metricsObserver{}
	// The proxy's meter is the autoscaler's traffic: one Meter, given to both.
	meter := web.NewMeter(nil)
	if token != "" {
		sum := sha256.Sum256([]byte(token))
		gateways.AdminTokenSHA256 = hex.EncodeToString(sum[:])
	}
	env := runtimeEnv{
		o: o, owner: owner, cfg: cfg, log: log, st: st, backends: bes, market: market, policies: policies, obs: obs, meter: meter,
		gateways: gateways, ideURLs: ideURLs, artifacts: artifacts, artifactRetention: artifactRetention,
		localShares: localShares(cfg, projects),
	}
	var rts []*projectRuntime
	for _, p := range projects {
		rt, err := newProjectRuntime(ctx, env, p)
		if err != nil {
			return err
		}
		rts = append(rts, rt)
	}
	def := defaultProject(rts)
	// Webhook pushes to other branches are acknowledged and ignored: the
	// tracked branch is the flag's, or the one the source resolves now.
	branch := def.spec.branch
	if branch == "" {
		if rev, err := def.src.Latest(ctx); err == nil {
			branch = rev.Branch
		}
	}
	// The unprefixed routes serve the default project; every other
	// project's collaborators are its rt.webDeps, below /projects/<name>.
	deps := def.webDeps(st, artifacts)
	view := storeview.New(st, def.spec.name)
	deps.Tokens, deps.Shared, deps.Offers, deps.Meter, deps.RunnerDownloads = view, view, market, meter, downloads
	deps.Users = view
	ctrls := map[string]*reconciler.Controller{}
	for _, rt := range rts {
		ctrls[rt.spec.name] = rt.ctrl
	}
	deps.Services = services{ctrl: def.ctrl, byProject: ctrls}
	budgets := map[string]plan.Budget{}
	for _, rt := range rts {
		budgets[rt.spec.name] = cfg.projectBudget(rt.spec.name)
		if rt == def {
			continue
		}
		d := rt.webDeps(st, artifacts)
		if deps.Projects == nil {
			deps.Projects = map[string]web.ProjectDeps{}
		}
		deps.Projects[rt.spec.name] = web.ProjectDeps{Store: d.Store, Syncer: d.Syncer, Inventory: d.Inventory,
			Planner: d.Planner, Controller: d.Controller, Secrets: d.Secrets, Artifacts: d.Artifacts,
			ServiceStatuses: d.ServiceStatuses, JobMetrics: d.JobMetrics}
	}
	if deps.OIDC, err = openOIDC(ctx, cfg.OIDC); err != nil {
		return fmt.Errorf("config %s: %w", o.config, err)
	}
	srv, err := web.New(web.Config{
		AdminToken: token, WebhookSecret: webhookSecret, Branch: branch,
		GitHubToken: os.Getenv("HOIST_GITHUB_TOKEN"), GitHubAPI: os.Getenv("HOIST_GITHUB_API"),
		GitLabToken: os.Getenv("HOIST_GITLAB_TOKEN"), GitLabAPI: os.Getenv("HOIST_GITLAB_API"),
		ExternalURL: o.externalURL, Logger: log.With("component", "web"),
		Budgets: budgets, DefaultProject: def.spec.name,
	}, deps)
	if err != nil {
		return err
	}
	defer srv.Close()
	obs.m, obs.srv = srv.Metrics(), srv

	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	downloads.SetBaseURL(cmp.Or(o.externalURL, "http://"+ln.Addr().String()))
	if o.externalURL == "" {
		// Pods of a container cloud fetch the runner from this server.
		for _, name := range backendNames(bes) {
			if t := bes[name].Traits(); t.Runtime == backends.RuntimeRunner && t.Isolated {
				log.Warn("external_url_unset", "backend", name, "runner_url", "http://"+ln.Addr().String(),
					"hint", "the backend's pods fetch the runner from this server: set --external-url to an address they reach")
			}
		}
	}
	for _, rt := range rts {
		log.Info("hoist serving", "listen", ln.Addr().String(), "project", rt.spec.name, "source", rt.src.Describe(), "db", st.Dialect(),
			"backends", strings.Join(backendNames(rt.backends), ","))
	}
	hs := srv.HTTPServer() // timeouts against slow clients; live streams lift them
	g, gctx := errgroup.WithContext(ctx)
	for _, rt := range rts {
		g.Go(func() error { return rt.ctrl.Run(gctx) })
	}
	g.Go(func() error {
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
	g.Go(func() error {
		<-gctx.Done()
		srv.Close() // ends live streams, so that Shutdown need not wait for them
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return hs.Shutdown(sctx)
	})
	err = g.Wait()
	log.Info("hoist stopped")
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// adminToken returns HOIST_ADMIN_TOKEN, or the token in
// <data-dir>/admin-token, generating and printing it once on first start.
func adminToken(dataDir string) (string, error) {
	if t := strings.TrimSpace(os.Getenv("HOIST_ADMIN_TOKEN")); t != "" {
		return t, nil
	}
	path := filepath.Join(dataDir, "admin-token")
	if b, err := os.ReadFile(path); err == nil {
		if t := strings.TrimSpace(string(b)); t != "" {
			return t, nil
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("admin token: %w", err)
	}
	buf := make([]byte, 24)
	if _, err := rand.Read(buf); err != nil {
		return "", err
	}
	t := hex.EncodeToString(buf)
	if err := os.WriteFile(path, []byte(t+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("admin token: %w", err)
	}
	fmt.Fprintf(os.Stderr, "hoist: generated the admin token (kept in %s):\n\n    %s\n\n", path, t)
	return t, nil
}

func readSecret(file, env string) (string, error) {
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("webhook secret: %w", err)
		}
		return strings.TrimSpace(string(b)), nil
	}
	return os.Getenv(env), nil
}

func backendNames(bes map[string]backends.Backend) []string {
	var out []string
	for n := range bes {
		out = append(out, n)
	}
	return out
}
