package podcloud

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"hoist/backends"
)

// Compile-time guards: the backend New returns for each kind of provider.
var (
	_ backends.VolumeBackend = volumeBackend{}
	_ backends.Connector     = volumeBackend{}
)

// volumeBackend is the backend of a VolumeProvider: a Backend with the
// volume methods.
type volumeBackend struct {
	*Backend
	*volumes
}

// Volume statuses (backends.Volume.Status).
const (
	volumeCreating  = "creating"
	volumeAvailable = "available"
	volumeInUse     = "in-use"
)

// volumeRecordSuffix makes the records key of volumes: the instances'
// and tasks' records are under the backend's name.
const volumeRecordSuffix = ".volumes"

// maxVolumeName bounds the names the engine gives volumes (dstack's
// default for generated names, which it uses for RunPod's).
const maxVolumeName = 60

// A volumeRecord is what the engine keeps of a volume: the provider has
// only its name.
type volumeRecord struct {
	// ID is hoist's volume id.
	ID string `json:"id"`
	// Name is the volume's name at the provider.
	Name string `json:"name"`
	// ProviderID is the provider's id, once known.
	ProviderID string `json:"provider_id,omitempty"`
	Region     string `json:"region"`
	// Owned is false for a volume registered by volume_id: deleting it
	// forgets it and leaves it at the provider.
	Owned bool              `json:"owned"`
	Tags  map[string]string `json:"tags"`
	// Attached lists the instances whose pods may mount the volume.
	Attached  []string  `json:"attached,omitempty"`
	CreatedAt time.Time `json:"created_at"`
}

// volumes implements backends.VolumeBackend's volume methods over a
// VolumeProvider.
type volumes struct {
	b  *Backend
	p  VolumeProvider
	mu sync.Mutex // serializes the changes of volume records
}

// volumeName is the provider-visible name of hoist volume id called name,
// backends.ResourceName's hoist-<name>-<8 hex of sha256(id)>, at most
// maxVolumeName long, so that a volume whose record was lost is still found
// by its id (volumeOf).
func volumeName(name, id string) string { return backends.ResourceName(name, id, maxVolumeName) }

// volumeOf says whether a provider's volume name is one the engine gave
// hoist volume id.
func volumeOf(name, id string) bool {
	return strings.HasPrefix(name, "hoist-") && strings.HasSuffix(name, "-"+backends.IDSuffix(id))
}

// volumeTags are spec's tags and TagVolume: spec.ID.
func volumeTags(spec backends.VolumeSpec) map[string]string {
	tags := backends.CopyTags(spec.Tags)
	if tags == nil {
		tags = map[string]string{}
	}
	tags[backends.TagVolume] = spec.ID
	return tags
}

func (v *volumes) key() string { return v.b.name + volumeRecordSuffix }

func (v *volumes) errf(format string, args ...any) error {
	return fmt.Errorf("%s backend %q: "+format, append([]any{v.b.kind, v.b.name}, args...)...)
}

func (v *volumes) record(ctx context.Context, id string) (volumeRecord, bool, error) {
	raw, ok, err := v.b.records.GetBackendRecord(ctx, v.key(), id)
	if err != nil {
		return volumeRecord{}, false, backends.Transient(v.errf("volume record %s: %w", id, err))
	}
	if !ok {
		return volumeRecord{}, false, nil
	}
	var r volumeRecord
	if err := json.Unmarshal(raw, &r); err != nil {
		return volumeRecord{}, false, v.errf("volume record %s: %w", id, err)
	}
	return r, true, nil
}

func (v *volumes) put(ctx context.Context, r volumeRecord) error {
	raw, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if err := v.b.records.PutBackendRecord(ctx, v.key(), r.ID, raw); err != nil {
		return backends.Transient(v.errf("volume record %s: %w", r.ID, err))
	}
	return nil
}

func (v *volumes) forget(ctx context.Context, id string) error {
	if err := v.b.records.DeleteBackendRecord(ctx, v.key(), id); err != nil {
		return backends.Transient(v.errf("volume record %s: %w", id, err))
	}
	return nil
}

// volume is the backends.Volume of record r as the provider shows nv: in
// use while an instance that still exists has it attached.
func (v *volumes) volume(ctx context.Context, r volumeRecord, nv NetworkVolume) (backends.Volume, error) {
	status := volumeAvailable
	for _, inst := range r.Attached {
		if _, ok, err := v.b.instanceRecord(ctx, inst); err != nil {
			return backends.Volume{}, err
		} else if ok {
			status = volumeInUse
			break
		}
	}
	region := nv.Region
	if region == "" {
		region = r.Region
	}
	return backends.Volume{
		ID: r.ID, ProviderID: r.ProviderID, Region: region, SizeGB: float64(nv.SizeGB), Status: status,
		Owned: r.Owned, Tags: backends.CopyTags(r.Tags), CreatedAt: r.CreatedAt,
	}, nil
}

