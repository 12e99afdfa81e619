package sshfleet

import (
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"

	"hoist/agents/api"
	"hoist/backends"
	"hoist/backends/internal/agentauth"
	"hoist/backends/internal/hostoffer"
	"hoist/backends/offers"
	"hoist/backends/tunnel"
)

// Region is the region of every SSH fleet instance and offer (dstack's
// "remote").
const Region = "remote"

// Compile-time guards.
var (
	_ backends.Backend   = (*Backend)(nil)
	_ backends.Connector = (*Backend)(nil)
)

// Config configures the backend.
type Config struct {
	// Name is the backend's name; "ssh" when empty.
	Name string
	// Records keeps the instance records, shared by every server
	// (required).
	Records backends.Records
	// StateDir, when set, is where an older hoist kept the records as
	// files (instances/<id>.json): New moves them into Records.
	StateDir string
	// Agents locates the hoist-shim and hoist-runner binaries per
	// architecture (required).
	Agents backends.AgentBinaries
	// RemoteDir is the base directory on hosts; each instance gets
	// <RemoteDir>/<instance id>. Empty means $HOME/.hoist; a relative path is
	// relative to the login user's $HOME.
	RemoteDir string
	// DialTimeout, HandshakeTimeout and KeepAlive tune SSH connections
	// (tunnel's defaults when zero).
	DialTimeout, HandshakeTimeout, KeepAlive time.Duration
	// ReadyTimeout is how long Create waits for the shim to answer before
	// returning the instance as provisioning (default 30 s).
	ReadyTimeout time.Duration
	// DrainGrace is the grace period tasks get when a host is drained
	// (default 10 s).
	DrainGrace time.Duration
	// DefaultKey is the PEM private key for hosts whose spec names none.
	DefaultKey []byte
	// KnownHosts is known_hosts content pinning hosts, added to what each
	// host's spec gives.
	KnownHosts string
	// Logger receives the backend's events; nil discards.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Options are the settings of an "ssh" entry in the server's config file.
type Options struct {
	// RemoteDir overrides Config.RemoteDir.
	RemoteDir string `json:"remote_dir"`
	// ConnectTimeout bounds the TCP dial and the SSH handshake, e.g. "5s".
	ConnectTimeout string `json:"connect_timeout"`
	// DrainGrace overrides Config.DrainGrace, e.g. "30s".
	DrainGrace string `json:"drain_grace"`
	// IdentityFile is the private key used for hosts that name none.
	IdentityFile string `json:"identity_file"`
	// KnownHostsFile is a known_hosts file that pins every host's key (in
	// addition to what a host's spec gives).
	KnownHostsFile string `json:"known_hosts_file"`
}

// Factory builds the backend from a config entry; use it in cmd/hoist's
// Registry as "ssh".
func Factory(cfg backends.Config, deps backends.Deps) (backends.Backend, error) {
	var o Options
	if err := cfg.Decode(&o); err != nil {
		return nil, err
	}
	c := Config{Name: cfg.Name, StateDir: deps.StateDir, Records: deps.Records, Agents: deps.Agents, RemoteDir: o.RemoteDir, Logger: deps.Logger, Now: deps.Now}
	if o.ConnectTimeout != "" {
		d, err := time.ParseDuration(o.ConnectTimeout)
		if err != nil {
			return nil, fmt.Errorf("connect_timeout: %w", err)
		}
		c.DialTimeout, c.HandshakeTimeout = d, d
	}
	if o.DrainGrace != "" {
		d, err := time.ParseDuration(o.DrainGrace)
		if err != nil {
			return nil, fmt.Errorf("drain_grace: %w", err)
		}
		c.DrainGrace = d
	}
	if o.IdentityFile != "" {
		key, err := os.ReadFile(o.IdentityFile)
		if err != nil {
			return nil, fmt.Errorf("identity_file: %w", err)
		}
		if _, err := ssh.ParsePrivateKey(key); err != nil {
			return nil, fmt.Errorf("identity_file %s: %w", o.IdentityFile, err)
		}
		c.DefaultKey = key
	}
	if o.KnownHostsFile != "" {
		kh, err := os.ReadFile(o.KnownHostsFile)
		if err != nil {
			return nil, fmt.Errorf("known_hosts_file: %w", err)
		}
		c.KnownHosts = string(kh)
	}
	return New(c)
}

// Backend is the SSH fleet backend. Use New.
type Backend struct {
	cfg   Config
	log   *slog.Logger
	store recordStore

	mu      sync.Mutex
	records map[string]*record
	clients map[string]*tunnel.Client
	shims   map[string]string // instance id → shim base URL
	locks   map[string]*sync.Mutex
	dials   map[string]*sync.Mutex // one SSH dial per instance at a time
	sums    map[string]string      // local binary (path|size|mtime) → sha256
}

// New returns the backend, loading the records from cfg.Records (after
// moving those an older hoist kept in cfg.StateDir there).
func New(cfg Config) (*Backend, error) {
	if cfg.Name == "" {
		cfg.Name = "ssh"
	}
	if cfg.Records == nil {
		return nil, errors.New("sshfleet: records are required")
	}
	if cfg.Agents == nil {
		return nil, errors.New("sshfleet: agent binaries are required")
	}
	if cfg.ReadyTimeout == 0 {
		cfg.ReadyTimeout = 30 * time.Second
	}
	if cfg.DrainGrace == 0 {
		cfg.DrainGrace = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	st := recordStore{backend: cfg.Name, recs: cfg.Records}
	if cfg.StateDir != "" {
		n, err := st.migrateFiles(filepath.Join(cfg.StateDir, "instances"))
		if err != nil {
			return nil, fmt.Errorf("sshfleet: migrate record files: %w", err)
		}
		if n > 0 {
			cfg.Logger.Info("records_migrated", "backend", cfg.Name, "records", n)
		}
	}
	lctx, cancel := context.WithTimeout(context.Background(), recordTimeout)
	recs, err := st.load(lctx)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("sshfleet: %w", err)
	}
	b := &Backend{
		cfg: cfg, log: cfg.Logger.With("backend", cfg.Name), store: st,
		records: recs, clients: map[string]*tunnel.Client{}, shims: map[string]string{}, locks: map[string]*sync.Mutex{}, dials: map[string]*sync.Mutex{}, sums: map[string]string{},
	}
	return b, nil
}

// Name returns the backend's name.
func (b *Backend) Name() string { return b.cfg.Name }

// Traits says the backend takes over the hosts it is given and runs a shim
// on each.
func (b *Backend) Traits() backends.Traits {
	return backends.Traits{Runtime: backends.RuntimeShim, TakesOverHosts: true}
}

// Close closes every SSH connection. Shims keep running on their hosts.
func (b *Backend) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	for id, c := range b.clients {
		c.Close()
		delete(b.clients, id)
	}
	return nil
}

