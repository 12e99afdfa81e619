package web

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"time"

	"hoist/reconciler/plan"
)

// ErrNotFound is returned by a Store (or wrapped by it) when the named object
// does not exist; handlers answer 404 for it.
var ErrNotFound = errors.New("not found")

// Run is the web's view of one run: a task, service or dev environment
// declared in Git, with its jobs newest first.
type Run struct {
	// Name is the run name from the spec.
	Name string `json:"name"`
	// Type is task, service or dev-environment.
	Type string `json:"type"`
	// Status is dstack's run status (pending … done).
	Status string `json:"status"`
	// StatusMessage explains Status to people.
	StatusMessage string `json:"status_message"`
	// TerminationReason is dstack's reason once the run ended.
	TerminationReason string `json:"termination_reason,omitempty"`
	// Revision is the Git revision the run was submitted from.
	Revision string `json:"revision"`
	// Fleet is the fleet the run was placed on.
	Fleet string `json:"fleet,omitempty"`
	// CostPerHour is what the run's active instances cost per hour (USD).
	CostPerHour float64 `json:"cost_per_hour"`
	// Suspended is true while reconciling the run is suspended.
	Suspended bool `json:"suspended"`
	// RemovedFromGit is true once its spec was deleted from Git.
	RemovedFromGit bool `json:"removed_from_git"`
	// ModelURL is the base URL of a service run's `model` (dstack's model
	// base_url; set by GetRun): at its gateway, whose ServiceURL is then
	// the gateway's, http[s]://<run>.<domain>/, or on hoist's proxy; empty
	// without a model.
	ModelURL string `json:"model_url,omitempty"`
	// ServiceURL is the path of a service run's URL on hoist's proxy
	// (/proxy/services/main/<run>/), prefixed with Config.ExternalURL when
	// set; empty for other runs.
	ServiceURL string `json:"service_url,omitempty"`
	// IDEURL is a dev environment's IDE deep link (dstack's
	// vscode://vscode-remote/ssh-remote+<run>/<working dir>, and the
	// cursor:// and windsurf:// forms), for the host `hoist attach` writes
	// to ~/.ssh/config; empty for other runs and without `ide` (set by
	// GetRun).
	IDEURL string `json:"ide_url,omitempty"`
	// Service is a service run's dashboard: replicas with their probe
	// state, requests per second and their history (set by the run page
	// and GET /api/v1/runs/{name} when the server has ServiceStatuses).
	Service *ServiceStatus `json:"service,omitempty"`
	// Warnings name fields of the run's spec that have no effect in hoist
	// (from its revision; set by GetRun only).
	Warnings []string `json:"warnings,omitempty"`
	// SubmittedAt is when the run was submitted.
	SubmittedAt time.Time `json:"submitted_at"`
	// UpdatedAt is when the run last changed.
	UpdatedAt time.Time `json:"updated_at"`
	// Spec is the normalized spec (set by GetRun only).
	Spec json.RawMessage `json:"spec,omitempty"`
	// Jobs are the run's submissions, newest first (set by GetRun only).
	Jobs []Job `json:"jobs"`
}

