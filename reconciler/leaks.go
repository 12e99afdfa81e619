package reconciler

import (
	"context"
	"errors"
	"fmt"

	"hoist/backends"
	"hoist/store"
)

// leakLoop is the leak audit: every Config.LeakAuditInterval it computes
// the project's audit report (Audit) — which lists the instances, network
// volumes and placement groups that carry this installation's and this
// project's ownership tags but that the store does not know (or knows as
// terminated or deleted), what a Create lost between the provider and the
// store leaves behind — publishes its counts (Observer.Audited) and
// deletes the leaked resources past their ReapAt. A resource younger than
// Config.LeakGrace is left alone, so that a Create racing the audit is
// never taken for a leak.
func (c *Controller) leakLoop(ctx context.Context) {
	if c.cfg.LeakAuditInterval <= 0 {
		return
	}
	every(ctx, c.cfg.LeakAuditInterval, func(ctx context.Context) { c.auditLeaks(ctx) })
}

// auditLeaks runs one pass of the leak audit and returns how many leaked
// instances, volumes and placement groups it deleted.
func (c *Controller) auditLeaks(ctx context.Context) int {
	rep := c.Audit(ctx)
	c.obs.Audited(rep.Project, len(rep.Leaked), len(rep.Lost), len(rep.Duplicated), len(rep.Errors))
	for _, e := range rep.Errors {
		c.log.Warn("leak audit failed", "backend", e.Backend, "kind", e.Kind, "error", e.Error)
	}
	reaped := 0
	for _, l := range rep.Leaked {
		if c.now().Before(l.ReapAt) {
			continue
		}
		if c.reap(ctx, l) {
			reaped++
		}
	}
	return reaped
}

// reap deletes leaked resource l and reports whether it did.
func (c *Controller) reap(ctx context.Context, l LeakedResource) bool {
	b, ok := c.bes[l.Backend]
	if !ok {
		return false
	}
	var err error
	msg := fmt.Sprintf("%s %s (%s) on backend %s carries this installation's tags but is not in the store: ", l.Kind, l.ID, l.ProviderID, l.Backend)
	switch l.Kind {
	case AuditInstance:
		err = b.Terminate(ctx, l.ID)
		msg += "terminated as leaked"
	case AuditVolume:
		err = b.(backends.VolumeBackend).DeleteVolume(ctx, l.ID)
		msg += "deleted as leaked"
	case AuditPlacementGroup:
		// In use (an instance of the leak is still going): next pass.
		err = b.(backends.PlacementBackend).DeletePlacementGroup(ctx, l.ID)
		msg = fmt.Sprintf("placement group %s (%s) on backend %s carries this installation's tags but no fleet records it: deleted as leaked", l.ID, l.ProviderID, l.Backend)
	default:
		return false
	}
	if c.backendFailed(ctx, l.Backend, err) != nil {
		c.log.Warn("leaked resource not deleted", "backend", l.Backend, "kind", l.Kind, "id", l.ID, "error", err)
		return false
	}
	c.log.Warn("leaked resource deleted", "backend", l.Backend, "kind", l.Kind, "id", l.ID, "provider_id", l.ProviderID)
	c.event(ctx, l.Kind, l.ID, l.ID, "leaked", "", msg)
	c.obs.LeakReaped(l.Backend, l.Kind)
	return true
}

// leakTags select what the leak audit looks at: what this installation
// created for this controller's project (every resource carries both tags,
// see tags). Each project's controller audits its own resources, so that
// one never deletes what another is still creating.
func (c *Controller) leakTags() map[string]string {
	return map[string]string{backends.TagInstallation: c.cfg.Installation, backends.TagProject: c.cfg.Project}
}

// volumeDeleting is the backends.Volume status of a volume the provider
// is deleting.
const volumeDeleting = "deleting"

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