// lock serializes Create, Describe and Terminate of one instance.
func (b *Backend) lock(id string) func() {
	b.mu.Lock()
	l, ok := b.locks[id]
	if !ok {
		l = &sync.Mutex{}
		b.locks[id] = l
	}
	b.mu.Unlock()
	l.Lock()
	return l.Unlock
}

// record returns the instance's record as the shared records hold it now
// (another server may have created or changed it), or this server's last
// copy when the records cannot be read.
func (b *Backend) record(id string) (*record, bool) {
	fresh, ok, err := b.store.get(id)
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case err != nil:
		b.log.Warn("record_read_failed", "instance", id, "error", err)
	case ok:
		b.records[id] = fresh
	default:
		delete(b.records, id)
	}
	r, ok := b.records[id]
	if !ok {
		return nil, false
	}
	c := *r
	c.Tags = backends.CopyTags(r.Tags)
	return &c, true
}

// refresh reloads every record from the shared records, so List and
// Offers see instances other servers created.
func (b *Backend) refresh(ctx context.Context) {
	recs, err := b.store.load(ctx)
	b.mu.Lock()
	defer b.mu.Unlock()
	if err != nil {
		b.log.Warn("records_read_failed", "error", err)
		return
	}
	b.records = recs
}

func (b *Backend) save(r *record) error {
	if err := b.store.save(r); err != nil {
		return err
	}
	c := *r
	b.mu.Lock()
	b.records[r.ID] = &c
	b.mu.Unlock()
	return nil
}

func (b *Backend) offersLocked() []offers.Offer {
	var all []offers.Offer
	for _, r := range b.records {
		if r.Status != backends.StatusTerminating && r.Offer.CPUs > 0 {
			all = append(all, r.Offer)
		}
	}
	return all
}

func (b *Backend) instance(r *record) backends.Instance {
	return backends.Instance{
		ID: r.ID, Backend: b.cfg.Name, Region: Region, Hostname: r.Host.Hostname, InternalIP: internalIP(r.Host),
		Status: r.Status, Message: r.Message, Runtime: backends.RuntimeShim,
		Offer: r.Offer, Arch: r.Arch, HostKey: r.HostKey,
		Tags: backends.CopyTags(r.Tags), CreatedAt: r.CreatedAt,
	}
}

// internalIP is the address the fleet's other hosts reach h at: its
// internal_ip, else the address the server dials (dstack takes a host's
// internal_ip, or its address, for the nodes of a cluster).
func internalIP(h backends.SSHHost) string {
	if h.InternalIP != "" {
		return h.InternalIP
	}
	return h.Hostname
}

// Offers returns one offer per host of the fleet that is not being
// terminated (SSH fleet capacity is the hosts the user listed), filtered by q.
func (b *Backend) Offers(ctx context.Context, q offers.Query) ([]offers.Offer, error) {
	b.refresh(ctx)
	b.mu.Lock()
	all := b.offersLocked()
	b.mu.Unlock()
	return offers.Filter(all, q), nil
}