// CreateVolume creates a volume of spec.SizeGB (rounded up to whole GB) in
// spec.Region (a RunPod datacenter), named volumeName(spec.Name, spec.ID).
// It is idempotent on spec.ID: the record is saved before the provider is
// asked, and a volume of the record's name the provider already has is
// adopted instead of created again.
func (v *volumes) CreateVolume(ctx context.Context, spec backends.VolumeSpec) (backends.Volume, error) {
	if spec.ID == "" || spec.Region == "" {
		return backends.Volume{}, backends.Stalled(v.errf("a volume needs an id and a region (%q, %q)", spec.ID, spec.Region))
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	r, ok, err := v.record(ctx, spec.ID)
	if err != nil {
		return backends.Volume{}, err
	}
	if ok && r.ProviderID != "" {
		return v.describe(ctx, r)
	}
	if !ok {
		r = volumeRecord{ID: spec.ID, Name: volumeName(spec.Name, spec.ID), Region: spec.Region, Owned: true,
			Tags: volumeTags(spec), CreatedAt: v.b.now().UTC()}
		if err := v.put(ctx, r); err != nil {
			return backends.Volume{}, err
		}
	}
	all, err := v.p.ListVolumes(ctx)
	if err != nil {
		return backends.Volume{}, v.errf("create volume %s: %w", spec.ID, err)
	}
	var nv NetworkVolume
	if i := slices.IndexFunc(all, func(nv NetworkVolume) bool { return nv.Name == r.Name }); i >= 0 {
		nv = all[i]
	} else {
		nv, err = v.p.CreateVolume(ctx, VolumeRequest{Name: r.Name, Region: r.Region, SizeGB: max(1, int(math.Ceil(spec.SizeGB)))})
		if err != nil {
			return backends.Volume{}, v.errf("create volume %s: %w", spec.ID, err)
		}
	}
	r.ProviderID = nv.ID
	if nv.Region != "" {
		r.Region = nv.Region
	}
	if err := v.put(ctx, r); err != nil {
		return backends.Volume{}, err
	}
	v.b.log.Info("volume_created", "volume", r.ID, "provider_id", r.ProviderID, "name", r.Name, "region", r.Region)
	return v.volume(ctx, r, nv)
}

// RegisterVolume adopts the provider's volume spec.ExternalID (a
// volume_id) without owning it: DeleteVolume forgets it and leaves it at
// the provider. A volume the provider does not know needs the user.
func (v *volumes) RegisterVolume(ctx context.Context, spec backends.VolumeSpec) (backends.Volume, error) {
	if spec.ID == "" || spec.ExternalID == "" {
		return backends.Volume{}, backends.Stalled(v.errf("a registered volume needs an id and a volume_id"))
	}
	nv, err := v.p.GetVolume(ctx, spec.ExternalID)
	if errors.Is(err, backends.ErrNotFound) {
		err = backends.Stalled(err)
	}
	if err != nil {
		return backends.Volume{}, v.errf("register volume %s (%s): %w", spec.ID, spec.ExternalID, err)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	r, ok, err := v.record(ctx, spec.ID)
	if err != nil {
		return backends.Volume{}, err
	}
	if !ok {
		r = volumeRecord{ID: spec.ID, Tags: volumeTags(spec), CreatedAt: v.b.now().UTC()}
	}
	r.Name, r.ProviderID, r.Region = nv.Name, nv.ID, nv.Region
	if err := v.put(ctx, r); err != nil {
		return backends.Volume{}, err
	}
	return v.volume(ctx, r, nv)
}

// DescribeVolume observes a volume: creating until the provider gave its
// id, then as the provider shows it; ErrNotFound without a record or when
// the provider no longer has it.
func (v *volumes) DescribeVolume(ctx context.Context, id string) (backends.Volume, error) {
	r, ok, err := v.record(ctx, id)
	if err != nil {
		return backends.Volume{}, err
	}
	if !ok {
		return backends.Volume{}, v.errf("volume %s: %w", id, backends.ErrNotFound)
	}
	if r.ProviderID == "" {
		return backends.Volume{ID: r.ID, Region: r.Region, Status: volumeCreating, Owned: r.Owned,
			Tags: backends.CopyTags(r.Tags), CreatedAt: r.CreatedAt}, nil
	}
	return v.describe(ctx, r)
}

func (v *volumes) describe(ctx context.Context, r volumeRecord) (backends.Volume, error) {
	nv, err := v.p.GetVolume(ctx, r.ProviderID)
	if err != nil {
		return backends.Volume{}, v.errf("volume %s: %w", r.ID, err)
	}
	return v.volume(ctx, r, nv)
}

// AttachVolume checks that the volume exists in the region (datacenter)
// of the instance's offer, where the instance's pods run, records the
// attachment and returns the provider's volume id as the claim the task's
// pod is created with (PodVolume). A volume elsewhere needs the user.
func (v *volumes) AttachVolume(ctx context.Context, volumeID, instanceID string) (backends.VolumeAttachment, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	r, ok, err := v.record(ctx, volumeID)
	if err != nil {
		return backends.VolumeAttachment{}, err
	}
	if !ok || r.ProviderID == "" {
		return backends.VolumeAttachment{}, v.errf("volume %s: %w", volumeID, backends.ErrNotFound)
	}
	inst, ok, err := v.b.instanceRecord(ctx, instanceID)
	if err != nil {
		return backends.VolumeAttachment{}, err
	}
	if !ok {
		return backends.VolumeAttachment{}, v.errf("instance %s: %w", instanceID, backends.ErrNotFound)
	}
	nv, err := v.p.GetVolume(ctx, r.ProviderID)
	if err != nil {
		return backends.VolumeAttachment{}, v.errf("attach volume %s: %w", volumeID, err)
	}
	if region := inst.Offer.Region; !strings.EqualFold(nv.Region, region) {
		return backends.VolumeAttachment{}, backends.Stalled(v.errf(
			"volume %s is in %s, instance %s in %s: a pod mounts only the network volumes of its own datacenter", volumeID, nv.Region, instanceID, region))
	}
	if !slices.Contains(r.Attached, instanceID) {
		r.Attached = append(r.Attached, instanceID)
		if err := v.put(ctx, r); err != nil {
			return backends.VolumeAttachment{}, err
		}
	}
	v.b.log.Info("volume_attached", "volume", volumeID, "instance", instanceID, "provider_id", r.ProviderID)
	return backends.VolumeAttachment{Claim: r.ProviderID}, nil
}

// DetachVolume forgets the attachment: the pod that mounted the volume
// goes with its task, so nothing is asked of the provider.
func (v *volumes) DetachVolume(ctx context.Context, volumeID, instanceID string, force bool) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	r, ok, err := v.record(ctx, volumeID)
	if err != nil || !ok || !slices.Contains(r.Attached, instanceID) {
		return err
	}
	r.Attached = slices.DeleteFunc(r.Attached, func(id string) bool { return id == instanceID })
	return v.put(ctx, r)
}

// DeleteVolume deletes an owned volume at the provider and forgets it; a
// registered volume is only forgotten. A volume without a record, or
// whose create got no answer, is found by its name (volumeOf). Gone is
// success.
func (v *volumes) DeleteVolume(ctx context.Context, id string) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	r, ok, err := v.record(ctx, id)
	if err != nil {
		return err
	}
	if ok && !r.Owned {
		return v.forget(ctx, id)
	}
	ids := []string{}
	if ok && r.ProviderID != "" {
		ids = append(ids, r.ProviderID)
	} else {
		all, err := v.p.ListVolumes(ctx)
		if err != nil {
			return v.errf("delete volume %s: %w", id, err)
		}
		for _, nv := range all {
			if ok && nv.Name == r.Name || !ok && volumeOf(nv.Name, id) {
				ids = append(ids, nv.ID)
			}
		}
	}
	for _, pid := range ids {
		if err := v.p.DeleteVolume(ctx, pid); err != nil && !errors.Is(err, backends.ErrNotFound) {
			return v.errf("delete volume %s: %w", id, err)
		}
		v.b.log.Info("volume_deleted", "volume", id, "provider_id", pid)
	}
	if !ok {
		return nil
	}
	return v.forget(ctx, id)
}

