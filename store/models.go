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
	RoleAdmin   = "admin"
	RoleManager = "manager"
	RoleUser    = "user"
	RoleViewer  = "viewer"
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

	// ID is the project's UUID.
	ID string `bun:"id,pk"`
	// Name is the unique project name.
	Name string `bun:"name,notnull"`
	// CreatedAt is when the project was created.
	CreatedAt time.Time `bun:"created_at,notnull"`
}

// User is someone who may call the API. Its Role is global: RoleAdmin may
// do everything everywhere, RoleUser only what its project memberships
// (Member) allow.
type User struct {
	bun.BaseModel `bun:"table:users"`

	// ID is the user's UUID.
	ID string `bun:"id,pk"`
	// Name is the unique login name.
	Name string `bun:"name,notnull"`
	// Role is RoleAdmin or RoleUser.
	Role string `bun:"role,notnull"`
	// Disabled users cannot authenticate.
	Disabled bool `bun:"disabled,notnull"`
	// CreatedAt is when the user was created.
	CreatedAt time.Time `bun:"created_at,notnull"`
}

// APIToken is a user's API token; only its SHA-256 hash is stored.
type APIToken struct {
	bun.BaseModel `bun:"table:api_tokens"`

	// ID is the token's UUID (not the secret).
	ID string `bun:"id,pk"`
	// UserID is the owning user's ID.
	UserID string `bun:"user_id,notnull"`
	// Name describes the token, e.g. "ci".
	Name string `bun:"name,notnull"`
	// TokenHash is the hex SHA-256 of the plaintext token.
	TokenHash string `bun:"token_hash,notnull"`
	// CreatedAt is when the token was issued.
	CreatedAt time.Time `bun:"created_at,notnull"`
	// ExpiresAt is when the token stops working; zero means never.
	ExpiresAt time.Time `bun:"expires_at,nullzero"`
	// LastUsedAt is when LookupToken last accepted the token.
	LastUsedAt time.Time `bun:"last_used_at,nullzero"`
	// Revoked tokens are refused.
	Revoked bool `bun:"revoked,notnull"`
}

// TokenInfo describes an API token for listings: everything but its hash.
type TokenInfo struct {
	bun.BaseModel `bun:"table:api_tokens"`

	// ID is the token's UUID (not the secret).
	ID string `bun:"id"`
	// UserID is the owning user's ID.
	UserID string `bun:"user_id"`
	// UserName is the owning user's name.
	UserName string `bun:"user_name"`
	// Name describes the token, unique among the user's tokens.
	Name string `bun:"name"`
	// CreatedAt is when the token was issued.
	CreatedAt time.Time `bun:"created_at"`
	// ExpiresAt is when the token stops working; zero means never.
	ExpiresAt time.Time `bun:"expires_at,nullzero"`
	// LastUsedAt is when LookupToken last accepted the token.
	LastUsedAt time.Time `bun:"last_used_at,nullzero"`
	// Revoked tokens are refused.
	Revoked bool `bun:"revoked"`
}

// Member is a user's role in one project: RoleAdmin, RoleManager, RoleUser
// or RoleViewer, as dstack's project roles plus a read-only viewer.
type Member struct {
	bun.BaseModel `bun:"table:project_members"`

	// Project is the project's name.
	Project string `bun:"project,pk"`
	// UserID is the member's user ID.
	UserID string `bun:"user_id,pk"`
	// UserName is the member's name (read from users, not stored here).
	UserName string `bun:"user_name,scanonly"`
	// Role is the member's role in the project.
	Role string `bun:"role,notnull"`
	// CreatedAt is when the membership was last set.
	CreatedAt time.Time `bun:"created_at,notnull"`
}

