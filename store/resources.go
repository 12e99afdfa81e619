package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// RecordRevision inserts or updates the revision with rev.SHA in
// rev.Project (author, message, commit time, validation result and errors).
// SeenAt is set on first sight. A project defaults to DefaultProject.
func (s *Store) RecordRevision(ctx context.Context, rev Revision) error {
	if rev.SHA == "" {
		return fmt.Errorf("record revision: sha must not be empty")
	}
	rev.Project = project(rev.Project)
	rev.SeenAt = s.Now()
	rev.CommittedAt = rev.CommittedAt.UTC()
	_, err := s.db.NewInsert().Model(&rev).
		On("CONFLICT (project, sha) DO UPDATE").
		Set("source_id = EXCLUDED.source_id").
		Set("author = EXCLUDED.author").
		Set("message = EXCLUDED.message").
		Set("committed_at = EXCLUDED.committed_at").
		Set("valid = EXCLUDED.valid").
		Set("errors = EXCLUDED.errors").
		Set("warnings = EXCLUDED.warnings").
		Exec(ctx)
	if err != nil {
		return fmt.Errorf("record revision %s: %w", rev.SHA, err)
	}
	return nil
}

// SetRevisionPlan records the plan a revision of project proj produced when
// it was applied.
func (s *Store) SetRevisionPlan(ctx context.Context, proj, sha string, plan json.RawMessage) error {
	res, err := s.db.NewUpdate().Model((*Revision)(nil)).Set("plan = ?", string(plan)).
		Where("project = ? AND sha = ?", project(proj), sha).Exec(ctx)
	if err != nil {
		return fmt.Errorf("set plan of revision %s: %w", sha, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("set plan of revision %s: %w", sha, ErrNotFound)
	}
	return nil
}

// GetRevision returns the revision of project proj with the given sha, or
// ErrNotFound.
func (s *Store) GetRevision(ctx context.Context, proj, sha string) (Revision, error) {
	var rev Revision
	if err := s.db.NewSelect().Model(&rev).Where("project = ? AND sha = ?", project(proj), sha).Scan(ctx); err != nil {
		return rev, notFound(err, "get revision "+sha)
	}
	return rev, nil
}

// ListRevisions returns the revisions project proj saw, most recently seen
// first (at most limit; 50 when limit is zero).
func (s *Store) ListRevisions(ctx context.Context, proj string, limit int) ([]Revision, error) {
	var revs []Revision
	err := s.db.NewSelect().Model(&revs).Where("project = ?", project(proj)).OrderExpr("seen_at DESC, sha").Limit(limitOr(limit, 50)).Scan(ctx)
	if err != nil {
		return nil, fmt.Errorf("list revisions: %w", err)
	}
	return revs, nil
}

// GetSyncState returns the sync state of project proj, creating it (status
// "syncing", version 1) on first use.
func (s *Store) GetSyncState(ctx context.Context, proj string) (SyncState, error) {
	proj = project(proj)
	var st SyncState
	err := s.db.NewSelect().Model(&st).Where("project = ?", proj).Scan(ctx)
	if isNoRows(err) {
		st = SyncState{Project: proj, Status: SyncSyncing, Version: 1}
		if _, err := s.db.NewInsert().Model(&st).On("CONFLICT (project) DO NOTHING").Exec(ctx); err != nil {
			return st, fmt.Errorf("init sync state of %s: %w", proj, err)
		}
		err = s.db.NewSelect().Model(&st).Where("project = ?", proj).Scan(ctx)
	}
	if err != nil {
		return st, fmt.Errorf("get sync state of %s: %w", proj, err)
	}
	return st, nil
}

// UpdateSyncState writes st (the row of st.Project), guarded by st.Version
// (ErrConflict when another writer changed the row since st was read).
// Requested is not written: use RequestSync to bump it. On success
// st.Version is incremented.
func (s *Store) UpdateSyncState(ctx context.Context, st *SyncState) error {
	old := st.Version
	st.Project = project(st.Project)
	st.Version = old + 1
	st.UpdatedAt = s.Now()
	res, err := s.db.NewUpdate().Model(st).ExcludeColumn("project", "requested").WherePK().Where("version = ?", old).Exec(ctx)
	if err != nil {
		st.Version = old
		return fmt.Errorf("update sync state: %w", err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		st.Version = old
		return fmt.Errorf("update sync state: version %d is stale: %w", old, ErrConflict)
	}
	return nil
}

// RequestSync increments the request counter ("sync now") of project proj's
// sync state and returns the new value.
func (s *Store) RequestSync(ctx context.Context, proj string) (int64, error) {
	st, err := s.GetSyncState(ctx, proj)
	if err != nil {
		return 0, err
	}
	var n int64
	err = s.db.NewUpdate().Table("sync_state").Set("requested = requested + 1").Where("project = ?", st.Project).
		Returning("requested").Scan(ctx, &n)
	if err != nil {
		return 0, fmt.Errorf("request sync: %w", err)
	}
	return n, nil
}

// ResourceFilter selects resources in ListResources; zero fields match all.
type ResourceFilter struct {
	// Project keeps resources of this project.
	Project string
	// Kind keeps resources of this kind.
	Kind string
	// IncludeDeleted also returns resources marked deleted.
	IncludeDeleted bool
}

// UpsertResource records the desired state of r (by project, kind and name)
// from Git. A new resource is created with version 1. An existing one is
// changed only when its spec hash or file differ or it was marked deleted:
// then Spec, SpecHash, File and Revision are replaced, the deletion mark is
// cleared and the version bumped. Status, suspension and applied revision are
// left alone. It returns the stored row.
func (s *Store) UpsertResource(ctx context.Context, r Resource) (Resource, error) {
	if r.Kind == "" || r.Name == "" {
		return r, fmt.Errorf("upsert resource: kind and name: %w", errEmptyName)
	}
	r.Project = project(r.Project)
	now := s.Now()
	r.ID, r.Version, r.CreatedAt, r.UpdatedAt = newID(), 1, now, now
	r.Deleted, r.DeletedAt = false, time.Time{}
	_, err := s.db.NewInsert().Model(&r).
		On("CONFLICT (project, kind, name) DO UPDATE").
		Set("spec = EXCLUDED.spec").
		Set("spec_hash = EXCLUDED.spec_hash").
		Set("file = EXCLUDED.file").
		Set("revision = EXCLUDED.revision").
		Set("deleted = ?", false).
		Set("deleted_at = NULL").
		Set("version = ?TableAlias.version + 1").
		Set("updated_at = EXCLUDED.updated_at").
		Where("?TableAlias.spec_hash <> EXCLUDED.spec_hash OR ?TableAlias.file <> EXCLUDED.file OR ?TableAlias.deleted").
		Exec(ctx)
	if err != nil {
		return r, fmt.Errorf("upsert resource %s/%s: %w", r.Kind, r.Name, err)
	}
	return s.GetResource(ctx, r.Project, r.Kind, r.Name)
}

// GetResource returns the resource, deleted or not, or ErrNotFound.
func (s *Store) GetResource(ctx context.Context, proj, kind, name string) (Resource, error) {
	var r Resource
	err := s.db.NewSelect().Model(&r).
		Where("project = ? AND kind = ? AND name = ?", project(proj), kind, name).Scan(ctx)
	if err != nil {
		return r, notFound(err, fmt.Sprintf("get resource %s/%s", kind, name))
	}
	return r, nil
}

// ListResources returns resources ordered by kind and name.
func (s *Store) ListResources(ctx context.Context, f ResourceFilter) ([]Resource, error) {
	var rs []Resource
	q := s.db.NewSelect().Model(&rs).OrderExpr("kind, name")
	if f.Project != "" {
		q = q.Where("project = ?", f.Project)
	}
	if f.Kind != "" {
		q = q.Where("kind = ?", f.Kind)
	}
	if !f.IncludeDeleted {
		q = q.Where("NOT deleted")
	}
	if err := q.Scan(ctx); err != nil {
		return nil, fmt.Errorf("list resources: %w", err)
	}
	return rs, nil
}

// UpdateResource writes every field of r, guarded by r.Version: it returns
// ErrConflict when another writer changed the row since r was read, so two
// writers never silently overwrite each other. On success r.Version is
// incremented.
func (s *Store) UpdateResource(ctx context.Context, r *Resource) error {
	return updateRow(ctx, s.db, s.Now(), r, nil)
}

// MarkResourceDeleted marks the resource as deleted from Git (bumping its
// version); the reconciler finalizes it and may later remove the row.
func (s *Store) MarkResourceDeleted(ctx context.Context, proj, kind, name string) error {
	now := s.Now()
	res, err := s.db.NewUpdate().Model((*Resource)(nil)).
		Set("deleted = ?", true).
		Set("deleted_at = ?", now).
		Set("updated_at = ?", now).
		Set("version = version + 1").
		Where("project = ? AND kind = ? AND name = ? AND NOT deleted", project(proj), kind, name).
		Exec(ctx)
	if err != nil {
		return fmt.Errorf("mark resource %s/%s deleted: %w", kind, name, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		if _, err := s.GetResource(ctx, proj, kind, name); err != nil {
			return err
		}
	}
	return nil
}

// PurgeResource removes a resource row for good (after finalization).
func (s *Store) PurgeResource(ctx context.Context, id string) error {
	if _, err := s.db.NewDelete().Model((*Resource)(nil)).Where("id = ?", id).Exec(ctx); err != nil {
		return fmt.Errorf("purge resource %s: %w", id, err)
	}
	return nil
}
