package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/uptrace/bun"
)

// WorkflowOutput is what a program provider printed (its jobs, as JSON),
// kept by the hash of everything it read.
type WorkflowOutput struct {
	bun.BaseModel `bun:"table:workflow_outputs"`

	Project   string          `bun:"project,pk"`
	InputHash string          `bun:"input_hash,pk"`
	Jobs      json.RawMessage `bun:"jobs,type:text,notnull"`
}

// PutWorkflowOutput keeps a program provider's jobs under its input hash;
// a second put of the same hash keeps the first (the same input gives the
// same jobs).
func (s *Store) PutWorkflowOutput(ctx context.Context, project, hash string, jobs json.RawMessage) error {
	if project == "" {
		project = DefaultProject
	}
	row := WorkflowOutput{Project: project, InputHash: hash, Jobs: jobs}
	if _, err := s.db.NewInsert().Model(&row).On("CONFLICT (project, input_hash) DO NOTHING").Exec(ctx); err != nil {
		return fmt.Errorf("put workflow output %.12s: %w", hash, err)
	}
	return nil
}

// GetWorkflowOutput returns the jobs kept under hash, or ErrNotFound.
func (s *Store) GetWorkflowOutput(ctx context.Context, project, hash string) (json.RawMessage, error) {
	if project == "" {
		project = DefaultProject
	}
	var row WorkflowOutput
	err := s.db.NewSelect().Model(&row).Where("project = ? AND input_hash = ?", project, hash).Scan(ctx)
	if err != nil {
		return nil, notFound(err, "get workflow output "+hash)
	}
	return row.Jobs, nil
}

// FinishedRunIDs returns the IDs of project's runs that finished after
// after and at or before before (the runs whose artifacts retention
// removes).
func (s *Store) FinishedRunIDs(ctx context.Context, project string, after, before time.Time) ([]string, error) {
	if project == "" {
		project = DefaultProject
	}
	var ids []string
	q := s.db.NewSelect().Model((*Run)(nil)).Column("id").
		Where("project = ?", project).Where("finished_at IS NOT NULL").Where("finished_at <= ?", before.UTC())
	if !after.IsZero() {
		q = q.Where("finished_at > ?", after.UTC())
	}
	if err := q.Order("finished_at").Scan(ctx, &ids); err != nil {
		return nil, fmt.Errorf("list finished runs: %w", err)
	}
	return ids, nil
}
