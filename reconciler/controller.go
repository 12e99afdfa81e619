package reconciler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"hoist/backends"
	"hoist/reconciler/plan"
	"hoist/reconciler/policy"
	"hoist/reconciler/queue"
	"hoist/reconciler/source"
	"hoist/schema"
	"hoist/store"
	"hoist/store/blob"
)

// Config tunes a Controller.
type Config struct {
	// Project is the store project rows belong to ("main" when empty).
	Project string
	// Installation names this hoist installation in ownership tags.
	Installation string
	// Owner names this server in leases ("<hostname>-<pid>" when empty;
	// hoist serve gives "<hostname>-<id>", id kept in its data directory).
	Owner string
	// ResyncInterval is how often every active row is re-queued and the
	// applied revision re-planned, with ±20% jitter (30 s when zero).
	ResyncInterval time.Duration
	// LeaseFor is how long a claimed row stays this server's before another
	// server may take it (30 s when zero); held leases are extended.
	LeaseFor time.Duration
	// UnreachableGrace is how long a running job's runner may not answer
	// before the job fails as instance_unreachable (2 min when zero).
	UnreachableGrace time.Duration
	// MetricsInterval is how often each running job's CPU, memory and GPU
	// use is sampled from its runner (10 s when zero, as dstack collects).
	MetricsInterval time.Duration
	// LoadTimeout bounds validating one revision (and every plan's load):
	// past it the revision is refused with an error naming the deadline and
	// the next one is looked at (30 s when zero).
	LoadTimeout time.Duration
	// DefaultImage runs specs that name no image (dstack uses its base image).
	DefaultImage string
	// IDEDownloadURLs replace, by IDE (vscode, cursor, windsurf), the
	// download URL template of the IDE server a dev environment pinning
	// its `version` gets installed (dstack's URLs when absent), so that a
	// mirror can serve them: {version}, {commit} and {arch} are replaced
	// as in dstack's URLs (see ideServers).
	IDEDownloadURLs map[string]string
	// LocalFleet is the name of the fleet of this host, created by default
	// when a backend named LocalBackend is configured ("local" when empty).
	LocalFleet string
	// NoLocalFleet skips creating the fleet of this host, leaving the host
	// to fleets that name the local backend in `backends` (each instance
	// reserving its share).
	NoLocalFleet bool
	// LocalShares is how many projects' controllers of this server make a
	// fleet of this host through the same local backend (cmd/hoist: the
	// projects whose backends include it). With more than one, this
	// project's fleet of this host gets an instance of 1/LocalShares of the
	// host's CPUs, memory and GPUs (at least one CPU) instead of the whole
	// host: the local backend admits instances while they fit next to each
	// other, so the projects together never reserve more than the host.
	LocalShares int
	// LocalBackend is the name of the backend of this host (when empty,
	// the configured backend whose traits say its instances share this
	// host; see localBackend).
	LocalBackend string
	// Gateways are the server's `gateways:` settings (certificates).
	Gateways GatewaySettings
	// Retention is how long events, and the logs of finished jobs, are kept
	// (zero keeps them forever).
	Retention time.Duration
	// RetentionInterval is how often retention runs (1 h when zero).
	RetentionInterval time.Duration
	// Artifacts keeps the files of jobs' `artifacts` folders: the runner's
	// copy is fetched when a job ends, and a job's dependencies' artifacts
	// are placed in its working directory before it starts. Nil refuses
	// every workflow job that declares or needs artifacts.
	Artifacts blob.Store
	// ArtifactRetention is how long artifacts are kept after their run
	// finished; zero keeps them as long as the run's record.
	ArtifactRetention time.Duration
	// LeakAuditInterval is how often every backend is asked for
	// instances, network volumes and placement groups tagged as this
	// installation's that the store does not know, which are then deleted
	// (10 min when zero; negative turns the audit off).
	LeakAuditInterval time.Duration
	// LeakGrace is how old such a resource must be before it counts as
	// leaked (10 min when zero).
	LeakGrace time.Duration
	// DataDir is the server's data directory (its SQLite database, Git
	// mirrors, caches): a sync or a re-run is refused while it has less
	// than MinFreeBytes free, and a store write the disk had no room for
	// is reported as a DiskFullError naming it. "" checks nothing.
	DataDir string
	// MinFreeBytes is the free space DataDir must keep for new work.
	MinFreeBytes int64
	// ServiceDrain is how long a service replica retired by a rolling
	// deployment or a scale-down keeps running after it left the
	// service's routes, so that no proxy picks it from a route it cached
	// (the in-server proxy keeps one for 1 s) and its requests in flight
	// finish (5 s when zero; negative stops it at once).
	ServiceDrain time.Duration
	// HFEndpoint is the Hugging Face Hub the tokenizer configuration of a
	// `format: tgi` model is read from (DefaultHFEndpoint when empty);
	// cmd/hoist passes the HF_ENDPOINT environment variable, as
	// huggingface_hub reads it.
	HFEndpoint string
	// SSHAuthorizedKeys are authorized_keys lines (the server config's
	// ssh.authorized_keys: hoist's project keys, e.g. a bastion's or CI's)
	// that every job's runner accepts over SSH, besides the key of the
	// user of each connection (DialJobSSH).
	SSHAuthorizedKeys []string
	// RepoCacheDir keeps the mirrors of the remote repositories runs bring
	// with `repos[].url` (cmd/hoist: <data-dir>/repos); empty fetches each
	// into memory afresh.
	RepoCacheDir string
	// Budget is what the project may spend (the server config's
	// `projects[].budget`; zero: no limit): a plan raising the spend past
	// it is held for confirmation, and an instance whose price would take
	// the project past it is not created, whatever was confirmed (the job
	// or fleet asking waits).
	Budget plan.Budget
	// Logger receives the controller's events; nil discards them.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Deps are what a Controller works with.
type Deps struct {
	// Store keeps desired and observed state.
	Store *store.Store
	// Source yields revisions of the spec repository.
	Source source.Source
	// Backends are the configured backends by name.
	Backends map[string]backends.Backend
	// Estimate prices offers for plan estimates (optional; see
	// plan.Options.Estimate).
	Estimate plan.Pricer
	// Observer is told about reconcile outcomes (metrics); optional.
	Observer Observer
	// Checks are applied to every resource of a revision after the schema
	// accepted it, in sync and in every plan: what the server's policy
	// allows, what hoist's runtime supports. Any error rejects the revision
	// like a schema error does.
	Checks []Check
	// Policy is the server's policy for what specs may ask of a host: the
	// job worker asks it again for the backend a job was placed on, and
	// mounts read-only every instance volume it does not grant read-write.
	// Nil allows no instance volume and no privileged container.
	Policy *policy.Policy
	// Advisories are applied like Checks to every resource of a revision
	// the checks accepted, but never reject it: what they find (fields
	// without effect) is recorded with the revision as its warnings.
	Advisories []Check
	// Traffic is what the service proxy measured of each service run, for
	// `scaling: {metric: rps}` and scaling to zero; nil means no traffic is
	// known (services keep the low end of their `replicas`).
	Traffic Traffic
}

// A Check reviews one loaded resource against a rule the schema does not
// know and returns its problems, positioned with Resource.FieldError.
type Check func(r *schema.Resource) schema.Errors

// Observer receives reconcile outcomes, e.g. to export metrics.
type Observer interface {
	// Reconciled is called after each processing of one key of a kind.
	Reconciled(kind string, d time.Duration, err error)
	// Synced is called after each revision sync with its result
	// ("synced", "invalid", "held", "error", "unchanged").
	Synced(result string, d time.Duration)
	// QueueDepth reports the keys of kind's queue ready for a worker (its
	// backlog), those waiting for a delay (scheduled re-checks) and those
	// that failed since their last success (backingOff).
	QueueDepth(kind string, ready, delayed, backingOff int)
	// LogsAppended is called when output of a job was stored, so that live
	// followers (server-sent events) look at once.
	LogsAppended(jobID string)
	// Changed is called after an object was processed and may have changed.
	Changed()
	// LeakReaped is called for each leaked resource of kind (instance,
	// volume, placement_group) the leak audit deleted on backend.
	LeakReaped(backend, kind string)
	// Audited is called after each periodic audit of project with the
	// counts of its report (AuditReport).
	Audited(project string, leaked, lost, duplicated, errors int)
	// JobFinished is called when a job that started reaches its final
	// status, with its backend and how long it ran.
	JobFinished(backend, status string, d time.Duration)
	// Retried is called each time a key of kind failed with a transient
	// error and was put back after the back-off d.
	Retried(kind string, d time.Duration)
	// BackendFailed is called for each failed call of the reconciler to
	// backend (create, describe, terminate of instances; volumes), with
	// the error's class (backends.Reason).
	BackendFailed(backend, reason string)
	// BudgetBlocked is called once each time a job or fleet (kind) of
	// project starts waiting because an instance it needs would take the
	// project past its budget (Config.Budget).
	BudgetBlocked(project, kind string)
}

// Controller reconciles desired state from Git with what is provisioned.
type Controller struct {
	cfg  Config
	st   *store.Store
	src  source.Source
	bes  map[string]backends.Backend
	est  plan.Pricer
	chk  []Check
	pol  *policy.Policy
	adv  []Check
	obs  Observer
	log  *slog.Logger
	now  func() time.Time
	reqs *syncRequests // coalesced requests for a sync

	runs  *queue.Queue[string]
	jobs  *queue.Queue[string]
	insts *queue.Queue[string]
	gws   *queue.Queue[string]

	connsMu sync.Mutex
	conns   map[string]backends.Conn // by instance id

	gwMu    sync.Mutex
	gwStats map[string]gatewayTraffic // by project/run: what a gateway measured

	pumpsMu sync.Mutex
	pumps   map[string]context.CancelFunc // running jobs whose output is being copied
	pumpWG  sync.WaitGroup                // pumps still finishing

	branch atomic.Value // string: the tracked branch as last resolved
	// syncErr is why the last sync attempt failed ("" once one
	// succeeds), shown by Status: kept in memory, as the store may be the
	// cause (a full disk).
	syncErr atomic.Value // string

	traffic Traffic
	hf      *http.Client // the Hugging Face Hub's (tokenizer configs)

	svcMu  sync.Mutex
	passes map[string][]int       // by job id: each probe's passes in a row, as this server last probed
	scales map[string]*scaleState // by run id: the autoscaler's state

	history *serviceHistory // each service's recent traffic and replica count, for the dashboard

	mirrors   *source.Mirrors // of `repos[].url` repositories
	blobSums  *blobSums       // SHA-256 of Git blobs of mirrored repositories
	provRepos providerRepos   // provider repositories' files by URL and commit
	artSums   *blobSums       // SHA-256 of kept artifact files
	// artifactsPrunedTo is the previous artifact retention pass's cutoff
	// (only the retention loop touches it).
	artifactsPrunedTo time.Time
}

// New returns a Controller; Run starts it.
func New(cfg Config, deps Deps) (*Controller, error) {
	if deps.Store == nil || deps.Source == nil {
		return nil, errors.New("reconciler: store and source are required")
	}
	if cfg.Project == "" {
		cfg.Project = store.DefaultProject
	}
	if cfg.Installation == "" {
		cfg.Installation = "hoist"
	}
	if cfg.Owner == "" {
		h, _ := os.Hostname()
		cfg.Owner = fmt.Sprintf("%s-%d", h, os.Getpid())
	}
	if cfg.ResyncInterval <= 0 {
		cfg.ResyncInterval = 30 * time.Second
	}
	if cfg.LeaseFor <= 0 {
		cfg.LeaseFor = 30 * time.Second
	}
	if cfg.UnreachableGrace <= 0 {
		cfg.UnreachableGrace = unreachableGrace
	}
	if cfg.RetentionInterval <= 0 {
		cfg.RetentionInterval = time.Hour
	}
	if cfg.MetricsInterval <= 0 {
		cfg.MetricsInterval = 10 * time.Second
	}
	if cfg.LeakAuditInterval == 0 {
		cfg.LeakAuditInterval = 10 * time.Minute
	}
	if cfg.LeakGrace <= 0 {
		cfg.LeakGrace = 10 * time.Minute
	}
	if cfg.LoadTimeout <= 0 {
		cfg.LoadTimeout = 30 * time.Second
	}
	if cfg.ServiceDrain == 0 {
		cfg.ServiceDrain = defaultServiceDrain
	}
	if cfg.LocalFleet == "" {
		cfg.LocalFleet = "local"
	}
	if cfg.LocalBackend == "" {
		cfg.LocalBackend = localBackend(deps.Backends)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	obs := deps.Observer
	if obs == nil {
		obs = nopObserver{}
	}
	now := cfg.Now
	c := &Controller{
		cfg:   cfg,
		st:    deps.Store,
		src:   deps.Source,
		bes:   deps.Backends,
		est:   deps.Estimate,
		chk:   deps.Checks,
		pol:   deps.Policy,
		adv:   deps.Advisories,
		obs:   obs,
		log:   cfg.Logger,
		now:   now,
		reqs:  newSyncRequests(),
		hf:    &http.Client{Timeout: hfTimeout},
		runs:  queue.New[string](time.Second, time.Minute, now),
		jobs:  queue.New[string](time.Second, time.Minute, now),
		insts: queue.New[string](2*time.Second, 2*time.Minute, now),
		gws:   queue.New[string](2*time.Second, time.Minute, now),
		conns: map[string]backends.Conn{},
		pumps: map[string]context.CancelFunc{},

		gwStats: map[string]gatewayTraffic{},

		traffic: deps.Traffic,

		mirrors:  source.NewMirrors(cfg.RepoCacheDir, cfg.Logger),
		blobSums: &blobSums{sums: map[string]string{}},
		artSums:  &blobSums{sums: map[string]string{}},

		passes:  map[string][]int{},
		scales:  map[string]*scaleState{},
		history: newServiceHistory(serviceSampleEvery, serviceSampleKeep),
	}
	c.branch.Store("")
	c.syncErr.Store("")
	return c, nil
}

type nopObserver struct{}

func (nopObserver) Reconciled(string, time.Duration, error)   {}
func (nopObserver) Synced(string, time.Duration)              {}
func (nopObserver) QueueDepth(string, int, int, int)          {}
func (nopObserver) LogsAppended(string)                       {}
func (nopObserver) Changed()                                  {}
func (nopObserver) LeakReaped(string, string)                 {}
func (nopObserver) Audited(string, int, int, int, int)        {}
func (nopObserver) JobFinished(string, string, time.Duration) {}
func (nopObserver) BudgetBlocked(string, string)              {}
func (nopObserver) Retried(string, time.Duration)             {}
func (nopObserver) BackendFailed(string, string)              {}

// Run runs the source watchers, the revision pipeline, the workers and the
// periodic resync until ctx is done.
func (c *Controller) Run(ctx context.Context) error {
	if err := c.ensureLocalFleet(ctx); err != nil {
		return fmt.Errorf("local fleet: %w", err)
	}
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		err := c.src.Run(ctx)
		if ctx.Err() != nil {
			return nil
		}
		return err
	})
	g.Go(func() error { c.syncLoop(ctx); return nil })
	g.Go(func() error { c.resyncLoop(ctx); return nil })
	g.Go(func() error { c.retentionLoop(ctx); return nil })
	g.Go(func() error { c.leakLoop(ctx); return nil })
	g.Go(func() error { c.volumeLoop(ctx); return nil })
	g.Go(func() error { c.serviceSampleLoop(ctx); return nil })
	for i := 0; i < 4; i++ {
		g.Go(func() error { c.work(ctx, "runs", c.runs, c.runSettled, c.reconcileRun); return nil })
	}
	for i := 0; i < 8; i++ {
		g.Go(func() error { c.work(ctx, "jobs", c.jobs, c.jobPumped, c.reconcileJob); return nil })
	}
	for i := 0; i < 4; i++ {
		g.Go(func() error { c.work(ctx, "instances", c.insts, nil, c.reconcileInstance); return nil })
	}
	for i := 0; i < 2; i++ {
		g.Go(func() error { c.work(ctx, "gateways", c.gws, nil, c.reconcileGateway); return nil })
	}
	g.Go(func() error {
		<-ctx.Done()
		c.runs.Close()
		c.jobs.Close()
		c.insts.Close()
		c.gws.Close()
		c.stopPumps()
		c.pumpWG.Wait() // they release their leases before the store closes
		c.closeConns()
		return nil
	})
	return g.Wait()
}

