package store

import (
	"encoding/json"
	"time"

	"github.com/uptrace/bun"
)

// DefaultProject is the project rows belong to when the caller leaves
// Project empty.
const DefaultProject = "main"

// Run statuses (dstack's RunStatus vocabulary).
const (
	RunPending      = "pending"
	RunSubmitted    = "submitted"
	RunProvisioning = "provisioning"
	RunRunning      = "running"
	RunTerminating  = "terminating"
	RunTerminated   = "terminated"
	RunFailed       = "failed"
	RunDone         = "done"
)

// Job statuses (dstack's JobStatus vocabulary).
const (
	JobSubmitted    = "submitted"
	JobProvisioning = "provisioning"
	JobPulling      = "pulling"
	JobRunning      = "running"
	JobTerminating  = "terminating"
	JobTerminated   = "terminated"
	JobAborted      = "aborted"
	JobFailed       = "failed"
	JobDone         = "done"
)

// Instance statuses (dstack's InstanceStatus vocabulary).
const (
	InstancePending      = "pending"
	InstanceProvisioning = "provisioning"
	InstanceIdle         = "idle"
	InstanceBusy         = "busy"
	InstanceTerminating  = "terminating"
	InstanceTerminated   = "terminated"
)

// Fleet statuses (dstack's FleetStatus vocabulary).
const (
	FleetSubmitted   = "submitted"
	FleetActive      = "active"
	FleetTerminating = "terminating"
	FleetTerminated  = "terminated"
	FleetFailed      = "failed"
)

// Volume statuses (dstack's VolumeStatus vocabulary).
const (
	VolumeSubmitted    = "submitted"
	VolumeProvisioning = "provisioning"
	VolumeActive       = "active"
	VolumeFailed       = "failed"
)

// Gateway statuses (dstack's GatewayStatus vocabulary).
const (
	GatewaySubmitted    = "submitted"
	GatewayProvisioning = "provisioning"
	GatewayRunning      = "running"
	GatewayFailed       = "failed"
)

// Sync statuses of the singleton SyncState row.
const (
	SyncSynced  = "synced"
	SyncSyncing = "syncing"
	SyncInvalid = "invalid"
)

// User roles.
const (
	RoleAdmin  = "admin"
	RoleUser   = "user"
	RoleViewer = "viewer"
)

// IsRunFinished reports whether a run status is final.
func IsRunFinished(status string) bool {
	return status == RunTerminated || status == RunFailed || status == RunDone
}

// IsJobFinished reports whether a job status is final.
func IsJobFinished(status string) bool {
	switch status {
	case JobTerminated, JobAborted, JobFailed, JobDone:
		return true
	}
	return false
}

// LeaseColumns are the work-claiming columns of every table the reconciler's
// workers process (runs, jobs, instances, fleets, volumes, gateways). Only the
// lease methods (Claim, Heartbeat, Release) write them.
type LeaseColumns struct {
	// LockToken identifies the current lease; empty when unleased.
	LockToken string `bun:"lock_token,nullzero"`
	// LockOwner names the claimer that last leased the row.
	LockOwner string `bun:"lock_owner,nullzero"`
	// LockExpiresAt is when the current lease lapses.
	LockExpiresAt time.Time `bun:"lock_expires_at,nullzero"`
	// LastProcessedAt is when a worker last released the row.
	LastProcessedAt time.Time `bun:"last_processed_at,nullzero"`
}

// Project groups every other object; hoist runs with one ("main") by default.
type Project struct {
	bun.BaseModel `bun:"table:projects"`

	ID        string    `bun:"id,pk"`
	Name      string    `bun:"name,notnull"`
	CreatedAt time.Time `bun:"created_at,notnull"`
}

// User is someone who may call the API, with a role of admin, user or viewer.
type User struct {
	bun.BaseModel `bun:"table:users"`

	ID        string    `bun:"id,pk"`
	Name      string    `bun:"name,notnull"`
	Role      string    `bun:"role,notnull"`
	Disabled  bool      `bun:"disabled,notnull"`
	CreatedAt time.Time `bun:"created_at,notnull"`
}

// APIToken is a user's API token; only its SHA-256 hash is stored.
type APIToken struct {
	bun.BaseModel `bun:"table:api_tokens"`

	ID         string    `bun:"id,pk"`
	UserID     string    `bun:"user_id,notnull"`
	Name       string    `bun:"name,notnull"`
	TokenHash  string    `bun:"token_hash,notnull"`
	CreatedAt  time.Time `bun:"created_at,notnull"`
	ExpiresAt  time.Time `bun:"expires_at,nullzero"`
	LastUsedAt time.Time `bun:"last_used_at,nullzero"`
	Revoked    bool      `bun:"revoked,notnull"`
}

