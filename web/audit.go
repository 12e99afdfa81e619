package web

import (
	"context"
	"net/http"
	"time"

	"github.com/labstack/echo/v5"
)

// Auditor is an optional Controller capability: the project's audit of
// what the providers hold against what the store holds (GET
// /api/v1/audit). Without it that route answers 501.
type Auditor interface {
	// Audit computes the project's audit report now.
	Audit(ctx context.Context) (Audit, error)
}

// Audit is one audit of a project (GET /api/v1/audit): what the
// providers hold with this installation's and project's tags that the
// store does not know (Leaked), what the store holds as existing that the
// providers do not have (Lost), what must exist once and exists twice
// (Duplicated), and the backends that could not be listed (Errors: their
// resources are not counted as none).
type Audit struct {
	Project      string `json:"project"`
	CheckedAt    string `json:"checked_at"`
	GraceSeconds int64  `json:"grace_seconds"`
	// Leaked are deleted by the periodic audit once past their ReapAt.
	Leaked     []AuditLeaked    `json:"leaked"`
	Lost       []AuditLost      `json:"lost"`
	Duplicated []AuditDuplicate `json:"duplicated"`
	Errors     []AuditError     `json:"errors"`
}

// Clean reports whether the audit found nothing leaked, lost or
// duplicated.
func (a Audit) Clean() bool {
	return len(a.Leaked) == 0 && len(a.Lost) == 0 && len(a.Duplicated) == 0
}

// AuditLeaked is a provider resource with the installation's and
// project's ownership tags that the store does not know.
type AuditLeaked struct {
	Backend string `json:"backend"`
	// Kind is instance, volume or placement_group.
	Kind       string `json:"kind"`
	ID         string `json:"id"`
	ProviderID string `json:"provider_id"`
	// CreatedAt is when the provider created it (RFC 3339), "" when
	// unknown.
	CreatedAt string `json:"created_at"`
	// AgeSeconds is its age at CheckedAt (0 when unknown).
	AgeSeconds int64 `json:"age_seconds"`
	// ReapAt is when the periodic audit deletes it (RFC 3339).
	ReapAt string `json:"reap_at"`
}

// AuditLost is a resource the store holds as existing that the provider
// does not have.
type AuditLost struct {
	Backend string `json:"backend"`
	// Kind is instance or volume.
	Kind       string `json:"kind"`
	ID         string `json:"id"`
	Name       string `json:"name"`
	ProviderID string `json:"provider_id"`
	// Status is its status in the store.
	Status string `json:"status"`
	// Owner is its fleet (instances) or its name (volumes).
	Owner string `json:"owner"`
	// Action says what the reconciler does about it.
	Action string `json:"action"`
}

// AuditDuplicate is something that must exist once and exists more often.
type AuditDuplicate struct {
	// Kind is job, instance or volume.
	Kind    string   `json:"kind"`
	Run     string   `json:"run,omitempty"`
	Job     string   `json:"job,omitempty"`
	IDs     []string `json:"ids"`
	Message string   `json:"message"`
}

// AuditError is a backend (and kind) the audit could not list.
type AuditError struct {
	Backend string `json:"backend"`
	Kind    string `json:"kind,omitempty"`
	Error   string `json:"error"`
}

// AuditTime formats t as the audit's times are: RFC 3339 in UTC, "" for
// the zero time.
func AuditTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

// apiAudit answers GET /api/v1/audit with the project's audit, computed
// now (its managers and the global admins only: it names every resource
// of the project at its providers).
func (s *Server) apiAudit(c *echo.Context) error {
	a, ok := s.proj(c).Controller.(Auditor)
	if !ok {
		return echo.NewHTTPError(http.StatusNotImplemented, "this server has no audit")
	}
	rep, err := a.Audit(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, rep)
}
