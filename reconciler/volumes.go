package reconciler

import (
	"context"
	"errors"
	"fmt"

	"hoist/backends"
	"hoist/reconciler/plan"
	"hoist/reconciler/source"
	"hoist/schema"
	"hoist/store"
)

func (c *Controller) applyVolume(ctx context.Context, rev source.Revision, s plan.Step) error {
	v, err := c.st.GetVolumeByName(ctx, c.cfg.Project, s.Name)
	exists := err == nil
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	if s.Action == plan.Delete || s.Action == plan.Replace {
		if exists {
			if err := c.deleteVolume(ctx, rev, &v); err != nil {
				return err
			}
		}
		if s.Action == plan.Delete {
			return nil
		}
		exists = false
	}
	spec := s.Desired.Spec.(*schema.Volume)
	if !exists {
		v = store.Volume{Project: c.cfg.Project, Name: s.Name, Status: store.VolumeSubmitted}
	}
	v.Spec, v.SpecHash, v.Revision, v.Backend, v.Region = s.Desired.JSON, specHash(s.Desired.JSON), rev.ID, spec.Backend, spec.Region
	if exists {
		err = c.st.UpdateVolume(ctx, &v)
	} else {
		err = c.st.CreateVolume(ctx, &v)
	}
	if err != nil {
		return err
	}
	if v.Status != store.VolumeSubmitted {
		return nil
	}
	vb, ok := c.bes[spec.Backend].(backends.VolumeBackend)
	if !ok {
		v.Status, v.StatusMessage = store.VolumeFailed, fmt.Sprintf("backend %q is not configured or has no volumes", spec.Backend)
		c.event(ctx, "volume", v.Name, v.ID, "failed", rev.ID, v.StatusMessage)
		return c.st.UpdateVolume(ctx, &v)
	}
	vs := backends.VolumeSpec{ID: v.ID, Name: v.Name, Region: spec.Region, ExternalID: spec.VolumeID,
		Tags: c.tags(schema.KindVolume, v.Name, "")}
	var got backends.Volume
	if spec.VolumeID != "" {
		got, err = vb.RegisterVolume(ctx, vs)
	} else {
		if spec.Size != nil {
			vs.SizeGB = *spec.Size
		}
		got, err = vb.CreateVolume(ctx, vs)
	}
	if err != nil {
		v.Status, v.StatusMessage = store.VolumeFailed, err.Error()
	} else {
		v.Status, v.ExternalID, v.SizeGB = store.VolumeActive, got.ProviderID, got.SizeGB
	}
	c.event(ctx, "volume", v.Name, v.ID, v.Status, rev.ID, "volume "+v.Status+" "+v.StatusMessage)
	return c.st.UpdateVolume(ctx, &v)
}

// deleteVolume deletes a volume at its backend (only what hoist owns) and
// marks the row deleted.
func (c *Controller) deleteVolume(ctx context.Context, rev source.Revision, v *store.Volume) error {
	if vb, ok := c.bes[v.Backend].(backends.VolumeBackend); ok && v.Status == store.VolumeActive {
		if err := vb.DeleteVolume(ctx, v.ID); err != nil {
			return err
		}
	}
	v.Deleted, v.RemovedFromGit = true, true
	c.event(ctx, "volume", v.Name, v.ID, "deleted", rev.ID, "volume deleted")
	return c.st.UpdateVolume(ctx, v)
}