// List returns the instances whose tags match, from the backend's records
// (no host is contacted).
func (b *Backend) List(ctx context.Context, tags map[string]string) ([]backends.Instance, error) {
	b.refresh(ctx)
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []backends.Instance
	for _, r := range b.records {
		if backends.MatchTags(r.Tags, tags) {
			out = append(out, b.instance(r))
		}
	}
	slices.SortFunc(out, func(a, b backends.Instance) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// Create takes over the host of spec.Host: connect (pinning or recording its
// host key), check, record, upload the agents, start the shim under its
// supervisor and wait up to ReadyTimeout for it to answer. It is idempotent
// on spec.ID: a second call re-runs every step that is not done yet. A host
// key that differs from the pinned one is a stalled error wrapping
// backends.ErrHostKeyMismatch; an unreachable host a transient one wrapping
// backends.ErrUnreachable.
func (b *Backend) Create(ctx context.Context, spec backends.InstanceSpec) (backends.Instance, error) {
	if spec.ID == "" {
		return backends.Instance{}, backends.Stalled(errors.New("sshfleet: instance id is required"))
	}
	if spec.Host == nil || spec.Host.Hostname == "" {
		return backends.Instance{}, backends.Stalled(fmt.Errorf("sshfleet: instance %s: no host given", spec.ID))
	}
	unlock := b.lock(spec.ID)
	defer unlock()
	r, ok := b.record(spec.ID)
	if ok && r.Status == backends.StatusTerminating {
		return b.instance(r), backends.Stalled(fmt.Errorf("sshfleet: instance %s is being terminated", spec.ID))
	}
	if ok && tunnel.HostPort(r.Host.Hostname, r.Host.Port) != tunnel.HostPort(spec.Host.Hostname, spec.Host.Port) {
		return b.instance(r), backends.Stalled(fmt.Errorf("sshfleet: instance %s runs on %s, not %s: terminate it and create another",
			spec.ID, tunnel.HostPort(r.Host.Hostname, r.Host.Port), tunnel.HostPort(spec.Host.Hostname, spec.Host.Port)))
	}
	if !ok {
		r = &record{ID: spec.ID, Name: spec.Name, Status: backends.StatusProvisioning, CreatedAt: b.cfg.Now()}
	}
	r.Host, r.Tags = *spec.Host, backends.CopyTags(spec.Tags)
	if len(spec.Host.HostKeys) > 0 {
		r.HostKey = ""
	}
	log := b.log.With("instance", spec.ID, "host", spec.Host.Hostname)
	began := time.Now()

	c, err := b.client(ctx, r, ok)
	if err != nil {
		if ok {
			b.note(r, err)
		}
		return b.instance(r), err
	}
	out, err := c.Run(ctx, probeScript(b.remoteDirExpr(spec.ID)), nil)
	if err != nil {
		return b.instance(r), fmt.Errorf("sshfleet: probe %s: %w", spec.Host.Hostname, err)
	}
	facts := parseFacts(out)
	if err := facts.check(); err != nil {
		err = fmt.Errorf("sshfleet: host %s: %w", spec.Host.Hostname, err)
		if ok {
			b.note(r, err)
		}
		return b.instance(r), err
	}
	r.Arch = goArch(facts.Arch)
	r.Dir = facts.Dir
	if err := b.save(r); err != nil {
		return b.instance(r), err
	}
	log.Info("host_checked", "arch", r.Arch, "docker", facts.Docker, "dir", r.Dir, "elapsed", time.Since(began))

	if err := b.deploy(ctx, c, r, facts.Sums); err != nil {
		b.note(r, err)
		return b.instance(r), fmt.Errorf("sshfleet: deploy to %s: %w", spec.Host.Hostname, err)
	}
	wctx, cancel := context.WithTimeout(ctx, b.cfg.ReadyTimeout)
	defer cancel()
	err = b.waitShim(wctx, c, r)
	if err == nil {
		err = b.describeHost(wctx, c, r)
	}
	if err != nil {
		r.Message = fmt.Sprintf("shim not answering yet: %v", err)
		_ = b.save(r)
		log.Warn("shim_not_ready", "error", err)
		return b.instance(r), nil
	}
	log.Info("host_described", "cpus", r.Offer.CPUs, "memory_gb", r.Offer.MemoryGB, "gpus", r.Offer.GPUCount)
	r.Status, r.Message = backends.StatusRunning, ""
	if err := b.save(r); err != nil {
		return b.instance(r), err
	}
	log.Info("shim_ready", "elapsed", time.Since(began))
	return b.instance(r), nil
}

// note records err as the instance's message.
func (b *Backend) note(r *record, err error) {
	r.Message = err.Error()
	_ = b.save(r)
}

// remoteDirExpr returns a shell expression for the instance's directory on
// the host: <RemoteDir>/<id>, RemoteDir relative to $HOME unless absolute.
func (b *Backend) remoteDirExpr(id string) string {
	name := safeName(id)
	if strings.HasPrefix(name, ".") {
		name = "_" + name
	}
	base := strings.TrimPrefix(b.cfg.RemoteDir, "~/")
	switch {
	case base == "":
		return `"$HOME"/` + tunnel.Quote(".hoist/"+name)
	case path.IsAbs(base):
		return tunnel.Quote(path.Join(base, name))
	}
	return `"$HOME"/` + tunnel.Quote(path.Join(base, name))
}

// shimArgs are the hoist-shim flags the supervisor passes: loopback only, on
// a port the shim picks and writes to shim.addr, the token the server made
// for the instance (file token, mode 0600), the instance's tags as container
// labels.
func shimArgs(r *record) string {
	args := []string{`--listen 127.0.0.1:0`, `--addr-file "$DIR/shim.addr"`, `--state-dir "$DIR/state"`, `--runner-binary "$DIR/bin/hoist-runner"`, `--token-file "$DIR/token"`}
	keys := make([]string, 0, len(r.Tags))
	for k := range r.Tags {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		args = append(args, "--label "+tunnel.Quote(k+"="+r.Tags[k]))
	}
	return strings.Join(args, " ")
}

// deploy brings the agents (those whose SHA-256 differs from remoteSums) and
// the supervisor script to the host in one tar stream and starts the
// supervisor unless it is running (a changed shim is restarted), all in one
// SSH session, which answers once the shim has written its address.
func (b *Backend) deploy(ctx context.Context, c *tunnel.Client, r *record, remoteSums map[string]string) error {
	shimBin, runnerBin, err := b.cfg.Agents(r.Arch)
	if err != nil {
		return backends.Stalled(fmt.Errorf("agent binaries for %s: %w", r.Arch, err))
	}
	var files []tarFile
	shimChanged := false
	for _, bin := range []struct{ name, local string }{{"hoist-runner", runnerBin}, {"hoist-shim", shimBin}} {
		if err := checkStatic(bin.local); err != nil {
			return backends.Stalled(fmt.Errorf("agent binary for %s: %w; build hoist with `CGO_ENABLED=0 go build ./cmd/hoist` or run `go tool task build`", r.Arch, err))
		}
		sum, err := b.sum(bin.local)
		if err != nil {
			return backends.Stalled(fmt.Errorf("agent binary: %w", err))
		}
		if remoteSums[bin.name] != sum {
			files = append(files, tarFile{name: "bin/" + bin.name, local: bin.local, mode: 0o755})
			shimChanged = shimChanged || bin.name == "hoist-shim"
		}
	}
	// The shim's token: made once per instance by the server, kept in its
	// record and on the host (0600), sent with every request to the shim.
	newToken := r.ShimToken == ""
	if newToken {
		tok, err := agentauth.NewToken()
		if err != nil {
			return err
		}
		r.ShimToken = tok
		if err := b.save(r); err != nil {
			return err
		}
	}
	files = append(files, tarFile{name: "token", data: []byte(r.ShimToken + "\n"), mode: 0o600})
	files = append(files, tarFile{name: "supervise.sh", data: []byte(supervisorScript(shimArgs(r))), mode: 0o755})

	restart := ""
	if shimChanged || newToken {
		// The supervisor runs the shim with the arguments of its script:
		// stop it (and so its shim), a new one starts below.
		restart = `p=$(cat supervisor.pid 2>/dev/null); if [ -n "$p" ]; then kill -TERM "$p" 2>/dev/null; i=0; while alive "$p" && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done; fi; rm -f shim.addr; `
	}
	waitSteps := int(b.cfg.ReadyTimeout / (50 * time.Millisecond))
	script := fmt.Sprintf(aliveFunc+`set -e
mkdir -p %[1]s
cd %[1]s
mkdir -p bin state
rm -rf .new && mkdir .new
tar -xf - -C .new
for f in $(cd .new && find . -type f); do mv -f ".new/$f" "$f"; done
rm -rf .new
set +e
%[2]sif [ -f supervisor.pid ] && alive "$(cat supervisor.pid)"; then echo state=running; else rm -f stop shim.addr; setsid sh ./supervise.sh </dev/null >/dev/null 2>&1 & echo state=started; fi
i=0; while [ ! -s shim.addr ] && [ $i -lt %[3]d ]; do sleep 0.05; i=$((i+1)); done
echo "addr=$(cat shim.addr 2>/dev/null)"
`, tunnel.Quote(r.Dir), restart, waitSteps)

	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(writeTar(pw, files)) }()
	out, err := c.Run(ctx, script, pr)
	pr.Close()
	if err != nil {
		return fmt.Errorf("deploy agents to %s: %w", r.Dir, err)
	}
	var state, addr string
	for _, line := range strings.Split(string(out), "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), "="); ok {
			switch k {
			case "state":
				state = v
			case "addr":
				addr = v
			}
		}
	}
	b.log.Info("shim_supervisor", "instance", r.ID, "state", state, "shim_updated", shimChanged, "uploaded", len(files)-1)
	b.mu.Lock()
	if addr != "" {
		b.shims[r.ID] = "http://" + addr
	} else {
		delete(b.shims, r.ID)
	}
	b.mu.Unlock()
	return nil
}

