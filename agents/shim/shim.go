package shim

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"sync"
	"time"

	"github.com/docker/docker/client"

	"hoist/agents/api"
)

// Labels the shim puts on every container it creates.
const (
	// LabelManagedBy marks containers of a hoist shim; its value is "hoist-shim".
	LabelManagedBy = "hoist.managed-by"
	// LabelShimID names the shim (Config.ID) that owns the container.
	LabelShimID = "hoist.shim-id"
	// LabelTaskID holds the task id.
	LabelTaskID = "hoist.task-id"
)

// Paths inside the container.
const (
	// RunnerPath is where the runner binary is mounted in the container.
	RunnerPath = "/hoist/bin/hoist-runner"
	// RunnerHome is where the task's runner directory is mounted in the container.
	RunnerHome = "/hoist/run"
	// RunnerCodeCache is where the instance's code cache (shared by its
	// tasks, see CodeCacheDir) is mounted in the container.
	RunnerCodeCache = "/hoist/code"
	// RunnerSocketFile is the runner's Unix socket in its directory: the
	// runner API's only address (TaskInfo.RunnerAddr names it on the host).
	RunnerSocketFile = "runner.sock"
	// RunnerTokenFile is the file in the runner's directory that hands the
	// runner its token; the runner reads and deletes it before it serves,
	// so the token is in no environment and in no file the job could read.
	RunnerTokenFile = ".runner-token"
	// minTokenLen is the shortest shim token New accepts.
	minTokenLen = 32
)

// runnerReadyTimeout bounds how long a started container may take until its
// runner answers.
const runnerReadyTimeout = 60 * time.Second

// Config configures a Shim.
type Config struct {
	// Docker is the Engine client; when nil, one is made for DockerHost.
	Docker *client.Client
	// DockerHost is the Engine address when Docker is nil ("" = from the
	// environment, DOCKER_HOST or the default socket).
	DockerHost string
	// RunnerBinary is the host path of the static hoist-runner binary that
	// is bind-mounted into every container.
	RunnerBinary string
	// StateDir keeps each task's state and runner directory.
	StateDir string
	// ID names this shim in container labels so that several shims can share
	// one Engine; "" derives it from StateDir.
	ID string
	// Token is the bearer token every request to the shim's API must carry,
	// the health check included (required). The server generates it for
	// each instance; see Handler.
	Token string
	// RunnerLinger is how long a runner keeps serving after its job has
	// finished and its API fell idle, before it exits and so ends the
	// container (0: the runner's default, 5 minutes).
	RunnerLinger time.Duration
	// Labels are added to every container the shim creates.
	Labels map[string]string
	// Version is the shim binary's version.
	Version string
	// Logger receives the shim's log; nil discards it.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// GPUs are the GPU ids (NVIDIA indexes) the shim hands out to tasks
	// that ask for a number of GPUs; nil means the host's, found with
	// nvidia-smi; empty means none. The local backend gives each instance
	// its own.
	GPUs []string
	// DeviceDir is where the GPUs' device nodes are (nvidia<index>,
	// nvidiactl), mapped into containers when Docker has no NVIDIA
	// runtime; "" means /dev.
	DeviceDir string
}

// Shim runs tasks on a Docker Engine. Create it with New, call Recover once,
// and serve Handler.
type Shim struct {
	cfg    Config
	docker *client.Client
	owned  bool // docker was made by New and is closed by Close
	log    *slog.Logger
	now    func() time.Time
	hc     *http.Client // for the runners' health checks

	ctx    context.Context // lives until Close
	cancel context.CancelFunc

	mu      sync.Mutex
	tasks   map[string]*task
	unknown []api.UnknownContainer
	wg      sync.WaitGroup

	gpuOnce          sync.Once // guards gpus (see gpuPool)
	gpus             []string
	runtimeOnce      sync.Once // guards hasNVIDIARuntime (see nvidiaRuntime)
	hasNVIDIARuntime bool

	launchOnce sync.Once    // guards launch and launchErr (see runnerLaunch)
	launch     runnerLaunch // how containers start the runner binary
	launchErr  error

	netnsOnce sync.Once // guards netns (see hostNetns)
	netns     netnsInfo // whether host-network tasks need a holder
}

