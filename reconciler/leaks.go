package reconciler

import (
	"context"
	"errors"
	"fmt"
	"time"

	"hoist/backends"
	"hoist/store"
)

// leakLoop is the leak audit: every Config.LeakAuditInterval it asks each
// backend for the instances, network volumes and placement groups that
// carry this installation's and this project's ownership tags and deletes those the store does
// not know (or knows as terminated or deleted) — what a Create lost
// between the provider and the store leaves behind. A resource younger
// than Config.LeakGrace is left alone, so that a Create racing the audit
// is never taken for a leak. Shared resources (the AWS driver's security
// group per installation and region) are not audited: they are reused,
// never deleted, as dstack leaves its project security groups.
func (c *Controller) leakLoop(ctx context.Context) {
	if c.cfg.LeakAuditInterval <= 0 {
		return
	}
	every(ctx, c.cfg.LeakAuditInterval, func(ctx context.Context) { c.auditLeaks(ctx) })
}

// auditLeaks runs one pass of the leak audit over every backend and
// returns how many leaked instances, volumes and placement groups it
// deleted.
func (c *Controller) auditLeaks(ctx context.Context) int {
	reaped := 0
	for name, b := range c.bes {
		insts, err := b.List(ctx, c.leakTags())
		if err != nil {
			c.log.Warn("leak audit failed", "backend", name, "error", err)
			continue
		}
		for _, inst := range insts {
			if c.young(inst.CreatedAt) {
				continue
			}
			known, err := c.knownInstance(ctx, inst.ID)
			if err != nil {
				c.log.Warn("leak audit failed", "backend", name, "instance_id", inst.ID, "error", err)
				continue
			}
			if known {
				continue
			}
			msg := fmt.Sprintf("instance %s on backend %s carries this installation's tags but is not in the store: terminated as leaked", inst.ID, name)
			if err := b.Terminate(ctx, inst.ID); err != nil {
				c.log.Warn("leaked instance not terminated", "backend", name, "instance_id", inst.ID, "error", err)
				continue
			}
			c.log.Warn("leaked instance terminated", "backend", name, "instance_id", inst.ID, "provider_id", inst.ProviderID)
			c.event(ctx, "instance", inst.ID, inst.ID, "leaked", "", msg)
			c.obs.LeakReaped(name, "instance")
			reaped++
		}
		reaped += c.auditVolumes(ctx, name, b) + c.auditPlacementGroups(ctx, name, b)
	}
	return reaped
}

// leakTags select what the leak audit looks at: what this installation
// created for this controller's project (every resource carries both tags,
// see tags). Each project's controller audits its own resources, so that
// one never deletes what another is still creating.
func (c *Controller) leakTags() map[string]string {
	return map[string]string{backends.TagInstallation: c.cfg.Installation, backends.TagProject: c.cfg.Project}
}

// young reports whether a resource created at created is still within
// Config.LeakGrace (zero: unknown, never young).
func (c *Controller) young(created time.Time) bool {
	return !created.IsZero() && c.now().Sub(created) < c.cfg.LeakGrace
}

// auditVolumes deletes the volumes of backend b that carry this
// installation's ownership tags but that the store does not know (or
// knows as deleted), and returns how many. A registered (external) volume
// is never deleted.
func (c *Controller) auditVolumes(ctx context.Context, name string, b backends.Backend) int {
	vb, ok := b.(backends.VolumeBackend)
	if !ok {
		return 0
	}
	vols, err := vb.ListVolumes(ctx, c.leakTags())
	if err != nil {
		c.log.Warn("leak audit failed", "backend", name, "kind", "volume", "error", err)
		return 0
	}
	reaped := 0
	for _, v := range vols {
		if !v.Owned || v.Status == volumeDeleting || c.young(v.CreatedAt) {
			continue
		}
		row, err := c.st.GetVolume(ctx, v.ID)
		switch {
		case err == nil && !row.Deleted:
			continue
		case err != nil && !errors.Is(err, store.ErrNotFound):
			c.log.Warn("leak audit failed", "backend", name, "volume_id", v.ID, "error", err)
			continue
		}
		if err := vb.DeleteVolume(ctx, v.ID); err != nil {
			c.log.Warn("leaked volume not deleted", "backend", name, "volume_id", v.ID, "error", err)
			continue
		}
		c.log.Warn("leaked volume deleted", "backend", name, "volume_id", v.ID, "provider_id", v.ProviderID)
		c.event(ctx, "volume", v.ID, v.ID, "leaked", "", fmt.Sprintf(
			"volume %s (%s) on backend %s carries this installation's tags but is not in the store: deleted as leaked", v.ID, v.ProviderID, name))
		c.obs.LeakReaped(name, "volume")
		reaped++
	}
	return reaped
}

// volumeDeleting is the backends.Volume status of a volume the provider
// is deleting.
const volumeDeleting = "deleting"

// auditPlacementGroups deletes the placement groups of backend b that
// carry this installation's ownership tags but that no fleet in the store
// records (deleted fleets included: their groups are the placement group
// sweep's), and returns how many.
func (c *Controller) auditPlacementGroups(ctx context.Context, name string, b backends.Backend) int {
	pb, ok := b.(backends.PlacementBackend)
	if !ok {
		return 0
	}
	groups, err := pb.ListPlacementGroups(ctx, c.leakTags())
	if err != nil {
		c.log.Warn("leak audit failed", "backend", name, "kind", "placement_group", "error", err)
		return 0
	}
	reaped := 0
	for _, g := range groups {
		if c.young(g.CreatedAt) {
			continue
		}
		_, err := c.st.GetFleetByPlacementGroup(ctx, g.ID)
		switch {
		case err == nil:
			continue
		case !errors.Is(err, store.ErrNotFound):
			c.log.Warn("leak audit failed", "backend", name, "placement_group_id", g.ID, "error", err)
			continue
		}
		if err := pb.DeletePlacementGroup(ctx, g.ID); err != nil {
			// In use (an instance of the leak is still going): next pass.
			c.log.Warn("leaked placement group not deleted", "backend", name, "placement_group_id", g.ID, "error", err)
			continue
		}
		c.log.Warn("leaked placement group deleted", "backend", name, "placement_group_id", g.ID, "provider_id", g.ProviderID)
		c.event(ctx, "placement_group", g.ID, g.ID, "leaked", "", fmt.Sprintf(
			"placement group %s (%s) on backend %s carries this installation's tags but no fleet records it: deleted as leaked", g.ID, g.ProviderID, name))
		c.obs.LeakReaped(name, "placement_group")
		reaped++
	}
	return reaped
}

// knownInstance reports whether the store has instance id in a status
// other than terminated, or as the instance of a gateway (which keeps it
// until it terminated it).
func (c *Controller) knownInstance(ctx context.Context, id string) (bool, error) {
	row, err := c.st.GetInstance(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		_, err := c.st.GatewayOfInstance(ctx, id)
		if errors.Is(err, store.ErrNotFound) {
			return false, nil
		}
		return err == nil, err
	}
	if err != nil {
		return false, err
	}
	return row.Status != store.InstanceTerminated, nil
}