// sum returns the SHA-256 of a local agent binary, cached by path, size and
// modification time.
func (b *Backend) sum(p string) (string, error) {
	st, err := os.Stat(p)
	if err != nil {
		return "", err
	}
	key := fmt.Sprintf("%s|%d|%d", p, st.Size(), st.ModTime().UnixNano())
	b.mu.Lock()
	s, ok := b.sums[key]
	b.mu.Unlock()
	if ok {
		return s, nil
	}
	s, err = fileSum(p)
	if err != nil {
		return "", err
	}
	b.mu.Lock()
	b.sums[key] = s
	b.mu.Unlock()
	return s, nil
}

// shimURL reads the shim's address on the host (cached until a request
// through it fails).
func (b *Backend) shimURL(ctx context.Context, c *tunnel.Client, r *record) (string, error) {
	b.mu.Lock()
	u, ok := b.shims[r.ID]
	b.mu.Unlock()
	if ok {
		return u, nil
	}
	out, err := c.Run(ctx, "cat "+tunnel.Quote(r.Dir+"/shim.addr")+" 2>/dev/null", nil)
	addr := strings.TrimSpace(string(out))
	if err != nil || addr == "" {
		return "", fmt.Errorf("shim address not written yet: %w", errors.Join(err, errors.New("no shim.addr")))
	}
	u = "http://" + addr
	b.mu.Lock()
	b.shims[r.ID] = u
	b.mu.Unlock()
	return u, nil
}

