package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing/fstest"
	"time"

	yaml "go.yaml.in/yaml/v4"
	"golang.org/x/crypto/ssh"

	"hoist/agents/api"
	"hoist/backends"
	"hoist/backends/offers"
	"hoist/backends/offers/query"
	"hoist/reconciler"
	"hoist/reconciler/plan"
	"hoist/reconciler/policy"
	"hoist/reconciler/source"
	"hoist/schema"
	"hoist/store"
	"hoist/web"
	"hoist/web/storeview"
)

// serverConfig is the server's config file: backends and their
// credentials, never kept in the spec repository.
type serverConfig struct {
	// Backends are the server's backends, used by every project that
	// lists none of its own.
	Backends []backendEntry `yaml:"backends"`
	// Projects are the projects the server runs, each with its own spec
	// source (projects.go); none means project main from --repo.
	Projects []projectEntry `yaml:"projects"`
	// Policy says what specs may ask of the hosts that run them; the zero
	// policy allows no host path and no privileged container.
	Policy policy.Config `yaml:"policy"`
	// IDE says where dev environments' IDE servers are downloaded from.
	IDE ideConfig `yaml:"ide"`
	// Gateways says how the server's gateways get certificates.
	Gateways gatewaysConfig `yaml:"gateways"`
	// SSH says who may SSH into every job besides the user of each
	// connection (`hoist attach`, `hoist ssh`).
	SSH sshConfig `yaml:"ssh"`
	// Artifacts says where jobs' artifact files are kept and for how long.
	Artifacts artifactsConfig `yaml:"artifacts"`
	// OIDC logs people in through an OpenID Connect provider.
	OIDC *oidcConfig `yaml:"oidc"`
}

// sshConfig is the `ssh:` section: authorized_keys lines (hoist's project
// keys, e.g. a bastion's or CI's) that every job's runner accepts, as
// dstack adds its project key to every container.
type sshConfig struct {
	AuthorizedKeys []string `yaml:"authorized_keys"`
}

// check parses every authorized_keys line: a public key and an optional
// comment, without options (the runner would not honour them).
func (c sshConfig) check() error {
	for i, line := range c.AuthorizedKeys {
		_, _, opts, rest, err := ssh.ParseAuthorizedKey([]byte(line))
		switch {
		case err != nil:
			return fmt.Errorf("ssh.authorized_keys[%d]: not an authorized_keys line (%q): %w", i, abbreviate(line, 40), err)
		case len(opts) > 0:
			return fmt.Errorf("ssh.authorized_keys[%d]: options (%s) are not supported", i, strings.Join(opts, ","))
		case len(bytes.TrimSpace(rest)) > 0:
			return fmt.Errorf("ssh.authorized_keys[%d]: one key per entry", i)
		}
	}
	return nil
}

// abbreviate returns s cut to n bytes with an ellipsis.
func abbreviate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// gatewaysConfig is the `gateways:` section: the ACME server gateways with
// `certificate: {type: lets-encrypt}` use (dstack's DSTACK_ACME_SERVER,
// DSTACK_ACME_EAB_KID, DSTACK_ACME_EAB_HMAC_KEY), and given certificates,
// each served by the gateways whose domain it covers.
type gatewaysConfig struct {
	ACME *struct {
		// Directory is the ACME directory URL (Let's Encrypt's production
		// directory when empty).
		Directory string `yaml:"directory"`
		// CAFile is a PEM file of roots to trust for the ACME server (a
		// private one's CA); the system's roots when empty.
		CAFile     string `yaml:"ca_file"`
		Email      string `yaml:"email"`
		EABKeyID   string `yaml:"eab_kid"`
		EABHMACKey string `yaml:"eab_hmac_key"`
	} `yaml:"acme"`
	Certificates []struct {
		CertFile string `yaml:"cert_file"`
		KeyFile  string `yaml:"key_file"`
	} `yaml:"certificates"`
}