// ListVolumes returns the provider's volumes that have a record whose
// tags carry all of tags (the leak audit): the provider keeps no tags, so
// a volume without a record cannot be told to be hoist's (DeleteVolume
// still finds it by its id).
func (v *volumes) ListVolumes(ctx context.Context, tags map[string]string) ([]backends.Volume, error) {
	all, err := v.p.ListVolumes(ctx)
	if err != nil {
		return nil, v.errf("list volumes: %w", err)
	}
	raws, err := v.b.records.ListBackendRecords(ctx, v.key())
	if err != nil {
		return nil, backends.Transient(v.errf("volume records: %w", err))
	}
	byID, byName := map[string]volumeRecord{}, map[string]volumeRecord{}
	for id, raw := range raws {
		var r volumeRecord
		if json.Unmarshal(raw, &r) != nil {
			v.b.log.Warn("record_unreadable", "record", id)
			continue
		}
		if r.ProviderID != "" {
			byID[r.ProviderID] = r
		} else if r.Owned {
			byName[r.Name] = r
		}
	}
	out := []backends.Volume{}
	for _, nv := range all {
		r, ok := byID[nv.ID]
		if !ok {
			r, ok = byName[nv.Name]
			r.ProviderID = nv.ID
		}
		if !ok || !backends.MatchTags(r.Tags, tags) {
			continue
		}
		vol, err := v.volume(ctx, r, nv)
		if err != nil {
			return nil, err
		}
		out = append(out, vol)
	}
	return out, nil
}