// work processes keys of one queue until ctx is done. A key that settled
// reports true (read-only) has nothing to do: it is neither claimed nor
// reconciled, and the web's caches are not told of a change, where a
// claim and a release are two writes and every change clears the run
// list's cache.
func (c *Controller) work(ctx context.Context, kind string, q *queue.Queue[string], settled func(ctx context.Context, id string) bool, fn func(ctx context.Context, id string) (time.Duration, error)) {
	for {
		id, ok := q.Get(ctx)
		if !ok {
			return
		}
		if settled != nil && settled(ctx, id) {
			q.Forget(id)
			q.Done(id)
			continue
		}
		start := c.now()
		after, err := fn(ctx, id)
		c.obs.Reconciled(kind, c.now().Sub(start), err)
		c.obs.Changed()
		switch {
		case err == nil:
			q.Forget(id)
			if after > 0 {
				q.AddAfter(id, after)
			}
		case ctx.Err() != nil:
		case backends.KindOf(err) == backends.KindStalled:
			c.log.Warn("reconcile stalled", "kind", kind, "id", id, "error", err)
		case backends.KindOf(err) == backends.KindWait:
			q.AddAfter(id, max(backends.RetryAfter(err), time.Second))
		default:
			d := q.AddRateLimited(id)
			c.obs.Retried(kind, d)
			c.log.Warn("reconcile failed", "kind", kind, "id", id, "retry_in", d, "error", err)
		}
		ready, delayed := q.Depth()
		c.obs.QueueDepth(kind, ready, delayed, q.BackingOff())
		q.Done(id)
	}
}