// gatewaySettings reads the files the `gateways:` section names.
func gatewaySettings(cfg gatewaysConfig) (reconciler.GatewaySettings, error) {
	var out reconciler.GatewaySettings
	if a := cfg.ACME; a != nil {
		acme := &api.GatewayACME{DirectoryURL: a.Directory, Email: a.Email, EABKeyID: a.EABKeyID, EABHMACKey: a.EABHMACKey}
		if (a.EABKeyID == "") != (a.EABHMACKey == "") {
			return out, errors.New("gateways.acme: eab_kid and eab_hmac_key go together")
		}
		if a.CAFile != "" {
			b, err := os.ReadFile(a.CAFile)
			if err != nil {
				return out, fmt.Errorf("gateways.acme.ca_file: %w", err)
			}
			acme.CAPEM = string(b)
		}
		out.ACME = acme
	}
	for i, c := range cfg.Certificates {
		cert, err := os.ReadFile(c.CertFile)
		if err != nil {
			return out, fmt.Errorf("gateways.certificates[%d].cert_file: %w", i, err)
		}
		key, err := os.ReadFile(c.KeyFile)
		if err != nil {
			return out, fmt.Errorf("gateways.certificates[%d].key_file: %w", i, err)
		}
		if _, err := tls.X509KeyPair(cert, key); err != nil {
			return out, fmt.Errorf("gateways.certificates[%d]: %w", i, err)
		}
		out.Certificates = append(out.Certificates, reconciler.GatewayCertificate{CertPEM: string(cert), KeyPEM: string(key)})
	}
	return out, nil
}

// backendEntry is one entry of `backends:`, written as dstack writes the
// entries of its server/config.yml: `type`, an optional `name` (defaults to
// the type), and the driver's own settings beside them (`creds`, `regions`,
// `remote_dir`, ...), which the driver decodes and checks.
type backendEntry struct {
	Name    string         `yaml:"name"`
	Type    string         `yaml:"type"`
	Options map[string]any `yaml:",inline"`
}

// loadServerConfig reads the config file; no file means the default
// backends (this host through Docker, and SSH fleets).
func loadServerConfig(path string) (serverConfig, error) {
	if path == "" {
		return serverConfig{Backends: []backendEntry{{Name: "local", Type: "local"}, {Name: "ssh", Type: "ssh"}}}, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return serverConfig{}, fmt.Errorf("config: %w", err)
	}
	var cfg serverConfig
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil {
		return serverConfig{}, fmt.Errorf("config %s: %w", path, err)
	}
	seen := map[string]bool{}
	for i, e := range cfg.Backends {
		if e.Type == "" {
			return serverConfig{}, fmt.Errorf("config %s: backends[%d]: type is required", path, i)
		}
		name := e.Name
		if name == "" {
			name = e.Type
		}
		if seen[name] {
			return serverConfig{}, fmt.Errorf("config %s: backends[%d]: backend %q is configured twice", path, i, name)
		}
		seen[name] = true
	}
	if err := checkProjects(cfg); err != nil {
		return serverConfig{}, fmt.Errorf("config %s: %w", path, err)
	}
	if err := cfg.SSH.check(); err != nil {
		return serverConfig{}, fmt.Errorf("config %s: %w", path, err)
	}
	if err := cfg.Artifacts.check(); err != nil {
		return serverConfig{}, fmt.Errorf("config %s: %w", path, err)
	}
	if err := cfg.OIDC.check(); err != nil {
		return serverConfig{}, fmt.Errorf("config %s: %w", path, err)
	}
	return cfg, nil
}

// buildPolicy compiles the config's policy for the default project of a
// server keeping its state in dataDir (projectPolicy for any project).
func buildPolicy(cfg serverConfig, dataDir, agentsDir string) (*policy.Policy, error) {
	return projectPolicy(cfg, store.DefaultProject, dataDir, agentsDir)
}