// Job is one submission of a run's job: every retry or replacement is a new
// submission with its own id.
type Job struct {
	// ID is the job row's id; log reads and ?job= use it.
	ID string `json:"id"`
	// SubmissionID names this submission (equal to ID in hoist's store).
	SubmissionID string `json:"submission_id"`
	// SubmissionNum counts retries of the same job, from 0.
	SubmissionNum int `json:"submission_num"`
	// JobName is dstack's job name (run-replica-job).
	JobName string `json:"job_name,omitempty"`
	// Group is the name of the node group the job is a node of, for a
	// task with groups.
	Group string `json:"group,omitempty"`
	// JobNum is the job's number in its run (a node's rank, a workflow
	// job's place).
	JobNum int `json:"job_num"`
	// WorkflowJob is a workflow job's name ("provider" for the provider's
	// program), and DependsOn the jobs it waits for.
	WorkflowJob string   `json:"workflow_job,omitempty"`
	DependsOn   []string `json:"depends_on,omitempty"`
	// Status is dstack's job status (submitted … done).
	Status string `json:"status"`
	// StatusMessage explains Status to people.
	StatusMessage string `json:"status_message,omitempty"`
	// ExitCode is the process's exit code; nil until it exited.
	ExitCode *int `json:"exit_code"`
	// TerminationReason is dstack's reason once the job ended.
	TerminationReason string `json:"termination_reason,omitempty"`
	// TerminationMessage explains TerminationReason to people.
	TerminationMessage string `json:"termination_message,omitempty"`
	// Revision is set on submissions of an earlier run of the same name
	// (replaced by a newer revision).
	Revision string `json:"revision,omitempty"`
	// Instance is the name of the instance the job ran on.
	Instance string `json:"instance,omitempty"`
	// Price is that instance's price per hour (USD).
	Price float64 `json:"price"`
	// SubmittedAt is when the submission was made.
	SubmittedAt time.Time `json:"submitted_at"`
	// StartedAt is when the job started running; nil before.
	StartedAt *time.Time `json:"started_at,omitempty"`
	// FinishedAt is when the job ended; nil before.
	FinishedAt *time.Time `json:"finished_at,omitempty"`
	// RunName is set by ListJobs, which returns jobs of many runs.
	RunName string `json:"run_name,omitempty"`
	// Metrics are an unfinished job's CPU, memory and GPU samples in the
	// server's window, oldest first (set by GET /api/v1/runs/{name} when
	// the server has JobMetrics).
	Metrics []MetricsPoint `json:"metrics,omitempty"`
}

// LogLine is one line of a job's output. Seq increases strictly per job and
// is the cursor for paging and following.
type LogLine struct {
	Seq    int64     `json:"seq"`
	Time   time.Time `json:"time"`
	Stream string    `json:"stream,omitempty"`
	Text   string    `json:"text"`
	// Partial: the job's output had no newline here (the runner records
	// an incomplete line after a pause in the output); the next line
	// continues it, and the plain-text log adds no newline after it.
	Partial bool `json:"partial,omitempty"`
}

// RunFilter narrows ListRuns; empty fields match everything.
type RunFilter struct {
	Status string
	Type   string
	Fleet  string
	// Limit caps the result; 0 means no limit.
	Limit int
	// Offset skips that many runs of the ordered result.
	Offset int
}

// RunCounter is an optional Store capability: counting runs by status
// without loading them (the overview and the hoist_runs metric use it).
type RunCounter interface {
	// CountRuns returns the number of runs per status.
	CountRuns(ctx context.Context) (map[string]int, error)
}

// Accounting is an optional Store capability behind the money and health
// series of /metrics (hoist_project_spend_month_to_date_dollars and
// hoist_jobs); without it they are left out.
type Accounting interface {
	// Project names the project the store shows.
	Project() string
	// BilledInstances returns the instances, terminated and deleted ones
	// included, that had not finished before since.
	BilledInstances(ctx context.Context, since time.Time) ([]BilledInstance, error)
	// CountJobs returns how many job submissions have each status on each
	// backend.
	CountJobs(ctx context.Context) ([]JobCount, error)
}

// BilledInstance is an instance's price and lifetime, what its spend is
// computed from.
type BilledInstance struct {
	Name string
	// Price is the hourly price in USD.
	Price float64
	// From is when billing started: provisioning's start, else the
	// instance's creation.
	From time.Time
	// To is when the instance finished; nil while it lives.
	To *time.Time
}

// JobCount is how many job submissions have one status on one backend
// (empty for submissions never placed).
type JobCount struct {
	Status  string
	Backend string
	N       int
}

// Event is one entry of the audit trail the reconciler writes.
type Event struct {
	ID       string    `json:"id"`
	Time     time.Time `json:"time"`
	Kind     string    `json:"kind"`
	Name     string    `json:"name"`
	Revision string    `json:"revision,omitempty"`
	Type     string    `json:"type"`
	Message  string    `json:"message"`
}