// Revision is one commit hoist has seen, with its validation result.
type Revision struct {
	bun.BaseModel `bun:"table:revisions"`

	// Project is the project whose source the commit was read for
	// (DefaultProject when empty): projects reading one repository each
	// validate their own directory of it.
	Project string `bun:"project,pk"`
	// SHA is the commit hash.
	SHA string `bun:"sha,pk"`
	// SourceID is the source the commit came from (may be empty).
	SourceID string `bun:"source_id,notnull"`
	// Author is the commit author ("Name <email>").
	Author string `bun:"author,notnull"`
	// Message is the commit message.
	Message string `bun:"message,notnull"`
	// CommittedAt is the commit time.
	CommittedAt time.Time `bun:"committed_at,nullzero"`
	// SeenAt is when hoist first recorded the revision.
	SeenAt time.Time `bun:"seen_at,notnull"`
	// Valid reports whether every spec in the revision validated.
	Valid bool `bun:"valid,notnull"`
	// Errors are the validation errors, one positioned message each.
	Errors []string `bun:"errors,type:text,nullzero"`
	// Warnings are the advisory findings of a valid revision (fields that
	// have no effect in hoist), one positioned message each.
	Warnings []string `bun:"warnings,type:text,nullzero"`
	// Plan is the plan the revision produced when it was applied (JSON),
	// set by SetRevisionPlan; nil otherwise.
	Plan json.RawMessage `bun:"plan,type:text,nullzero"`
}

// SyncState describes where the Git sync of one project stands.
type SyncState struct {
	bun.BaseModel `bun:"table:sync_state"`

	// Project is the project whose source is synced (DefaultProject when
	// empty).
	Project string `bun:"project,pk"`
	// LatestSHA is the newest commit seen on the tracked ref.
	LatestSHA string `bun:"latest_sha,notnull"`
	// AppliedSHA is the newest valid commit whose desired state was applied.
	AppliedSHA string `bun:"applied_sha,notnull"`
	// Status is SyncSynced, SyncSyncing or SyncInvalid.
	Status string `bun:"status,notnull"`
	// Errors explain an invalid or failing sync.
	Errors []string `bun:"errors,type:text,nullzero"`
	// Held reports that the latest revision's plan, or some of its steps,
	// waits for a user's confirmation (see ConfirmRevision).
	Held bool `bun:"held,notnull"`
	// HeldReasons say what is held and why, one line each.
	HeldReasons []string `bun:"held_reasons,type:text,nullzero"`
	// Suspended stops applying new revisions.
	Suspended bool `bun:"suspended,notnull"`
	// Requested counts "sync now" requests (see RequestSync).
	Requested int64 `bun:"requested,notnull"`
	// LastSyncedAt is when a sync last completed.
	LastSyncedAt time.Time `bun:"last_synced_at,nullzero"`
	// UpdatedAt is when the row was last written.
	UpdatedAt time.Time `bun:"updated_at,nullzero"`
	// Version guards updates (optimistic concurrency).
	Version int64 `bun:"version,notnull"`
}

// Resource is one desired object from Git (kind + name), with its normalized
// spec and where it stands.
type Resource struct {
	bun.BaseModel `bun:"table:resources"`

	// ID is the resource's UUID.
	ID string `bun:"id,pk"`
	// Project is the owning project.
	Project string `bun:"project,notnull"`
	// Kind is the spec type: task, service, dev-environment, fleet, volume or gateway.
	Kind string `bun:"kind,notnull"`
	// Name is unique per project and kind.
	Name string `bun:"name,notnull"`
	// Spec is the normalized desired spec as JSON; stored byte for byte.
	Spec json.RawMessage `bun:"spec,type:text"`
	// SpecHash identifies Spec; a change of hash is a change of desired state.
	SpecHash string `bun:"spec_hash,notnull"`
	// File is the repository path the spec came from.
	File string `bun:"file,notnull"`
	// Revision is the commit that last changed Spec or File.
	Revision string `bun:"revision,notnull"`
	// AppliedRevision is the revision the reconciler last applied.
	AppliedRevision string `bun:"applied_revision,notnull"`
	// Status is the reconciler's summary (its own vocabulary).
	Status string `bun:"status,notnull"`
	// StatusMessage explains Status to people.
	StatusMessage string `bun:"status_message,notnull"`
	// Suspended resources are not reconciled.
	Suspended bool `bun:"suspended,notnull"`
	// Deleted marks a resource removed from Git, awaiting finalization.
	Deleted bool `bun:"deleted,notnull"`
	// DeletedAt is when it was marked deleted.
	DeletedAt time.Time `bun:"deleted_at,nullzero"`
	// Version guards updates (optimistic concurrency).
	Version int64 `bun:"version,notnull"`
	// CreatedAt is when the row was created.
	CreatedAt time.Time `bun:"created_at,notnull"`
	// UpdatedAt is when the row was last written.
	UpdatedAt time.Time `bun:"updated_at,notnull"`
}

