package schema

import "encoding/json"

// Kind is the value of a spec's `type` field.
type Kind string

// The six resource kinds hoist understands.
const (
	KindTask           Kind = "task"
	KindService        Kind = "service"
	KindDevEnvironment Kind = "dev-environment"
	KindFleet          Kind = "fleet"
	KindVolume         Kind = "volume"
	KindGateway        Kind = "gateway"
)

// KindWorkflow is a workflow of dstack's custom providers
// (WorkflowsFile, or a CUE spec's top-level `workflows`): a run whose jobs
// a provider generates. It is a run kind, never the `type` of a spec file,
// so it is not in Kinds.
const KindWorkflow Kind = "workflow"

// KindProvider names the support table's rows about providers
// (ProvidersFile); providers are not resources.
const KindProvider Kind = "provider"

// Kinds lists every resource kind in a stable order.
var Kinds = []Kind{KindTask, KindService, KindDevEnvironment, KindFleet, KindVolume, KindGateway}

// IsRun reports whether k is a run kind; task, service, dev-environment
// and workflow share one name space.
func (k Kind) IsRun() bool {
	return k == KindTask || k == KindService || k == KindDevEnvironment || k == KindWorkflow
}

// Namespace returns the identity name space of k: "run" for the run kinds and the kind itself otherwise.
func (k Kind) Namespace() string {
	if k.IsRun() {
		return "run"
	}
	return string(k)
}

// Off is the sentinel stored in a duration field that was switched off
// (`off`, `false`, or `-1` where dstack allows it): the limit never applies.
const Off int64 = -1

// Defaults applied during normalization, in seconds where they are durations.
const (
	DefaultStopDuration      int64 = 300
	DefaultRunIdleDuration   int64 = 5 * 60
	DefaultFleetIdleDuration int64 = 3 * 24 * 3600
	DefaultRetryDuration     int64 = 3600
	DefaultScalingWindow     int64 = 60
	DefaultScaleUpDelay      int64 = 5 * 60
	DefaultScaleDownDelay    int64 = 10 * 60
)

// Range is a closed or half-open interval of numbers; a nil bound is
// unbounded. Counts are whole numbers, memory and disk sizes are in GB.
type Range struct {
	Min *float64 `json:"min,omitempty"`
	Max *float64 `json:"max,omitempty"`
}

// CPU is the normalized CPU requirement.
type CPU struct {
	// Arch is "x86", "arm" or empty (any, resolved from the image).
	Arch  string `json:"arch,omitempty"`
	Count Range  `json:"count"`
}

// GPU is the normalized GPU/accelerator requirement.
type GPU struct {
	// Vendor is one of nvidia, amd, google, intel, tenstorrent or empty.
	Vendor string `json:"vendor,omitempty"`
	// Names lists acceptable GPU names (any of them).
	Names []string `json:"name,omitempty"`
	Count Range    `json:"count"`
	// Memory is the per-GPU memory range in GB.
	Memory *Range `json:"memory,omitempty"`
	// TotalMemory is the range of memory across all GPUs in GB.
	TotalMemory *Range `json:"total_memory,omitempty"`
	// ComputeCapability is the minimum compute capability as [major, minor].
	ComputeCapability []int `json:"compute_capability,omitempty"`
}

// Disk is the normalized root disk requirement.
type Disk struct {
	Size Range `json:"size"`
}

// Resources is the normalized `resources` block with dstack's defaults
// applied: cpu 2.., memory 8GB.., gpu 0.. (1.. once any gpu is given) and
// disk 100GB...
type Resources struct {
	CPU    CPU   `json:"cpu"`
	Memory Range `json:"memory"`
	// ShmSize is the /dev/shm size in GB; nil leaves Docker's default.
	ShmSize *float64 `json:"shm_size,omitempty"`
	GPU     GPU      `json:"gpu"`
	Disk    *Disk    `json:"disk,omitempty"`
}

// EnvVar is one environment variable.
type EnvVar struct {
	Name  string `json:"name"`
	Value string `json:"value"`
	// FromLocal marks a bare name (`- HF_TOKEN`): in dstack the value comes
	// from the applying user's environment; a server applying from Git has
	// none, so hoist takes it from the project's secret of that name. Value
	// is empty.
	FromLocal bool `json:"from_local,omitempty"`
	// Secrets lists the secret names the value references via
	// `${{ secrets.NAME }}`; they are interpolated right before provisioning.
	Secrets []string `json:"secrets,omitempty"`
}

// PortMapping maps a local port to a container port.
type PortMapping struct {
	// LocalPort is nil for `*:N` (any free local port).
	LocalPort     *int `json:"local_port,omitempty"`
	ContainerPort int  `json:"container_port"`
}

