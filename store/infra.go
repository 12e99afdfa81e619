package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/uptrace/bun"
)

// InfraFilter selects instances, fleets, volumes or gateways; zero fields
// match all.
type InfraFilter struct {
	// Project keeps rows of this project.
	Project string
	// Name keeps rows with this name.
	Name string
	// FleetID keeps instances of this fleet (instances only).
	FleetID string
	// Status matches any of the given statuses.
	Status []string
	// IncludeDeleted also returns rows marked deleted.
	IncludeDeleted bool
	// Limit caps the result (1000 when zero).
	Limit int
}

func (f InfraFilter) apply(q *bun.SelectQuery) *bun.SelectQuery {
	if f.Project != "" {
		q = q.Where("project = ?", f.Project)
	}
	if f.Name != "" {
		q = q.Where("name = ?", f.Name)
	}
	if len(f.Status) > 0 {
		q = q.Where("status IN (?)", bunIn(f.Status))
	}
	if !f.IncludeDeleted {
		q = q.Where("NOT deleted")
	}
	return q.OrderExpr("created_at, id").Limit(limitOr(f.Limit, 1000))
}

func listRows[T any](ctx context.Context, db bun.IDB, f InfraFilter, what string, extra func(*bun.SelectQuery) *bun.SelectQuery) ([]T, error) {
	var rows []T
	q := f.apply(db.NewSelect().Model(&rows))
	if extra != nil {
		q = extra(q)
	}
	if err := q.Scan(ctx); err != nil {
		return nil, fmt.Errorf("list %s: %w", what, err)
	}
	return rows, nil
}

func getByName[T any](ctx context.Context, db bun.IDB, proj, name, what string) (T, error) {
	var row T
	err := db.NewSelect().Model(&row).Where("project = ? AND name = ? AND NOT deleted", project(proj), name).
		OrderExpr("created_at DESC, id DESC").Limit(1).Scan(ctx)
	if err != nil {
		return row, notFound(err, fmt.Sprintf("get %s %s", what, name))
	}
	return row, nil
}

// CreateInstance inserts i, filling in ID, Project, Version and times.
func (s *Store) CreateInstance(ctx context.Context, i *Instance) error {
	i.Project = project(i.Project)
	return createRow(ctx, s.db, s.Now(), i)
}

// GetInstance returns the instance with the given id, or ErrNotFound.
func (s *Store) GetInstance(ctx context.Context, id string) (Instance, error) {
	var i Instance
	err := getRow(ctx, s.db, &i, id)
	return i, err
}

// GetInstanceByName returns the newest non-deleted instance with that name.
func (s *Store) GetInstanceByName(ctx context.Context, proj, name string) (Instance, error) {
	return getByName[Instance](ctx, s.db, proj, name, "instance")
}

// ListInstances returns instances in creation order.
func (s *Store) ListInstances(ctx context.Context, f InfraFilter) ([]Instance, error) {
	return listRows[Instance](ctx, s.db, f, "instances", func(q *bun.SelectQuery) *bun.SelectQuery {
		if f.FleetID != "" {
			q = q.Where("fleet_id = ?", f.FleetID)
		}
		return q
	})
}

// UpdateInstance writes i guarded by i.Version (ErrConflict when stale).
func (s *Store) UpdateInstance(ctx context.Context, i *Instance) error {
	return updateRow(ctx, s.db, s.Now(), i, nil)
}

// UpdateInstanceLeased is UpdateInstance that also requires l to hold the row.
func (s *Store) UpdateInstanceLeased(ctx context.Context, l Lease, i *Instance) error {
	return updateRow(ctx, s.db, s.Now(), i, &l)
}

// CreateFleet inserts f, filling in ID, Project, Version and times.
func (s *Store) CreateFleet(ctx context.Context, f *Fleet) error {
	if f.Name == "" {
		return fmt.Errorf("create fleet: %w", errEmptyName)
	}
	f.Project = project(f.Project)
	return createRow(ctx, s.db, s.Now(), f)
}