// task is the shim's record of one task; Shim.mu guards every field.
type task struct {
	spec    api.TaskSpec // without RegistryAuth
	auth    *api.RegistryAuth
	info    api.TaskInfo
	changed chan struct{} // closed and replaced on every change

	cancel      context.CancelFunc // ends the start sequence
	settled     chan struct{}      // closed when the start sequence has ended
	exited      chan struct{}      // closed once the container's exit is recorded
	stopReason  string
	stopMessage string
}

// persisted is what the shim keeps of a task in StateDir/tasks/<id>/task.json.
type persisted struct {
	Spec api.TaskSpec `json:"spec"`
	Info api.TaskInfo `json:"info"`
}

var validID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)

// New returns a shim for cfg. It does not touch containers: call Recover.
func New(cfg Config) (*Shim, error) {
	if cfg.StateDir == "" {
		return nil, errors.New("shim: state dir is required")
	}
	abs, err := filepath.Abs(cfg.StateDir)
	if err != nil {
		return nil, fmt.Errorf("shim: %w", err)
	}
	cfg.StateDir = abs
	// Task state and job logs are the host's business only; the runner
	// home below each task is bind-mounted, so the container needs no
	// access to the directories above it.
	if err := os.MkdirAll(filepath.Join(cfg.StateDir, "tasks"), 0o700); err != nil {
		return nil, fmt.Errorf("shim: %w", err)
	}
	if cfg.RunnerBinary == "" {
		return nil, errors.New("shim: runner binary is required")
	}
	if len(cfg.Token) < minTokenLen {
		return nil, fmt.Errorf("shim: a token of at least %d characters is required", minTokenLen)
	}
	if cfg.RunnerBinary, err = filepath.Abs(cfg.RunnerBinary); err != nil {
		return nil, fmt.Errorf("shim: %w", err)
	}
	if _, err := os.Stat(cfg.RunnerBinary); err != nil {
		return nil, fmt.Errorf("shim: runner binary: %w", err)
	}
	if cfg.ID == "" {
		sum := sha256.Sum256([]byte(cfg.StateDir))
		cfg.ID = hex.EncodeToString(sum[:6])
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	docker, owned := cfg.Docker, cfg.Docker == nil
	if owned {
		opts := []client.Opt{client.FromEnv, client.WithAPIVersionNegotiation()}
		if cfg.DockerHost != "" {
			opts = append(opts, client.WithHost(cfg.DockerHost))
		}
		if docker, err = client.NewClientWithOpts(opts...); err != nil {
			return nil, fmt.Errorf("shim: docker client: %w", err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Shim{
		cfg:    cfg,
		docker: docker,
		owned:  owned,
		log:    cfg.Logger.With("shim_id", cfg.ID),
		now:    cfg.Now,
		hc:     &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DialContext: api.UnixDial(nil), DisableKeepAlives: true}},
		ctx:    ctx,
		cancel: cancel,
		tasks:  map[string]*task{},
	}, nil
}

// ID returns the shim's id as it appears in container labels.
func (s *Shim) ID() string { return s.cfg.ID }

// Close stops watching containers. It leaves the containers running: a new
// shim on the same StateDir re-attaches to them with Recover.
func (s *Shim) Close() error {
	s.cancel()
	s.wg.Wait()
	if s.owned {
		return s.docker.Close()
	}
	return nil
}

func (s *Shim) taskDir(id string) string { return filepath.Join(s.cfg.StateDir, "tasks", id) }

// CodeCacheDir returns the host directory the instance's tasks share as
// their runners' code blob cache (hoist-runner --code-cache): a job
// receives only the files of its code that no earlier job on the instance
// received. Runners check each blob they read from it against its SHA-256
// name.
func (s *Shim) CodeCacheDir() string { return filepath.Join(s.cfg.StateDir, "code") }

// RunnerDir returns the host directory mounted as the runner's home in the
// task's container (job log and state file).
func (s *Shim) RunnerDir(id string) string { return filepath.Join(s.taskDir(id), "run") }

// CreateTask registers a task and starts it in the background.
func (s *Shim) CreateTask(spec api.TaskSpec) (api.TaskInfo, error) {
	if !validID.MatchString(spec.ID) {
		return api.TaskInfo{}, fmt.Errorf("task id %q: %w", spec.ID, errInvalid)
	}
	if spec.Image == "" {
		return api.TaskInfo{}, fmt.Errorf("task %s has no image: %w", spec.ID, errInvalid)
	}
	switch spec.NetworkMode {
	case "", api.NetworkBridge, api.NetworkHost:
	default:
		return api.TaskInfo{}, fmt.Errorf("network mode %q: %w", spec.NetworkMode, errInvalid)
	}
	switch spec.PullPolicy {
	case "", api.PullMissing, api.PullAlways:
	default:
		return api.TaskInfo{}, fmt.Errorf("pull policy %q: %w", spec.PullPolicy, errInvalid)
	}
	for _, m := range spec.InstanceMounts {
		if !filepath.IsAbs(m.InstancePath) || !filepath.IsAbs(m.Path) {
			return api.TaskInfo{}, fmt.Errorf("instance mount %s:%s must be absolute: %w", m.InstancePath, m.Path, errInvalid)
		}
	}
	for _, m := range spec.VolumeMounts {
		if m.Name == "" || !filepath.IsAbs(m.Path) {
			return api.TaskInfo{}, fmt.Errorf("volume mount %s:%s needs a name and an absolute path: %w", m.Name, m.Path, errInvalid)
		}
	}
	for _, v := range spec.NetworkVolumes {
		if err := checkNetworkVolume(v); err != nil {
			return api.TaskInfo{}, fmt.Errorf("%w: %w", err, errInvalid)
		}
	}
	if spec.Name == "" {
		spec.Name = "hoist-" + spec.ID
	}
	auth := spec.RegistryAuth
	spec.RegistryAuth = nil
	var pool []string
	allocate := false
	if wantsGPUAllocation(spec) {
		// Without known GPUs the count goes to Docker as it is.
		pool, allocate = s.gpuPool(s.ctx)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.tasks[spec.ID]; ok {
		return api.TaskInfo{}, fmt.Errorf("task %s exists: %w", spec.ID, errConflict)
	}
	if allocate {
		ids, err := pickGPUs(pool, s.heldGPUsLocked(), spec.GPUCount)
		if err != nil {
			return api.TaskInfo{}, fmt.Errorf("task %s gpus: %w", spec.ID, err)
		}
		spec.GPUIDs = ids
		if len(ids) == 0 {
			spec.GPUCount = 0 // all of none
		}
	}
	if _, err := os.Stat(s.taskDir(spec.ID)); err == nil {
		return api.TaskInfo{}, fmt.Errorf("task %s has files left in the state dir: %w", spec.ID, errConflict)
	}
	ctx, cancel := context.WithCancel(s.ctx)
	t := &task{
		spec:    spec,
		auth:    auth,
		info:    api.TaskInfo{ID: spec.ID, Status: api.TaskPending, ContainerName: spec.Name, Updated: s.now()},
		changed: make(chan struct{}),
		cancel:  cancel,
		settled: make(chan struct{}),
		exited:  make(chan struct{}),
	}
	// Every runner demands a token of its own, so that nothing else that
	// can reach its port (another container on the bridge network, a local
	// user on the host network, another task's job) can drive it.
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		cancel()
		return api.TaskInfo{}, fmt.Errorf("runner token: %w", err)
	}
	t.info.RunnerToken = hex.EncodeToString(b[:])
	s.tasks[spec.ID] = t
	if err := os.MkdirAll(s.taskDir(spec.ID), 0o700); err != nil {
		delete(s.tasks, spec.ID)
		cancel()
		return api.TaskInfo{}, fmt.Errorf("task dir: %w", err)
	}
	s.persistLocked(t)
	s.log.Info("task_created", "task_id", spec.ID, "image", spec.Image)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer close(t.settled)
		s.start(ctx, t)
	}()
	return t.info, nil
}

var (
	errInvalid  = errors.New("invalid")
	errConflict = errors.New("conflict")
	errNotFound = errors.New("not found")
)

// GetTask returns the task's state.
func (s *Shim) GetTask(id string) (api.TaskInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tasks[id]
	if !ok {
		return api.TaskInfo{}, fmt.Errorf("task %s: %w", id, errNotFound)
	}
	return t.info, nil
}

// WaitTask waits until the task has reached status (or terminated), ctx
// ends, or timeout passes, and returns its state.
func (s *Shim) WaitTask(ctx context.Context, id, status string, timeout time.Duration) (api.TaskInfo, error) {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	want := api.TaskStatusRank(status)
	for {
		s.mu.Lock()
		t, ok := s.tasks[id]
		if !ok {
			s.mu.Unlock()
			return api.TaskInfo{}, fmt.Errorf("task %s: %w", id, errNotFound)
		}
		info, changed := t.info, t.changed
		s.mu.Unlock()
		if info.Terminated() || api.TaskStatusRank(info.Status) >= want {
			return info, nil
		}
		select {
		case <-changed:
		case <-timer.C:
			return info, nil
		case <-ctx.Done():
			return info, ctx.Err()
		}
	}
}

// ListTasks returns every task, ordered by id, and the unknown containers.
func (s *Shim) ListTasks() api.TaskList {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := api.TaskList{Tasks: make([]api.TaskInfo, 0, len(s.tasks)), Unknown: append([]api.UnknownContainer(nil), s.unknown...)}
	for _, t := range s.tasks {
		l.Tasks = append(l.Tasks, t.info)
	}
	sort.Slice(l.Tasks, func(i, j int) bool { return l.Tasks[i].ID < l.Tasks[j].ID })
	return l
}

// update applies fn to the task's info under the lock, moving it to status
// to (when to differs from its status) if the transition is allowed. It
// reports whether the change was applied.
func (s *Shim) update(t *task, to string, fn func(*api.TaskInfo)) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.updateLocked(t, to, fn)
}