// projectPolicy compiles the config's policy for the specs of project
// proj: the server's backends (every project's), those of type local being
// this machine, and the agents' directories never mountable.
func projectPolicy(cfg serverConfig, proj, dataDir, agentsDir string) (*policy.Policy, error) {
	env := policy.Env{
		Project: proj, DataDir: dataDir, DockerHost: os.Getenv("DOCKER_HOST"),
		Resolve: policy.ResolveSymlinks,
	}
	for _, p := range cfg.Projects {
		env.Projects = append(env.Projects, p.Name)
	}
	for _, e := range allBackends(cfg).Backends {
		name := e.Name
		if name == "" {
			name = e.Type
		}
		env.Backends = append(env.Backends, name)
		switch e.Type {
		case "local":
			env.LocalBackends = append(env.LocalBackends, name)
		case "kubernetes":
			env.PodBackends = append(env.PodBackends, name)
		case "ssh":
			env.RemoteBackends = append(env.RemoteBackends, name)
			// The shims' directories on SSH hosts, when given as absolute.
			if d, _ := e.Options["remote_dir"].(string); filepath.IsAbs(d) {
				env.AgentDirs = append(env.AgentDirs, d)
			}
		}
	}
	if agentsDir != "" {
		if abs, err := filepath.Abs(agentsDir); err == nil {
			env.AgentDirs = append(env.AgentDirs, abs)
		}
	}
	return policy.New(cfg.Policy, env)
}

// openBackends opens every configured backend. With the default config a
// backend that cannot start (no Docker Engine here) is skipped with a
// warning; one the user configured fails the start. Instance records go to
// recs (the store), shared by every server on the database; cloud drivers
// answer offers from catalog (the Market's current catalog).
func openBackends(cfg serverConfig, explicit bool, dataDir string, base backends.Deps) (map[string]backends.Backend, error) {
	reg := registry()
	log := base.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	out := map[string]backends.Backend{}
	for _, e := range cfg.Backends {
		opts, err := json.Marshal(e.Options)
		if err != nil {
			return nil, err
		}
		name := e.Name
		if name == "" {
			name = e.Type
		}
		deps := base
		deps.Logger, deps.StateDir, deps.GatewayBinary = log.With("backend", name), filepath.Join(dataDir, "backends", name), gatewayBinary()
		b, err := reg.Open(backends.Config{Name: name, Type: e.Type, Options: opts}, deps)
		if err != nil {
			if explicit {
				closeBackends(out)
				return nil, err
			}
			log.Warn("backend not started", "backend", name, "error", err)
			continue
		}
		out[name] = b
	}
	return out, nil
}

// gatewayBinary returns the hoist binary that gateway instances run as
// `hoist gateway`: this very executable on Linux (a gateway host must be of
// the server's architecture, see backends.GatewayHost), else "" (no
// gateways on cloud VMs from this server).
func gatewayBinary() string {
	if runtime.GOOS != "linux" {
		return ""
	}
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	return exe
}

func closeBackends(bes map[string]backends.Backend) {
	for _, b := range bes {
		if c, ok := b.(interface{ Close() error }); ok {
			_ = c.Close()
		}
	}
}

// agentLocator finds the agent binaries for a Linux architecture: in
// --agents-dir, next to the hoist executable, or in <data-dir>/agents;
// hoist-shim-linux-<arch> and hoist-runner-linux-<arch>, or plain hoist-shim
// and hoist-runner for this machine's architecture. When none is found for
// this machine's architecture, the running hoist binary serves as both
// agents (see agent.go); for other architectures the error says what to
// build.
func agentLocator(dir, dataDir string) backends.AgentBinaries {
	var dirs []string
	if dir != "" {
		dirs = append(dirs, dir)
	}
	if exe, err := os.Executable(); err == nil {
		dirs = append(dirs, filepath.Dir(exe))
	}
	dirs = append(dirs, filepath.Join(dataDir, "agents"))
	var once sync.Once
	var extractErr error
	return func(arch string) (string, string, error) {
		if emb := embeddedAgents(); emb != nil {
			// Binaries built into hoist win: extract them once per version.
			once.Do(func() { extractErr = extractAgents(emb, filepath.Join(dataDir, "agents")) })
			if extractErr != nil {
				return "", "", extractErr
			}
		}
		find := func(agent string) string {
			names := []string{fmt.Sprintf("hoist-%s-linux-%s", agent, arch)}
			if arch == runtime.GOARCH {
				names = append(names, "hoist-"+agent)
			}
			for _, d := range dirs {
				for _, n := range names {
					p := filepath.Join(d, n)
					if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
						return p
					}
				}
			}
			return ""
		}
		shim, runner := find("shim"), find("runner")
		if shim != "" && runner != "" {
			return shim, runner, nil
		}
		self, err := selfAgent(arch)
		if err != nil {
			return "", "", fmt.Errorf("no hoist agent for linux/%s (looked for hoist-shim-linux-%[1]s and hoist-runner-linux-%[1]s in %s): %w", arch, strings.Join(dirs, ", "), err)
		}
		if shim == "" {
			shim = self
		}
		if runner == "" {
			runner = self
		}
		return shim, runner, nil
	}
}