func (b *Backend) forgetShim(id string) {
	b.mu.Lock()
	delete(b.shims, id)
	b.mu.Unlock()
}

// health asks the shim's health check through c. A failure through a cached
// address is retried once with the address read afresh (the shim may have
// restarted on another port).
func (b *Backend) health(ctx context.Context, c *tunnel.Client, r *record) error {
	for attempt := 0; ; attempt++ {
		b.mu.Lock()
		_, cached := b.shims[r.ID]
		b.mu.Unlock()
		u, err := b.shimURL(ctx, c, r)
		if err != nil {
			return err
		}
		hctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err = api.NewShimClient(u, c.HTTPClient()).WithToken(r.ShimToken).Health(hctx)
		cancel()
		if err == nil {
			return nil
		}
		b.forgetShim(r.ID)
		if !cached || attempt > 0 || !c.Alive() {
			return err
		}
	}
}

// describeHost sets r's offer from what the instance's shim says of its
// host (GET /api/v1/host, agents/hostinfo's probe run on the host).
func (b *Backend) describeHost(ctx context.Context, c *tunnel.Client, r *record) error {
	u, err := b.shimURL(ctx, c, r)
	if err != nil {
		return err
	}
	hctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	h, err := api.NewShimClient(u, c.HTTPClient()).WithToken(r.ShimToken).HostInfo(hctx)
	if err != nil {
		return fmt.Errorf("describe host: %w", err)
	}
	r.Offer = hostoffer.Offer(h, b.cfg.Name, Region)
	return nil
}

func (b *Backend) waitShim(ctx context.Context, c *tunnel.Client, r *record) error {
	delay := 20 * time.Millisecond
	for {
		err := b.health(ctx, c, r)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(delay):
		}
		delay = min(delay*2, 500*time.Millisecond)
	}
}

// client returns the pooled SSH connection of r, dialing when needed. A
// first-contact host key is recorded in r (saved when persist is set).
func (b *Backend) client(ctx context.Context, r *record, persist bool) (*tunnel.Client, error) {
	b.mu.Lock()
	c, ok := b.clients[r.ID]
	dl, dok := b.dials[r.ID]
	if !dok {
		dl = &sync.Mutex{}
		b.dials[r.ID] = dl
	}
	b.mu.Unlock()
	if ok && c.Alive() {
		return c, nil
	}
	// One dial per instance at a time; whoever waited reuses its result.
	dl.Lock()
	defer dl.Unlock()
	b.mu.Lock()
	c, ok = b.clients[r.ID]
	b.mu.Unlock()
	if ok && c.Alive() {
		return c, nil
	}
	cfg, err := b.tunnelConfig(r.Host, r.HostKey, r.JumpKey)
	if err != nil {
		return nil, err
	}
	c, err = tunnel.Dial(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("sshfleet: instance %s: %w", r.ID, err)
	}
	changed := false
	if len(r.Host.HostKeys) == 0 && r.HostKey == "" {
		r.HostKey, changed = tunnel.MarshalHostKey(c.HostKey()), true
	}
	if jk := c.JumpHostKey(); jk != nil && r.JumpKey == "" && r.Host.ProxyJump != nil && len(r.Host.ProxyJump.HostKeys) == 0 {
		r.JumpKey, changed = tunnel.MarshalHostKey(jk), true
	}
	if changed && persist {
		if err := b.save(r); err != nil {
			c.Close()
			return nil, err
		}
	}
	b.mu.Lock()
	if old, ok := b.clients[r.ID]; ok {
		old.Close()
	}
	b.clients[r.ID] = c
	b.mu.Unlock()
	return c, nil
}

