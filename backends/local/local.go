package local

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/client"

	"hoist/agents/api"
	"hoist/agents/hostinfo"
	"hoist/agents/shim"
	"hoist/backends"
	"hoist/backends/internal/agentauth"
	"hoist/backends/internal/hostoffer"
	"hoist/backends/offers"
)

// Region is the region of local offers and instances.
const Region = "local"

// Compile-time guards.
var (
	_ backends.Backend   = (*Backend)(nil)
	_ backends.Connector = (*Backend)(nil)
)

// Config configures the local backend.
type Config struct {
	// Name is the backend's name; "local" when empty.
	Name string
	// RunnerBinary is the path of the hoist-runner binary for this host; the
	// shims bind-mount it into every job container. Required unless
	// RunnerMissing says why there is none.
	RunnerBinary string
	// RunnerMissing, with an empty RunnerBinary, says why this host has no
	// runner binary (what to build): the backend starts, and every Create
	// fails with it (backends.Stalled) so that the instance shows it.
	RunnerMissing error
	// StateDir keeps the shims' state (required). Each instance's shim runs
	// in this server's process, so the StateDir (with the hostname) also
	// names the server that serves the instance.
	StateDir string
	// Records keeps the instance records, shared by every server
	// (required): another server sees this one's instances as running
	// and leaves their termination to it.
	Records backends.Records
	// Labels are added to every container the shims create.
	Labels map[string]string
	// GatewayBinary is the hoist binary StartGateway runs as `hoist
	// gateway`; empty refuses gateways (backends.Deps.GatewayBinary).
	GatewayBinary string
	// GatewayAddress is the address a gateway's public listeners bind and
	// clients reach them at; empty means DefaultGatewayAddress.
	GatewayAddress string
	// GatewayHTTPPort and GatewayHTTPSPort are the ports of a gateway's
	// public listeners; zero means DefaultGatewayHTTPPort and
	// DefaultGatewayHTTPSPort.
	GatewayHTTPPort, GatewayHTTPSPort int
	// Logger receives the backend's and the shims' events; nil discards.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Options are the settings of a "local" entry in the server's config file.
type Options struct {
	// RunnerBinary overrides the runner binary cmd/hoist resolved.
	RunnerBinary string `json:"runner_binary"`
	// GatewayAddress is where gateways of this host listen (default
	// 127.0.0.1).
	GatewayAddress string `json:"gateway_address"`
	// GatewayHTTPPort and GatewayHTTPSPort are their ports (default 80
	// and 443).
	GatewayHTTPPort  int `json:"gateway_http_port"`
	GatewayHTTPSPort int `json:"gateway_https_port"`
}

// Factory builds the backend from a config entry; use it in cmd/hoist's
// Registry as "local". The runner binary comes from deps.Agents for this
// host's architecture unless the options name one.
func Factory(cfg backends.Config, deps backends.Deps) (backends.Backend, error) {
	var o Options
	if err := cfg.Decode(&o); err != nil {
		return nil, err
	}
	var missing error
	if o.RunnerBinary == "" && deps.Agents != nil {
		_, runner, err := deps.Agents(goarch())
		if err != nil {
			missing = fmt.Errorf("runner binary: %w", err)
		}
		o.RunnerBinary = runner
	}
	return New(Config{Name: cfg.Name, RunnerBinary: o.RunnerBinary, RunnerMissing: missing, StateDir: deps.StateDir, Records: deps.Records, Logger: deps.Logger, Now: deps.Now,
		GatewayBinary: deps.GatewayBinary, GatewayAddress: o.GatewayAddress, GatewayHTTPPort: o.GatewayHTTPPort, GatewayHTTPSPort: o.GatewayHTTPSPort})
}

// Backend is the local backend. Use New; Close it on shutdown (the shims
// stop serving, their containers keep running and are recovered by the next
// New on the same StateDir).
type Backend struct {
	cfg  Config
	log  *slog.Logger
	host offers.Offer // the whole host, from ThisHost

	docker *client.Client // shared by every instance's shim

	server string // this server, as recorded in the records it owns

	mu     sync.Mutex
	insts  map[string]*instance
	closed bool
}

// errClosed is returned by every call after Close.
var errClosed = errors.New("local backend: closed")

// instance is one local instance: its record and its running shim.
type instance struct {
	rec   record
	shim  *shim.Shim
	srv   *http.Server
	url   string
	token string // the shim's token; it lives in this process only
}

// record is what the backend keeps of an instance, in the shared
// backends.Records (older hoists kept it in
// <StateDir>/instances/<id>/instance.json).
type record struct {
	ID        string            `json:"id"`
	Server    string            `json:"server,omitempty"` // the server whose process runs the shim
	Name      string            `json:"name,omitempty"`
	Offer     offers.Offer      `json:"offer"`
	GPUIDs    []string          `json:"gpu_ids,omitempty"` // host GPU indexes reserved for the instance
	Tags      map[string]string `json:"tags"`
	CreatedAt time.Time         `json:"created_at"`
}

// New returns the local backend. It checks that the Docker Engine answers
// (else a transient error), then restarts the shim of every instance this
// server owns in cfg.Records (moving records an older hoist kept in
// cfg.StateDir there first), re-attaching to their containers (Recover).
func New(cfg Config) (*Backend, error) {
	if cfg.Name == "" {
		cfg.Name = "local"
	}
	if cfg.StateDir == "" {
		return nil, errors.New("local backend: state dir is required")
	}
	if cfg.Records == nil {
		return nil, errors.New("local backend: records are required")
	}
	switch {
	case cfg.RunnerBinary == "" && cfg.RunnerMissing == nil:
		return nil, errors.New("local backend: runner binary is required")
	case cfg.RunnerBinary != "":
		if _, err := os.Stat(cfg.RunnerBinary); err != nil {
			return nil, fmt.Errorf("local backend: runner binary: %w", err)
		}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.GatewayAddress == "" {
		cfg.GatewayAddress = DefaultGatewayAddress
	}
	if cfg.GatewayHTTPPort == 0 {
		cfg.GatewayHTTPPort = DefaultGatewayHTTPPort
	}
	if cfg.GatewayHTTPSPort == 0 {
		cfg.GatewayHTTPSPort = DefaultGatewayHTTPSPort
	}
	dir := filepath.Join(cfg.StateDir, "instances")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("local backend: %w", err)
	}
	docker, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, fmt.Errorf("local backend: docker client: %w", err)
	}
	pctx, pcancel := context.WithTimeout(context.Background(), 5*time.Second)
	_, err = docker.Ping(pctx)
	pcancel()
	if err != nil {
		docker.Close()
		return nil, backends.Transient(fmt.Errorf("local backend: docker engine not answering: %w", err))
	}
	b := &Backend{cfg: cfg, log: cfg.Logger.With("backend", cfg.Name), docker: docker, insts: map[string]*instance{}}
	hostname, _ := os.Hostname()
	abs, _ := filepath.Abs(cfg.StateDir)
	b.server = hostname + ":" + abs
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if b.host, err = ThisHost(ctx, cfg.Name, cfg.StateDir); err != nil {
		b.log.Warn("host_probe_incomplete", "error", err)
	}
	if err := b.migrateFiles(ctx, dir); err != nil {
		b.Close()
		return nil, err
	}
	all, err := b.records(ctx)
	if err != nil {
		b.Close()
		return nil, err
	}
	for _, r := range all {
		if r.Server != b.server {
			continue // another server's instance: its shim runs there
		}
		in, err := b.start(ctx, r)
		if err != nil {
			b.Close()
			return nil, err
		}
		b.insts[r.ID] = in
	}
	return b, nil
}

