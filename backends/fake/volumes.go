package fake

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"hoist/agents/api"
	"hoist/backends"
	"hoist/backends/offers"
)

// Network volumes. A fake volume is a record: it lives in one region,
// attaches to one instance of that region at a time, and shows up there at
// DevicePrefix + its provider id (with Config.VolumeClaims, as a claim named
// by its provider id). The fake shim fails a task that names a
// network volume's device which is not attached to its instance, as a real
// shim finds no device, so a test sees a task submitted before its attach.

// DevicePrefix is where a fake volume shows up on the instance it is
// attached to.
const DevicePrefix = "/dev/disk/by-id/fake-"

var _ backends.VolumeBackend = (*Backend)(nil)

// volume is one fake volume.
type volume struct {
	id, providerID, region, name string
	sizeGB                       float64
	storageClass                 string
	accessModes                  []string
	owned                        bool
	inUse                        bool // DeleteVolume waits (SetVolumeInUse)
	created                      time.Time
	tags                         map[string]string
	attachedTo                   string // instance id
}

// VolumeState is a test's view of a fake volume.
type VolumeState struct {
	// ID is hoist's id; "" for an external volume nobody registered.
	ID string
	// ProviderID is the fake provider's id.
	ProviderID string
	// Region is where the volume lives.
	Region string
	// AttachedTo is the instance it is attached to, "" when detached.
	AttachedTo string
	// Owned is false for a registered external volume.
	Owned bool
	// StorageClass and AccessModes are those the volume was created with.
	StorageClass string
	AccessModes  []string
}

// AddExternalVolume creates a volume outside hoist (as a user would in the
// provider's console) that a `volume_id` spec can register.
func (b *Backend) AddExternalVolume(providerID, region string, sizeGB float64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.volumesLocked()[providerID] = &volume{providerID: providerID, region: region, sizeGB: sizeGB}
}

// Volumes returns every volume the provider has, by provider id.
func (b *Backend) Volumes() map[string]VolumeState {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[string]VolumeState{}
	for pid, v := range b.vols {
		out[pid] = VolumeState{ID: v.id, ProviderID: pid, Region: v.region, AttachedTo: v.attachedTo, Owned: v.owned,
			StorageClass: v.storageClass, AccessModes: slices.Clone(v.accessModes)}
	}
	return out
}

func (b *Backend) volumesLocked() map[string]*volume {
	if b.vols == nil {
		b.vols = map[string]*volume{}
	}
	return b.vols
}

// volumeLocked finds a volume by hoist's id.
func (b *Backend) volumeLocked(id string) *volume {
	for _, v := range b.vols {
		if v.id == id && id != "" {
			return v
		}
	}
	return nil
}

func (b *Backend) describeVolume(v *volume) backends.Volume {
	st := "available"
	switch {
	case v.attachedTo != "":
		st = "in-use"
	case b.cfg.Now().Before(v.created.Add(b.cfg.VolumeCreateFor)):
		st = "creating"
	}
	return backends.Volume{ID: v.id, ProviderID: v.providerID, Region: v.region, SizeGB: v.sizeGB, Status: st,
		Owned: v.owned, Tags: maps.Clone(v.tags), CreatedAt: v.created}
}