// Run is one submission of a task, service or dev environment.
type Run struct {
	bun.BaseModel `bun:"table:runs"`

	// ID is the run's UUID.
	ID string `bun:"id,pk"`
	// Project is the owning project.
	Project string `bun:"project,notnull"`
	// Name is the run name; several runs (resubmissions) may share it.
	Name string `bun:"name,notnull"`
	// Type is "task", "service", "dev-environment" or "workflow".
	Type string `bun:"type,notnull"`
	// ResourceKind is the kind of the Git resource that asked for the run.
	ResourceKind string `bun:"resource_kind,notnull"`
	// ResourceName is the name of that resource.
	ResourceName string `bun:"resource_name,notnull"`
	// Spec is the run spec as JSON.
	Spec json.RawMessage `bun:"spec,type:text"`
	// SpecHash identifies Spec.
	SpecHash string `bun:"spec_hash,notnull"`
	// Revision is the commit the run was submitted from.
	Revision string `bun:"revision,notnull"`
	// Status is one of the Run* constants (dstack's run vocabulary).
	Status string `bun:"status,notnull"`
	// StatusMessage is what people see (e.g. "pulling", "retrying").
	StatusMessage string `bun:"status_message,notnull"`
	// TerminationReason is dstack's RunTerminationReason, once terminating.
	TerminationReason string `bun:"termination_reason,notnull"`
	// FleetID is the fleet the run was placed on, if any.
	FleetID string `bun:"fleet_id,notnull"`
	// Priority orders submitted runs (higher first).
	Priority int `bun:"priority,notnull"`
	// SubmittedAt is when the run was submitted.
	SubmittedAt time.Time `bun:"submitted_at,notnull"`
	// FinishedAt is when the run reached a final status.
	FinishedAt time.Time `bun:"finished_at,nullzero"`
	// ResubmissionAttempt counts retries of the whole run.
	ResubmissionAttempt int `bun:"resubmission_attempt,notnull"`
	// NextTriggeredAt is the next scheduled (cron) start of a pending run.
	NextTriggeredAt time.Time `bun:"next_triggered_at,nullzero"`
	// SubmitKey, when set, is unique among runs: CreateRunWithJobs with the
	// key of a run that exists already writes nothing.
	SubmitKey string `bun:"submit_key,nullzero"`
	// DeploymentNum counts in-place updates of the run.
	DeploymentNum int `bun:"deployment_num,notnull"`
	// Deleted hides the run from lookups by name.
	Deleted bool `bun:"deleted,notnull"`
	// RemovedFromGit marks a run whose resource left the repository.
	RemovedFromGit bool `bun:"removed_from_git,notnull"`
	// Version guards updates (optimistic concurrency).
	Version int64 `bun:"version,notnull"`
	// CreatedAt is when the row was created.
	CreatedAt time.Time `bun:"created_at,notnull"`
	// UpdatedAt is when the row was last written.
	UpdatedAt time.Time `bun:"updated_at,notnull"`
	LeaseColumns
}

