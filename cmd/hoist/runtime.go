package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"

	"hoist/backends"
	"hoist/backends/offers"
	"hoist/reconciler"
	"hoist/reconciler/policy"
	"hoist/reconciler/source"
	"hoist/reconciler/support"
	"hoist/store"
	"hoist/store/blob"
	"hoist/web"
	"hoist/web/storeview"
)

// projectRuntime is one project the server runs: its spec source, its
// backends (a subset of the server's, which are opened once) and its
// controller. Every project's rows, revisions and sync state are its own
// (store.Claim and the rest take the project).
type projectRuntime struct {
	spec     projectSpec
	src      source.Source
	backends map[string]backends.Backend
	ctrl     *reconciler.Controller
}

// runtimeEnv is what every project's runtime is built from.
type runtimeEnv struct {
	o serveOptions
	// owner names this server in leases (claimDataDir).
	owner     string
	cfg       serverConfig
	log       *slog.Logger
	st        *store.Store
	backends  map[string]backends.Backend // every backend of the server
	market    *offers.Market
	policies  map[string]*policy.Policy // by project
	obs       reconciler.Observer
	meter     *web.Meter
	gateways  reconciler.GatewaySettings
	ideURLs   map[string]string
	artifacts blob.Store
	// artifactRetention is how long artifacts are kept after their run.
	artifactRetention time.Duration
	// localShares counts, by local backend name, the projects using it.
	localShares map[string]int
}

// newProjectRuntime opens project p's source (its Git cache under
// <data-dir>/git for project main, as before projects existed, and
// <data-dir>/projects/<name>/git for the others) and builds its controller.
func newProjectRuntime(ctx context.Context, env runtimeEnv, p projectSpec) (*projectRuntime, error) {
	cache := filepath.Join(env.o.dataDir, "git")
	if p.name != store.DefaultProject {
		cache = filepath.Join(env.o.dataDir, "projects", p.name, "git")
	}
	log := env.log.With("project", p.name)
	src, err := source.Open(ctx, source.Config{
		Repo: p.repo, Branch: p.branch, Path: p.path, CacheDir: cache,
		PollInterval: env.o.pollInterval, Logger: log.With("component", "source"),
	})
	if err != nil {
		return nil, fmt.Errorf("project %s: %w", p.name, err)
	}
	bes := map[string]backends.Backend{}
	for _, name := range p.backends {
		if b, ok := env.backends[name]; ok {
			bes[name] = b
		}
	}
	shares := 0
	for name, n := range env.localShares {
		if _, ok := bes[name]; ok {
			shares = max(shares, n)
		}
	}
	o, pol := env.o, env.policies[p.name]
	ctrl, err := reconciler.New(reconciler.Config{
		Project:         p.name,
		Owner:           env.owner,
		Gateways:        env.gateways,
		IDEDownloadURLs: env.ideURLs,
		Installation:    o.installation, ResyncInterval: o.resync, DefaultImage: o.defaultImage, Logger: log.With("component", "reconciler"),
		UnreachableGrace: o.unreachableGrace, MetricsInterval: o.metricsInterval, NoLocalFleet: o.noLocalFleet, LoadTimeout: o.validateTimeout,
		LocalShares: shares,
		Retention:   o.retention, LeakAuditInterval: o.leakAudit, LeakGrace: o.leakGrace, HFEndpoint: os.Getenv("HF_ENDPOINT"),
		SSHAuthorizedKeys: env.cfg.SSH.AuthorizedKeys,
		RepoCacheDir:      filepath.Join(o.dataDir, "repos"),
		DataDir:           o.dataDir, MinFreeBytes: o.minFree,
		Artifacts: env.artifacts, ArtifactRetention: env.artifactRetention,
		Budget: env.cfg.projectBudget(p.name),
	}, reconciler.Deps{Store: env.st, Source: src, Backends: bes, Estimate: estimator(env.market, bes), Observer: env.obs,
		Checks: []reconciler.Check{pol.Check, support.Check, support.CodePaths}, Advisories: []reconciler.Check{support.Warnings}, Policy: pol,
		Traffic: env.meter})
	if err != nil {
		return nil, fmt.Errorf("project %s: %w", p.name, err)
	}
	return &projectRuntime{spec: p, src: src, backends: bes, ctrl: ctrl}, nil
}

// localShares counts, for every backend of this host (type local), the
// projects whose backends include it: each project's fleet of this host
// then takes its share (reconciler.Config.LocalShares).
func localShares(cfg serverConfig, projects []projectSpec) map[string]int {
	out := map[string]int{}
	for _, e := range allBackends(cfg).Backends {
		if e.Type != "local" {
			continue
		}
		name := backendName(e)
		for _, p := range projects {
			if slices.Contains(p.backends, name) {
				out[name]++
			}
		}
	}
	return out
}

// webDeps are the web collaborators that answer for this project alone:
// its store view, sync, plans, controls, secrets, artifacts, service
// statuses and job metrics. The server's default project fills web.Deps
// with them; the others are the same adapters, one set per project.
func (r *projectRuntime) webDeps(st *store.Store, artifacts blob.Store) web.Deps {
	view := storeview.New(st, r.spec.name)
	return web.Deps{
		Store: view, Syncer: syncer{c: r.ctrl, path: r.spec.path}, Inventory: view,
		Planner: planner{ctrl: r.ctrl, src: r.src}, Controller: controller{ctrl: r.ctrl, st: st, project: r.spec.name},
		Secrets: view, ServiceStatuses: services{ctrl: r.ctrl}, JobMetrics: view,
		Artifacts: storeview.NewArtifacts(st, r.spec.name, artifacts),
	}
}

// defaultProject is the runtime the web's unprefixed routes serve: project
// main when the server runs it, else the first project configured.
func defaultProject(rts []*projectRuntime) *projectRuntime {
	for _, r := range rts {
		if r.spec.name == store.DefaultProject {
			return r
		}
	}
	return rts[0]
}