func (b *Backend) tunnelConfig(h backends.SSHHost, recorded, recordedJump string) (tunnel.Config, error) {
	if len(h.PrivateKey) == 0 && h.IdentityFile == "" {
		h.PrivateKey = b.cfg.DefaultKey
	}
	if b.cfg.KnownHosts != "" {
		h.KnownHosts = strings.TrimRight(h.KnownHosts, "\n") + "\n" + b.cfg.KnownHosts
	}
	signer, err := loadSigner(h)
	if err != nil {
		return tunnel.Config{}, err
	}
	keys := h.HostKeys
	if len(keys) == 0 && recorded != "" {
		keys = []string{recorded}
	}
	pinned, err := tunnel.ParseHostKeys(keys)
	if err != nil {
		return tunnel.Config{}, backends.Stalled(err)
	}
	cfg := tunnel.Config{
		Addr: tunnel.HostPort(h.Hostname, h.Port), User: h.User, Signers: []ssh.Signer{signer},
		HostKeys: pinned, KnownHosts: h.KnownHosts, TrustOnFirstUse: true,
		DialTimeout: b.cfg.DialTimeout, HandshakeTimeout: b.cfg.HandshakeTimeout, KeepAlive: b.cfg.KeepAlive,
		Logger: b.log,
	}
	if h.ProxyJump != nil {
		jc, err := b.tunnelConfig(*h.ProxyJump, recordedJump, "")
		if err != nil {
			return tunnel.Config{}, fmt.Errorf("proxy jump: %w", err)
		}
		cfg.Jump = &jc
	}
	return cfg, nil
}

func loadSigner(h backends.SSHHost) (ssh.Signer, error) {
	key, err := privateKey(h)
	if err != nil {
		return nil, err
	}
	s, err := ssh.ParsePrivateKey(key)
	if err != nil {
		return nil, backends.Stalled(fmt.Errorf("ssh host %s: private key: %w", h.Hostname, err))
	}
	return s, nil
}

// Describe observes the instance: it connects (pooled) and asks the shim's
// health check through the connection. A shim of an incompatible API version
// is replaced by the agents of this server (upload, restart) on the spot, and
// a supervisor that is not running (a rebooted host) is started again. An
// unreachable host is not an error: the instance comes back with Unreachable
// set and the reason in Message, so the caller marks it and retries with
// back-off. A changed host key returns
// the instance together with a stalled error wrapping
// backends.ErrHostKeyMismatch.
func (b *Backend) Describe(ctx context.Context, id string) (backends.Instance, error) {
	r, ok := b.record(id)
	if !ok {
		return backends.Instance{}, fmt.Errorf("sshfleet: instance %s: %w", id, backends.ErrNotFound)
	}
	if r.Status == backends.StatusTerminating {
		return b.instance(r), nil
	}
	unlock := b.lock(id)
	defer unlock()
	c, err := b.client(ctx, r, true)
	if err != nil {
		inst := b.instance(r)
		inst.Message = err.Error()
		if errors.Is(err, backends.ErrUnreachable) {
			inst.Unreachable = true
			return inst, nil
		}
		return inst, err
	}
	err = b.health(ctx, c, r)
	if errors.Is(err, api.ErrIncompatibleAgent) || errors.Is(err, api.ErrUnauthorized) {
		// An agent of another version, or one that does not know the
		// instance's token, answers: replace it with ours.
		b.log.Warn("shim_incompatible", "instance", id, "error", err)
		if derr := b.deploy(ctx, c, r, nil); derr != nil {
			err = fmt.Errorf("%w; replacing it failed: %w", err, derr)
		} else {
			wctx, cancel := context.WithTimeout(ctx, b.cfg.ReadyTimeout)
			err = b.waitShim(wctx, c, r)
			cancel()
		}
	}
	if err != nil && c.Alive() && r.Dir != "" {
		// A host that rebooted (or lost the supervisor) gets it started
		// again: the shim recovers its containers.
		if restarted, rerr := b.restartSupervisor(ctx, c, r); rerr != nil {
			err = fmt.Errorf("%w; restarting the supervisor failed: %w", err, rerr)
		} else if restarted {
			wctx, cancel := context.WithTimeout(ctx, b.cfg.ReadyTimeout)
			err = b.waitShim(wctx, c, r)
			cancel()
		}
	}
	if err != nil {
		if !c.Alive() {
			inst := b.instance(r)
			inst.Unreachable, inst.Message = true, err.Error()
			return inst, nil
		}
		if r.Status == backends.StatusRunning {
			r.Status = backends.StatusProvisioning
		}
		r.Message = fmt.Sprintf("shim not answering: %v", err)
	} else if r.Offer.CPUs == 0 {
		// The shim answered after Create gave up waiting: the host's
		// resources are still to be learnt.
		if err := b.describeHost(ctx, c, r); err != nil {
			r.Message = fmt.Sprintf("shim not answering: %v", err)
		} else {
			r.Status, r.Message = backends.StatusRunning, ""
		}
	} else {
		r.Status, r.Message = backends.StatusRunning, ""
	}
	if cur, ok := b.record(id); !ok || cur.Status != r.Status || cur.Message != r.Message || cur.HostKey != r.HostKey {
		_ = b.save(r)
	}
	return b.instance(r), nil
}

// aliveFunc defines alive PID for the scripts: the process exists and is not
// a zombie (kill -0 succeeds on zombies, which hosts without a reaping init
// keep around).
const aliveFunc = `alive() { s=$(sed -n 's/^[0-9]* (.*) \(.\) .*/\1/p' "/proc/$1/stat" 2>/dev/null); [ -n "$s" ] && [ "$s" != Z ]; }
`