// Job is one submission of one job (replica × node) of a run.
type Job struct {
	bun.BaseModel `bun:"table:jobs"`

	// ID is the job submission's UUID.
	ID string `bun:"id,pk"`
	// RunID is the owning run.
	RunID string `bun:"run_id,notnull"`
	// RunName is the owning run's name.
	RunName string `bun:"run_name,notnull"`
	// JobName is "<run>-<job_num>-<replica_num>".
	JobName string `bun:"job_name,notnull"`
	// JobNum is the node index of a multi-node task.
	JobNum int `bun:"job_num,notnull"`
	// ReplicaNum is the replica index of a service.
	ReplicaNum int `bun:"replica_num,notnull"`
	// SubmissionNum counts retries of this job (one row each).
	SubmissionNum int `bun:"submission_num,notnull"`
	// DeploymentNum is the run deployment this job belongs to.
	DeploymentNum int `bun:"deployment_num,notnull"`
	// Spec is the job spec as JSON.
	Spec json.RawMessage `bun:"spec,type:text"`
	// Status is one of the Job* constants (dstack's job vocabulary).
	Status string `bun:"status,notnull"`
	// StatusMessage is what people see, e.g. "exited (1)" or "no capacity".
	StatusMessage string `bun:"status_message,notnull"`
	// TerminationReason is dstack's JobTerminationReason.
	TerminationReason string `bun:"termination_reason,notnull"`
	// TerminationMessage is detail from the shim or runner.
	TerminationMessage string `bun:"termination_message,notnull"`
	// ExitCode is the container's exit code, when known.
	ExitCode *int `bun:"exit_code"`
	// InstanceID is the instance the job was placed on.
	InstanceID string `bun:"instance_id,notnull"`
	// Backend is the backend of that instance.
	Backend string `bun:"backend,notnull"`
	// Blocks is how many of the instance's blocks the job holds (its
	// fleet's `blocks`); 0 (or every block) holds the whole instance.
	Blocks int `bun:"blocks,notnull"`
	// ShimTaskID is the shim's task ID for the job's container.
	ShimTaskID string `bun:"shim_task_id,notnull"`
	// RunnerAddr is where the job's runner API answers on its instance:
	// "unix://" and the path of the runner's socket.
	RunnerAddr string `bun:"runner_addr,notnull"`
	// ProvisioningData is backend detail about the placement, as JSON.
	ProvisioningData json.RawMessage `bun:"provisioning_data,type:text"`
	// RuntimeData is detail known once running, a JobRuntime as JSON.
	RuntimeData json.RawMessage `bun:"runtime_data,type:text"`
	// LogCursor is the runner's log sequence number already copied into the store.
	LogCursor int64 `bun:"log_cursor,notnull"`
	// GracefulTerminationAttempts counts graceful stop attempts, when stopping.
	GracefulTerminationAttempts *int `bun:"graceful_termination_attempts"`
	// RemoveAt delays processing of a terminating job until then.
	RemoveAt time.Time `bun:"remove_at,nullzero"`
	// SubmittedAt is when this submission was created.
	SubmittedAt time.Time `bun:"submitted_at,notnull"`
	// StartedAt is when the job started running.
	StartedAt time.Time `bun:"started_at,nullzero"`
	// FinishedAt is when the job reached a final status.
	FinishedAt time.Time `bun:"finished_at,nullzero"`
	// Version guards updates (optimistic concurrency).
	Version int64 `bun:"version,notnull"`
	// CreatedAt is when the row was created.
	CreatedAt time.Time `bun:"created_at,notnull"`
	// UpdatedAt is when the row was last written.
	UpdatedAt time.Time `bun:"updated_at,notnull"`
	LeaseColumns
}

// JobRuntime is what a job keeps about where it runs (Job.RuntimeData).
type JobRuntime struct {
	// ServiceAddr is host:port of the service port as seen from the
	// instance (services only).
	ServiceAddr string `json:"service_addr,omitempty"`
	// WorkingDir is the absolute directory the job runs in, as its runner
	// reported on starting it (dstack's JobRuntimeData.working_dir).
	WorkingDir string `json:"working_dir,omitempty"`
	// InternalIP is the address the other nodes of its cluster reach the
	// job's container at, when the container has one of its own (a
	// Kubernetes pod's IP, as its shim task reported it; dstack's
	// JobProvisioningData.internal_ip of a container backend's job).
	InternalIP string `json:"internal_ip,omitempty"`
}

// Runtime decodes RuntimeData (the zero JobRuntime when there is none).
func (j Job) Runtime() JobRuntime {
	var rt JobRuntime
	_ = json.Unmarshal(j.RuntimeData, &rt)
	return rt
}