// GetFleet returns the fleet with the given id, or ErrNotFound.
func (s *Store) GetFleet(ctx context.Context, id string) (Fleet, error) {
	var f Fleet
	err := getRow(ctx, s.db, &f, id)
	return f, err
}

// GetFleetByName returns the newest non-deleted fleet with that name.
func (s *Store) GetFleetByName(ctx context.Context, proj, name string) (Fleet, error) {
	return getByName[Fleet](ctx, s.db, proj, name, "fleet")
}

// ListFleets returns fleets in creation order.
func (s *Store) ListFleets(ctx context.Context, f InfraFilter) ([]Fleet, error) {
	return listRows[Fleet](ctx, s.db, f, "fleets", nil)
}

// GetFleetByPlacementGroup returns the fleet, deleted or not, that
// records the placement group with hoist id id
// (FleetPlacementGroup.ID), or ErrNotFound.
func (s *Store) GetFleetByPlacementGroup(ctx context.Context, id string) (Fleet, error) {
	var f Fleet
	// placement_groups holds the JSON of []FleetPlacementGroup.
	key, err := json.Marshal(id)
	if err != nil {
		return f, err
	}
	pat := `%"id":` + strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(string(key)) + `%`
	err = s.db.NewSelect().Model(&f).Where(`placement_groups LIKE ? ESCAPE '\'`, pat).
		OrderExpr("created_at DESC, id DESC").Limit(1).Scan(ctx)
	if err != nil {
		return f, notFound(err, "get fleet by placement group "+id)
	}
	return f, nil
}

// UpdateFleet writes f guarded by f.Version (ErrConflict when stale).
func (s *Store) UpdateFleet(ctx context.Context, f *Fleet) error {
	return updateRow(ctx, s.db, s.Now(), f, nil)
}

// UpdateFleetLeased is UpdateFleet that also requires l to hold the row.
func (s *Store) UpdateFleetLeased(ctx context.Context, l Lease, f *Fleet) error {
	return updateRow(ctx, s.db, s.Now(), f, &l)
}

// CreateVolume inserts v, filling in ID, Project, Version and times.
func (s *Store) CreateVolume(ctx context.Context, v *Volume) error {
	if v.Name == "" {
		return fmt.Errorf("create volume: %w", errEmptyName)
	}
	v.Project = project(v.Project)
	return createRow(ctx, s.db, s.Now(), v)
}

// GetVolume returns the volume with the given id, or ErrNotFound.
func (s *Store) GetVolume(ctx context.Context, id string) (Volume, error) {
	var v Volume
	err := getRow(ctx, s.db, &v, id)
	return v, err
}

// GetVolumeByName returns the newest non-deleted volume with that name.
func (s *Store) GetVolumeByName(ctx context.Context, proj, name string) (Volume, error) {
	return getByName[Volume](ctx, s.db, proj, name, "volume")
}

// ListVolumes returns volumes in creation order.
func (s *Store) ListVolumes(ctx context.Context, f InfraFilter) ([]Volume, error) {
	return listRows[Volume](ctx, s.db, f, "volumes", nil)
}

// UpdateVolume writes v guarded by v.Version (ErrConflict when stale).
func (s *Store) UpdateVolume(ctx context.Context, v *Volume) error {
	return updateRow(ctx, s.db, s.Now(), v, nil)
}

// UpdateVolumeLeased is UpdateVolume that also requires l to hold the row.
func (s *Store) UpdateVolumeLeased(ctx context.Context, l Lease, v *Volume) error {
	return updateRow(ctx, s.db, s.Now(), v, &l)
}

