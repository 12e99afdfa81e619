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

func (c *Controller) applyGateway(ctx context.Context, rev source.Revision, s plan.Step) error {
	g, err := c.st.GetGatewayByName(ctx, c.cfg.Project, s.Name)
	exists := err == nil
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	if s.Action == plan.Delete || s.Action == plan.Replace {
		if exists {
			g.Deleted, g.RemovedFromGit = true, true
			if err := c.st.UpdateGateway(ctx, &g); err != nil {
				return err
			}
			c.event(ctx, "gateway", g.Name, g.ID, "deleted", rev.ID, "gateway deleted")
		}
		if s.Action == plan.Delete {
			return nil
		}
		exists = false
	}
	spec := s.Desired.Spec.(*schema.Gateway)
	if !exists {
		g = store.Gateway{Project: c.cfg.Project, Name: s.Name, Status: store.GatewaySubmitted}
	}
	g.Spec, g.SpecHash, g.Revision, g.Backend, g.Region = s.Desired.JSON, specHash(s.Desired.JSON), rev.ID, spec.Backend, spec.Region
	g.OwnershipTags = c.tags(schema.KindGateway, g.Name, "")
	if exists {
		err = c.st.UpdateGateway(ctx, &g)
	} else {
		err = c.st.CreateGateway(ctx, &g)
	}
	if err != nil {
		return err
	}
	if g.Status != store.GatewaySubmitted {
		return nil
	}
	if _, ok := c.bes[spec.Backend].(backends.GatewayHost); !ok {
		g.Status, g.StatusMessage = store.GatewayFailed, fmt.Sprintf("backend %q is not configured or has no gateways", spec.Backend)
	}
	c.event(ctx, "gateway", g.Name, g.ID, g.Status, rev.ID, "gateway "+g.Status+" "+g.StatusMessage)
	return c.st.UpdateGateway(ctx, &g)
}
