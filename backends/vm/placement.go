package vm

import (
	"context"
	"errors"
	"fmt"

	"hoist/backends"
)

// placements implements backends.PlacementBackend's methods over a
// PlacementProvider, keeping a record per group (its ref) under the backend
// name <Name>.placement.
type placements struct {
	b    *Backend
	prov PlacementProvider
	recs recordStore
}

// CreatePlacementGroup creates a placement group named after spec.Name and
// spec.ID in spec.Region, idempotent on spec.ID (the provider's create is
// idempotent on the name, which the id determines).
func (p *placements) CreatePlacementGroup(ctx context.Context, spec backends.PlacementGroupSpec) (backends.PlacementGroup, error) {
	if spec.ID == "" {
		return backends.PlacementGroup{}, backends.Stalled(errors.New("vm: placement group id is required"))
	}
	unlock := p.b.lock("placement/" + spec.ID)
	defer unlock()
	g, ok, err := p.recs.getGroup(spec.ID)
	if err != nil {
		return backends.PlacementGroup{}, err
	}
	if ok && g.Ref != "" {
		return backends.PlacementGroup{ID: g.ID, ProviderID: g.Ref, Region: g.Region}, nil
	}
	if !ok {
		g = &groupRecord{ID: spec.ID, Name: ResourceName(spec.Name, spec.ID, p.b.cfg.MaxNameLen), Region: spec.Region}
		if err := p.recs.putJSON(g.ID, g); err != nil {
			return backends.PlacementGroup{}, err
		}
	}
	tags := backends.CopyTags(spec.Tags)
	if tags == nil {
		tags = map[string]string{}
	}
	tags[backends.TagPlacementGroup] = g.ID
	ref, err := p.prov.CreatePlacementGroup(ctx, g.Name, g.Region, tags)
	if err != nil {
		return backends.PlacementGroup{}, fmt.Errorf("vm: create placement group %s: %w", spec.ID, err)
	}
	g.Ref = ref
	if err := p.recs.putJSON(g.ID, g); err != nil {
		return backends.PlacementGroup{}, err
	}
	p.b.log.Info("placement_group_created", "placement_group", g.ID, "ref", ref, "region", g.Region)
	return backends.PlacementGroup{ID: g.ID, ProviderID: g.Ref, Region: g.Region}, nil
}

// DeletePlacementGroup deletes a placement group and forgets it. Gone is
// success; a group still in use is an error wrapping
// backends.ErrNotYetTerminated (KindWait), as the provider says.
func (p *placements) DeletePlacementGroup(ctx context.Context, id string) error {
	unlock := p.b.lock("placement/" + id)
	defer unlock()
	g, ok, err := p.recs.getGroup(id)
	if err != nil {
		return err
	}
	if !ok || g.Ref == "" {
		// A leak the audit found, or a create that never got an answer:
		// the group, if any, carries its id as a tag.
		if err := p.deleteByTag(ctx, id); err != nil || !ok {
			return err
		}
		return p.recs.remove(id)
	}
	if err := p.prov.DeletePlacementGroup(ctx, g.Ref); err != nil && !errors.Is(err, backends.ErrNotFound) {
		return fmt.Errorf("vm: delete placement group %s: %w", id, err)
	}
	p.b.log.Info("placement_group_deleted", "placement_group", id, "ref", g.Ref)
	return p.recs.remove(id)
}

// deleteByTag deletes the placement groups tagged with group id, which no
// record names.
func (p *placements) deleteByTag(ctx context.Context, id string) error {
	gs, err := p.prov.ListPlacementGroups(ctx, map[string]string{backends.TagPlacementGroup: id})
	if err != nil {
		return fmt.Errorf("vm: delete placement group %s: %w", id, err)
	}
	for _, g := range gs {
		if err := p.prov.DeletePlacementGroup(ctx, g.Ref); err != nil && !errors.Is(err, backends.ErrNotFound) {
			return fmt.Errorf("vm: delete placement group %s: %w", id, err)
		}
		p.b.log.Info("placement_group_deleted", "placement_group", id, "ref", g.Ref, "recorded", false)
	}
	return nil
}

// ListPlacementGroups returns the placement groups the provider shows with
// all of tags (the leak audit), whatever the records say; groups without a
// TagPlacementGroup tag are left out.
func (p *placements) ListPlacementGroups(ctx context.Context, tags map[string]string) ([]backends.PlacementGroup, error) {
	gs, err := p.prov.ListPlacementGroups(ctx, tags)
	if err != nil {
		return nil, fmt.Errorf("vm: list placement groups: %w", err)
	}
	out := make([]backends.PlacementGroup, 0, len(gs))
	for _, g := range gs {
		id := g.Tags[backends.TagPlacementGroup]
		if id == "" {
			continue
		}
		out = append(out, backends.PlacementGroup{ID: id, ProviderID: g.Ref, Region: g.Region, Tags: backends.CopyTags(g.Tags), CreatedAt: g.CreatedAt})
	}
	return out, nil
}