// EventFilter narrows ListEvents; empty fields match everything.
type EventFilter struct {
	Kind     string
	Name     string
	Revision string
	Limit    int
}

// SyncStatus is the state of the Git source as the API reports it.
type SyncStatus struct {
	// Status is synced, syncing or invalid.
	Status string `json:"status"`
	// Revision is the applied revision.
	Revision string `json:"revision"`
	// LatestRevision is the newest revision of the source.
	LatestRevision string `json:"latest_revision"`
	// Errors say why the latest revision was rejected, as
	// "path:line:col: message".
	Errors []string `json:"errors"`
	// Held reports that the latest revision's plan, or some of its steps,
	// waits for a user's confirmation (Confirmer).
	Held bool `json:"held"`
	// HeldReasons say what is held and why, one line each.
	HeldReasons []string `json:"held_reasons"`
	// Repo is the source's URL or directory.
	Repo string `json:"repo,omitempty"`
	// Branch is the tracked branch.
	Branch string `json:"branch,omitempty"`
	// Path is the directory of specs inside the repository.
	Path string `json:"path,omitempty"`
	// AutoSync is false while syncing from Git is suspended.
	AutoSync bool `json:"auto_sync"`
	// LastSyncAt is when the last sync finished.
	LastSyncAt *time.Time `json:"last_sync_at,omitempty"`
	// Error is why the last sync attempt failed, e.g. "data directory
	// <dir> is full: N bytes free, below the minimum M"; absent once one
	// succeeds.
	Error string `json:"error,omitempty"`
}

// Sync statuses.
const (
	SyncSynced  = "synced"
	SyncSyncing = "syncing"
	SyncInvalid = "invalid"
)

// Role is what a principal may do in a project, as dstack's project roles
// (admin, manager, user) plus a read-only viewer; a principal's global Role
// is RoleAdmin (every project, users and tokens) or RoleUser (only the
// projects it is a member of).
type Role string

// Roles, most privileged first.
const (
	RoleAdmin   Role = "admin"
	RoleManager Role = "manager"
	RoleUser    Role = "user"
	RoleViewer  Role = "viewer"
)

// rank orders roles: a higher rank may do everything a lower one may.
func (r Role) rank() int {
	switch r {
	case RoleAdmin:
		return 4
	case RoleManager:
		return 3
	case RoleUser:
		return 2
	case RoleViewer:
		return 1
	}
	return 0
}

// CanRead reports whether the role may see the project at all.
func (r Role) CanRead() bool { return r.rank() >= RoleViewer.rank() }

// CanAct reports whether the role may change state (sync, stop, re-run).
func (r Role) CanAct() bool { return r.rank() >= RoleUser.rank() }

// CanManage reports whether the role may manage the project's secrets,
// members and held plans.
func (r Role) CanManage() bool { return r.rank() >= RoleManager.rank() }

// Principal is an authenticated caller.
type Principal struct {
	Name string `json:"name"`
	// Role is the global role: RoleAdmin has every role in every project.
	Role Role `json:"role"`
	// Projects are the caller's roles by project name.
	Projects map[string]Role `json:"projects,omitempty"`
}

// RoleIn is the caller's role in the named project: admin for a global
// admin, else its membership's role, else "" (no access).
func (p Principal) RoleIn(project string) Role {
	if p.Role == RoleAdmin {
		return RoleAdmin
	}
	return p.Projects[project]
}