// MountPoint is a volume mount: a network volume (Name set) or an instance
// (host) path (InstancePath set).
type MountPoint struct {
	// Name lists network volume names; the first available one is mounted.
	Name         []string `json:"name,omitempty"`
	InstancePath string   `json:"instance_path,omitempty"`
	Path         string   `json:"path"`
	Optional     bool     `json:"optional,omitempty"`
}

// FileMapping uploads a local file or directory to a container path.
type FileMapping struct {
	LocalPath string `json:"local_path"`
	Path      string `json:"path"`
}

// Repo is a Git repository to clone into the run.
type Repo struct {
	LocalPath string `json:"local_path,omitempty"`
	URL       string `json:"url,omitempty"`
	Branch    string `json:"branch,omitempty"`
	Hash      string `json:"hash,omitempty"`
	Path      string `json:"path"`
	IfExists  string `json:"if_exists"`
}

// RegistryAuth holds private registry credentials (values may reference secrets).
type RegistryAuth struct {
	Username string `json:"username"`
	Password string `json:"password"`
}

// Retry is the normalized retry policy.
type Retry struct {
	// OnEvents holds no-capacity, interruption, error (in that order).
	OnEvents []string `json:"on_events"`
	// Duration is in seconds.
	Duration int64 `json:"duration"`
}

// UtilizationPolicy terminates runs whose GPUs stay idle.
type UtilizationPolicy struct {
	MinGPUUtilization int   `json:"min_gpu_utilization"`
	TimeWindow        int64 `json:"time_window"`
}

// Schedule lists UTC cron expressions.
type Schedule struct {
	Cron []string `json:"cron"`
}

// EntityRef references a fleet or gateway, optionally in another project.
type EntityRef struct {
	Project string `json:"project,omitempty"`
	Name    string `json:"name"`
}

// InstanceSelector pins a run to fleet instances; exactly one form is set.
type InstanceSelector struct {
	Name     string     `json:"name,omitempty"`
	Hostname string     `json:"hostname,omitempty"`
	Fleet    *EntityRef `json:"fleet,omitempty"`
	Instance *int       `json:"instance,omitempty"`
}

// BackendOptions are per-backend knobs (today only vastai).
type BackendOptions struct {
	Type           string   `json:"type"`
	OfferOrder     string   `json:"offer_order,omitempty"`
	MinReliability *float64 `json:"min_reliability,omitempty"`
	MinScore       *int     `json:"min_score,omitempty"`
}

// Profile holds dstack's profile parameters shared by the run kinds.
type Profile struct {
	Backends          []string           `json:"backends,omitempty"`
	Regions           []string           `json:"regions,omitempty"`
	AvailabilityZones []string           `json:"availability_zones,omitempty"`
	InstanceTypes     []string           `json:"instance_types,omitempty"`
	Reservation       string             `json:"reservation,omitempty"`
	SpotPolicy        string             `json:"spot_policy"`
	Retry             *Retry             `json:"retry,omitempty"`
	MaxDuration       int64              `json:"max_duration"`
	StopDuration      int64              `json:"stop_duration"`
	MaxPrice          *float64           `json:"max_price,omitempty"`
	CreationPolicy    string             `json:"creation_policy"`
	IdleDuration      int64              `json:"idle_duration"`
	UtilizationPolicy *UtilizationPolicy `json:"utilization_policy,omitempty"`
	StartupOrder      string             `json:"startup_order"`
	StopCriteria      string             `json:"stop_criteria"`
	Schedule          *Schedule          `json:"schedule,omitempty"`
	Fleets            []EntityRef        `json:"fleets,omitempty"`
	Instances         []InstanceSelector `json:"instances,omitempty"`
	Tags              map[string]string  `json:"tags,omitempty"`
	BackendOptions    []BackendOptions   `json:"backend_options,omitempty"`
}

// RunConfig is the part shared by tasks, services and dev environments.
type RunConfig struct {
	Name         string        `json:"name"`
	Image        string        `json:"image,omitempty"`
	User         string        `json:"user,omitempty"`
	Privileged   bool          `json:"privileged"`
	Entrypoint   string        `json:"entrypoint,omitempty"`
	WorkingDir   string        `json:"working_dir,omitempty"`
	RegistryAuth *RegistryAuth `json:"registry_auth,omitempty"`
	Python       string        `json:"python,omitempty"`
	NVCC         bool          `json:"nvcc"`
	Docker       bool          `json:"docker"`
	SingleBranch *bool         `json:"single_branch,omitempty"`
	Env          []EnvVar      `json:"env,omitempty"`
	Shell        string        `json:"shell,omitempty"`
	Resources    Resources     `json:"resources"`
	Priority     int           `json:"priority"`
	Volumes      []MountPoint  `json:"volumes,omitempty"`
	Repos        []Repo        `json:"repos,omitempty"`
	Files        []FileMapping `json:"files,omitempty"`
	Dstack       bool          `json:"dstack"`
	Setup        []string      `json:"setup,omitempty"`
	Profile
}