// Instance is one machine (VM, SSH host or local host) hoist provisioned or adopted.
type Instance struct {
	bun.BaseModel `bun:"table:instances"`

	// ID is the instance's UUID.
	ID string `bun:"id,pk"`
	// Project is the owning project.
	Project string `bun:"project,notnull"`
	// Name is the instance name, e.g. "<fleet>-<num>".
	Name string `bun:"name,notnull"`
	// FleetID is the owning fleet (empty for none).
	FleetID string `bun:"fleet_id,nullzero"`
	// InstanceNum is the index within the fleet.
	InstanceNum int `bun:"instance_num,notnull"`
	// Backend is the backend that provisioned the instance.
	Backend string `bun:"backend,notnull"`
	// Region is the backend region.
	Region string `bun:"region,notnull"`
	// Offer is the offer the instance was created from, as JSON.
	Offer json.RawMessage `bun:"offer,type:text"`
	// Price is the hourly price in USD.
	Price float64 `bun:"price,notnull"`
	// Hostname is the address hoist reaches the instance at.
	Hostname string `bun:"hostname,notnull"`
	// InternalIP is the address the other instances of its fleet reach it
	// at (dstack's internal_ip), "" when unknown: the nodes of a
	// multi-node run find each other by it.
	InternalIP string `bun:"internal_ip,notnull"`
	// SSHPort is the instance's SSH port.
	SSHPort int `bun:"ssh_port,notnull"`
	// SSHUser is the SSH login user.
	SSHUser string `bun:"ssh_user,notnull"`
	// Ports maps container or service port names to host ports.
	Ports map[string]int `bun:"ports,type:text"`
	// HostKey is the pinned SSH host public key (authorized_keys format).
	HostKey string `bun:"host_key,notnull"`
	// BackendData is the backend's handle for the instance, as JSON.
	BackendData json.RawMessage `bun:"backend_data,type:text"`
	// Status is one of the Instance* constants (dstack's vocabulary).
	Status string `bun:"status,notnull"`
	// StatusMessage explains Status to people.
	StatusMessage string `bun:"status_message,notnull"`
	// TerminationReason is dstack's InstanceTerminationReason.
	TerminationReason string `bun:"termination_reason,notnull"`
	// OwnershipTags are the tags hoist put on cloud resources to recognize its own.
	OwnershipTags map[string]string `bun:"ownership_tags,type:text"`
	// Unreachable is set while health checks fail.
	Unreachable bool `bun:"unreachable,notnull"`
	// LastSeenAt is when the instance last answered a health check.
	LastSeenAt time.Time `bun:"last_seen_at,nullzero"`
	// StartedAt is when provisioning started.
	StartedAt time.Time `bun:"started_at,nullzero"`
	// FinishedAt is when the instance was terminated.
	FinishedAt time.Time `bun:"finished_at,nullzero"`
	// Deleted hides a terminated instance.
	Deleted bool `bun:"deleted,notnull"`
	// Version guards updates (optimistic concurrency).
	Version int64 `bun:"version,notnull"`
	// CreatedAt is when the row was created.
	CreatedAt time.Time `bun:"created_at,notnull"`
	// UpdatedAt is when the row was last written.
	UpdatedAt time.Time `bun:"updated_at,notnull"`
	LeaseColumns
}

// Fleet is a named group of instances.
type Fleet struct {
	bun.BaseModel `bun:"table:fleets"`

	// ID is the fleet's UUID.
	ID string `bun:"id,pk"`
	// Project is the owning project.
	Project string `bun:"project,notnull"`
	// Name is the fleet name.
	Name string `bun:"name,notnull"`
	// Spec is the fleet spec as JSON.
	Spec json.RawMessage `bun:"spec,type:text"`
	// SpecHash identifies Spec.
	SpecHash string `bun:"spec_hash,notnull"`
	// Revision is the commit the spec came from.
	Revision string `bun:"revision,notnull"`
	// Status is one of the Fleet* constants.
	Status string `bun:"status,notnull"`
	// StatusMessage explains Status to people.
	StatusMessage string `bun:"status_message,notnull"`
	// ConsolidationAttempt counts failed consolidations (for back-off).
	ConsolidationAttempt int `bun:"consolidation_attempt,notnull"`
	// LastConsolidatedAt is when consolidation last ran.
	LastConsolidatedAt time.Time `bun:"last_consolidated_at,nullzero"`
	// Deleted hides a terminated fleet.
	Deleted bool `bun:"deleted,notnull"`
	// RemovedFromGit marks a fleet whose spec left the repository.
	RemovedFromGit bool `bun:"removed_from_git,notnull"`
	// TriedOffers are the offers the fleet's instances could not be had
	// from (no capacity, no boot) since its spec was last applied: the
	// offer walk skips them, also after a restart.
	TriedOffers []TriedOffer `bun:"tried_offers,type:text"`
	// PlacementGroups are the fleet's placement groups (`placement:
	// cluster`), at most one per backend and region, recorded before they
	// are created and deleted once the fleet's last instance is gone.
	PlacementGroups []FleetPlacementGroup `bun:"placement_groups,type:text"`
	// Version guards updates (optimistic concurrency).
	Version int64 `bun:"version,notnull"`
	// CreatedAt is when the row was created.
	CreatedAt time.Time `bun:"created_at,notnull"`
	// UpdatedAt is when the row was last written.
	UpdatedAt time.Time `bun:"updated_at,notnull"`
	LeaseColumns
}

