package vm

import (
	"context"
	"errors"
	"fmt"
	"math"

	"hoist/backends"
)

// volumes implements backends.VolumeBackend's volume methods over a
// VolumeProvider, keeping a record per volume (its ref, whether hoist owns
// it) under the backend name <Name>.volumes.
type volumes struct {
	b    *Backend
	prov VolumeProvider
	recs recordStore
}

func (v *volumes) volume(r *volumeRecord, d Disk) backends.Volume {
	tags := d.Tags
	if tags == nil {
		tags = r.Tags
	}
	return backends.Volume{
		ID: r.ID, ProviderID: r.Ref, Region: firstNonEmpty(d.Region, r.Region), SizeGB: float64(d.SizeGB),
		Status: d.State, Owned: r.Owned, Tags: backends.CopyTags(tags), CreatedAt: d.CreatedAt,
	}
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// CreateVolume creates a volume of spec.SizeGB (rounded up to whole GB) in
// spec.Region, idempotent on spec.ID: the record is saved before the
// provider is asked, and the provider's create is idempotent on the id.
func (v *volumes) CreateVolume(ctx context.Context, spec backends.VolumeSpec) (backends.Volume, error) {
	if spec.ID == "" {
		return backends.Volume{}, backends.Stalled(errors.New("vm: volume id is required"))
	}
	unlock := v.b.lock("volume/" + spec.ID)
	defer unlock()
	r, ok, err := v.recs.getVolume(spec.ID)
	if err != nil {
		return backends.Volume{}, err
	}
	if ok && r.Ref != "" {
		return v.describe(ctx, r)
	}
	if !ok {
		r = &volumeRecord{ID: spec.ID, Name: ResourceName(spec.Name, spec.ID, v.b.cfg.MaxNameLen), Region: spec.Region, Owned: true, Tags: backends.CopyTags(spec.Tags)}
		if err := v.recs.putJSON(r.ID, r); err != nil {
			return backends.Volume{}, err
		}
	}
	tags := backends.CopyTags(r.Tags)
	if tags == nil {
		tags = map[string]string{}
	}
	tags[backends.TagVolume] = r.ID
	d, err := v.prov.CreateVolume(ctx, VolumeRequest{
		ID: r.ID, Name: r.Name, Region: r.Region, SizeGB: max(1, int(math.Ceil(spec.SizeGB))), Tags: tags,
	})
	if err != nil {
		return backends.Volume{}, fmt.Errorf("vm: create volume %s: %w", spec.ID, err)
	}
	r.Ref = d.Ref
	if d.Region != "" {
		r.Region = d.Region
	}
	if err := v.recs.putJSON(r.ID, r); err != nil {
		return backends.Volume{}, err
	}
	v.b.log.Info("volume_created", "volume", r.ID, "ref", r.Ref, "region", r.Region)
	return v.volume(r, d), nil
}

// RegisterVolume adopts the provider's volume spec.ExternalID without owning
// it: DeleteVolume forgets it and leaves it at the provider.
func (v *volumes) RegisterVolume(ctx context.Context, spec backends.VolumeSpec) (backends.Volume, error) {
	if spec.ID == "" || spec.ExternalID == "" {
		return backends.Volume{}, backends.Stalled(errors.New("vm: volume id and external id are required"))
	}
	d, err := v.prov.GetVolume(ctx, spec.ExternalID)
	if err != nil {
		if errors.Is(err, backends.ErrNotFound) {
			err = backends.Stalled(err)
		}
		return backends.Volume{}, fmt.Errorf("vm: register volume %s (%s): %w", spec.ID, spec.ExternalID, err)
	}
	r := &volumeRecord{ID: spec.ID, Name: spec.Name, Ref: firstNonEmpty(d.Ref, spec.ExternalID), Region: firstNonEmpty(d.Region, spec.Region), Tags: backends.CopyTags(spec.Tags)}
	if err := v.recs.putJSON(r.ID, r); err != nil {
		return backends.Volume{}, err
	}
	return v.volume(r, d), nil
}

// DescribeVolume observes a volume; an error wrapping backends.ErrNotFound
// when it has no record or the provider no longer knows it.
func (v *volumes) DescribeVolume(ctx context.Context, id string) (backends.Volume, error) {
	r, ok, err := v.recs.getVolume(id)
	if err != nil {
		return backends.Volume{}, err
	}
	if !ok {
		return backends.Volume{}, fmt.Errorf("vm: volume %s: %w", id, backends.ErrNotFound)
	}
	if r.Ref == "" {
		return backends.Volume{ID: r.ID, Region: r.Region, Status: DiskCreating, Owned: r.Owned, Tags: backends.CopyTags(r.Tags)}, nil
	}
	return v.describe(ctx, r)
}

func (v *volumes) describe(ctx context.Context, r *volumeRecord) (backends.Volume, error) {
	d, err := v.prov.GetVolume(ctx, r.Ref)
	if err != nil {
		return backends.Volume{}, fmt.Errorf("vm: volume %s: %w", r.ID, err)
	}
	if d.State == DiskGone {
		return backends.Volume{}, fmt.Errorf("vm: volume %s: %w", r.ID, backends.ErrNotFound)
	}
	return v.volume(r, d), nil
}

// refs returns the provider refs of a volume and an instance.
func (v *volumes) refs(volumeID, instanceID string) (vol, machine string, err error) {
	r, ok, err := v.recs.getVolume(volumeID)
	if err != nil {
		return "", "", err
	}
	if !ok || r.Ref == "" {
		return "", "", fmt.Errorf("vm: volume %s: %w", volumeID, backends.ErrNotFound)
	}
	ir, ok, err := v.b.recs.get(instanceID)
	if err != nil {
		return "", "", err
	}
	if !ok || ir.Ref == "" {
		return "", "", fmt.Errorf("vm: instance %s: %w", instanceID, backends.ErrNotFound)
	}
	return r.Ref, ir.Ref, nil
}

// AttachVolume attaches a volume to an instance's VM and returns the device
// path the provider documents for it.
func (v *volumes) AttachVolume(ctx context.Context, volumeID, instanceID string) (backends.VolumeAttachment, error) {
	vol, machine, err := v.refs(volumeID, instanceID)
	if err != nil {
		return backends.VolumeAttachment{}, err
	}
	dev, err := v.prov.AttachVolume(ctx, vol, machine)
	if err != nil {
		return backends.VolumeAttachment{}, fmt.Errorf("vm: attach volume %s to %s: %w", volumeID, instanceID, err)
	}
	v.b.log.Info("volume_attached", "volume", volumeID, "instance", instanceID, "device", dev)
	return backends.VolumeAttachment{DevicePath: dev}, nil
}

// DetachVolume detaches a volume from an instance's VM. A VM already gone
// has nothing attached.
func (v *volumes) DetachVolume(ctx context.Context, volumeID, instanceID string, force bool) error {
	vol, machine, err := v.refs(volumeID, instanceID)
	if errors.Is(err, backends.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := v.prov.DetachVolume(ctx, vol, machine, force); err != nil && !errors.Is(err, backends.ErrNotFound) {
		return fmt.Errorf("vm: detach volume %s from %s: %w", volumeID, instanceID, err)
	}
	return nil
}

// DeleteVolume deletes an owned volume at the provider and forgets it; a
// registered volume is only forgotten. A volume without a record (a leak
// the audit found) or whose create never got an answer is found by its
// TagVolume tag. Gone is success.
func (v *volumes) DeleteVolume(ctx context.Context, id string) error {
	unlock := v.b.lock("volume/" + id)
	defer unlock()
	r, ok, err := v.recs.getVolume(id)
	if err != nil {
		return err
	}
	if !ok || r.Owned && r.Ref == "" {
		if err := v.deleteByTag(ctx, id); err != nil || !ok {
			return err
		}
		return v.recs.remove(id)
	}
	if r.Owned && r.Ref != "" {
		if err := v.prov.DeleteVolume(ctx, r.Ref); err != nil && !errors.Is(err, backends.ErrNotFound) {
			return fmt.Errorf("vm: delete volume %s: %w", id, err)
		}
		v.b.log.Info("volume_deleted", "volume", id, "ref", r.Ref)
	}
	return v.recs.remove(id)
}

// deleteByTag deletes the volumes tagged with volume id, which no record
// names.
func (v *volumes) deleteByTag(ctx context.Context, id string) error {
	ds, err := v.prov.ListVolumes(ctx, map[string]string{backends.TagVolume: id})
	if err != nil {
		return fmt.Errorf("vm: delete volume %s: %w", id, err)
	}
	for _, d := range ds {
		if d.State == DiskGone || d.State == DiskDeleting {
			continue
		}
		if err := v.prov.DeleteVolume(ctx, d.Ref); err != nil && !errors.Is(err, backends.ErrNotFound) {
			return fmt.Errorf("vm: delete volume %s: %w", id, err)
		}
		v.b.log.Info("volume_deleted", "volume", id, "ref", d.Ref, "recorded", false)
	}
	return nil
}

// ListVolumes returns the volumes the provider shows with all of tags (the
// leak audit), whatever the records say; volumes already gone and volumes
// without a TagVolume tag are left out. A volume is owned unless its
// record says it was registered.
func (v *volumes) ListVolumes(ctx context.Context, tags map[string]string) ([]backends.Volume, error) {
	ds, err := v.prov.ListVolumes(ctx, tags)
	if err != nil {
		return nil, fmt.Errorf("vm: list volumes: %w", err)
	}
	out := make([]backends.Volume, 0, len(ds))
	for _, d := range ds {
		id := d.Tags[backends.TagVolume]
		if d.State == DiskGone || id == "" {
			continue
		}
		owned := true
		if r, ok, err := v.recs.getVolume(id); err != nil {
			return nil, err
		} else if ok {
			owned = r.Owned
		}
		out = append(out, backends.Volume{
			ID: id, ProviderID: d.Ref, Region: d.Region, SizeGB: float64(d.SizeGB), Status: d.State,
			Owned: owned, Tags: backends.CopyTags(d.Tags), CreatedAt: d.CreatedAt,
		})
	}
	return out, nil
}