// NodeGroup is one group of a heterogeneous multi-node task.
type NodeGroup struct {
	Name      string        `json:"name"`
	Nodes     int           `json:"nodes"`
	Resources Resources     `json:"resources"`
	Commands  []string      `json:"commands,omitempty"`
	Ports     []PortMapping `json:"ports,omitempty"`
}

// Task is a normalized `type: task`.
type Task struct {
	RunConfig
	Commands []string      `json:"commands,omitempty"`
	Ports    []PortMapping `json:"ports,omitempty"`
	// Nodes is the number of nodes of a homogeneous task (1 by default); 0
	// when Groups is set.
	Nodes  int         `json:"nodes,omitempty"`
	Groups []NodeGroup `json:"groups,omitempty"`
}

// DevEnvironment is a normalized `type: dev-environment`.
type DevEnvironment struct {
	RunConfig
	Ports   []PortMapping `json:"ports,omitempty"`
	IDE     string        `json:"ide,omitempty"`
	Version string        `json:"version,omitempty"`
	Init    []string      `json:"init,omitempty"`
	// InactivityDuration is in seconds; 0 means off.
	InactivityDuration int64 `json:"inactivity_duration,omitempty"`
}

// Scaling is a service autoscaling policy.
type Scaling struct {
	Metric         string  `json:"metric"`
	Target         float64 `json:"target"`
	Window         int64   `json:"window"`
	ScaleUpDelay   int64   `json:"scale_up_delay"`
	ScaleDownDelay int64   `json:"scale_down_delay"`
}

// RateLimitKey partitions requests for rate limiting.
type RateLimitKey struct {
	Type   string `json:"type"`
	Header string `json:"header,omitempty"`
}

// RateLimit is one gateway rate limit.
type RateLimit struct {
	Prefix string       `json:"prefix"`
	Key    RateLimitKey `json:"key"`
	RPS    float64      `json:"rps"`
	Burst  int64        `json:"burst"`
}

// HTTPHeader is a probe request header.
type HTTPHeader struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Probe is a service readiness probe with defaults applied.
type Probe struct {
	Type       string       `json:"type"`
	URL        string       `json:"url"`
	Method     string       `json:"method"`
	Headers    []HTTPHeader `json:"headers,omitempty"`
	Body       string       `json:"body,omitempty"`
	Timeout    int64        `json:"timeout"`
	Interval   int64        `json:"interval"`
	ReadyAfter int          `json:"ready_after"`
	UntilReady bool         `json:"until_ready"`
}

// Model registers an OpenAI-compatible model endpoint for a service.
type Model struct {
	Type         string `json:"type"`
	Name         string `json:"name"`
	Format       string `json:"format"`
	Prefix       string `json:"prefix,omitempty"`
	ChatTemplate string `json:"chat_template,omitempty"`
	EOSToken     string `json:"eos_token,omitempty"`
}

// GatewayRef is a service's gateway choice: Enabled false = no gateway,
// true with Ref nil = the default gateway; Ref names a specific gateway.
// A nil *GatewayRef means "the default gateway if there is one".
type GatewayRef struct {
	Enabled bool       `json:"enabled"`
	Ref     *EntityRef `json:"ref,omitempty"`
}

// Router selects an in-service router for a replica group.
type Router struct {
	Type string `json:"type"`
}

// ReplicaGroup is one group of a heterogeneous service.
type ReplicaGroup struct {
	Name        string    `json:"name"`
	Replicas    Range     `json:"replicas"`
	Scaling     *Scaling  `json:"scaling,omitempty"`
	Resources   Resources `json:"resources"`
	SpotPolicy  string    `json:"spot_policy,omitempty"`
	Reservation string    `json:"reservation,omitempty"`
	Commands    []string  `json:"commands,omitempty"`
	Image       string    `json:"image,omitempty"`
	Python      string    `json:"python,omitempty"`
	NVCC        *bool     `json:"nvcc,omitempty"`
	Docker      *bool     `json:"docker,omitempty"`
	Privileged  *bool     `json:"privileged,omitempty"`
	Router      *Router   `json:"router,omitempty"`
}

