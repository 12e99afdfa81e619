package reconciler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/google/uuid"

	"hoist/backends"
	"hoist/backends/offers"
	"hoist/schema"
	"hoist/store"
)

// placementGroupFor returns the id of the placement group an instance of
// a `placement: cluster` fleet is created in, on a backend that has them
// (backends.PlacementBackend): one per fleet, backend and region, recorded
// in the fleet before the backend creates it (so a crash never leaves one
// the store does not know) and created before the fleet's first instance
// there (dstack creates a cluster fleet's placement group with its first
// instance, src/dstack/_internal/server/background/pipeline_tasks/instances/cloud_provisioning.py).
// It returns "" for other instances.
func (c *Controller) placementGroupFor(ctx context.Context, inst store.Instance, be backends.Backend, offer offers.Offer) (string, error) {
	pb, ok := be.(backends.PlacementBackend)
	if !ok || inst.FleetID == "" || offer.Region == "" {
		return "", nil
	}
	f, err := c.st.GetFleet(ctx, inst.FleetID)
	if err != nil {
		return "", err
	}
	var spec schema.Fleet
	if json.Unmarshal(f.Spec, &spec) != nil || spec.Placement != "cluster" {
		return "", nil
	}
	for _, g := range f.PlacementGroups {
		if g.Backend == inst.Backend && g.Region == offer.Region && g.ProviderID != "" {
			return g.ID, nil // created: no lock needed to use it
		}
	}
	var id string
	err = c.withFleetLock(ctx, f.ID, func() (err error) {
		id, err = c.ensurePlacementGroup(ctx, inst, pb, offer)
		return err
	})
	return id, err
}

// ensurePlacementGroup is placementGroupFor under the fleet's lock.
func (c *Controller) ensurePlacementGroup(ctx context.Context, inst store.Instance, pb backends.PlacementBackend, offer offers.Offer) (string, error) {
	for attempt := 0; ; attempt++ {
		f, err := c.st.GetFleet(ctx, inst.FleetID)
		if err != nil {
			return "", err
		}
		i := slices.IndexFunc(f.PlacementGroups, func(g store.FleetPlacementGroup) bool {
			return g.Backend == inst.Backend && g.Region == offer.Region
		})
		if i < 0 {
			f.PlacementGroups = append(f.PlacementGroups, store.FleetPlacementGroup{
				ID: uuid.Must(uuid.NewV7()).String(), Backend: inst.Backend, Region: offer.Region,
			})
			i = len(f.PlacementGroups) - 1
			err := c.st.UpdateFleet(ctx, &f)
			if errors.Is(err, store.ErrConflict) && attempt < 5 {
				continue // another instance of the fleet may have recorded one
			}
			if err != nil {
				return "", err
			}
		}
		g := f.PlacementGroups[i]
		if g.ProviderID != "" {
			return g.ID, nil
		}
		pg, err := pb.CreatePlacementGroup(ctx, backends.PlacementGroupSpec{
			ID: g.ID, Name: f.Name, Region: g.Region, Tags: c.tags(schema.KindFleet, f.Name, ""),
		})
		if err != nil {
			return "", fmt.Errorf("create placement group of fleet %s in %s: %w", f.Name, g.Region, err)
		}
		c.event(ctx, "fleet", f.Name, f.ID, "placement_group", f.Revision,
			fmt.Sprintf("placement group %s created on %s in %s", pg.ProviderID, g.Backend, g.Region))
		// Recording the provider's id only saves a Create next time (it is
		// idempotent on the id): a lost write is harmless.
		c.setPlacementGroupProviderID(ctx, f.ID, g.ID, pg.ProviderID)
		return g.ID, nil
	}
}