// Store is the read side of hoist's state that the web serves. *store.Store
// (through a thin adapter in cmd/hoist) satisfies it.
type Store interface {
	// ListRuns returns runs matching f, most recently submitted first,
	// without jobs or spec.
	ListRuns(ctx context.Context, f RunFilter) ([]Run, error)
	// GetRun returns the named run with its jobs (newest first) and its
	// normalized spec; ErrNotFound when it does not exist.
	GetRun(ctx context.Context, name string) (Run, error)
	// ReadLogs returns up to limit lines of the job with Seq > afterSeq,
	// oldest first.
	ReadLogs(ctx context.Context, jobID string, afterSeq int64, limit int) ([]LogLine, error)
	// ListEvents returns events matching f, newest first.
	ListEvents(ctx context.Context, f EventFilter) ([]Event, error)
	// ListJobs returns submissions of all runs that were active at some
	// point after f.Since (for spend charts), newest first.
	ListJobs(ctx context.Context, f JobFilter) ([]Job, error)
	// ListRevisions returns the revisions hoist has seen, newest first.
	ListRevisions(ctx context.Context, limit int) ([]Revision, error)
	// GetRevision returns one revision by full sha; ErrNotFound otherwise.
	GetRevision(ctx context.Context, sha string) (Revision, error)
}

// JobFilter narrows ListJobs.
type JobFilter struct {
	// Since drops jobs that finished before it.
	Since time.Time
	Limit int
}

// Revision is one commit (or dev-mode content hash) hoist has seen.
type Revision struct {
	SHA         string    `json:"sha"`
	Message     string    `json:"message"`
	Author      string    `json:"author"`
	CommittedAt time.Time `json:"committed_at"`
	SeenAt      time.Time `json:"seen_at"`
	Valid       bool      `json:"valid"`
	Errors      []string  `json:"errors"`
	// ServiceURL is the path of a service run's URL on hoist's proxy
	// (/proxy/services/main/<run>/), prefixed with Config.ExternalURL when
	// set; empty for other runs.
	ServiceURL string `json:"service_url,omitempty"`
	// Service is a service run's dashboard: replicas with their probe
	// state, requests per second and their history (set by the run page
	// and GET /api/v1/runs/{name} when the server has ServiceStatuses).
	Service *ServiceStatus `json:"service,omitempty"`
	// Warnings name fields of a valid revision that have no effect in
	// hoist, one positioned message each.
	Warnings []string `json:"warnings"`
	// Applied reports whether this is the revision currently applied.
	Applied bool `json:"applied"`
	// Plan is the plan the revision produced when hoist applied it (nil
	// for rejected revisions).
	Plan *Plan `json:"plan,omitempty"`
}

// Fleet is a named group of instances.
type Fleet struct {
	Name          string          `json:"name"`
	Status        string          `json:"status"`
	StatusMessage string          `json:"status_message"`
	Revision      string          `json:"revision"`
	NodesMin      int             `json:"nodes_min"`
	NodesTarget   int             `json:"nodes_target"`
	NodesMax      *int            `json:"nodes_max"`
	Instances     int             `json:"instances"`
	Spec          json.RawMessage `json:"spec,omitempty"`
	CreatedAt     time.Time       `json:"created_at"`
}

// Instance is one machine of a fleet.
type Instance struct {
	Name          string     `json:"name"`
	Fleet         string     `json:"fleet"`
	Backend       string     `json:"backend"`
	Region        string     `json:"region"`
	InstanceType  string     `json:"instance_type"`
	Resources     string     `json:"resources"`
	Price         float64    `json:"price"`
	Spot          bool       `json:"spot"`
	Status        string     `json:"status"`
	StatusMessage string     `json:"status_message"`
	Reachable     bool       `json:"reachable"`
	LastSeenAt    *time.Time `json:"last_seen_at,omitempty"`
	CreatedAt     time.Time  `json:"created_at"`
}

// Volume is a network or instance volume.
type Volume struct {
	Name          string    `json:"name"`
	Backend       string    `json:"backend"`
	Region        string    `json:"region"`
	SizeGB        float64   `json:"size_gb"`
	Status        string    `json:"status"`
	StatusMessage string    `json:"status_message"`
	Revision      string    `json:"revision"`
	AttachedTo    []string  `json:"attached_to"`
	CreatedAt     time.Time `json:"created_at"`
}