// Service is a normalized `type: service`.
type Service struct {
	RunConfig
	Commands []string `json:"commands,omitempty"`
	// Port is the application port (only ContainerPort matters).
	Port        PortMapping `json:"port"`
	Gateway     *GatewayRef `json:"gateway,omitempty"`
	StripPrefix bool        `json:"strip_prefix"`
	Model       *Model      `json:"model,omitempty"`
	// HTTPS is "true", "false" or "auto".
	HTTPS string `json:"https"`
	Auth  bool   `json:"auth"`
	// Replicas is the replica range (1 by default); empty when Groups is set.
	Replicas   Range       `json:"replicas"`
	Scaling    *Scaling    `json:"scaling,omitempty"`
	RateLimits []RateLimit `json:"rate_limits,omitempty"`
	// Probes are the effective probes (a default one when model is set and
	// probes is omitted).
	Probes []Probe        `json:"probes"`
	Groups []ReplicaGroup `json:"groups,omitempty"`
}

// Nodes is a backend fleet's size: Min is kept forever, Target is what an
// apply provisions, Max (nil = unlimited) caps run-driven growth.
type Nodes struct {
	Min    int  `json:"min"`
	Target int  `json:"target"`
	Max    *int `json:"max,omitempty"`
}

// SSHProxy is an SSH jump host.
type SSHProxy struct {
	Hostname     string `json:"hostname"`
	Port         int    `json:"port,omitempty"`
	User         string `json:"user"`
	IdentityFile string `json:"identity_file"`
}

// SSHHost is one host of an SSH fleet with the fleet defaults applied.
type SSHHost struct {
	Hostname     string    `json:"hostname"`
	Port         int       `json:"port,omitempty"`
	User         string    `json:"user,omitempty"`
	IdentityFile string    `json:"identity_file,omitempty"`
	ProxyJump    *SSHProxy `json:"proxy_jump,omitempty"`
	InternalIP   string    `json:"internal_ip,omitempty"`
	// Blocks is 0 for auto; absent means the fleet's blocks.
	Blocks *int `json:"blocks,omitempty"`
}

// SSHConfig describes an SSH ("bring your own hosts") fleet.
type SSHConfig struct {
	User         string    `json:"user,omitempty"`
	Port         int       `json:"port,omitempty"`
	IdentityFile string    `json:"identity_file,omitempty"`
	ProxyJump    *SSHProxy `json:"proxy_jump,omitempty"`
	Hosts        []SSHHost `json:"hosts"`
	Network      string    `json:"network,omitempty"`
}

// Fleet is a normalized `type: fleet`: a backend fleet (Nodes set) or an SSH
// fleet (SSHConfig set).
type Fleet struct {
	Name      string `json:"name"`
	Placement string `json:"placement"`
	// Blocks splits each instance; 0 means auto.
	Blocks            int               `json:"blocks"`
	Nodes             *Nodes            `json:"nodes,omitempty"`
	Reservation       string            `json:"reservation,omitempty"`
	Resources         *Resources        `json:"resources,omitempty"`
	Backends          []string          `json:"backends,omitempty"`
	Regions           []string          `json:"regions,omitempty"`
	AvailabilityZones []string          `json:"availability_zones,omitempty"`
	InstanceTypes     []string          `json:"instance_types,omitempty"`
	SpotPolicy        string            `json:"spot_policy"`
	Retry             *Retry            `json:"retry,omitempty"`
	MaxPrice          *float64          `json:"max_price,omitempty"`
	IdleDuration      int64             `json:"idle_duration"`
	Tags              map[string]string `json:"tags,omitempty"`
	BackendOptions    []BackendOptions  `json:"backend_options,omitempty"`
	SSHConfig         *SSHConfig        `json:"ssh_config,omitempty"`
	Env               []EnvVar          `json:"env,omitempty"`
}

// Volume is a normalized `type: volume`.
type Volume struct {
	Name             string `json:"name"`
	Backend          string `json:"backend"`
	Region           string `json:"region"`
	AvailabilityZone string `json:"availability_zone,omitempty"`
	// VolumeID registers an existing volume (aws, gcp, azure, runpod, verda).
	VolumeID string `json:"volume_id,omitempty"`
	// Size is in GB; nil when registering an existing volume.
	Size *float64 `json:"size,omitempty"`
	// AutoCleanupDuration is in seconds; Off keeps the volume forever.
	AutoCleanupDuration int64             `json:"auto_cleanup_duration"`
	Tags                map[string]string `json:"tags,omitempty"`
	// Hoist holds hoist's own options (pruning).
	Hoist *HoistOptions `json:"hoist,omitempty"`
	// Kubernetes only.
	ClaimName        string   `json:"claim_name,omitempty"`
	StorageClassName string   `json:"storage_class_name,omitempty"`
	AccessModes      []string `json:"access_modes,omitempty"`
	ReadOnly         bool     `json:"read_only,omitempty"`
}