// Source is a Git repository (or directory) hoist reads desired state from.
type Source struct {
	bun.BaseModel `bun:"table:sources"`

	ID        string    `bun:"id,pk"`
	Project   string    `bun:"project,notnull"`
	Name      string    `bun:"name,notnull"`
	URL       string    `bun:"url,notnull"`
	Ref       string    `bun:"ref,notnull"`
	Path      string    `bun:"path,notnull"`
	CreatedAt time.Time `bun:"created_at,notnull"`
	UpdatedAt time.Time `bun:"updated_at,notnull"`
}

// Revision is one commit hoist has seen, with its validation result.
type Revision struct {
	bun.BaseModel `bun:"table:revisions"`

	SHA         string    `bun:"sha,pk"`
	SourceID    string    `bun:"source_id,notnull"`
	Author      string    `bun:"author,notnull"`
	Message     string    `bun:"message,notnull"`
	CommittedAt time.Time `bun:"committed_at,nullzero"`
	SeenAt      time.Time `bun:"seen_at,notnull"`
	Valid       bool      `bun:"valid,notnull"`
	Errors      []string  `bun:"errors,type:text,nullzero"`
}

// SyncState is the singleton row describing where Git sync stands.
type SyncState struct {
	bun.BaseModel `bun:"table:sync_state"`

	ID           int       `bun:"id,pk"`
	LatestSHA    string    `bun:"latest_sha,notnull"`
	AppliedSHA   string    `bun:"applied_sha,notnull"`
	Status       string    `bun:"status,notnull"`
	Errors       []string  `bun:"errors,type:text,nullzero"`
	Suspended    bool      `bun:"suspended,notnull"`
	Requested    int64     `bun:"requested,notnull"`
	LastSyncedAt time.Time `bun:"last_synced_at,nullzero"`
	UpdatedAt    time.Time `bun:"updated_at,nullzero"`
	Version      int64     `bun:"version,notnull"`
}

// Resource is one desired object from Git (kind + name), with its normalized
// spec and where it stands.
type Resource struct {
	bun.BaseModel `bun:"table:resources"`

	ID      string `bun:"id,pk"`
	Project string `bun:"project,notnull"`
	Kind    string `bun:"kind,notnull"`
	Name    string `bun:"name,notnull"`
	// Spec is the normalized desired spec as JSON; stored byte for byte.
	Spec     json.RawMessage `bun:"spec,type:text"`
	SpecHash string          `bun:"spec_hash,notnull"`
	File     string          `bun:"file,notnull"`
	// Revision is the commit that last changed Spec or File.
	Revision string `bun:"revision,notnull"`
	// AppliedRevision is the revision the reconciler last applied.
	AppliedRevision string    `bun:"applied_revision,notnull"`
	Status          string    `bun:"status,notnull"`
	StatusMessage   string    `bun:"status_message,notnull"`
	Suspended       bool      `bun:"suspended,notnull"`
	Deleted         bool      `bun:"deleted,notnull"`
	DeletedAt       time.Time `bun:"deleted_at,nullzero"`
	Version         int64     `bun:"version,notnull"`
	CreatedAt       time.Time `bun:"created_at,notnull"`
	UpdatedAt       time.Time `bun:"updated_at,notnull"`
}

// Run is one submission of a task, service or dev environment.
type Run struct {
	bun.BaseModel `bun:"table:runs"`

	ID                  string          `bun:"id,pk"`
	Project             string          `bun:"project,notnull"`
	Name                string          `bun:"name,notnull"`
	Type                string          `bun:"type,notnull"`
	ResourceKind        string          `bun:"resource_kind,notnull"`
	ResourceName        string          `bun:"resource_name,notnull"`
	Spec                json.RawMessage `bun:"spec,type:text"`
	SpecHash            string          `bun:"spec_hash,notnull"`
	Revision            string          `bun:"revision,notnull"`
	Status              string          `bun:"status,notnull"`
	StatusMessage       string          `bun:"status_message,notnull"`
	TerminationReason   string          `bun:"termination_reason,notnull"`
	FleetID             string          `bun:"fleet_id,notnull"`
	Priority            int             `bun:"priority,notnull"`
	SubmittedAt         time.Time       `bun:"submitted_at,notnull"`
	FinishedAt          time.Time       `bun:"finished_at,nullzero"`
	ResubmissionAttempt int             `bun:"resubmission_attempt,notnull"`
	NextTriggeredAt     time.Time       `bun:"next_triggered_at,nullzero"`
	DeploymentNum       int             `bun:"deployment_num,notnull"`
	Deleted             bool            `bun:"deleted,notnull"`
	RemovedFromGit      bool            `bun:"removed_from_git,notnull"`
	Version             int64           `bun:"version,notnull"`
	CreatedAt           time.Time       `bun:"created_at,notnull"`
	UpdatedAt           time.Time       `bun:"updated_at,notnull"`
	LeaseColumns
}

