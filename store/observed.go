package store

import (
	"context"
	"fmt"

	"github.com/uptrace/bun"
	"golang.org/x/sync/errgroup"
)

// An ObservedResource is what the planner needs of one managed resource:
// small columns only, never its spec.
type ObservedResource struct {
	ID        string `bun:"id"`
	Kind      string `bun:"kind"`
	Name      string `bun:"name"`
	SpecHash  string `bun:"spec_hash"`
	File      string `bun:"file"`
	Status    string `bun:"status"`
	Suspended bool   `bun:"suspended"`
}

// An ObservedRun is what the planner needs of a run: small columns only.
type ObservedRun struct {
	ID       string `bun:"id"`
	Name     string `bun:"name"`
	Status   string `bun:"status"`
	SpecHash string `bun:"spec_hash"`
}

// ObservedState is the state a revision is planned against: the project's
// managed resources and the newest run of each name.
type ObservedState struct {
	// Resources are the resources not marked deleted.
	Resources []ObservedResource
	// LatestRuns is the newest run (not deleted) of each run name.
	LatestRuns map[string]ObservedRun
}

// ObservedState reads the observed state of project. It reads small
// columns into small rows (no full models, no scan hooks), the two tables
// at once, so that planning a large repository stays fast; specs are read
// back separately, only for the rows that need them (ResourceSpecs,
// RunSpecs).
func (s *Store) ObservedState(ctx context.Context, project string) (ObservedState, error) {
	var rs []ObservedResource
	var runs []ObservedRun
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		if err := s.db.NewSelect().Table("resources").
			Column("id", "kind", "name", "spec_hash", "file", "status", "suspended").
			Where("project = ? AND NOT deleted", project).Scan(gctx, &rs); err != nil {
			return fmt.Errorf("observe resources: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		if err := s.db.NewSelect().Table("runs").Column("id", "name", "status", "spec_hash").
			Where("project = ? AND NOT deleted", project).Scan(gctx, &runs); err != nil {
			return fmt.Errorf("observe runs: %w", err)
		}
		return nil
	})
	if err := g.Wait(); err != nil {
		return ObservedState{}, err
	}
	// The latest run of every name: run ids are time-ordered (UUIDv7), so
	// the greatest id of a name is its newest run; no sort in the database.
	latest := make(map[string]ObservedRun, len(runs))
	for _, r := range runs {
		if prev, ok := latest[r.Name]; !ok || r.ID > prev.ID {
			latest[r.Name] = r
		}
	}
	return ObservedState{Resources: rs, LatestRuns: latest}, nil
}

// ResourceSpecs returns the specs of the resources with the given ids, by
// id; ids not found are absent.
func (s *Store) ResourceSpecs(ctx context.Context, ids []string) (map[string][]byte, error) {
	return s.specsByID(ctx, "resources", ids)
}

// RunSpecs returns the specs of the runs with the given ids, by id; ids
// not found are absent.
func (s *Store) RunSpecs(ctx context.Context, ids []string) (map[string][]byte, error) {
	return s.specsByID(ctx, "runs", ids)
}

func (s *Store) specsByID(ctx context.Context, table string, ids []string) (map[string][]byte, error) {
	out := make(map[string][]byte, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	var rows []struct {
		ID   string `bun:"id"`
		Spec string `bun:"spec"`
	}
	if err := s.db.NewSelect().Table(table).Column("id", "spec").Where("id IN (?)", bun.In(ids)).Scan(ctx, &rows); err != nil {
		return nil, fmt.Errorf("read %s specs: %w", table, err)
	}
	for _, r := range rows {
		out[r.ID] = []byte(r.Spec)
	}
	return out, nil
}
