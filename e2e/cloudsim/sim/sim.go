package sim

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"
)

// Resource kinds every provider uses; providers may add their own
// ("security_group", "key_pair", "placement_group", ...).
const (
	// KindInstance is a VM.
	KindInstance = "instance"
	// KindVolume is a network disk (EBS volume, persistent disk, managed disk).
	KindVolume = "volume"
)

// Provider-neutral states, shown by the admin API; each provider maps them
// to its own words (EC2 pending/running/shutting-down/terminated, GCP
// PROVISIONING/RUNNING/STOPPING/TERMINATED, ARM provisioningState).
const (
	StatePending    = "pending"
	StateRunning    = "running"
	StateStopping   = "stopping"
	StateTerminated = "terminated"
	StateAvailable  = "available"
	StateInUse      = "in-use"
	StateDeleted    = "deleted"
)

// ErrNotFound says the simulator has no such resource.
var ErrNotFound = errors.New("sim: not found")

// A Resource is one thing a simulated provider created.
type Resource struct {
	Provider     string            `json:"provider"`
	Kind         string            `json:"kind"`
	ID           string            `json:"id"`
	Name         string            `json:"name,omitempty"`
	State        string            `json:"state"`
	Region       string            `json:"region,omitempty"`
	Zone         string            `json:"zone,omitempty"`
	InstanceType string            `json:"instance_type,omitempty"`
	Image        string            `json:"image,omitempty"`
	Spot         bool              `json:"spot,omitempty"`
	Tags         map[string]string `json:"tags,omitempty"`
	Address      string            `json:"address,omitempty"`
	Price        float64           `json:"price,omitempty"`
	SizeGB       int               `json:"size_gb,omitempty"`
	// User and AuthorizedKeys are the login the driver injected (key pair,
	// metadata ssh-keys, osProfile, cloud-config ssh_authorized_keys).
	User           string   `json:"user,omitempty"`
	AuthorizedKeys []string `json:"authorized_keys,omitempty"`
	UserData       string   `json:"user_data,omitempty"`
	// HostKeys are the VM's sshd host public keys (authorized_keys form),
	// shown in its console output.
	HostKeys []string `json:"host_keys,omitempty"`
	// AttachedTo is, for a volume, the instance it is attached to, and
	// Device where it shows up there.
	AttachedTo  string `json:"attached_to,omitempty"`
	Device      string `json:"device,omitempty"`
	Interrupted bool   `json:"interrupted,omitempty"`
	// Message says why a VM is stuck (its sshd did not start).
	Message string `json:"message,omitempty"`
	// Extra holds provider-specific fields (self links, resource groups,
	// security groups, placement group, LUN, ...).
	Extra        map[string]string `json:"extra,omitempty"`
	CreatedAt    time.Time         `json:"created_at"`
	TerminatedAt *time.Time        `json:"terminated_at,omitempty"`
}

// A Provider speaks one provider's wire format over a Sim.
type Provider interface {
	// Name is the provider's name: aws, gcp, azure.
	Name() string
	// Handler serves the provider's API.
	Handler(s *Sim) http.Handler
	// TLS says whether the API must be served over https (azidentity
	// refuses plain http).
	TLS() bool
	// Backend returns a hoist server-config backend entry for the API at
	// endpoint, with credentials the provider accepts.
	Backend(s *Sim, endpoint string) map[string]any
	// Interrupt reclaims spot instance id the way the provider does.
	Interrupt(s *Sim, id string) error
}

// Config configures a Sim.
type Config struct {
	// StateDir keeps the state that survives a restart: the resources
	// (state.json), each VM's host key, authorized_keys, sshd_config and
	// sshd log (vms/<provider>/<id>/). Empty means a temporary directory that
	// Close removes.
	StateDir string
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// BootDelay is how long a VM stays pending before its sshd starts.
	BootDelay time.Duration
	// Logger logs VM boots and halts; nil means slog.Default().
	Logger *slog.Logger
}

// A Sim is the simulator's state. Safe for concurrent use.
type Sim struct {
	cfg Config
	tmp bool // cfg.StateDir is ours to remove

	mu  sync.Mutex
	res map[string]*Resource // by provider + "/" + id

	vmu    sync.Mutex
	vms    map[string]*vm // running or booting VMs, by provider + "/" + id
	closed bool           // Close was called: no more boots

	pods podEngine // the Docker client and per-pod locks (pods.go)

	fmu    sync.Mutex
	faults Faults
	stats  Stats
	rng    *rand.Rand
}

// New returns a Sim, loading the state in cfg.StateDir and booting again
// the VMs that were pending or running there (same address, same host
// keys); those that were stopping are terminated.
func New(cfg Config) (*Sim, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Sim{cfg: cfg, res: map[string]*Resource{}, vms: map[string]*vm{}, rng: rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))}
	s.stats = newStats()
	if cfg.StateDir == "" {
		d, err := os.MkdirTemp("", "cloudsim-")
		if err != nil {
			return nil, err
		}
		s.cfg.StateDir, s.tmp = d, true
	} else {
		d, err := filepath.Abs(cfg.StateDir)
		if err != nil {
			return nil, err
		}
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
		s.cfg.StateDir = d
	}
	if err := s.load(); err != nil {
		return nil, err
	}
	for _, r := range s.List("", KindInstance) {
		switch r.State {
		case StatePending, StateRunning:
			if err := s.boot(r, false); err != nil {
				return nil, fmt.Errorf("sim: boot %s %s again: %w", r.Provider, r.ID, err)
			}
		case StateStopping:
			// It finished shutting down while the simulator was away.
			if err := s.Halt(r.Provider, r.ID); err != nil {
				return nil, err
			}
		}
	}
	return s, nil
}

