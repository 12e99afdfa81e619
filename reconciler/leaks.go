package reconciler

import (
	"context"
	"errors"
	"fmt"

	"hoist/backends"
	"hoist/store"
)

// leakLoop is the leak audit: every Config.LeakAuditInterval it asks each
// backend for the instances that carry this installation's ownership tag
// and terminates those the store does not know (or knows as terminated) —
// what a Create lost between the provider and the store leaves behind.
// An instance younger than Config.LeakGrace is left alone, so that a
// Create racing the audit is never taken for a leak.
func (c *Controller) leakLoop(ctx context.Context) {
	if c.cfg.LeakAuditInterval <= 0 {
		return
	}
	every(ctx, c.cfg.LeakAuditInterval, func(ctx context.Context) { c.auditLeaks(ctx) })
}

// auditLeaks runs one pass of the leak audit over every backend and
// returns how many leaked instances it terminated.
func (c *Controller) auditLeaks(ctx context.Context) int {
	reaped := 0
	for name, b := range c.bes {
		insts, err := b.List(ctx, map[string]string{backends.TagInstallation: c.cfg.Installation})
		if err != nil {
			c.log.Warn("leak audit failed", "backend", name, "error", err)
			continue
		}
		for _, inst := range insts {
			if !inst.CreatedAt.IsZero() && c.now().Sub(inst.CreatedAt) < c.cfg.LeakGrace {
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
			c.obs.LeakReaped(name)
			reaped++
		}
	}
	return reaped
}

// knownInstance reports whether the store has instance id in a status
// other than terminated.
func (c *Controller) knownInstance(ctx context.Context, id string) (bool, error) {
	row, err := c.st.GetInstance(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return row.Status != store.InstanceTerminated, nil
}