// ThisHost describes this machine as a whole-host offer of the local
// backend named name (agents/hostinfo's probe), its disk the file system
// holding dir ("/" when empty). The error reports a GPU tool that failed;
// the offer is usable without those GPUs.
func ThisHost(ctx context.Context, name, dir string) (offers.Offer, error) {
	h, err := hostinfo.Probe(ctx, dir)
	o := hostoffer.Offer(h, name, Region)
	if o.Instance == "" {
		o.Instance = "localhost"
	}
	return o, err
}

func goarch() string { return runtime.GOARCH }

// Name returns the backend's name.
func (b *Backend) Name() string { return b.cfg.Name }

// Traits says the backend runs a shim on instances that are slices of this
// host, shared with the server.
func (b *Backend) Traits() backends.Traits {
	return backends.Traits{Runtime: backends.RuntimeShim, SharedHost: true}
}

// Close stops every shim's HTTP server and watchers. Containers keep running.
func (b *Backend) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	for id, in := range b.insts {
		in.stop()
		delete(b.insts, id)
	}
	if !b.closed {
		b.docker.Close()
	}
	b.closed = true
	return nil
}

func (in *instance) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = in.srv.Shutdown(ctx)
	_ = in.shim.Close()
}

func (b *Backend) instDir(id string) string {
	name := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			return r
		}
		return '_'
	}, id)
	return filepath.Join(b.cfg.StateDir, "instances", name)
}

