package store

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/uptrace/bun"
)

// RunFilter selects runs in ListRuns; zero fields match all.
type RunFilter struct {
	// Project keeps runs of this project.
	Project string
	// Name keeps runs with this name.
	Name string
	// Status matches any of the given statuses.
	Status []string
	// Type keeps runs of this type.
	Type string
	// Active limits the list to runs whose status is not final.
	Active bool
	// IncludeDeleted also returns runs marked deleted.
	IncludeDeleted bool
	// Limit caps the result (100 when zero).
	Limit int
}

// CreateRun inserts r. It fills in ID (when empty), Project (when empty),
// Version 1, CreatedAt/UpdatedAt and SubmittedAt (when zero).
func (s *Store) CreateRun(ctx context.Context, r *Run) error {
	if r.Name == "" {
		return fmt.Errorf("create run: %w", errEmptyName)
	}
	r.Project = project(r.Project)
	now := s.Now()
	if r.SubmittedAt.IsZero() {
		r.SubmittedAt = now
	}
	return createRow(ctx, s.db, now, r)
}

// GetRun returns the run with the given id, or ErrNotFound.
func (s *Store) GetRun(ctx context.Context, id string) (Run, error) {
	var r Run
	err := getRow(ctx, s.db, &r, id)
	return r, err
}

// GetRunByName returns the latest non-deleted run with the given name in the
// project, or ErrNotFound.
func (s *Store) GetRunByName(ctx context.Context, proj, name string) (Run, error) {
	var r Run
	err := s.db.NewSelect().Model(&r).
		Where("project = ? AND name = ? AND NOT deleted", project(proj), name).
		OrderExpr("submitted_at DESC, id DESC").Limit(1).Scan(ctx)
	if err != nil {
		return r, notFound(err, "get run "+name)
	}
	return r, nil
}

// ListRuns returns runs, newest submission first.
func (s *Store) ListRuns(ctx context.Context, f RunFilter) ([]Run, error) {
	var rs []Run
	q := s.db.NewSelect().Model(&rs).OrderExpr("submitted_at DESC, id DESC").Limit(limitOr(f.Limit, 100))
	if f.Project != "" {
		q = q.Where("project = ?", f.Project)
	}
	if f.Name != "" {
		q = q.Where("name = ?", f.Name)
	}
	if len(f.Status) > 0 {
		q = q.Where("status IN (?)", bunIn(f.Status))
	}
	if f.Type != "" {
		q = q.Where("type = ?", f.Type)
	}
	if f.Active {
		q = q.Where("status NOT IN (?)", bunIn([]string{RunTerminated, RunFailed, RunDone}))
	}
	if !f.IncludeDeleted {
		q = q.Where("NOT deleted")
	}
	if err := q.Scan(ctx); err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	return rs, nil
}

// UpdateRun writes r guarded by r.Version (ErrConflict on a stale version).
// Lease columns are never written here. On success r.Version is incremented.
func (s *Store) UpdateRun(ctx context.Context, r *Run) error {
	return updateRow(ctx, s.db, s.Now(), r, nil)
}

// UpdateRunLeased is UpdateRun that also requires l to still hold the row:
// it returns ErrLeaseLost when another worker has taken it.
func (s *Store) UpdateRunLeased(ctx context.Context, l Lease, r *Run) error {
	return updateRow(ctx, s.db, s.Now(), r, &l)
}

// JobFilter selects jobs in ListJobsFiltered; zero fields match all.
type JobFilter struct {
	// Project keeps jobs of runs of this project (every project when
	// empty).
	Project string
	// RunID keeps jobs of this run.
	RunID string
	// InstanceID keeps jobs placed on this instance.
	InstanceID string
	// Status matches any of the given statuses.
	Status []string
	// Active limits the list to jobs whose status is not final.
	Active bool
	// Limit caps the result (1000 when zero).
	Limit int
}

// CreateJob inserts j (one submission of one job of a run). It fills in ID,
// Version 1, CreatedAt/UpdatedAt and SubmittedAt (when zero).
func (s *Store) CreateJob(ctx context.Context, j *Job) error {
	if j.RunID == "" {
		return fmt.Errorf("create job: run id must not be empty")
	}
	now := s.Now()
	if j.SubmittedAt.IsZero() {
		j.SubmittedAt = now
	}
	return createRow(ctx, s.db, now, j)
}

// GetJob returns the job with the given id, or ErrNotFound.
func (s *Store) GetJob(ctx context.Context, id string) (Job, error) {
	var j Job
	err := getRow(ctx, s.db, &j, id)
	return j, err
}

// ListJobs returns every submission of every job of a run, newest first.
func (s *Store) ListJobs(ctx context.Context, runID string) ([]Job, error) {
	return s.ListJobsFiltered(ctx, JobFilter{RunID: runID})
}