// resyncLoop re-queues every active row and re-checks the source on a
// jittered interval.
func (c *Controller) resyncLoop(ctx context.Context) {
	c.resync(ctx)
	for {
		j := 0.8 + 0.4*rand.Float64()
		t := time.NewTimer(time.Duration(float64(c.cfg.ResyncInterval) * j))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		c.resync(ctx)
		c.requestSync(false)
	}
}

func (c *Controller) resync(ctx context.Context) {
	// State shared with the other servers expires (sessions, deliveries,
	// confirmations); any server may sweep it.
	if _, err := c.st.PruneExpired(ctx); err != nil {
		c.log.Warn("prune expired state failed", "error", err)
	}
	runs, err := c.st.ListRuns(ctx, store.RunFilter{Project: c.cfg.Project, Active: true, Limit: 100000})
	if err != nil {
		c.log.Warn("resync runs failed", "error", err)
	}
	for _, r := range runs {
		c.runs.Add(r.ID)
	}
	jobs, err := c.st.ListJobsFiltered(ctx, store.JobFilter{Project: c.cfg.Project, Status: activeJobStatuses, Limit: 1 << 30}) // every one, not the first 1000
	if err != nil {
		c.log.Warn("resync jobs failed", "error", err)
	}
	for _, j := range jobs {
		c.jobs.Add(j.ID)
	}
	insts, err := c.st.ListInstances(ctx, store.InfraFilter{Project: c.cfg.Project, Limit: everyRow})
	if err != nil {
		c.log.Warn("resync instances failed", "error", err)
	}
	for _, i := range insts {
		if i.Status != store.InstanceTerminated {
			c.insts.Add(i.ID)
		}
	}
	if c.cfg.Budget.Limited() {
		c.retryBudgetFleets(ctx)
	}
	gws, err := c.st.ListGateways(ctx, store.InfraFilter{Project: c.cfg.Project, IncludeDeleted: true, Limit: 100000})
	if err != nil {
		c.log.Warn("resync gateways failed", "error", err)
	}
	for _, g := range gws {
		if !g.Deleted && g.Status != store.GatewayFailed || g.InstanceID != "" {
			c.gws.Add(g.ID)
		}
	}
	c.sweepPlacementGroups(ctx)
}

