package web

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// ErrNotFound is returned by a Store (or wrapped by it) when the named object
// does not exist; handlers answer 404 for it.
var ErrNotFound = errors.New("not found")

// Run is the web's view of one run: a task, service or dev environment
// declared in Git, with its jobs newest first.
type Run struct {
	Name              string          `json:"name"`
	Type              string          `json:"type"`
	Status            string          `json:"status"`
	StatusMessage     string          `json:"status_message"`
	TerminationReason string          `json:"termination_reason,omitempty"`
	Revision          string          `json:"revision"`
	Fleet             string          `json:"fleet,omitempty"`
	CostPerHour       float64         `json:"cost_per_hour"`
	Suspended         bool            `json:"suspended"`
	SubmittedAt       time.Time       `json:"submitted_at"`
	UpdatedAt         time.Time       `json:"updated_at"`
	Spec              json.RawMessage `json:"spec,omitempty"`
	Jobs              []Job           `json:"jobs"`
}

// Job is one submission of a run's job: every retry or replacement is a new
// submission with its own id.
type Job struct {
	ID                string     `json:"id"`
	SubmissionID      string     `json:"submission_id"`
	SubmissionNum     int        `json:"submission_num"`
	Status            string     `json:"status"`
	ExitCode          *int       `json:"exit_code"`
	TerminationReason string     `json:"termination_reason,omitempty"`
	Instance          string     `json:"instance,omitempty"`
	SubmittedAt       time.Time  `json:"submitted_at"`
	FinishedAt        *time.Time `json:"finished_at,omitempty"`
	// Transitions lists the statuses the submission went through, oldest
	// first; the run timeline draws them.
	Transitions []Transition `json:"transitions,omitempty"`
}

// Transition records that a submission entered Status at At.
type Transition struct {
	Status string    `json:"status"`
	At     time.Time `json:"at"`
}

// LogLine is one line of a job's output. Seq increases strictly per job and
// is the cursor for paging and following.
type LogLine struct {
	Seq    int64     `json:"seq"`
	Time   time.Time `json:"time"`
	Stream string    `json:"stream,omitempty"`
	Text   string    `json:"text"`
}

// RunFilter narrows ListRuns; empty fields match everything.
type RunFilter struct {
	Status string
	Type   string
	Fleet  string
	Limit  int
}

// Event is one entry of the audit trail the reconciler writes.
type Event struct {
	ID       int64     `json:"id"`
	Time     time.Time `json:"time"`
	Kind     string    `json:"kind"`
	Name     string    `json:"name"`
	Revision string    `json:"revision,omitempty"`
	Type     string    `json:"type"`
	Reason   string    `json:"reason,omitempty"`
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
	Status         string     `json:"status"` // synced | syncing | invalid
	Revision       string     `json:"revision"`
	LatestRevision string     `json:"latest_revision"`
	Errors         []string   `json:"errors"`
	Repo           string     `json:"repo,omitempty"`
	Branch         string     `json:"branch,omitempty"`
	Path           string     `json:"path,omitempty"`
	AutoSync       bool       `json:"auto_sync"`
	LastSyncAt     *time.Time `json:"last_sync_at,omitempty"`
}

// Sync statuses.
const (
	SyncSynced  = "synced"
	SyncSyncing = "syncing"
	SyncInvalid = "invalid"
)

// Role is what a principal may do: admins and users act, viewers only read.
type Role string

// Roles, most privileged first.
const (
	RoleAdmin  Role = "admin"
	RoleUser   Role = "user"
	RoleViewer Role = "viewer"
)

// CanAct reports whether the role may change state (sync, stop, re-run).
func (r Role) CanAct() bool { return r == RoleAdmin || r == RoleUser }

// Principal is an authenticated caller.
type Principal struct {
	Name string `json:"name"`
	Role Role   `json:"role"`
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
}

// Syncer is the reconciler's control surface that the web drives.
type Syncer interface {
	// SyncStatus reports the applied and latest revisions and any errors
	// of a rejected revision.
	SyncStatus(ctx context.Context) (SyncStatus, error)
	// Sync resolves the newest revision of the source and reconciles it
	// once, returning when done. The web never calls it concurrently with
	// itself and coalesces bursts of requests into one call.
	Sync(ctx context.Context) error
}

// Tokens resolves API tokens. The admin token from Config is checked first
// and never reaches Tokens.
type Tokens interface {
	// LookupToken returns the principal owning the plaintext token, or
	// ErrNotFound.
	LookupToken(ctx context.Context, token string) (Principal, error)
}