// ListJobsFiltered returns jobs matching f, newest submission first.
func (s *Store) ListJobsFiltered(ctx context.Context, f JobFilter) ([]Job, error) {
	var js []Job
	q := s.db.NewSelect().Model(&js).
		OrderExpr("submitted_at DESC, submission_num DESC, id DESC").Limit(limitOr(f.Limit, 1000))
	if f.RunID != "" {
		q = q.Where("run_id = ?", f.RunID)
	}
	if f.InstanceID != "" {
		q = q.Where("instance_id = ?", f.InstanceID)
	}
	if f.Project != "" {
		q = q.Where("run_id IN (SELECT id FROM runs WHERE project = ?)", f.Project)
	}
	if len(f.Status) > 0 {
		q = q.Where("status IN (?)", bunIn(f.Status))
	}
	if f.Active {
		q = q.Where("status NOT IN (?)", bunIn([]string{JobTerminated, JobAborted, JobFailed, JobDone}))
	}
	if err := q.Scan(ctx); err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	return js, nil
}

// UpdateJob writes j guarded by j.Version (ErrConflict on a stale version).
// On success j.Version is incremented.
func (s *Store) UpdateJob(ctx context.Context, j *Job) error {
	return updateRow(ctx, s.db, s.Now(), j, nil)
}

// UpdateJobLeased is UpdateJob that also requires l to still hold the row
// (ErrLeaseLost otherwise).
func (s *Store) UpdateJobLeased(ctx context.Context, l Lease, j *Job) error {
	return updateRow(ctx, s.db, s.Now(), j, &l)
}

// AssignJobLeased writes j under lease l, placed on j.InstanceID. With
// exclusive it writes only while no other active job is placed on that
// instance: it locks the instance's row first, so of two servers (or
// workers) placing jobs on one free instance at once exactly one wins and the
// other gets ErrInstanceBusy (and j is unchanged).
func (s *Store) AssignJobLeased(ctx context.Context, l Lease, j *Job, exclusive bool) error {
	if !exclusive {
		return s.UpdateJobLeased(ctx, l, j)
	}
	return s.AssignJobBlocksLeased(ctx, l, j, 1)
}

// AssignJobBlocksLeased writes j under lease l, placed on j.InstanceID,
// only while the instance's totalBlocks hold j.Blocks (all of them when
// it records none) next to the blocks its other active jobs hold
// (BusyBlocks). Like
// AssignJobLeased it locks the instance's row first, so two placements on
// the last free blocks never both win: the loser gets ErrInstanceBusy.
// totalBlocks 0 is an instance shared without a count (the server's own
// host): nothing is checked.
func (s *Store) AssignJobBlocksLeased(ctx context.Context, l Lease, j *Job, totalBlocks int) error {
	if totalBlocks == 0 {
		return s.UpdateJobLeased(ctx, l, j)
	}
	if j.InstanceID == "" {
		return fmt.Errorf("assign job %s: no instance", j.ID)
	}
	now := s.Now()
	return s.WithLease(ctx, l, func(ctx context.Context, tx bun.Tx) error {
		// A no-op write takes the instance row's lock (Postgres) or the
		// write lock (SQLite) until the transaction ends.
		if _, err := tx.NewUpdate().Table("instances").Set("version = version").
			Where("id = ?", j.InstanceID).Exec(ctx); err != nil {
			return fmt.Errorf("assign job %s: lock instance: %w", j.ID, err)
		}
		busy, err := busyBlocks(ctx, tx, j.InstanceID, j.ID, totalBlocks)
		if err != nil {
			return fmt.Errorf("assign job %s: %w", j.ID, err)
		}
		want := j.Blocks
		if want < 1 {
			want = totalBlocks
		}
		if busy+want > totalBlocks {
			return fmt.Errorf("assign job %s to instance %s (%d of %d blocks busy): %w", j.ID, j.InstanceID, busy, totalBlocks, ErrInstanceBusy)
		}
		return updateRow(ctx, tx, now, j, &l)
	})
}