// everyRow is the limit of a store list that must see every row (the
// store's lists stop at 1,000 by default).
const everyRow = 1 << 30

var activeJobStatuses = []string{store.JobSubmitted, store.JobProvisioning, store.JobPulling, store.JobRunning, store.JobTerminating}

// claim leases one row for this server; ok is false when another server
// holds it (the periodic resync tries again later).
func (c *Controller) claim(ctx context.Context, table, id string) (store.Lease, bool, error) {
	ls, err := c.st.Claim(ctx, store.ClaimRequest{
		Table: table, Owner: c.cfg.Owner, Project: c.cfg.Project, Limit: 1, LeaseFor: c.cfg.LeaseFor,
		Where: "id = ?", Args: []any{id},
	})
	if err != nil {
		return store.Lease{}, false, err
	}
	if len(ls) == 0 {
		// Counted by the multi-server measurement (e2e).
		c.log.Debug("claim conflict", "table", table, "id", id)
		return store.Lease{}, false, nil
	}
	return ls[0], true, nil
}

// keepAlive extends l for as long as the worker holding it runs (a slow
// backend Create over SSH outlives LeaseFor): the returned context ends
// when the lease is lost, so the worker stops instead of racing the server
// that took the row over. stop ends the heartbeats; call it before release.
func (c *Controller) keepAlive(ctx context.Context, l store.Lease) (context.Context, func()) {
	k := c.st.KeepAlive(ctx, l, c.cfg.LeaseFor)
	return k.Context(), func() { _, _ = k.Stop() }
}

func (c *Controller) release(l store.Lease) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.st.Release(ctx, l); err != nil && !errors.Is(err, store.ErrLeaseLost) {
		c.log.Warn("release lease failed", "table", l.Table, "id", l.ID, "error", err)
	}
}

// event records one line of history; failures are logged, never fatal.
func (c *Controller) event(ctx context.Context, kind, name, id, typ, rev, msg string) {
	if _, err := c.st.AddEvent(ctx, store.Event{
		Project: c.cfg.Project, ObjectKind: kind, ObjectName: name, ObjectID: id, Type: typ, Message: msg, Revision: rev,
	}); err != nil {
		c.log.Warn("record event failed", "object_kind", kind, "object_name", name, "error", err)
	}
}

// backendFailed reports err, the answer of a call to backend, to the
// observer (by its backends.Reason) and returns it. An error of a call cut
// short because ctx ended is not the backend's.
func (c *Controller) backendFailed(ctx context.Context, backend string, err error) error {
	if err != nil && ctx.Err() == nil {
		c.obs.BackendFailed(backend, backends.Reason(err))
	}
	return err
}
