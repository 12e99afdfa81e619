package verda

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"strings"
	"time"

	"hoist/backends"
	"hoist/backends/vm"
)

// Volumes are Verda's block volumes (https://api.verda.com/v1/volumes, the
// SDK's verda/volumes/volumes.py in github.com/DataCrunch-io/datacrunch-python):
// POST /volumes {type, name, size, location_code} answers the new id as
// text; PUT /volumes {action, id} attaches (with instance_id), detaches and
// deletes (is_permanent); GET /volumes and GET /volumes/{id} show
// {id, name, status, size, type, location, instance_id, target, created_at}.

// volumeType is the type of the volumes hoist creates (VolumeTypes.NVMe of
// the SDK's verda/constants.py; HDD is the other block type).
const volumeType = "NVMe"

// nameSep separates hoist's name of a volume from its ownership tags in the
// volume's name: Verda volumes have no tags or description, so the tags are
// query-encoded into the name ("hoist-data-1a2b3c4d?hoist.installation=...&
// hoist.volume=..."), as they are into an instance's description.
const nameSep = "?"

// volume is a volume as the API shows it.
type volume struct {
	ID         string  `json:"id"`
	Name       string  `json:"name"`
	Status     string  `json:"status"`
	Size       int     `json:"size"`
	Type       string  `json:"type"`
	IsOSVolume bool    `json:"is_os_volume"`
	Location   string  `json:"location"`
	InstanceID *string `json:"instance_id"`
	Target     *string `json:"target"`
	CreatedAt  string  `json:"created_at"`
}

// createVolume is POST /volumes' body.
type createVolume struct {
	Type         string `json:"type"`
	Name         string `json:"name"`
	Size         int    `json:"size"`
	LocationCode string `json:"location_code"`
}

var _ vm.VolumeProvider = (*Provider)(nil)

// volumeName encodes hoist's name and tags as a volume name.
func volumeName(name string, tags map[string]string) string {
	v := url.Values{}
	for k, val := range tags {
		v.Set(k, val)
	}
	return name + nameSep + v.Encode()
}

// parseVolumeName returns the tags of a volume name hoist wrote; false for
// any other name (a foreign volume, or one the user renamed).
func parseVolumeName(n string) (map[string]string, bool) {
	name, rest, ok := strings.Cut(n, nameSep)
	if !ok || !strings.HasPrefix(name, "hoist-") {
		return nil, false
	}
	v, err := url.ParseQuery(rest)
	if err != nil || v.Get(backends.TagInstallation) == "" || v.Get(backends.TagVolume) == "" {
		return nil, false
	}
	tags := map[string]string{}
	for k := range v {
		tags[k] = v.Get(k)
	}
	return tags, true
}

// DevicePath is where an attached volume shows up in the VM: /dev/ and the
// volume's target, the virtio disk name Verda gives it ("vdb"; the SDK's
// Volume.target, "target device e.g. vda").
func DevicePath(target string) string {
	return "/dev/" + target
}

// disk maps a volume onto the engine's view.
func disk(v volume) vm.Disk {
	tags, _ := parseVolumeName(v.Name)
	d := vm.Disk{Ref: v.ID, Region: v.Location, SizeGB: v.Size, Tags: tags}
	if v.InstanceID != nil {
		d.AttachedTo = *v.InstanceID
	}
	if t, err := time.Parse(time.RFC3339Nano, v.CreatedAt); err == nil {
		d.CreatedAt = t
	}
	switch v.Status {
	case "ordered", "creating", "cloning":
		d.State = vm.DiskCreating
	case "attached":
		d.State = vm.DiskInUse
	case "detached":
		d.State = vm.DiskAvailable
		if d.AttachedTo != "" {
			d.State = vm.DiskInUse
		}
	case "deleting":
		d.State = vm.DiskDeleting
	case "deleted":
		d.State = vm.DiskGone
	default:
		d.State = vm.DiskCreating
	}
	return d
}

// CreateVolume creates an NVMe volume of req.SizeGB in location req.Region,
// named with hoist's name and tags. It is idempotent on req.ID by looking
// the hoist.volume tag up among the volumes first (Verda has no idempotency
// token; creates of one id in this process are serialized).
func (p *Provider) CreateVolume(ctx context.Context, req vm.VolumeRequest) (vm.Disk, error) {
	unlock := lockLaunch("volume/" + req.ID)
	defer unlock()
	tags := maps.Clone(req.Tags)
	if tags == nil {
		tags = map[string]string{}
	}
	tags[backends.TagVolume] = req.ID
	if tags[backends.TagInstallation] == "" {
		return vm.Disk{}, backends.Stalled(errors.New("verda: create volume: the hoist.installation tag is required"))
	}
	existing, err := p.ListVolumes(ctx, map[string]string{backends.TagVolume: req.ID, backends.TagInstallation: tags[backends.TagInstallation]})
	if err != nil {
		return vm.Disk{}, err
	}
	for _, d := range existing {
		if d.State != vm.DiskGone && d.State != vm.DiskDeleting {
			return d, nil
		}
	}
	body := createVolume{Type: volumeType, Name: volumeName(req.Name, tags), Size: max(1, req.SizeGB), LocationCode: req.Region}
	var id string
	if _, err := p.api.do(ctx, "POST", "/volumes", body, &id); err != nil {
		return vm.Disk{}, classifyVolume(err)
	}
	if id == "" {
		return vm.Disk{}, backends.Transient(errors.New("verda: POST /volumes answered no volume id"))
	}
	return vm.Disk{Ref: id, Region: req.Region, SizeGB: body.Size, State: vm.DiskCreating, Tags: tags, CreatedAt: p.now().UTC()}, nil
}