// CreateVolume creates a volume in spec.Region, one of the regions of the
// backend's offers (none: the first offer's, as a Kubernetes volume lives
// in its cluster's context); idempotent on spec.ID.
func (b *Backend) CreateVolume(_ context.Context, spec backends.VolumeSpec) (backends.Volume, error) {
	if spec.ID == "" {
		return backends.Volume{}, backends.Stalled(errors.New("fake backend: volume id is required"))
	}
	if spec.Region == "" && len(b.offers) > 0 {
		spec.Region = b.offers[0].Region
	}
	if !slices.ContainsFunc(b.offers, func(o offers.Offer) bool { return o.Region == spec.Region }) {
		return backends.Volume{}, backends.Stalled(fmt.Errorf("fake backend: no region %q", spec.Region))
	}
	if spec.SizeGB <= 0 {
		return backends.Volume{}, backends.Stalled(fmt.Errorf("fake backend: volume size %v GB", spec.SizeGB))
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if v := b.volumeLocked(spec.ID); v != nil {
		return b.describeVolume(v), nil
	}
	if b.createErr != nil {
		return backends.Volume{}, b.createErr
	}
	b.seq++
	v := &volume{id: spec.ID, providerID: fmt.Sprintf("fakevol-%d", b.seq), region: spec.Region, name: spec.Name,
		sizeGB: spec.SizeGB, storageClass: spec.StorageClass, accessModes: slices.Clone(spec.AccessModes),
		owned: true, created: b.cfg.Now(), tags: maps.Clone(spec.Tags)}
	if v.tags == nil {
		v.tags = map[string]string{}
	}
	v.tags[backends.TagVolume] = spec.ID
	b.volumesLocked()[v.providerID] = v
	return b.describeVolume(v), nil
}

// RegisterVolume adopts the external volume spec.ExternalID, which must be
// in spec.Region when that is set; it stays the user's (DeleteVolume only
// forgets it).
func (b *Backend) RegisterVolume(_ context.Context, spec backends.VolumeSpec) (backends.Volume, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	v, ok := b.vols[spec.ExternalID]
	if !ok {
		return backends.Volume{}, backends.Stalled(fmt.Errorf("fake volume %s: %w", spec.ExternalID, backends.ErrNotFound))
	}
	if spec.Region != "" && v.region != spec.Region {
		return backends.Volume{}, backends.Stalled(fmt.Errorf("fake volume %s is in region %s, not %s", spec.ExternalID, v.region, spec.Region))
	}
	if v.id != "" && v.id != spec.ID {
		return backends.Volume{}, backends.Stalled(fmt.Errorf("fake volume %s is registered as %s already", spec.ExternalID, v.id))
	}
	v.id = spec.ID
	return b.describeVolume(v), nil
}

// DescribeVolume observes a volume by hoist's id.
func (b *Backend) DescribeVolume(_ context.Context, id string) (backends.Volume, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	v := b.volumeLocked(id)
	if v == nil {
		return backends.Volume{}, fmt.Errorf("fake volume %s: %w", id, backends.ErrNotFound)
	}
	return b.describeVolume(v), nil
}

// AttachVolume attaches a volume to an instance of its region; attaching it
// again to the same instance is a no-op, to another one an error.
func (b *Backend) AttachVolume(_ context.Context, volumeID, instanceID string) (backends.VolumeAttachment, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	v := b.volumeLocked(volumeID)
	if v == nil {
		return backends.VolumeAttachment{}, fmt.Errorf("fake volume %s: %w", volumeID, backends.ErrNotFound)
	}
	in, ok := b.insts[instanceID]
	if !ok {
		return backends.VolumeAttachment{}, fmt.Errorf("fake instance %s: %w", instanceID, backends.ErrNotFound)
	}
	if in.offer.Region != v.region {
		return backends.VolumeAttachment{}, backends.Stalled(fmt.Errorf("fake volume %s is in region %s, instance %s in %s", volumeID, v.region, instanceID, in.offer.Region))
	}
	if b.cfg.Now().Before(v.created.Add(b.cfg.VolumeCreateFor)) {
		return backends.VolumeAttachment{}, fmt.Errorf("fake volume %s is still being created", volumeID)
	}
	if v.attachedTo != "" && v.attachedTo != instanceID {
		return backends.VolumeAttachment{}, fmt.Errorf("fake volume %s is attached to %s", volumeID, v.attachedTo)
	}
	v.attachedTo = instanceID
	if b.cfg.VolumeClaims {
		return backends.VolumeAttachment{Claim: v.providerID}, nil
	}
	return backends.VolumeAttachment{DevicePath: DevicePrefix + v.providerID}, nil
}

// DetachVolume detaches a volume from an instance; one not attached there
// is detached already.
func (b *Backend) DetachVolume(_ context.Context, volumeID, instanceID string, _ bool) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	v := b.volumeLocked(volumeID)
	if v == nil {
		return nil
	}
	if v.attachedTo == instanceID {
		v.attachedTo = ""
	}
	return nil
}

