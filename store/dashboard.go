package store

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/uptrace/bun"
)

// RunSummary is the part of a run that a list of runs shows: no spec, no
// lease, so listing a thousand runs reads little.
type RunSummary struct {
	bun.BaseModel `bun:"table:runs"`

	// ID is the run's UUID.
	ID string `bun:"id,pk"`
	// Name is the run name.
	Name string `bun:"name"`
	// Type is "task", "service", "dev-environment" or "workflow".
	Type string `bun:"type"`
	// Status is one of the Run* constants.
	Status string `bun:"status"`
	// StatusMessage is what people see.
	StatusMessage string `bun:"status_message"`
	// TerminationReason is dstack's RunTerminationReason, once terminating.
	TerminationReason string `bun:"termination_reason"`
	// Revision is the commit the run was submitted from.
	Revision string `bun:"revision"`
	// FleetID is the fleet the run was placed on, if any.
	FleetID string `bun:"fleet_id"`
	// SubmittedAt is when the run was submitted.
	SubmittedAt time.Time `bun:"submitted_at"`
	// UpdatedAt is when the row was last written.
	UpdatedAt time.Time `bun:"updated_at"`
	// RemovedFromGit marks a run whose resource left the repository.
	RemovedFromGit bool `bun:"removed_from_git"`
}

// RunSummaryFilter selects runs in ListRunSummaries; zero fields match all.
type RunSummaryFilter struct {
	// Project keeps runs of this project (DefaultProject when empty).
	Project string
	// Status keeps runs with this status.
	Status string
	// Type keeps runs of this type.
	Type string
	// Fleet keeps runs placed on a fleet of this name in the project
	// (deleted fleets included).
	Fleet string
	// Limit caps the result; zero means no cap.
	Limit int
	// Offset skips that many runs first (for paging).
	Offset int
}

// ListRunSummaries returns the summaries of the project's runs that are
// not deleted, newest submission first.
func (s *Store) ListRunSummaries(ctx context.Context, f RunSummaryFilter) ([]RunSummary, error) {
	rs := []RunSummary{}
	q := s.db.NewSelect().Model(&rs).
		Where("project = ? AND NOT deleted", project(f.Project)).OrderExpr("submitted_at DESC, id DESC")
	if f.Status != "" {
		q = q.Where("status = ?", f.Status)
	}
	if f.Type != "" {
		q = q.Where("type = ?", f.Type)
	}
	if f.Fleet != "" {
		fleets := s.db.NewSelect().Table("fleets").Column("id").Where("project = ? AND name = ?", project(f.Project), f.Fleet)
		q = q.Where("fleet_id IN (?)", fleets)
	}
	switch {
	case f.Limit > 0:
		q = q.Limit(int64(f.Limit))
	case f.Offset > 0:
		// SQLite accepts OFFSET only after a LIMIT
		// (https://www.sqlite.org/lang_select.html#limitoffset), and bun
		// writes no LIMIT for zero or less.
		q = q.Limit(math.MaxInt64)
	}
	if f.Offset > 0 {
		q = q.Offset(int64(f.Offset))
	}
	if err := q.Scan(ctx); err != nil {
		return nil, fmt.Errorf("list run summaries: %w", err)
	}
	return rs, nil
}

// CountRunsByStatus counts the project's runs that are not deleted, by
// status; statuses without runs are absent.
func (s *Store) CountRunsByStatus(ctx context.Context, proj string) (map[string]int, error) {
	var rows []struct {
		Status string `bun:"status"`
		N      int    `bun:"n"`
	}
	err := s.db.NewSelect().Table("runs").ColumnExpr("status, count(*) AS n").
		Where("project = ? AND NOT deleted", project(proj)).Group("status").Scan(ctx, &rows)
	if err != nil {
		return nil, fmt.Errorf("count runs by status: %w", err)
	}
	out := make(map[string]int, len(rows))
	for _, r := range rows {
		out[r.Status] = r.N
	}
	return out, nil
}

// FleetNames maps the ids of the project's fleets among ids, deleted ones
// included, to their names (a list of runs or instances names the few
// fleets they are on, not the thousands a repository may hold).
func (s *Store) FleetNames(ctx context.Context, proj string, ids []string) (map[string]string, error) {
	if len(ids) == 0 {
		return map[string]string{}, nil
	}
	var fs []struct {
		ID   string `bun:"id"`
		Name string `bun:"name"`
	}
	err := s.db.NewSelect().Table("fleets").Column("id", "name").
		Where("project = ? AND id IN (?)", project(proj), bun.In(ids)).Scan(ctx, &fs)
	if err != nil {
		return nil, fmt.Errorf("list fleet names: %w", err)
	}
	out := make(map[string]string, len(fs))
	for _, f := range fs {
		out[f.ID] = f.Name
	}
	return out, nil
}