func (c *Controller) setPlacementGroupProviderID(ctx context.Context, fleetID, id, providerID string) {
	for range 5 {
		f, err := c.st.GetFleet(ctx, fleetID)
		if err != nil {
			return
		}
		i := slices.IndexFunc(f.PlacementGroups, func(g store.FleetPlacementGroup) bool { return g.ID == id })
		if i < 0 {
			return
		}
		f.PlacementGroups[i].ProviderID = providerID
		if err := c.st.UpdateFleet(ctx, &f); !errors.Is(err, store.ErrConflict) {
			return
		}
	}
}

// deletePlacementGroups deletes the placement groups of a fleet none of
// whose instances is left (every one terminated), and forgets them; a
// group its provider still holds (backends.ErrNotYetTerminated) stays
// recorded and the error is returned, for the next pass or the periodic
// resync to try again.
func (c *Controller) deletePlacementGroups(ctx context.Context, fleetID string) error {
	if fleetID == "" {
		return nil
	}
	f, err := c.st.GetFleet(ctx, fleetID)
	if err != nil || len(f.PlacementGroups) == 0 {
		return err
	}
	return c.withFleetLock(ctx, fleetID, func() error { return c.deleteUnusedPlacementGroups(ctx, fleetID) })
}

// deleteUnusedPlacementGroups is deletePlacementGroups under the fleet's
// lock.
func (c *Controller) deleteUnusedPlacementGroups(ctx context.Context, fleetID string) error {
	f, err := c.st.GetFleet(ctx, fleetID)
	if err != nil || len(f.PlacementGroups) == 0 {
		return err
	}
	insts, err := c.st.ListInstances(ctx, store.InfraFilter{Project: c.cfg.Project, FleetID: f.ID})
	if err != nil {
		return err
	}
	for _, i := range insts {
		if i.Status != store.InstanceTerminated {
			return nil
		}
	}
	var errs []error
	var gone []string
	for _, g := range f.PlacementGroups {
		pb, ok := c.bes[g.Backend].(backends.PlacementBackend)
		if !ok {
			errs = append(errs, backends.Stalled(fmt.Errorf("placement group %s: backend %q is not configured or has no placement groups", g.ID, g.Backend)))
			continue
		}
		if err := pb.DeletePlacementGroup(ctx, g.ID); err != nil {
			errs = append(errs, fmt.Errorf("delete placement group %s of fleet %s: %w", g.ID, f.Name, err))
			continue
		}
		gone = append(gone, g.ID)
		c.event(ctx, "fleet", f.Name, f.ID, "placement_group", f.Revision,
			fmt.Sprintf("placement group %s deleted on %s in %s: the fleet has no instance left", strings.TrimSpace(g.ProviderID+" "+g.ID), g.Backend, g.Region))
	}
	for attempt := 0; len(gone) > 0 && attempt < 5; attempt++ {
		f.PlacementGroups = slices.DeleteFunc(f.PlacementGroups, func(g store.FleetPlacementGroup) bool { return slices.Contains(gone, g.ID) })
		err := c.st.UpdateFleet(ctx, &f)
		if !errors.Is(err, store.ErrConflict) {
			errs = append(errs, err)
			break
		}
		if f, err = c.st.GetFleet(ctx, fleetID); err != nil {
			errs = append(errs, err)
			break
		}
	}
	return errors.Join(errs...)
}

// sweepPlacementGroups deletes the placement groups of every fleet left
// without instances (deletePlacementGroups), for groups a provider held
// when the fleet's last instance went.
func (c *Controller) sweepPlacementGroups(ctx context.Context) {
	fleets, err := c.st.ListFleets(ctx, store.InfraFilter{Project: c.cfg.Project, IncludeDeleted: true, Limit: everyRow})
	if err != nil {
		c.log.Warn("placement group sweep failed", "error", err)
		return
	}
	for _, f := range fleets {
		if len(f.PlacementGroups) == 0 {
			continue
		}
		if err := c.deletePlacementGroups(ctx, f.ID); err != nil {
			c.log.Info("placement groups not deleted yet", "fleet", f.Name, "error", err)
		}
	}
}