// Job is one submission of one job (replica × node) of a run.
type Job struct {
	bun.BaseModel `bun:"table:jobs"`

	ID                 string          `bun:"id,pk"`
	RunID              string          `bun:"run_id,notnull"`
	RunName            string          `bun:"run_name,notnull"`
	JobName            string          `bun:"job_name,notnull"`
	JobNum             int             `bun:"job_num,notnull"`
	ReplicaNum         int             `bun:"replica_num,notnull"`
	SubmissionNum      int             `bun:"submission_num,notnull"`
	DeploymentNum      int             `bun:"deployment_num,notnull"`
	Spec               json.RawMessage `bun:"spec,type:text"`
	Status             string          `bun:"status,notnull"`
	StatusMessage      string          `bun:"status_message,notnull"`
	TerminationReason  string          `bun:"termination_reason,notnull"`
	TerminationMessage string          `bun:"termination_message,notnull"`
	ExitCode           *int            `bun:"exit_code"`
	InstanceID         string          `bun:"instance_id,notnull"`
	Backend            string          `bun:"backend,notnull"`
	ShimTaskID         string          `bun:"shim_task_id,notnull"`
	RunnerHost         string          `bun:"runner_host,notnull"`
	RunnerPort         int             `bun:"runner_port,notnull"`
	ProvisioningData   json.RawMessage `bun:"provisioning_data,type:text"`
	RuntimeData        json.RawMessage `bun:"runtime_data,type:text"`
	// LogCursor is the runner's log sequence number already copied into the store.
	LogCursor                   int64     `bun:"log_cursor,notnull"`
	GracefulTerminationAttempts *int      `bun:"graceful_termination_attempts"`
	RemoveAt                    time.Time `bun:"remove_at,nullzero"`
	SubmittedAt                 time.Time `bun:"submitted_at,notnull"`
	StartedAt                   time.Time `bun:"started_at,nullzero"`
	FinishedAt                  time.Time `bun:"finished_at,nullzero"`
	Version                     int64     `bun:"version,notnull"`
	CreatedAt                   time.Time `bun:"created_at,notnull"`
	UpdatedAt                   time.Time `bun:"updated_at,notnull"`
	LeaseColumns
}

// Instance is one machine (VM, SSH host or local host) hoist provisioned or adopted.
type Instance struct {
	bun.BaseModel `bun:"table:instances"`

	ID          string          `bun:"id,pk"`
	Project     string          `bun:"project,notnull"`
	Name        string          `bun:"name,notnull"`
	FleetID     string          `bun:"fleet_id,nullzero"`
	InstanceNum int             `bun:"instance_num,notnull"`
	Backend     string          `bun:"backend,notnull"`
	Region      string          `bun:"region,notnull"`
	Offer       json.RawMessage `bun:"offer,type:text"`
	Price       float64         `bun:"price,notnull"`
	Hostname    string          `bun:"hostname,notnull"`
	SSHPort     int             `bun:"ssh_port,notnull"`
	SSHUser     string          `bun:"ssh_user,notnull"`
	// Ports maps container or service port names to host ports.
	Ports map[string]int `bun:"ports,type:text"`
	// HostKey is the pinned SSH host public key (authorized_keys format).
	HostKey     string          `bun:"host_key,notnull"`
	BackendData json.RawMessage `bun:"backend_data,type:text"`
	Status      string          `bun:"status,notnull"`
	// StatusMessage explains Status to people.
	StatusMessage     string            `bun:"status_message,notnull"`
	TerminationReason string            `bun:"termination_reason,notnull"`
	OwnershipTags     map[string]string `bun:"ownership_tags,type:text"`
	Unreachable       bool              `bun:"unreachable,notnull"`
	Health            string            `bun:"health,notnull"`
	LastSeenAt        time.Time         `bun:"last_seen_at,nullzero"`
	StartedAt         time.Time         `bun:"started_at,nullzero"`
	FinishedAt        time.Time         `bun:"finished_at,nullzero"`
	TotalBlocks       int               `bun:"total_blocks,notnull"`
	BusyBlocks        int               `bun:"busy_blocks,notnull"`
	Deleted           bool              `bun:"deleted,notnull"`
	Version           int64             `bun:"version,notnull"`
	CreatedAt         time.Time         `bun:"created_at,notnull"`
	UpdatedAt         time.Time         `bun:"updated_at,notnull"`
	LeaseColumns
}