// extractAgents copies the embedded agent binaries into dir (executable),
// rewriting a file only when its content differs.
func extractAgents(emb fs.FS, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("agents: %w", err)
	}
	entries, err := fs.ReadDir(emb, ".")
	if err != nil {
		return fmt.Errorf("agents: %w", err)
	}
	for _, e := range entries {
		b, err := fs.ReadFile(emb, e.Name())
		if err != nil {
			return fmt.Errorf("agents: %w", err)
		}
		p := filepath.Join(dir, e.Name())
		if old, err := os.ReadFile(p); err == nil && bytes.Equal(old, b) {
			continue
		}
		tmp := p + ".tmp"
		if err := os.WriteFile(tmp, b, 0o755); err != nil {
			return fmt.Errorf("agents: %w", err)
		}
		// Executable by containers of any user, whatever the umask (hoist
		// serve's is 077): chmod is not narrowed by it.
		if err := os.Chmod(tmp, 0o755); err != nil {
			return fmt.Errorf("agents: %w", err)
		}
		if err := os.Rename(tmp, p); err != nil {
			return fmt.Errorf("agents: %w", err)
		}
	}
	return nil
}

// estimator prices offers for plan estimates (plan.Pricer) from the
// offline catalog, which is pure between refreshes: the cheapest offer that
// fits the resources and profile. A profile that names only the local
// backend asks for this host, which is free. Backends whose price is their
// own configuration (Kubernetes: rates per vCPU, GiB and GPU) price the
// resources' minimums themselves, without asking their provider.
func estimator(m *offers.Market, bes map[string]backends.Backend) plan.Pricer {
	return func(res schema.Resources, prof schema.Profile) (float64, bool) {
		if len(prof.Backends) > 0 && !slices.ContainsFunc(prof.Backends, func(b string) bool { return !strings.EqualFold(b, "local") }) {
			return 0, true
		}
		q := query.FromSpec(res, prof)
		q.Disk, q.Limit = offers.Range{}, 1
		best, found := 0.0, false
		if ans := m.Catalog().Query(q); len(ans) > 0 {
			best, found = ans[0].Price, true
		}
		for name, b := range bes {
			p, ok := b.(selfPricer)
			if !ok || len(prof.Backends) > 0 && !slices.ContainsFunc(prof.Backends, func(n string) bool { return strings.EqualFold(n, name) }) {
				continue
			}
			if v := p.EstimatePrice(q); !found || v < best {
				best, found = v, true
			}
		}
		return best, found
	}
}

// selfPricer is a backend that prices a query from its configuration
// (kubernetes.Backend).
type selfPricer interface {
	EstimatePrice(q offers.Query) float64
}

// liveOffers returns the backends whose offers are live rather than in the
// offline catalog (Traits.LiveOffers: a Kubernetes cluster's nodes,
// Vultr's plans, the container clouds' stock), as the Market's online
// providers, in the order of the config. A Backend is an offers.Provider
// (Name, Offers).
func liveOffers(cfg serverConfig, bes map[string]backends.Backend) []offers.Provider {
	var out []offers.Provider
	for _, e := range cfg.Backends {
		name := e.Name
		if name == "" {
			name = e.Type
		}
		if b, ok := bes[name]; ok && b.Traits().LiveOffers {
			out = append(out, b)
		}
	}
	return out
}