// GetVolume is GET /volumes/{id}.
func (p *Provider) GetVolume(ctx context.Context, ref string) (vm.Disk, error) {
	v, err := p.getVolume(ctx, ref)
	if err != nil {
		return vm.Disk{}, err
	}
	return disk(v), nil
}

func (p *Provider) getVolume(ctx context.Context, ref string) (volume, error) {
	if ref == "" || strings.ContainsAny(ref, "/?#") {
		return volume{}, fmt.Errorf("%w: verda: %q is not a volume id", backends.ErrNotFound, ref)
	}
	var v volume
	if _, err := p.api.do(ctx, "GET", "/volumes/"+ref, nil, &v); err != nil {
		if isVolumeGone(err) {
			return volume{}, fmt.Errorf("%w: %w", backends.ErrNotFound, err)
		}
		return volume{}, classify(err)
	}
	if v.Status == "deleted" {
		return volume{}, fmt.Errorf("verda: volume %s: %w (deleted)", ref, backends.ErrNotFound)
	}
	return v, nil
}

// volumeAction is PUT /volumes.
func (p *Provider) volumeAction(ctx context.Context, body map[string]any) error {
	_, err := p.api.do(ctx, "PUT", "/volumes", body, nil)
	return err
}

// AttachVolume attaches volume volRef to instance machineRef (PUT /volumes
// action attach) and returns DevicePath of the target Verda reports. A
// volume attached to that instance already returns its path again; one
// attached to another instance is stalled. An attach accepted whose target
// is not shown yet is an error to retry after a moment.
func (p *Provider) AttachVolume(ctx context.Context, volRef, machineRef string) (string, error) {
	v, err := p.getVolume(ctx, volRef)
	if err != nil {
		return "", err
	}
	if v.InstanceID != nil && *v.InstanceID != "" {
		if *v.InstanceID != machineRef {
			return "", backends.Stalled(fmt.Errorf("verda: volume %s is attached to instance %s", volRef, *v.InstanceID))
		}
		if v.Target != nil && *v.Target != "" {
			return DevicePath(*v.Target), nil
		}
	} else if err := p.volumeAction(ctx, map[string]any{"action": "attach", "id": volRef, "instance_id": machineRef}); err != nil {
		return "", classify(err)
	}
	v, err = p.getVolume(ctx, volRef)
	if err != nil {
		return "", err
	}
	if v.InstanceID == nil || *v.InstanceID != machineRef || v.Target == nil || *v.Target == "" {
		return "", backends.Wait(fmt.Errorf("verda: volume %s: the attach to %s is under way", volRef, machineRef), 2*time.Second)
	}
	return DevicePath(*v.Target), nil
}

// DetachVolume detaches volume volRef from instance machineRef (PUT
// /volumes action detach); a volume not attached to it is success. Verda's
// detach has no force: force is ignored.
func (p *Provider) DetachVolume(ctx context.Context, volRef, machineRef string, force bool) error {
	v, err := p.getVolume(ctx, volRef)
	if err != nil {
		return err
	}
	if v.InstanceID == nil || *v.InstanceID != machineRef {
		return nil
	}
	if err := p.volumeAction(ctx, map[string]any{"action": "detach", "id": volRef}); err != nil {
		if isVolumeGone(err) {
			return nil
		}
		return classify(err)
	}
	return nil
}

// DeleteVolume deletes a volume for good (PUT /volumes action delete,
// is_permanent: without it Verda keeps the volume in its trash); gone is
// success.
func (p *Provider) DeleteVolume(ctx context.Context, ref string) error {
	if _, err := p.getVolume(ctx, ref); errors.Is(err, backends.ErrNotFound) {
		return nil
	} else if err != nil {
		return err
	}
	if err := p.volumeAction(ctx, map[string]any{"action": "delete", "id": ref, "is_permanent": true}); err != nil {
		if isVolumeGone(err) {
			return nil
		}
		return classify(err)
	}
	return nil
}

// ListVolumes returns hoist's volumes whose tags (read from the name) carry
// all of tags, in the configured locations. Volumes with any other name are
// never listed.
func (p *Provider) ListVolumes(ctx context.Context, tags map[string]string) ([]vm.Disk, error) {
	var all []volume
	if _, err := p.api.do(ctx, "GET", "/volumes", nil, &all); err != nil {
		return nil, classify(err)
	}
	var out []vm.Disk
	for _, v := range all {
		got, ok := parseVolumeName(v.Name)
		if !ok || v.IsOSVolume || !vm.InRegions(v.Location, p.regions) {
			continue
		}
		if backends.MatchTags(got, tags) {
			out = append(out, disk(v))
		}
	}
	return out, nil
}

// classifyVolume classifies a POST /volumes error: no room in the location
// (503 service_unavailable, or a message of capacity or quota) wraps
// ErrNoCapacity; the rest as classify.
func classifyVolume(err error) error {
	var ae *APIError
	if errors.As(err, &ae) {
		msg := strings.ToLower(ae.Message)
		if ae.Status == http.StatusServiceUnavailable || (ae.Status < 500 && ae.Status != http.StatusUnauthorized && ae.Status != http.StatusTooManyRequests &&
			(strings.Contains(msg, "capacity") || strings.Contains(msg, "quota") || strings.Contains(msg, "limit"))) {
			return fmt.Errorf("%w: %w", backends.ErrNoCapacity, err)
		}
	}
	return classify(err)
}

// isVolumeGone says whether an error says the volume is gone (404, "Invalid
// volume id").
func isVolumeGone(err error) bool {
	var ae *APIError
	if !errors.As(err, &ae) {
		return false
	}
	return ae.Status == http.StatusNotFound || strings.Contains(ae.Message, "Invalid volume id")
}