// Gateway is a service gateway.
type Gateway struct {
	Name          string    `json:"name"`
	Backend       string    `json:"backend"`
	Region        string    `json:"region"`
	Domain        string    `json:"domain,omitempty"`
	Hostname      string    `json:"hostname,omitempty"`
	IPAddress     string    `json:"ip_address,omitempty"`
	Status        string    `json:"status"`
	StatusMessage string    `json:"status_message"`
	Revision      string    `json:"revision"`
	CreatedAt     time.Time `json:"created_at"`
}

// Inventory lists what hoist provisioned. Optional: without it the fleet,
// volume and gateway pages say so and their API routes answer 501.
type Inventory interface {
	ListFleets(ctx context.Context) ([]Fleet, error)
	// ListInstances returns the instances of fleet, or of all fleets when
	// fleet is empty.
	ListInstances(ctx context.Context, fleet string) ([]Instance, error)
	ListVolumes(ctx context.Context) ([]Volume, error)
	ListGateways(ctx context.Context) ([]Gateway, error)
}

// FleetNamer is an optional Inventory capability: the names of the fleets
// the project's runs were placed on, deleted fleets included, sorted,
// without loading fleets (the runs page's fleet filter uses it: a
// repository may hold thousands of fleets, most of them holding no run).
type FleetNamer interface {
	RunFleetNames(ctx context.Context) ([]string, error)
}

// Plan is what applying a revision (or a set of files) would change.
type Plan struct {
	Revision string   `json:"revision,omitempty"`
	Valid    bool     `json:"valid"`
	Errors   []string `json:"errors"`
	Changes  []Change `json:"changes"`
	// Held reports that applying waits for a user's confirmation, and
	// HeldReasons why.
	Held        bool     `json:"held"`
	HeldReasons []string `json:"held_reasons"`
	// CostBefore and CostAfter estimate the spend in dollars per hour
	// now and once the plan is applied (cheapest matching offers).
	CostBefore float64 `json:"cost_before"`
	CostAfter  float64 `json:"cost_after"`
	// Budget is the plan's verdict against its project's budget (nil when
	// the project has none).
	Budget *plan.BudgetCheck `json:"budget,omitempty"`
	// ServiceURL is the path of a service run's URL on hoist's proxy
	// (/proxy/services/main/<run>/), prefixed with Config.ExternalURL when
	// set; empty for other runs.
	ServiceURL string `json:"service_url,omitempty"`
	// Service is a service run's dashboard: replicas with their probe
	// state, requests per second and their history (set by the run page
	// and GET /api/v1/runs/{name} when the server has ServiceStatuses).
	Service *ServiceStatus `json:"service,omitempty"`
	// Warnings name fields of the planned specs that have no effect in
	// hoist, one "path:line:col: message" each; they never make a plan
	// invalid.
	Warnings []string `json:"warnings"`
}

// Change is one step of a plan.
type Change struct {
	// Action is create, update, replace, delete or none.
	Action string `json:"action"`
	Kind   string `json:"kind"`
	Name   string `json:"name"`
	Detail string `json:"detail,omitempty"`
	// CostBefore is what the resource costs now and CostAfter what it is
	// estimated to cost once applied, in dollars per hour; nil when
	// unknown.
	CostBefore *float64 `json:"cost_before,omitempty"`
	CostAfter  *float64 `json:"cost_after,omitempty"`
	// Jobs are a workflow's jobs, in the provider's order.
	Jobs []ChangeJob `json:"jobs,omitempty"`
}

// ChangeJob is one job of a planned workflow.
type ChangeJob struct {
	Name      string   `json:"name"`
	Image     string   `json:"image,omitempty"`
	DependsOn []string `json:"depends_on,omitempty"`
	Master    string   `json:"master,omitempty"`
	Artifacts []string `json:"artifacts,omitempty"`
	// PricePerHour is the job's estimated price, when an offer prices it.
	PricePerHour *float64 `json:"price_per_hour,omitempty"`
}