func (s *Shim) updateLocked(t *task, to string, fn func(*api.TaskInfo)) bool {
	from := t.info.Status
	if to != from {
		if err := Transition(from, to); err != nil {
			s.log.Warn("task_transition_refused", "task_id", t.info.ID, "from", from, "to", to, "err", err)
			return false
		}
	}
	if fn != nil {
		fn(&t.info)
	}
	t.info.Status = to
	t.info.Updated = s.now()
	close(t.changed)
	t.changed = make(chan struct{})
	if to != from {
		s.log.Info("task_status", "task_id", t.info.ID, "from", from, "to", to, "reason", t.info.TerminationReason)
		s.persistLocked(t)
	}
	return true
}

// terminateLocked moves the task to terminated with the requested stop
// reason if there is one, else with reason and message.
func (s *Shim) terminateLocked(t *task, reason, message string, fn func(*api.TaskInfo)) {
	if t.stopReason != "" {
		reason, message = t.stopReason, t.stopMessage
	}
	s.updateLocked(t, api.TaskTerminated, func(i *api.TaskInfo) {
		if fn != nil {
			fn(i)
		}
		i.TerminationReason, i.TerminationMessage = reason, message
		i.RunnerAddr = ""
	})
}

func (s *Shim) persistLocked(t *task) {
	b, err := json.MarshalIndent(persisted{Spec: t.spec, Info: t.info}, "", "  ")
	if err != nil {
		return
	}
	dir := s.taskDir(t.info.ID)
	tmp := filepath.Join(dir, "task.json.tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		s.log.Error("task_persist_failed", "task_id", t.info.ID, "err", err)
		return
	}
	if err := os.Rename(tmp, filepath.Join(dir, "task.json")); err != nil {
		s.log.Error("task_persist_failed", "task_id", t.info.ID, "err", err)
	}
}