// restartSupervisor starts the instance's supervisor when it is not running
// (re-sending only the script: the agents are assumed in place) and reports
// whether it did.
func (b *Backend) restartSupervisor(ctx context.Context, c *tunnel.Client, r *record) (bool, error) {
	out, err := c.Run(ctx, fmt.Sprintf(aliveFunc+`cd %s 2>/dev/null || { echo gone; exit 0; }
if [ -f supervisor.pid ] && alive "$(cat supervisor.pid)"; then echo running; else echo stopped; fi`, tunnel.Quote(r.Dir)), nil)
	if err != nil {
		return false, err
	}
	if strings.TrimSpace(string(out)) != "stopped" {
		return false, nil
	}
	shimBin, runnerBin, err := b.cfg.Agents(r.Arch)
	if err != nil {
		return false, backends.Stalled(fmt.Errorf("agent binaries for %s: %w", r.Arch, err))
	}
	sums := map[string]string{}
	for name, p := range map[string]string{"hoist-shim": shimBin, "hoist-runner": runnerBin} {
		if sums[name], err = b.sum(p); err != nil {
			return false, backends.Stalled(fmt.Errorf("agent binary: %w", err))
		}
	}
	b.log.Warn("shim_supervisor_restart", "instance", r.ID)
	return true, b.deploy(ctx, c, r, sums)
}

// ShimHost is the host name of Conn.ShimURL: a stable name that the Conn's
// dialer resolves to wherever the instance's shim listens now, so a Conn
// survives both a reconnect of the SSH connection and a restart of the shim
// (which picks a new port).
const ShimHost = "hoist-shim"

// Connect returns a connection to the instance's agents through the pooled
// SSH connection of its host. Its ShimURL is http://hoist-shim (see
// ShimHost); every dial goes through the host's current SSH connection,
// redialed when it broke, so a Conn may be kept for the instance's life.
// Closing it drops its idle HTTP connections only.
func (b *Backend) Connect(ctx context.Context, inst backends.Instance) (backends.Conn, error) {
	r, ok := b.record(inst.ID)
	if !ok {
		return nil, fmt.Errorf("sshfleet: instance %s: %w", inst.ID, backends.ErrNotFound)
	}
	c, err := b.client(ctx, r, true)
	if err != nil {
		return nil, err
	}
	if _, err := b.shimURL(ctx, c, r); err != nil {
		return nil, backends.Transient(fmt.Errorf("sshfleet: instance %s: %w", inst.ID, err))
	}
	cn := &conn{b: b, id: inst.ID}
	cn.tr = &http.Transport{DialContext: cn.dial, MaxIdleConnsPerHost: 4, IdleConnTimeout: 90 * time.Second, DisableCompression: true}
	cn.hc = &http.Client{Transport: &agentauth.Transport{Base: cn.tr, ShimURL: cn.ShimURL(), Token: cn.token}}
	return cn, nil
}

type conn struct {
	b  *Backend
	id string
	tr *http.Transport
	hc *http.Client
}

// dial opens a channel from the host to addr; ShimHost:80 means the shim,
// and the host of a "unix://" runner address (api.BaseURL) that socket.
func (c *conn) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	r, ok := c.b.record(c.id)
	if !ok {
		return nil, fmt.Errorf("sshfleet: instance %s: %w", c.id, backends.ErrNotFound)
	}
	cl, err := c.b.client(ctx, r, true)
	if err != nil {
		return nil, err
	}
	if sock, ok := api.SocketOfHost(addr); ok {
		// A runner's Unix socket on the host (TaskInfo.RunnerAddr), opened
		// by sshd for the login user (OpenSSH streamlocal forwarding).
		return cl.DialContext(ctx, "unix", sock)
	}
	if addr != ShimHost+":80" {
		return cl.DialContext(ctx, network, addr)
	}
	for attempt := 0; ; attempt++ {
		u, err := c.b.shimURL(ctx, cl, r)
		if err != nil {
			return nil, backends.Transient(fmt.Errorf("sshfleet: instance %s: %w", c.id, err))
		}
		nc, err := cl.DialContext(ctx, network, strings.TrimPrefix(u, "http://"))
		if err == nil || attempt > 0 {
			return nc, err
		}
		c.b.forgetShim(c.id) // the shim may have restarted on another port
	}
}

// HTTPClient returns the client that reaches the instance's agents.
func (c *conn) HTTPClient() *http.Client { return c.hc }

// token returns the current token of the instance's shim.
func (c *conn) token() string {
	r, _ := c.b.record(c.id)
	if r == nil {
		return ""
	}
	return r.ShimToken
}

// ShimURL returns the shim's base URL, http://hoist-shim.
func (c *conn) ShimURL() string { return "http://" + ShimHost }

// Close drops the connection's idle HTTP connections.
func (c *conn) Close() error {
	c.tr.CloseIdleConnections()
	return nil
}