// hostOffers offers the hosts hoist already manages (this host, SSH fleet
// hosts, provisioned instances) from the store: idle ones as idle, the
// others as busy.
type hostOffers struct{ st *store.Store }

func (h hostOffers) Name() string { return "hosts" }

func (h hostOffers) Offers(ctx context.Context, _ offers.Query) ([]offers.Offer, error) {
	insts, err := h.st.ListInstances(ctx, store.InfraFilter{})
	if err != nil {
		return nil, err
	}
	var out []offers.Offer
	for _, i := range insts {
		if (i.Status != store.InstanceIdle && i.Status != store.InstanceBusy) || len(i.Offer) == 0 || i.Unreachable {
			continue
		}
		var o offers.Offer
		if json.Unmarshal(i.Offer, &o) != nil {
			continue
		}
		o.Backend, o.Instance, o.Price = i.Backend, i.Name, i.Price
		o.Availability = offers.AvailabilityIdle
		if i.Status == store.InstanceBusy {
			o.Availability = offers.AvailabilityBusy
		}
		out = append(out, o)
	}
	return out, nil
}

// metricsObserver feeds the reconciler's outcomes into the web's metrics
// and wakes the web's live followers.
type metricsObserver struct {
	m   *web.Metrics
	srv *web.Server
}

func (o *metricsObserver) LogsAppended(string) {
	if o.srv != nil {
		o.srv.NotifyLogs()
	}
}

func (o *metricsObserver) Changed() {
	if o.srv != nil {
		o.srv.NotifyChange()
	}
}

func (o *metricsObserver) Reconciled(kind string, d time.Duration, err error) {
	if o.m == nil {
		return
	}
	result := "success"
	switch {
	case err == nil:
	case backends.KindOf(err) == backends.KindStalled:
		result = "stalled"
	case backends.KindOf(err) == backends.KindWait:
		result = "wait"
	default:
		result = "error"
	}
	o.m.ObserveReconcile(kind, result, d)
}

func (o *metricsObserver) LeakReaped(backend, kind string) {
	if o.m != nil {
		o.m.LeakReaped(backend, kind)
	}
}

func (o *metricsObserver) Audited(project string, leaked, lost, duplicated, errors int) {
	if o.m != nil {
		o.m.Audited(project, leaked, lost, duplicated, errors)
	}
}

func (o *metricsObserver) JobFinished(backend, status string, d time.Duration) {
	if o.m != nil {
		o.m.ObserveJobFinished(backend, status, d)
	}
}

func (o *metricsObserver) BudgetBlocked(project, kind string) {
	if o.m != nil {
		o.m.BudgetBlocked(project, kind)
	}
}

func (o *metricsObserver) Synced(result string, d time.Duration) {
	if o.m != nil {
		o.m.ObserveReconcile("revision", result, d)
		o.m.ObserveSync(result)
	}
}

func (o *metricsObserver) QueueDepth(kind string, ready, delayed, backingOff int) {
	if o.m != nil {
		o.m.SetQueueDepth(kind, ready, delayed)
		o.m.SetBackingOff(kind, backingOff)
	}
}

func (o *metricsObserver) Retried(kind string, d time.Duration) {
	if o.m != nil {
		o.m.ObserveRetry(kind, d)
	}
}

func (o *metricsObserver) BackendFailed(backend, kind string) {
	if o.m != nil {
		o.m.BackendFailed(backend, kind)
	}
}

// syncer is the reconciler as the web's Syncer.
type syncer struct {
	c    *reconciler.Controller
	path string
}

func (s syncer) SyncStatus(ctx context.Context) (web.SyncStatus, error) {
	st, err := s.c.Status(ctx)
	if err != nil {
		return web.SyncStatus{}, err
	}
	out := web.SyncStatus{
		Status: st.Status, Revision: st.Revision, LatestRevision: st.LatestRevision, Errors: st.Errors,
		Held: st.Held, HeldReasons: st.HeldReasons,
		Repo: st.Source, Branch: st.Branch, Path: s.path, AutoSync: !st.Suspended, Error: st.Error,
	}
	if !st.LastSyncedAt.IsZero() {
		t := st.LastSyncedAt
		out.LastSyncAt = &t
	}
	return out, nil
}

