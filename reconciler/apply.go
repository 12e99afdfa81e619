package reconciler

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"hoist/reconciler/plan"
	"hoist/reconciler/source"
	"hoist/schema"
	"hoist/store"
)

// apply carries out a plan's steps in order against the store's
// desired-state rows and wakes the workers that converge them. Held steps
// are skipped.
func (c *Controller) apply(ctx context.Context, rev source.Revision, p plan.Plan) error {
	for _, s := range p.Steps {
		if s.Held {
			continue
		}
		var err error
		switch {
		case s.Kind.IsRun():
			err = c.applyRun(ctx, rev, s)
		default:
			err = c.applyInfra(ctx, rev, s)
		}
		if err != nil {
			return fmt.Errorf("apply %s %s (%s): %w", s.Kind, s.Name, s.Action, err)
		}
	}
	return nil
}

// upsert records a step's desired spec as the resource's applied spec.
func (c *Controller) upsert(ctx context.Context, rev source.Revision, s plan.Step) (store.Resource, error) {
	r, err := c.st.UpsertResource(ctx, store.Resource{
		Project: c.cfg.Project, Kind: string(s.Kind), Name: s.Name,
		Spec: s.Desired.JSON, SpecHash: specHash(s.Desired.JSON), File: s.Desired.File, Revision: rev.ID,
	})
	if err != nil {
		return r, err
	}
	if r.AppliedRevision != rev.ID {
		r.AppliedRevision = rev.ID
		if err := c.st.UpdateResource(ctx, &r); err != nil && !errors.Is(err, store.ErrConflict) {
			return r, err
		}
	}
	return r, nil
}

// specHash is the hash a spec is stored with, to tell whether the desired
// spec changed without reading the stored one back.
func specHash(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// applyInfra carries out a plan step for a fleet, volume or gateway. The
// step is recorded as applied (the resource's spec, or its deletion) only
// after the kind's own apply succeeded: a sync plans against those
// records, so a step that failed half-way (a crash, or a worker's write
// that made an instance update stale) is planned again by the next sync
// rather than taken for done.
func (c *Controller) applyInfra(ctx context.Context, rev source.Revision, s plan.Step) error {
	if s.Action == plan.Noop {
		return nil
	}
	var err error
	switch s.Kind {
	case schema.KindFleet:
		err = c.applyFleet(ctx, rev, s)
	case schema.KindVolume:
		err = c.applyVolume(ctx, rev, s)
	case schema.KindGateway:
		err = c.applyGateway(ctx, rev, s)
	}
	if err != nil {
		return err
	}
	if s.Action != plan.Delete {
		_, err := c.upsert(ctx, rev, s)
		return err
	}
	if err := c.st.MarkResourceDeleted(ctx, c.cfg.Project, string(s.Kind), s.Name); err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	return nil
}