// Certificate is a gateway TLS certificate source.
type Certificate struct {
	Type string `json:"type"`
	ARN  string `json:"arn,omitempty"`
}

// GatewayRouter is the deprecated gateway-level router block, accepted and
// kept for compatibility with older configurations.
type GatewayRouter struct {
	Type             string `json:"type"`
	Policy           string `json:"policy"`
	PDDisaggregation bool   `json:"pd_disaggregation"`
}

// Gateway is a normalized `type: gateway`.
type Gateway struct {
	Name         string `json:"name"`
	Default      bool   `json:"default"`
	Backend      string `json:"backend"`
	Region       string `json:"region"`
	InstanceType string `json:"instance_type,omitempty"`
	Domain       string `json:"domain,omitempty"`
	PublicIP     bool   `json:"public_ip"`
	// Certificate is nil when the configuration sets `certificate: null`.
	Certificate *Certificate      `json:"certificate,omitempty"`
	Replicas    int               `json:"replicas"`
	Tags        map[string]string `json:"tags,omitempty"`
	Router      *GatewayRouter    `json:"router,omitempty"`
	// Hoist holds hoist's own options (pruning).
	Hoist *HoistOptions `json:"hoist,omitempty"`
}

// HoistOptions are hoist's own extension to a volume or gateway spec.
type HoistOptions struct {
	// Prune lets hoist delete the resource at its backend when its spec
	// leaves Git, without waiting for a user's confirmation.
	Prune bool `json:"prune,omitempty"`
}

// Workflow is a normalized workflow: its provider, its parameters and the
// jobs the provider generates. A CUE provider's jobs are known once the
// workflow is loaded; a program provider's once its program has run on
// the same input (InputHash), until then Jobs is empty and the run's first
// job runs the program.
type Workflow struct {
	// RunConfig holds the run's defaults (a task's: profile, retry,
	// resources of the provider's program); each job has its own image,
	// commands and resources.
	RunConfig
	Provider WorkflowProvider `json:"provider"`
	// Params are the workflow's parameters as JSON (every field but name,
	// provider and depends-on).
	Params json.RawMessage `json:"params"`
	// Program is the provider's program, for a program provider.
	Program *ProviderProgram `json:"program,omitempty"`
	// InputHash identifies everything a program provider reads: the
	// workflow, the provider and the files of its inputs at the revision.
	InputHash string `json:"input_hash,omitempty"`
	// Jobs are the generated jobs, in the provider's order.
	Jobs []WorkflowJob `json:"jobs,omitempty"`
}

// WorkflowProvider names a workflow's provider: one of the spec
// repository, or of another repository (Repo, at Ref; Commit is the
// commit it was read from).
type WorkflowProvider struct {
	Name   string `json:"name"`
	Repo   string `json:"repo,omitempty"`
	Ref    string `json:"ref,omitempty"`
	Commit string `json:"commit,omitempty"`
	// Kind is ProviderProgram or ProviderCUE; empty while a remote
	// provider is not resolved yet.
	Kind string `json:"kind,omitempty"`
}

// The kinds of provider.
const (
	// ProviderKindProgram is dstack's kind: a container that prints the
	// jobs.
	ProviderKindProgram = "program"
	// ProviderKindCUE is hoist's: a CUE definition evaluated at load time.
	ProviderKindCUE = "cue"
)

// ProviderProgram is a program provider's container.
type ProviderProgram struct {
	Image    string   `json:"image"`
	Commands []string `json:"commands"`
}

// WorkflowJob is one job a provider generated (dstack's old Job fields).
type WorkflowJob struct {
	// Name is unique in the workflow ("job-<index>" when the provider
	// gives none).
	Name       string        `json:"name"`
	Image      string        `json:"image,omitempty"`
	Commands   []string      `json:"commands,omitempty"`
	Env        []EnvVar      `json:"env,omitempty"`
	Ports      []PortMapping `json:"ports,omitempty"`
	WorkingDir string        `json:"working_dir,omitempty"`
	Resources  Resources     `json:"resources"`
	// Artifacts are the folders (relative to the working directory, or
	// absolute) kept when the job ends.
	Artifacts []string `json:"artifacts,omitempty"`
	// DependsOn names the jobs that must be done before this one starts;
	// their artifacts are placed in its working directory.
	DependsOn []string `json:"depends_on,omitempty"`
	// Master names the job whose address this one gets.
	Master string `json:"master,omitempty"`
}