// A TriedOffer is an offer a fleet's instance could not be had from.
type TriedOffer struct {
	// Offer identifies the offer: backend/region/instance type/spot.
	Offer string `json:"offer"`
	// Error is why it could not be had.
	Error string `json:"error"`
	// At is when it failed.
	At time.Time `json:"at"`
}

// A FleetPlacementGroup is a fleet's placement group in one backend and
// region.
type FleetPlacementGroup struct {
	// ID is hoist's id of the group (backends.PlacementGroupSpec.ID), the
	// one instances are created in.
	ID string `json:"id"`
	// Backend is the backend that holds the group.
	Backend string `json:"backend"`
	// Region is the region of the group and of its instances.
	Region string `json:"region"`
	// ProviderID is the provider's name or id of the group, once created.
	ProviderID string `json:"provider_id,omitempty"`
}

// Volume is a network or instance volume.
type Volume struct {
	bun.BaseModel `bun:"table:volumes"`

	// ID is the volume's UUID.
	ID string `bun:"id,pk"`
	// Project is the owning project.
	Project string `bun:"project,notnull"`
	// Name is the volume name.
	Name string `bun:"name,notnull"`
	// Spec is the volume spec as JSON.
	Spec json.RawMessage `bun:"spec,type:text"`
	// SpecHash identifies Spec.
	SpecHash string `bun:"spec_hash,notnull"`
	// Revision is the commit the spec came from.
	Revision string `bun:"revision,notnull"`
	// Backend is the backend that holds the volume.
	Backend string `bun:"backend,notnull"`
	// Region is the backend region.
	Region string `bun:"region,notnull"`
	// ExternalID is the backend's volume ID.
	ExternalID string `bun:"external_id,notnull"`
	// SizeGB is the volume size in GB.
	SizeGB float64 `bun:"size_gb,notnull"`
	// ProvisioningData is backend detail, as JSON.
	ProvisioningData json.RawMessage `bun:"provisioning_data,type:text"`
	// Status is one of the Volume* constants.
	Status string `bun:"status,notnull"`
	// StatusMessage explains Status to people.
	StatusMessage string `bun:"status_message,notnull"`
	// ToBeDeleted asks the volume pipeline to delete the volume.
	ToBeDeleted bool `bun:"to_be_deleted,notnull"`
	// Deleted hides a deleted volume.
	Deleted bool `bun:"deleted,notnull"`
	// RemovedFromGit marks a volume whose spec left the repository.
	RemovedFromGit bool `bun:"removed_from_git,notnull"`
	// LastJobProcessedAt is when a job last used the volume (idle clean-up).
	LastJobProcessedAt time.Time `bun:"last_job_processed_at,nullzero"`
	// Version guards updates (optimistic concurrency).
	Version int64 `bun:"version,notnull"`
	// CreatedAt is when the row was created.
	CreatedAt time.Time `bun:"created_at,notnull"`
	// UpdatedAt is when the row was last written.
	UpdatedAt time.Time `bun:"updated_at,notnull"`
	LeaseColumns
}

// VolumeAttachment records that a volume is attached to an instance.
type VolumeAttachment struct {
	bun.BaseModel `bun:"table:volume_attachments"`

	// VolumeID is the attached volume.
	VolumeID string `bun:"volume_id,pk"`
	// InstanceID is the instance it is attached to.
	InstanceID string `bun:"instance_id,pk"`
	// AttachmentData is backend detail (e.g. the device name), as JSON.
	AttachmentData json.RawMessage `bun:"attachment_data,type:text"`
	// CreatedAt is when the attachment was recorded.
	CreatedAt time.Time `bun:"created_at,notnull"`
}