func (s syncer) RequestSync() uint64 { return s.c.RequestSync() }

func (s syncer) WaitSynced(ctx context.Context, n uint64) error { return s.c.WaitSynced(ctx, n) }

// planner is the reconciler as the web's Planner.
type planner struct {
	ctrl *reconciler.Controller
	src  source.Source
}

func (p planner) PlanFiles(ctx context.Context, files map[string][]byte) (web.Plan, error) {
	fsys := fstest.MapFS{}
	for name, b := range files {
		fsys[strings.TrimPrefix(filepath.ToSlash(name), "/")] = &fstest.MapFile{Data: b}
	}
	pl, err := p.ctrl.PlanFS(ctx, fsys)
	return webPlan("", pl, err)
}

func (p planner) PlanRevision(ctx context.Context, _, sha string) (web.Plan, error) {
	pl, err := p.ctrl.PlanRevision(ctx, source.Revision{ID: sha})
	return webPlan(sha, pl, err)
}

func (p planner) SpecsAt(ctx context.Context, sha string) (map[string]json.RawMessage, error) {
	snap, err := p.src.CheckoutAt(ctx, sha)
	if err != nil {
		return nil, err
	}
	defer snap.Close()
	d, err := schema.LoadContext(ctx, snap.FS)
	if err != nil {
		return nil, err
	}
	out := map[string]json.RawMessage{}
	for _, r := range d.Resources {
		out[string(r.Kind)+"/"+r.Name] = r.JSON
	}
	return out, nil
}

// webPlan turns a plan (or the load errors of its specs) into the web's view.
func webPlan(rev string, pl plan.Plan, err error) (web.Plan, error) {
	out := web.Plan{Revision: rev, Errors: []string{}, HeldReasons: []string{}, Changes: []web.Change{}, Warnings: []string{}}
	if err != nil {
		var es schema.Errors
		if !errors.As(err, &es) {
			return out, err
		}
		for _, e := range es {
			out.Errors = append(out.Errors, e.Error())
		}
		return out, nil
	}
	return storeview.PlanView(rev, pl), nil
}

// controller is the reconciler of project project as the web's Controller.
type controller struct {
	ctrl    *reconciler.Controller
	st      *store.Store
	project string
}

func (c controller) StopRun(ctx context.Context, name string, abort bool) error {
	return mapNotFound(c.ctrl.StopRun(ctx, name, abort))
}

func (c controller) RerunRun(ctx context.Context, name string) error {
	return mapNotFound(c.ctrl.RerunRun(ctx, name))
}

func (c controller) SetRunSuspended(ctx context.Context, name string, suspended bool) error {
	run, err := c.st.GetRunByName(ctx, c.project, name)
	if err != nil {
		return mapNotFound(err)
	}
	return mapNotFound(c.ctrl.SetRunSuspended(ctx, run.ResourceKind, run.ResourceName, suspended))
}

func (c controller) SetAutoSync(ctx context.Context, enabled bool) error {
	return c.ctrl.SetSuspended(ctx, !enabled)
}

func (c controller) ConfirmRevision(ctx context.Context, sha string) error {
	return c.ctrl.Confirm(ctx, sha)
}

// The web's SSH route (GET /api/v1/runs/{name}/ssh) reaches jobs through
// the controller.
var _ web.JobSSH = controller{}

// DialJobSSH opens an SSH connection to a running job (web.JobSSH).
func (c controller) DialJobSSH(ctx context.Context, jobID, userKey string) (net.Conn, string, error) {
	conn, hostKey, err := c.ctrl.DialJobSSH(ctx, jobID, userKey)
	return conn, hostKey, mapNotFound(err)
}

func (c controller) ApplyRevision(ctx context.Context, sha string) error {
	return mapNotFound(c.ctrl.ApplyRevision(ctx, sha))
}

func mapNotFound(err error) error {
	if errors.Is(err, store.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: %v", web.ErrNotFound, err)
	}
	return err
}