// AttachVolume records that volumeID is attached to instanceID (idempotent;
// a repeated call replaces the attachment data).
func (s *Store) AttachVolume(ctx context.Context, volumeID, instanceID string, data json.RawMessage) error {
	a := VolumeAttachment{VolumeID: volumeID, InstanceID: instanceID, AttachmentData: data, CreatedAt: s.Now()}
	_, err := s.db.NewInsert().Model(&a).
		On("CONFLICT (volume_id, instance_id) DO UPDATE").Set("attachment_data = EXCLUDED.attachment_data").
		Exec(ctx)
	if err != nil {
		return fmt.Errorf("attach volume %s to %s: %w", volumeID, instanceID, err)
	}
	return nil
}

// DetachVolume removes the attachment record (no error when absent).
func (s *Store) DetachVolume(ctx context.Context, volumeID, instanceID string) error {
	_, err := s.db.NewDelete().Model((*VolumeAttachment)(nil)).
		Where("volume_id = ? AND instance_id = ?", volumeID, instanceID).Exec(ctx)
	if err != nil {
		return fmt.Errorf("detach volume %s from %s: %w", volumeID, instanceID, err)
	}
	return nil
}

// ListVolumeAttachments returns the attachments of a volume (volumeID set),
// of an instance (instanceID set), or all of them.
func (s *Store) ListVolumeAttachments(ctx context.Context, volumeID, instanceID string) ([]VolumeAttachment, error) {
	var as []VolumeAttachment
	q := s.db.NewSelect().Model(&as).OrderExpr("created_at, volume_id, instance_id")
	if volumeID != "" {
		q = q.Where("volume_id = ?", volumeID)
	}
	if instanceID != "" {
		q = q.Where("instance_id = ?", instanceID)
	}
	if err := q.Scan(ctx); err != nil {
		return nil, fmt.Errorf("list volume attachments: %w", err)
	}
	return as, nil
}

// CreateGateway inserts g, filling in ID, Project, Version and times.
func (s *Store) CreateGateway(ctx context.Context, g *Gateway) error {
	if g.Name == "" {
		return fmt.Errorf("create gateway: %w", errEmptyName)
	}
	g.Project = project(g.Project)
	return createRow(ctx, s.db, s.Now(), g)
}

// GetGateway returns the gateway with the given id, or ErrNotFound.
func (s *Store) GetGateway(ctx context.Context, id string) (Gateway, error) {
	var g Gateway
	err := getRow(ctx, s.db, &g, id)
	return g, err
}

// GetGatewayByName returns the newest non-deleted gateway with that name.
func (s *Store) GetGatewayByName(ctx context.Context, proj, name string) (Gateway, error) {
	return getByName[Gateway](ctx, s.db, proj, name, "gateway")
}

// GatewayOfInstance returns the gateway, deleted or not, whose instance is
// instanceID, or ErrNotFound.
func (s *Store) GatewayOfInstance(ctx context.Context, instanceID string) (Gateway, error) {
	var g Gateway
	if instanceID == "" {
		return g, fmt.Errorf("gateway of instance: %w", ErrNotFound)
	}
	err := s.db.NewSelect().Model(&g).Where("instance_id = ?", instanceID).Limit(1).Scan(ctx)
	if err != nil {
		return g, notFound(err, "gateway of instance "+instanceID)
	}
	return g, nil
}

// ListGateways returns gateways in creation order.
func (s *Store) ListGateways(ctx context.Context, f InfraFilter) ([]Gateway, error) {
	return listRows[Gateway](ctx, s.db, f, "gateways", nil)
}

// UpdateGateway writes g guarded by g.Version (ErrConflict when stale).
func (s *Store) UpdateGateway(ctx context.Context, g *Gateway) error {
	return updateRow(ctx, s.db, s.Now(), g, nil)
}

// UpdateGatewayLeased is UpdateGateway that also requires l to hold the row.
func (s *Store) UpdateGatewayLeased(ctx context.Context, l Lease, g *Gateway) error {
	return updateRow(ctx, s.db, s.Now(), g, &l)
}