// start runs the shim of r on a loopback listener and recovers its tasks.
func (b *Backend) start(ctx context.Context, r record) (*instance, error) {
	labels := backends.CopyTags(b.cfg.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	for k, v := range r.Tags {
		labels[k] = v
	}
	// The shim runs in this process: its token never leaves it.
	token, err := agentauth.NewToken()
	if err != nil {
		return nil, fmt.Errorf("local backend: instance %s: %w", r.ID, err)
	}
	s, err := shim.New(shim.Config{
		Docker:       b.docker,
		Token:        token,
		RunnerBinary: b.cfg.RunnerBinary,
		StateDir:     filepath.Join(b.instDir(r.ID), "shim"),
		Labels:       labels,
		// The instance's GPUs, which the shim hands out a task at a time
		// (none reserved: none to hand out).
		GPUs:   append([]string{}, r.GPUIDs...),
		Logger: b.cfg.Logger.With("instance", r.ID),
		Now:    b.cfg.Now,
	})
	if err != nil {
		return nil, fmt.Errorf("local backend: instance %s: %w", r.ID, err)
	}
	if err := s.Recover(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("local backend: instance %s: recover: %w", r.ID, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("local backend: instance %s: %w", r.ID, err)
	}
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	b.log.Info("shim_started", "instance", r.ID, "addr", ln.Addr().String())
	return &instance{rec: r, shim: s, srv: srv, url: "http://" + ln.Addr().String(), token: token}, nil
}

func (b *Backend) toInstance(in *instance) backends.Instance {
	return backends.Instance{
		ID: in.rec.ID, Backend: b.cfg.Name, Region: Region, Hostname: "127.0.0.1",
		Status: backends.StatusRunning, Runtime: backends.RuntimeShim, Offer: in.rec.Offer,
		Arch: goarch(), Tags: backends.CopyTags(in.rec.Tags), CreatedAt: in.rec.CreatedAt,
	}
}

// used sums the resources of the instances, except skip.
func (b *Backend) usedLocked(skip string) (cpus int, mem float64, gpus int) {
	for id, in := range b.insts {
		if id != skip {
			cpus += in.rec.Offer.CPUs
			mem += in.rec.Offer.MemoryGB
			gpus += in.rec.Offer.GPUCount
		}
	}
	return
}

// sized returns the offer for q: the query's minimums where it sets them,
// else the whole host; false when the host is too small for q.
func (b *Backend) sized(q offers.Query) (offers.Offer, bool) {
	h := b.host
	o := h
	o.Availability = offers.AvailabilityAvailable
	if q.CPU.HasMin {
		o.CPUs = max(1, int(math.Ceil(q.CPU.Min)))
	}
	if q.Memory.HasMin && q.Memory.Min > 0 {
		o.MemoryGB = q.Memory.Min
	}
	if q.Disk.HasMin && q.Disk.Min > 0 {
		o.DiskGB = q.Disk.Min
	}
	if q.GPUCount.HasMin && h.GPUCount > 0 {
		o.GPUCount = int(math.Ceil(q.GPUCount.Min))
	}
	if o.GPUCount == 0 {
		o.GPUVendor, o.GPUName, o.GPUMemoryGB = "", "", 0
	}
	o.Flags = nil
	if o.CPUs > h.CPUs || o.MemoryGB > h.MemoryGB || o.DiskGB > h.DiskGB || o.GPUCount > h.GPUCount {
		return offers.Offer{}, false
	}
	return o, true
}

func (b *Backend) fitsLocked(o offers.Offer, skip string) bool {
	cpus, mem, gpus := b.usedLocked(skip)
	const eps = 1e-9
	return cpus+o.CPUs <= b.host.CPUs && mem+o.MemoryGB <= b.host.MemoryGB+eps && gpus+o.GPUCount <= b.host.GPUCount
}

// Offers returns this host sized for q (whole host where q sets no
// minimum), available when it fits next to the existing instances and busy
// otherwise; none when the host is too small or q excludes it.
func (b *Backend) Offers(_ context.Context, q offers.Query) ([]offers.Offer, error) {
	o, ok := b.sized(q)
	if !ok {
		return nil, nil
	}
	b.mu.Lock()
	if !b.fitsLocked(o, "") {
		o.Availability = offers.AvailabilityBusy
	}
	b.mu.Unlock()
	return offers.Filter([]offers.Offer{o}, q), nil
}

// Create starts a local instance of spec.Offer's size (the whole host when
// the offer is zero) with its own shim. It is idempotent on spec.ID; an
// instance that does not fit next to the existing ones fails with
// backends.ErrNoCapacity.
func (b *Backend) Create(ctx context.Context, spec backends.InstanceSpec) (backends.Instance, error) {
	if spec.ID == "" {
		return backends.Instance{}, backends.Stalled(errors.New("local backend: instance id is required"))
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return backends.Instance{}, errClosed
	}
	if in, ok := b.insts[spec.ID]; ok {
		return b.toInstance(in), nil
	}
	if b.cfg.RunnerBinary == "" {
		return backends.Instance{}, backends.Stalled(fmt.Errorf("local backend: instance %s: %w", spec.ID, b.cfg.RunnerMissing))
	}
	o := spec.Offer
	switch {
	case spec.Gateway:
		// A gateway's instance is a process of this host that runs no
		// job: it reserves none of the host's CPUs, memory or GPUs, so
		// that the server's own fleet of the whole host leaves room for it.
		o = offers.Offer{Instance: o.Instance}
	case o.CPUs == 0:
		o, _ = b.sized(offers.Query{})
	}
	o.Backend, o.Region, o.Availability, o.Price = b.cfg.Name, Region, offers.AvailabilityBusy, 0
	if o.Instance == "" {
		o.Instance = b.host.Instance
	}
	if !spec.Gateway && (o.CPUs > b.host.CPUs || o.MemoryGB > b.host.MemoryGB || !b.fitsLocked(o, "")) {
		return backends.Instance{}, backends.Transient(fmt.Errorf("local backend: instance %s (%d cpus, %.1f GB): %w", spec.ID, o.CPUs, o.MemoryGB, backends.ErrNoCapacity))
	}
	var used [][]string
	for _, in := range b.insts {
		used = append(used, in.rec.GPUIDs)
	}
	r := record{ID: spec.ID, Name: spec.Name, Offer: o, GPUIDs: allocGPUs(b.host.GPUCount, used, o.GPUCount),
		Tags: backends.CopyTags(spec.Tags), CreatedAt: b.cfg.Now()}
	dir := b.instDir(spec.ID)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return backends.Instance{}, fmt.Errorf("local backend: %w", err)
	}
	r.Server = b.server
	if err := b.putRecord(ctx, r); err != nil {
		return backends.Instance{}, err
	}
	in, err := b.start(ctx, r)
	if err != nil {
		return backends.Instance{}, err
	}
	b.insts[spec.ID] = in
	b.log.Info("instance_created", "instance", spec.ID, "cpus", o.CPUs, "memory_gb", o.MemoryGB)
	return b.toInstance(in), nil
}

// Describe returns the instance, running while its shim answers.
func (b *Backend) Describe(ctx context.Context, id string) (backends.Instance, error) {
	b.mu.Lock()
	in, ok := b.insts[id]
	closed := b.closed
	b.mu.Unlock()
	if closed {
		return backends.Instance{}, errClosed
	}
	if !ok {
		r, found, err := b.getRecord(ctx, id)
		if err != nil {
			return backends.Instance{}, err
		}
		if !found || r.Server == b.server {
			return backends.Instance{}, fmt.Errorf("local backend: instance %s: %w", id, backends.ErrNotFound)
		}
		return b.othersInstance(r), nil
	}
	inst := b.toInstance(in)
	hctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := api.NewShimClient(in.url, nil).WithToken(in.token).Health(hctx); err != nil {
		inst.Status, inst.Message = backends.StatusProvisioning, fmt.Sprintf("shim not answering: %v", err)
	}
	return inst, nil
}

// List returns the instances whose tags match, those other servers serve
// included.
func (b *Backend) List(ctx context.Context, tags map[string]string) ([]backends.Instance, error) {
	all, err := b.records(ctx)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []backends.Instance
	for _, in := range b.insts {
		if backends.MatchTags(in.rec.Tags, tags) {
			out = append(out, b.toInstance(in))
		}
	}
	for _, r := range all {
		if _, mine := b.insts[r.ID]; !mine && r.Server != b.server && backends.MatchTags(r.Tags, tags) {
			out = append(out, b.othersInstance(r))
		}
	}
	slices.SortFunc(out, func(a, b backends.Instance) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// DrainGrace is how long a job container gets to stop when its instance is
// terminated.
const DrainGrace = 10 * time.Second

// Terminate drains the instance (terminates and removes its shim's tasks),
// stops its gateway, if it runs one, and its shim and deletes its state.
// Gone is success.
func (b *Backend) Terminate(ctx context.Context, id string) error {
	b.mu.Lock()
	in, ok := b.insts[id]
	closed := b.closed
	b.mu.Unlock()
	if closed {
		return errClosed
	}
	if !ok {
		r, found, err := b.getRecord(ctx, id)
		if err != nil {
			return err
		}
		if found && r.Server != b.server {
			// Its shim and containers are the other server's: only it can
			// drain them. The instance worker retries; whichever server
			// claims it next may be the owner.
			return backends.Transient(fmt.Errorf("local backend: instance %s is served by hoist server %s; it terminates it", id, r.Server))
		}
		if found {
			if err := b.stopGateway(ctx, id); err != nil {
				return err
			}
			return b.deleteRecord(ctx, id)
		}
		return nil
	}
	// The instance's gateway, if it runs one, goes with it.
	if err := b.stopGateway(ctx, id); err != nil {
		return err
	}
	for _, t := range in.shim.ListTasks().Tasks {
		if !t.Terminated() {
			if _, err := in.shim.TerminateTask(ctx, t.ID, api.ReasonTerminatedByServer, "instance terminated", DrainGrace); err != nil {
				return fmt.Errorf("local backend: terminate %s: task %s: %w", id, t.ID, err)
			}
		}
		if err := in.shim.RemoveTask(ctx, t.ID); err != nil {
			return fmt.Errorf("local backend: terminate %s: remove task %s: %w", id, t.ID, err)
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if cur, ok := b.insts[id]; !ok || cur != in {
		return nil
	}
	in.stop()
	delete(b.insts, id)
	if err := b.deleteRecord(ctx, id); err != nil {
		return fmt.Errorf("local backend: terminate %s: %w", id, err)
	}
	if err := os.RemoveAll(b.instDir(id)); err != nil {
		return fmt.Errorf("local backend: terminate %s: %w", id, err)
	}
	b.log.Info("instance_terminated", "instance", id)
	return nil
}

// Connect returns a loopback connection to the instance's shim. Its client
// authenticates to the shim and to the task's runners (agentauth); task
// creations through it get the instance's size as Docker limits when they
// set none.
func (b *Backend) Connect(_ context.Context, inst backends.Instance) (backends.Conn, error) {
	b.mu.Lock()
	in, ok := b.insts[inst.ID]
	b.mu.Unlock()
	if !ok {
		return nil, backends.Transient(fmt.Errorf("local backend: instance %s: its shim does not run in this server: %w", inst.ID, backends.ErrUnreachable))
	}
	// Runners answer on Unix sockets in the shim's state directory, on
	// this same host (TaskInfo.RunnerAddr).
	tr := &http.Transport{DialContext: api.UnixDial(nil), MaxIdleConnsPerHost: 8, IdleConnTimeout: 90 * time.Second}
	auth := &agentauth.Transport{
		Base:    &limits{base: tr, shimURL: in.url, offer: in.rec.Offer, host: b.host},
		ShimURL: in.url, Token: func() string { return in.token },
	}
	return &conn{
		hc:  &http.Client{Transport: auth},
		tr:  tr,
		url: in.url,
	}, nil
}

type conn struct {
	hc  *http.Client
	tr  *http.Transport
	url string
}

// HTTPClient returns the client that reaches the instance's agents.
func (c *conn) HTTPClient() *http.Client { return c.hc }

// ShimURL returns the shim's base URL.
func (c *conn) ShimURL() string { return c.url }

// Close drops the connection's idle HTTP connections.
func (c *conn) Close() error {
	c.tr.CloseIdleConnections()
	return nil
}

// limits is the RoundTripper that applies an instance's size to the tasks
// created on its shim: CPUs and memory as Docker limits, unless the task
// sets its own; nothing when the instance is the whole host.
type limits struct {
	base    http.RoundTripper
	shimURL string
	offer   offers.Offer
	host    offers.Offer
}

// RoundTrip fills in the limits of a task creation and sends the request.
func (l *limits) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodPost || req.URL.Path != "/api/v1/tasks" || req.Body == nil ||
		!strings.HasPrefix(l.shimURL, req.URL.Scheme+"://"+req.URL.Host) {
		return l.base.RoundTrip(req)
	}
	raw, err := io.ReadAll(req.Body)
	req.Body.Close()
	if err != nil {
		return nil, err
	}
	var spec api.TaskSpec
	if err := json.Unmarshal(raw, &spec); err == nil {
		if spec.CPUs == 0 && l.offer.CPUs > 0 && l.offer.CPUs < l.host.CPUs {
			spec.CPUs = float64(l.offer.CPUs)
		}
		if spec.MemoryBytes == 0 && l.offer.MemoryGB > 0 && l.offer.MemoryGB < l.host.MemoryGB {
			spec.MemoryBytes = int64(l.offer.MemoryGB * (1 << 30))
		}
		if b, err := json.Marshal(spec); err == nil {
			raw = b
		}
	}
	r2 := req.Clone(req.Context())
	r2.Body = io.NopCloser(bytes.NewReader(raw))
	r2.ContentLength = int64(len(raw))
	r2.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(raw)), nil }
	return l.base.RoundTrip(r2)
}

// allocGPUs picks n GPU indexes of a host with total GPUs, lowest first,
// skipping those in used; nil when n is 0 (or not enough are free, which
// the capacity check rules out).
func allocGPUs(total int, used [][]string, n int) []string {
	if n <= 0 {
		return nil
	}
	taken := map[string]bool{}
	for _, ids := range used {
		for _, id := range ids {
			taken[id] = true
		}
	}
	var out []string
	for i := 0; i < total && len(out) < n; i++ {
		if id := strconv.Itoa(i); !taken[id] {
			out = append(out, id)
		}
	}
	if len(out) < n {
		return nil
	}
	return out
}