// AssignJobsLeased writes the jobs of one gang (the nodes of a multi-node
// run) together or not at all, in one transaction under lease l, which
// must be the lease of one of them; the others are written guarded by
// their versions only (ErrConflict when one changed). Each job is placed
// on its InstanceID (or on none): every such instance's row is locked
// first, and when another active job outside the gang is placed on one,
// nothing is written and ErrInstanceBusy is returned. It both reserves
// instances for a gang (jobs left submitted) and assigns them.
func (s *Store) AssignJobsLeased(ctx context.Context, l Lease, jobs []*Job) error {
	if !slices.ContainsFunc(jobs, func(j *Job) bool { return j.ID == l.ID }) {
		return fmt.Errorf("assign jobs: lease %s %s is for none of them", l.Table, l.ID)
	}
	ids := make([]string, 0, len(jobs))
	for _, j := range jobs {
		ids = append(ids, j.ID)
	}
	now := s.Now()
	// Rows are written on copies, so that a failed transaction leaves the
	// callers' jobs unchanged.
	out := make([]Job, len(jobs))
	err := s.WithLease(ctx, l, func(ctx context.Context, tx bun.Tx) error {
		for _, j := range jobs {
			if j.InstanceID == "" {
				continue
			}
			if _, err := tx.NewUpdate().Table("instances").Set("version = version").
				Where("id = ?", j.InstanceID).Exec(ctx); err != nil {
				return fmt.Errorf("assign job %s: lock instance: %w", j.ID, err)
			}
			n, err := tx.NewSelect().Model((*Job)(nil)).
				Where("instance_id = ? AND id NOT IN (?) AND status NOT IN (?)", j.InstanceID, bun.In(ids),
					bun.In([]string{JobTerminated, JobAborted, JobFailed, JobDone})).Count(ctx)
			if err != nil {
				return fmt.Errorf("assign job %s: %w", j.ID, err)
			}
			if n > 0 {
				return fmt.Errorf("assign job %s to instance %s: %w", j.ID, j.InstanceID, ErrInstanceBusy)
			}
		}
		for i, j := range jobs {
			out[i] = *j
			var lease *Lease
			if j.ID == l.ID {
				lease = &l
			}
			if err := updateRow(ctx, tx, now, &out[i], lease); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for i, j := range jobs {
		*j = out[i]
	}
	return nil
}

// BusyBlocks returns the blocks of an instance of totalBlocks that its
// active jobs hold, the job except; a job that records none (placed by a
// caller that does not split instances, or waiting for the instance)
// holds them all.
func (s *Store) BusyBlocks(ctx context.Context, instanceID, except string, totalBlocks int) (int, error) {
	return busyBlocks(ctx, s.db, instanceID, except, totalBlocks)
}

func busyBlocks(ctx context.Context, db bun.IDB, instanceID, except string, totalBlocks int) (int, error) {
	var n int
	err := db.NewSelect().Model((*Job)(nil)).ColumnExpr("COALESCE(SUM(CASE WHEN blocks < 1 THEN ? ELSE blocks END), 0)", totalBlocks).
		Where("instance_id = ? AND id <> ? AND status NOT IN (?)", instanceID, except,
			bun.In([]string{JobTerminated, JobAborted, JobFailed, JobDone})).Scan(ctx, &n)
	return n, err
}

// CreateRunWithJobs inserts r and its first job submissions in one
// transaction, setting each job's RunID and RunName. When r.SubmitKey is set
// and a run with that key exists already (a retried submission, from this
// or another server), nothing is written and created is false; r and jobs
// are then left as given.
func (s *Store) CreateRunWithJobs(ctx context.Context, r *Run, jobs []Job) (created bool, err error) {
	if r.Name == "" {
		return false, fmt.Errorf("create run: %w", errEmptyName)
	}
	r.Project = project(r.Project)
	now := s.Now()
	if r.SubmittedAt.IsZero() {
		r.SubmittedAt = now
	}
	run := *r
	js := slices.Clone(jobs)
	err = s.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if run.SubmitKey != "" {
			n, err := tx.NewSelect().Model((*Run)(nil)).Where("submit_key = ?", run.SubmitKey).Count(ctx)
			if err != nil {
				return fmt.Errorf("create run %s: %w", run.Name, err)
			}
			if n > 0 {
				return errDuplicate
			}
		}
		if err := createRow(ctx, tx, now, &run); err != nil {
			return err
		}
		for i := range js {
			js[i].RunID, js[i].RunName = run.ID, run.Name
			if js[i].SubmittedAt.IsZero() {
				js[i].SubmittedAt = now
			}
			if err := createRow(ctx, tx, now, &js[i]); err != nil {
				return err
			}
		}
		return nil
	})
	switch {
	case errors.Is(err, errDuplicate):
		return false, nil
	case errors.Is(err, ErrConflict) && run.SubmitKey != "":
		// Another server inserted the same key between the check and
		// the insert: its run stands.
		return false, nil
	case err != nil:
		return false, err
	}
	*r = run
	copy(jobs, js)
	return true, nil
}

// CreateJobs inserts several job submissions in one transaction: all of
// them or none (a new submission of a multi-node task is never partial).
func (s *Store) CreateJobs(ctx context.Context, jobs []Job) error {
	now := s.Now()
	js := slices.Clone(jobs)
	err := s.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		for i := range js {
			if js[i].RunID == "" {
				return fmt.Errorf("create job: run id must not be empty")
			}
			if js[i].SubmittedAt.IsZero() {
				js[i].SubmittedAt = now
			}
			if err := createRow(ctx, tx, now, &js[i]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	copy(jobs, js)
	return nil
}