// Planner computes plans without applying them and reads normalized specs
// of past revisions. Optional: without it plan routes answer 501 and the
// history page shows no diffs.
type Planner interface {
	// PlanFiles validates and plans the given spec files (path → content)
	// as if they were the whole desired state.
	PlanFiles(ctx context.Context, files map[string][]byte) (Plan, error)
	// PlanRevision fetches ref (e.g. refs/pull/7/head) at sha and plans it.
	PlanRevision(ctx context.Context, ref, sha string) (Plan, error)
	// SpecsAt returns the normalized specs of revision sha keyed by
	// "kind/name"; the value is pretty-printable JSON.
	SpecsAt(ctx context.Context, sha string) (map[string]json.RawMessage, error)
}

// Controller carries out the dashboard's and API's actions. Optional:
// without it action routes answer 501 and buttons are hidden.
type Controller interface {
	// StopRun stops the named run; it stays stopped until its spec changes
	// or it is re-run. A graceful stop gives its jobs their stop_duration;
	// abort kills them at once and ends the run as aborted_by_user
	// (dstack's `stop --abort`).
	StopRun(ctx context.Context, name string, abort bool) error
	// RerunRun submits the named run again from its current spec.
	RerunRun(ctx context.Context, name string) error
	// SetRunSuspended suspends or resumes reconciling the named run.
	SetRunSuspended(ctx context.Context, name string, suspended bool) error
	// SetAutoSync turns automatic syncing from Git on or off (global
	// suspend).
	SetAutoSync(ctx context.Context, enabled bool) error
	// ApplyRevision applies an older revision; only allowed while auto-sync
	// is off.
	ApplyRevision(ctx context.Context, sha string) error
}

// JobSSH is an optional Controller capability: SSH connections into
// running jobs, for `hoist attach` and `hoist ssh` (GET
// /api/v1/runs/{name}/ssh). Without it that route answers 501.
type JobSSH interface {
	// DialJobSSH opens an SSH connection to the runner of the job with id
	// jobID through the connection hoist holds to its instance (never a
	// public port); userKey is the connecting user's public key in
	// authorized_keys form, which the runner accepts for this connection
	// alone. hostKey is the runner's host key (authorized_keys form). It
	// fails with ErrNotFound when the job is not running.
	DialJobSSH(ctx context.Context, jobID, userKey string) (conn net.Conn, hostKey string, err error)
}

// Syncer is the reconciler's control surface that the web drives.
type Syncer interface {
	// SyncStatus reports the applied and latest revisions and any errors
	// of a rejected revision.
	SyncStatus(ctx context.Context) (SyncStatus, error)
	// RequestSync asks for a sync of the newest revision and returns the
	// request's number; it never blocks. The Syncer coalesces requests:
	// those made before a sync begins are handled by it, those made while
	// it runs by exactly one more.
	RequestSync() uint64
	// WaitSynced blocks until request n was handled by a sync that began
	// after it, and returns that sync's error, or ctx's.
	WaitSynced(ctx context.Context, n uint64) error
}

// Tokens resolves API tokens. The admin token from Config is checked first
// and never reaches Tokens.
type Tokens interface {
	// LookupToken returns the principal owning the plaintext token, or
	// ErrNotFound.
	LookupToken(ctx context.Context, token string) (Principal, error)
}

// LogTailer is an optional Store capability: the last sequence number of a
// job's log, so the run page can open on the newest lines.
type LogTailer interface {
	// LastLogSeq returns the Seq of the job's last line (0 without logs).
	LastLogSeq(ctx context.Context, jobID string) (int64, error)
}

// Confirmer is an optional Controller capability: confirming the held
// changes (mass deletion, deletes of volumes and gateways) of a revision's
// plan so the next sync applies them.
type Confirmer interface {
	// ConfirmRevision lifts the holds of revision sha's plan and syncs.
	ConfirmRevision(ctx context.Context, sha string) error
}