// StateDir returns the directory holding the simulator's state.
func (s *Sim) StateDir() string { return s.cfg.StateDir }

// Close stops every VM's sshd and the processes started through it (Boot
// fails from then on), leaving the state as it is (a VM that was running boots again in the next
// New over the same StateDir). Pods' containers keep running, as a
// provider's pods outlive a restart of its API: the next New over the same
// StateDir finds them (RemoveAllPods removes them). A temporary state
// directory is removed, with the pods' containers.
func (s *Sim) Close() error {
	s.vmu.Lock()
	vms := slices.Collect(maps.Values(s.vms))
	s.vms, s.closed = map[string]*vm{}, true
	s.vmu.Unlock()
	var wg sync.WaitGroup
	for _, v := range vms {
		wg.Go(v.halt)
	}
	wg.Wait()
	if s.tmp {
		// No later New finds this state: its pods go with it.
		return errors.Join(s.RemoveAllPods(), s.closePods(), os.RemoveAll(s.cfg.StateDir))
	}
	return s.closePods()
}

// stateFile is state.json: every resource ever created.
type stateFile struct {
	Resources []Resource `json:"resources"`
}

func (s *Sim) load() error {
	b, err := os.ReadFile(filepath.Join(s.cfg.StateDir, "state.json"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var st stateFile
	if err := json.Unmarshal(b, &st); err != nil {
		return fmt.Errorf("sim: %s: %w", filepath.Join(s.cfg.StateDir, "state.json"), err)
	}
	for _, r := range st.Resources {
		c := clone(r)
		s.res[key(r.Provider, r.ID)] = &c
	}
	return nil
}

// saveLocked writes state.json atomically (a temporary file renamed over
// it); s.mu is held.
func (s *Sim) saveLocked() error {
	st := stateFile{Resources: make([]Resource, 0, len(s.res))}
	for _, r := range s.res {
		st.Resources = append(st.Resources, *r)
	}
	slices.SortFunc(st.Resources, byCreated)
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(s.cfg.StateDir, "state.json"), b, 0o644)
}

func writeFileAtomic(path string, b []byte, mode os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		os.Remove(f.Name())
		return err
	}
	if err := f.Chmod(mode); err != nil {
		f.Close()
		os.Remove(f.Name())
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(f.Name())
		return err
	}
	return os.Rename(f.Name(), path)
}

func byCreated(a, b Resource) int {
	if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
		return c
	}
	return cmpString(a.Provider+"/"+a.ID, b.Provider+"/"+b.ID)
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Now returns the simulator's clock.
func (s *Sim) Now() time.Time { return s.cfg.Now() }

func key(provider, id string) string { return provider + "/" + id }

// Create records a new resource (ID set by the provider) and returns it.
func (s *Sim) Create(r Resource) (Resource, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.res[key(r.Provider, r.ID)]; ok {
		return Resource{}, fmt.Errorf("sim: %s %s exists", r.Provider, r.ID)
	}
	if r.CreatedAt.IsZero() {
		r.CreatedAt = s.cfg.Now().UTC()
	}
	c := clone(r)
	s.res[key(r.Provider, r.ID)] = &c
	if err := s.saveLocked(); err != nil {
		return Resource{}, fmt.Errorf("sim: save state: %w", err)
	}
	return clone(c), nil
}

// Get returns a resource.
func (s *Sim) Get(provider, id string) (Resource, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.res[key(provider, id)]
	if !ok {
		return Resource{}, false
	}
	return clone(*r), true
}

// Update changes a resource under the lock; fn's error aborts the change.
func (s *Sim) Update(provider, id string, fn func(*Resource) error) (Resource, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.res[key(provider, id)]
	if !ok {
		return Resource{}, fmt.Errorf("%w: %s %s", ErrNotFound, provider, id)
	}
	c := clone(*r)
	if err := fn(&c); err != nil {
		return Resource{}, err
	}
	*r = c
	if err := s.saveLocked(); err != nil {
		return Resource{}, fmt.Errorf("sim: save state: %w", err)
	}
	return clone(c), nil
}

// List returns a provider's resources of a kind (every kind for ""),
// oldest first.
func (s *Sim) List(provider, kind string) []Resource {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Resource
	for _, r := range s.res {
		if (provider == "" || r.Provider == provider) && (kind == "" || r.Kind == kind) {
			out = append(out, clone(*r))
		}
	}
	slices.SortFunc(out, byCreated)
	return out
}

func clone(r Resource) Resource {
	r.Tags = maps.Clone(r.Tags)
	r.Extra = maps.Clone(r.Extra)
	r.AuthorizedKeys = slices.Clone(r.AuthorizedKeys)
	r.HostKeys = slices.Clone(r.HostKeys)
	return r
}