// Fleet is a named group of instances.
type Fleet struct {
	bun.BaseModel `bun:"table:fleets"`

	ID                   string          `bun:"id,pk"`
	Project              string          `bun:"project,notnull"`
	Name                 string          `bun:"name,notnull"`
	Spec                 json.RawMessage `bun:"spec,type:text"`
	SpecHash             string          `bun:"spec_hash,notnull"`
	Revision             string          `bun:"revision,notnull"`
	Status               string          `bun:"status,notnull"`
	StatusMessage        string          `bun:"status_message,notnull"`
	ConsolidationAttempt int             `bun:"consolidation_attempt,notnull"`
	LastConsolidatedAt   time.Time       `bun:"last_consolidated_at,nullzero"`
	Deleted              bool            `bun:"deleted,notnull"`
	RemovedFromGit       bool            `bun:"removed_from_git,notnull"`
	Version              int64           `bun:"version,notnull"`
	CreatedAt            time.Time       `bun:"created_at,notnull"`
	UpdatedAt            time.Time       `bun:"updated_at,notnull"`
	LeaseColumns
}

// Volume is a network or instance volume.
type Volume struct {
	bun.BaseModel `bun:"table:volumes"`

	ID                 string          `bun:"id,pk"`
	Project            string          `bun:"project,notnull"`
	Name               string          `bun:"name,notnull"`
	Spec               json.RawMessage `bun:"spec,type:text"`
	SpecHash           string          `bun:"spec_hash,notnull"`
	Revision           string          `bun:"revision,notnull"`
	Backend            string          `bun:"backend,notnull"`
	Region             string          `bun:"region,notnull"`
	ExternalID         string          `bun:"external_id,notnull"`
	SizeGB             float64         `bun:"size_gb,notnull"`
	ProvisioningData   json.RawMessage `bun:"provisioning_data,type:text"`
	Status             string          `bun:"status,notnull"`
	StatusMessage      string          `bun:"status_message,notnull"`
	ToBeDeleted        bool            `bun:"to_be_deleted,notnull"`
	Deleted            bool            `bun:"deleted,notnull"`
	RemovedFromGit     bool            `bun:"removed_from_git,notnull"`
	LastJobProcessedAt time.Time       `bun:"last_job_processed_at,nullzero"`
	Version            int64           `bun:"version,notnull"`
	CreatedAt          time.Time       `bun:"created_at,notnull"`
	UpdatedAt          time.Time       `bun:"updated_at,notnull"`
	LeaseColumns
}

// VolumeAttachment records that a volume is attached to an instance.
type VolumeAttachment struct {
	bun.BaseModel `bun:"table:volume_attachments"`

	VolumeID       string          `bun:"volume_id,pk"`
	InstanceID     string          `bun:"instance_id,pk"`
	AttachmentData json.RawMessage `bun:"attachment_data,type:text"`
	CreatedAt      time.Time       `bun:"created_at,notnull"`
}

// Gateway is a service gateway (ingress) instance.
type Gateway struct {
	bun.BaseModel `bun:"table:gateways"`

	ID             string            `bun:"id,pk"`
	Project        string            `bun:"project,notnull"`
	Name           string            `bun:"name,notnull"`
	Spec           json.RawMessage   `bun:"spec,type:text"`
	SpecHash       string            `bun:"spec_hash,notnull"`
	Revision       string            `bun:"revision,notnull"`
	Backend        string            `bun:"backend,notnull"`
	Region         string            `bun:"region,notnull"`
	Hostname       string            `bun:"hostname,notnull"`
	IPAddress      string            `bun:"ip_address,notnull"`
	SSHPort        int               `bun:"ssh_port,notnull"`
	HostKey        string            `bun:"host_key,notnull"`
	BackendData    json.RawMessage   `bun:"backend_data,type:text"`
	OwnershipTags  map[string]string `bun:"ownership_tags,type:text"`
	Status         string            `bun:"status,notnull"`
	StatusMessage  string            `bun:"status_message,notnull"`
	Deleted        bool              `bun:"deleted,notnull"`
	RemovedFromGit bool              `bun:"removed_from_git,notnull"`
	Version        int64             `bun:"version,notnull"`
	CreatedAt      time.Time         `bun:"created_at,notnull"`
	UpdatedAt      time.Time         `bun:"updated_at,notnull"`
	LeaseColumns
}

// Event is one line of history about an object.
type Event struct {
	bun.BaseModel `bun:"table:events"`

	ID         string    `bun:"id,pk"`
	Time       time.Time `bun:"time,notnull"`
	ObjectKind string    `bun:"object_kind,notnull"`
	ObjectName string    `bun:"object_name,notnull"`
	ObjectID   string    `bun:"object_id,notnull"`
	Type       string    `bun:"type,notnull"`
	Message    string    `bun:"message,notnull"`
	Revision   string    `bun:"revision,notnull"`
}