// DeleteVolume deletes an owned volume and forgets a registered one; gone
// is success, an attached volume an error.
func (b *Backend) DeleteVolume(_ context.Context, id string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	v := b.volumeLocked(id)
	if v == nil {
		// A leak hoist keeps no id of: found by its tag.
		for pid, l := range b.vols {
			if l.id == "" && l.owned && l.tags[backends.TagVolume] == id {
				delete(b.vols, pid)
			}
		}
		return nil
	}
	if v.attachedTo != "" {
		return fmt.Errorf("fake volume %s is attached to %s", id, v.attachedTo)
	}
	if v.owned && v.inUse {
		return backends.Wait(fmt.Errorf("fake volume %s is in use: %w", id, backends.ErrNotYetTerminated), time.Second)
	}
	if v.owned {
		delete(b.vols, v.providerID)
	} else {
		v.id = ""
	}
	return nil
}

// SetVolumeInUse makes DeleteVolume of the owned volume providerID wait
// (backends.ErrNotYetTerminated, KindWait) until it is set back to false,
// as the Kubernetes backend's does while a pod still uses a claim.
func (b *Backend) SetVolumeInUse(providerID string, inUse bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if v := b.vols[providerID]; v != nil {
		v.inUse = inUse
	}
}

// volumeMountError says why the fake shim on instance in could not mount
// the task's network volumes: a device (or claim) that is no volume
// attached there.
func (b *Backend) volumeMountError(instanceID string, vols []api.NetworkVolume) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, nv := range vols {
		if nv.Claim != "" {
			if v := b.vols[nv.Claim]; !b.cfg.VolumeClaims || v == nil || v.attachedTo != instanceID {
				return fmt.Sprintf("network volume %s: claim %s is not attached here", nv.Name, nv.Claim)
			}
			continue
		}
		pid, ok := strings.CutPrefix(nv.DevicePath, DevicePrefix)
		v := b.vols[pid]
		if !ok || v == nil || v.attachedTo != instanceID {
			return fmt.Sprintf("network volume %s: device %s did not appear", nv.Name, nv.DevicePath)
		}
	}
	return ""
}

// ListVolumes implements backends.VolumeBackend: the volumes carrying all
// of tags and a backends.TagVolume tag (the leak audit).
func (b *Backend) ListVolumes(_ context.Context, tags map[string]string) ([]backends.Volume, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.listErr != nil {
		return nil, b.listErr
	}
	var out []backends.Volume
	for _, v := range b.vols {
		if id := v.tags[backends.TagVolume]; id != "" && backends.MatchTags(v.tags, tags) {
			vol := b.describeVolume(v)
			vol.ID = id
			out = append(out, vol)
		}
	}
	slices.SortFunc(out, func(x, y backends.Volume) int { return strings.Compare(x.ID, y.ID) })
	return out, nil
}

// LeakVolume makes a volume as a create whose answer hoist lost leaves it:
// at the provider, carrying tags and the backends.TagVolume tag id, but
// unknown to hoist (DescribeVolume does not find it by id; DeleteVolume
// and ListVolumes do, by its tag).
func (b *Backend) LeakVolume(id, region string, sizeGB float64, tags map[string]string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.seq++
	t := maps.Clone(tags)
	if t == nil {
		t = map[string]string{}
	}
	t[backends.TagVolume] = id
	v := &volume{providerID: fmt.Sprintf("fakevol-%d", b.seq), region: region, sizeGB: sizeGB, owned: true, created: b.cfg.Now(), tags: t}
	b.volumesLocked()[v.providerID] = v
}