// Terminate drains the host and forgets the instance: every shim task is
// terminated (DrainGrace) and removed, the supervisor and shim are stopped
// and the instance directory is deleted. An unknown id is success; an
// unreachable host is a transient error (the record stays, status
// terminating) so the caller retries.
func (b *Backend) Terminate(ctx context.Context, id string) error {
	unlock := b.lock(id)
	defer unlock()
	r, ok := b.record(id)
	if !ok {
		return nil
	}
	log := b.log.With("instance", id, "host", r.Host.Hostname)
	r.Status = backends.StatusTerminating
	if err := b.save(r); err != nil {
		return err
	}
	if r.Dir != "" {
		c, err := b.client(ctx, r, true)
		if err != nil {
			b.note(r, err)
			return fmt.Errorf("sshfleet: terminate %s: %w", id, err)
		}
		if err := b.drain(ctx, c, r); err != nil {
			b.note(r, err)
			return fmt.Errorf("sshfleet: drain %s: %w", id, err)
		}
		stop := fmt.Sprintf(aliveFunc+`cd %[1]s 2>/dev/null || exit 0
touch stop
if [ -f supervisor.pid ]; then kill -TERM "$(cat supervisor.pid)" 2>/dev/null; fi
i=0; while [ -f supervisor.pid ] && alive "$(cat supervisor.pid)" && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done
if [ -f shim.pid ]; then kill -KILL "$(cat shim.pid)" 2>/dev/null; fi
if [ -d %[2]s ]; then (cd %[2]s && %[3]s); fi
%[4]s
cd / && rm -rf %[1]s`, tunnel.Quote(r.Dir), gatewayDir, stopGatewayScript, leftovers(r))
		if _, err := c.Run(ctx, stop, nil); err != nil {
			b.note(r, err)
			return fmt.Errorf("sshfleet: stop shim on %s: %w", id, err)
		}
	}
	b.mu.Lock()
	if c, ok := b.clients[id]; ok {
		c.Close()
		delete(b.clients, id)
	}
	delete(b.shims, id)
	delete(b.records, id)
	b.mu.Unlock()
	if err := b.store.remove(id); err != nil {
		return err
	}
	log.Info("instance_terminated")
	return nil
}

// Forget drops an instance without contacting its host: the SSH connection
// is closed and the record removed. The cloud-VM engine (backends/vm) calls
// it for a VM it deletes, whose host goes away with everything on it. An
// unknown id is success.
func (b *Backend) Forget(id string) error {
	unlock := b.lock(id)
	defer unlock()
	b.mu.Lock()
	if c, ok := b.clients[id]; ok {
		c.Close()
		delete(b.clients, id)
	}
	delete(b.shims, id)
	delete(b.records, id)
	b.mu.Unlock()
	return b.store.remove(id)
}

// leftovers returns a shell command that removes containers still labelled
// with the instance's id (a shim that did not answer could not drain them).
func leftovers(r *record) string {
	id, ok := r.Tags[backends.TagInstance]
	if !ok || id == "" {
		return ":"
	}
	return `ids=$(docker ps -aq --filter label=` + tunnel.Quote(backends.TagInstance+"="+id) + ` 2>/dev/null); [ -z "$ids" ] || docker rm -f $ids >/dev/null 2>&1 || true`
}

// drain terminates and removes every task of the instance's shim. A shim
// that does not answer has nothing to drain that hoist could reach; its
// containers stay, labelled, and are reported.
func (b *Backend) drain(ctx context.Context, c *tunnel.Client, r *record) error {
	if err := b.health(ctx, c, r); err != nil {
		b.log.Warn("drain_shim_not_answering", "instance", r.ID, "error", err)
		return nil
	}
	u, err := b.shimURL(ctx, c, r)
	if err != nil {
		return err
	}
	sc := api.NewShimClient(u, c.HTTPClient()).WithToken(r.ShimToken)
	list, err := sc.TaskList(ctx)
	if err != nil {
		return err
	}
	for _, t := range list.Tasks {
		if !t.Terminated() {
			if _, err := sc.TerminateTask(ctx, t.ID, api.ReasonTerminatedByServer, "host drained: removed from the fleet", b.cfg.DrainGrace); err != nil {
				return fmt.Errorf("terminate task %s: %w", t.ID, err)
			}
		}
		if err := sc.RemoveTask(ctx, t.ID); err != nil && !errors.Is(err, api.ErrNotFound) {
			return fmt.Errorf("remove task %s: %w", t.ID, err)
		}
		b.log.Info("task_drained", "instance", r.ID, "task", t.ID)
	}
	for _, u := range list.Unknown {
		b.log.Warn("unknown_container_left", "instance", r.ID, "container", u.ContainerID, "name", u.Name)
	}
	return nil
}

// Connected reports whether the backend holds a live SSH connection to the
// instance's host.
func (b *Backend) Connected(id string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	c, ok := b.clients[id]
	return ok && c.Alive()
}

// checkStatic fails unless path is an ELF executable without an interpreter
// (statically linked): the agents run on hosts whose C library is not the
// one they would have been linked against.
func checkStatic(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("%s is not an ELF executable: %w", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is dynamically linked (built with cgo), but SSH hosts need static agents", path)
		}
	}
	return nil
}