// Gateway is a service gateway (ingress) instance.
type Gateway struct {
	bun.BaseModel `bun:"table:gateways"`

	// ID is the gateway's UUID.
	ID string `bun:"id,pk"`
	// Project is the owning project.
	Project string `bun:"project,notnull"`
	// Name is the gateway name.
	Name string `bun:"name,notnull"`
	// Spec is the gateway spec as JSON.
	Spec json.RawMessage `bun:"spec,type:text"`
	// SpecHash identifies Spec.
	SpecHash string `bun:"spec_hash,notnull"`
	// Revision is the commit the spec came from.
	Revision string `bun:"revision,notnull"`
	// Backend is the backend that runs the gateway.
	Backend string `bun:"backend,notnull"`
	// Region is the backend region.
	Region string `bun:"region,notnull"`
	// Hostname is the gateway's public host name.
	Hostname string `bun:"hostname,notnull"`
	// IPAddress is the gateway's public address.
	IPAddress string `bun:"ip_address,notnull"`
	// SSHPort is the gateway's SSH port.
	SSHPort int `bun:"ssh_port,notnull"`
	// HostKey is the pinned SSH host public key.
	HostKey string `bun:"host_key,notnull"`
	// BackendData is the backend's handle, as JSON.
	BackendData json.RawMessage `bun:"backend_data,type:text"`
	// OwnershipTags are the tags hoist put on cloud resources.
	OwnershipTags map[string]string `bun:"ownership_tags,type:text"`
	// InstanceID is hoist's id of the gateway's instance at its backend,
	// persisted before the backend is asked to create it; empty before.
	InstanceID string `bun:"instance_id,notnull"`
	// AdminURL is the gateway's admin API as seen from its instance
	// (backends.GatewayEndpoint.AdminURL); empty until it started.
	AdminURL string `bun:"admin_url,notnull"`
	// AdminToken is the gateway's admin token sealed with the server's
	// secret key (SealGatewayToken); never the plaintext.
	AdminToken string `bun:"admin_token,notnull"`
	// ConfigVersion is the version of the configuration last put to the
	// gateway (api.GatewayConfig.Version).
	ConfigVersion int64 `bun:"config_version,notnull"`
	// ConfigHash identifies the content of that configuration.
	ConfigHash string `bun:"config_hash,notnull"`
	// HTTPPort and HTTPSPort are the ports of the gateway's public
	// listeners (backends.GatewayEndpoint); 0 until it started. Services'
	// URLs name a port other than 80 and 443.
	HTTPPort  int `bun:"http_port,notnull"`
	HTTPSPort int `bun:"https_port,notnull"`
	// Status is one of the Gateway* constants.
	Status string `bun:"status,notnull"`
	// StatusMessage explains Status to people.
	StatusMessage string `bun:"status_message,notnull"`
	// Deleted hides a deleted gateway.
	Deleted bool `bun:"deleted,notnull"`
	// RemovedFromGit marks a gateway whose spec left the repository.
	RemovedFromGit bool `bun:"removed_from_git,notnull"`
	// Version guards updates (optimistic concurrency).
	Version int64 `bun:"version,notnull"`
	// CreatedAt is when the row was created.
	CreatedAt time.Time `bun:"created_at,notnull"`
	// UpdatedAt is when the row was last written.
	UpdatedAt time.Time `bun:"updated_at,notnull"`
	LeaseColumns
}

// Event is one line of history about an object.
type Event struct {
	bun.BaseModel `bun:"table:events"`

	// ID is a time-ordered UUID (version 7).
	ID string `bun:"id,pk"`
	// Project is the project the object belongs to (DefaultProject when
	// empty).
	Project string `bun:"project,notnull"`
	// Time is when it happened.
	Time time.Time `bun:"time,notnull"`
	// ObjectKind is the kind of object, e.g. "run", "job", "instance", "sync".
	ObjectKind string `bun:"object_kind,notnull"`
	// ObjectName is the object's name.
	ObjectName string `bun:"object_name,notnull"`
	// ObjectID is the object's ID.
	ObjectID string `bun:"object_id,notnull"`
	// Type classifies the event, e.g. "created", "status", "deleted".
	Type string `bun:"type,notnull"`
	// Message is the human-readable text.
	Message string `bun:"message,notnull"`
	// Revision is the Git revision that caused it, if any.
	Revision string `bun:"revision,notnull"`
}