// RunFleetNames returns, sorted, the names of project proj's fleets,
// deleted ones included, that its runs that are not deleted were placed
// on: the fleets by which a list of runs can be filtered, as many as the
// runs at most however many fleets the repository holds.
func (s *Store) RunFleetNames(ctx context.Context, proj string) ([]string, error) {
	names := []string{}
	placed := s.db.NewSelect().Table("runs").Column("fleet_id").
		Where("project = ? AND NOT deleted AND fleet_id <> ''", project(proj))
	err := s.db.NewSelect().Table("fleets").ColumnExpr("DISTINCT name").
		Where("project = ? AND id IN (?)", project(proj), placed).
		OrderExpr("name").Scan(ctx, &names)
	if err != nil {
		return nil, fmt.Errorf("list run fleet names: %w", err)
	}
	return names, nil
}

// Occupancy is one unfinished job placed on an instance, with what the
// instance costs: the rows from which the spend per run is priced.
type Occupancy struct {
	// RunID is the job's run.
	RunID string `bun:"run_id"`
	// InstanceID is the instance the job occupies.
	InstanceID string `bun:"instance_id"`
	// InstanceStatus is the instance's status (one of the Instance*
	// constants); whether it is billed depends on it.
	InstanceStatus string `bun:"instance_status"`
	// Price is the instance's price per hour.
	Price float64 `bun:"price"`
}

// ListOccupancy returns, for every project, each unfinished job that is
// placed on an instance that exists, with that instance's status and price.
func (s *Store) ListOccupancy(ctx context.Context) ([]Occupancy, error) {
	out := []Occupancy{}
	err := s.db.NewSelect().TableExpr("jobs AS j").Join("JOIN instances AS i ON i.id = j.instance_id").
		ColumnExpr("j.run_id AS run_id, j.instance_id AS instance_id, i.status AS instance_status, i.price AS price").
		// The index jobs_occupancy_idx (migration 20261127050001) has
		// this WHERE as its predicate: change both together.
		Where("j.instance_id <> '' AND j.status NOT IN (?)", bun.In([]string{JobTerminated, JobAborted, JobFailed, JobDone})).
		OrderExpr("j.instance_id, j.run_id").
		Scan(ctx, &out)
	if err != nil {
		return nil, fmt.Errorf("list occupancy: %w", err)
	}
	return out, nil
}

// ListRecentJobs returns job submissions of every run that are unfinished
// or finished at or after since (all of them when since is zero), newest
// submission first, at most limit of them (no cap when zero).
func (s *Store) ListRecentJobs(ctx context.Context, since time.Time, limit int) ([]Job, error) {
	js := []Job{}
	q := s.db.NewSelect().Model(&js).OrderExpr("submitted_at DESC, submission_num DESC, id DESC")
	if !since.IsZero() {
		q = q.Where("finished_at IS NULL OR finished_at >= ?", since.UTC())
	}
	if limit > 0 {
		q = q.Limit(int64(limit))
	}
	if err := q.Scan(ctx); err != nil {
		return nil, fmt.Errorf("list recent jobs: %w", err)
	}
	return js, nil
}

// JobCount is how many job submissions of a project have one status on
// one backend (Backend is empty for submissions never placed).
type JobCount struct {
	Status  string `bun:"status"`
	Backend string `bun:"backend"`
	N       int    `bun:"n"`
}

// CountJobsByStatusBackend counts the job submissions of the project's
// runs (runs replaced or deleted left out, as CountRunsByStatus does) by
// status and backend.
func (s *Store) CountJobsByStatusBackend(ctx context.Context, proj string) ([]JobCount, error) {
	out := []JobCount{}
	err := s.db.NewSelect().TableExpr("jobs AS j").Join("JOIN runs AS r ON r.id = j.run_id").
		ColumnExpr("j.status AS status, j.backend AS backend, count(*) AS n").
		Where("r.project = ? AND NOT r.deleted", project(proj)).
		GroupExpr("j.status, j.backend").Scan(ctx, &out)
	if err != nil {
		return nil, fmt.Errorf("count jobs by status and backend: %w", err)
	}
	return out, nil
}

// ListInstancesBilledSince returns the project's instances, deleted ones
// included, that had not finished before since: those that may have been
// billed at some point after it.
func (s *Store) ListInstancesBilledSince(ctx context.Context, proj string, since time.Time) ([]Instance, error) {
	is := []Instance{}
	err := s.db.NewSelect().Model(&is).Where("project = ?", project(proj)).
		Where("finished_at IS NULL OR finished_at >= ?", since.UTC()).OrderExpr("created_at, id").Scan(ctx)
	if err != nil {
		return nil, fmt.Errorf("list instances billed since: %w", err)
	}
	return is, nil
}
