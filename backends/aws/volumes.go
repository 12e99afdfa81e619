package aws

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"hoist/backends"
	"hoist/backends/vm"
)

// detachPoll is how soon to look again at a volume being detached.
const detachPoll = 2 * time.Second

// DevicePath is where EBS volume id shows up on a Nitro instance: the udev
// link of its NVMe serial, "vol" and the id without its dash
// (https://docs.aws.amazon.com/ebs/latest/userguide/identify-nvme-ebs-device.html;
// dstack's shim finds volumes the same way, runner/internal/shim/backends/aws.go).
func DevicePath(id string) string {
	return "/dev/disk/by-id/nvme-Amazon_Elastic_Block_Store_" + strings.ReplaceAll(id, "-", "")
}

// zoneOf returns the zone of a location: loc itself when it is a zone
// (us-east-1a), else the region's default zone: its first available one,
// or with a custom network the first zone with a suitable subnet.
// Instances and volumes asked for in a region both go there, so that a
// volume attaches to the instances of its region: EBS volumes attach only
// within their zone
// (https://docs.aws.amazon.com/ebs/latest/userguide/ebs-attaching-volume.html),
// and hoist's offers and volumes name regions, as dstack's do.
func (p *Provider) zoneOf(ctx context.Context, loc string) (region, zone string, err error) {
	region, zone = splitZone(loc)
	if zone != "" {
		return region, zone, nil
	}
	if p.customNetwork(region) {
		zone, err := p.networkZone(ctx, region)
		return region, zone, err
	}
	p.zoneMu.Lock()
	defer p.zoneMu.Unlock()
	p.mu.Lock()
	zone = p.zones[region]
	p.mu.Unlock()
	if zone != "" {
		return region, zone, nil
	}
	out, err := p.client(region).DescribeAvailabilityZones(ctx, &ec2.DescribeAvailabilityZonesInput{
		Filters: []types.Filter{{Name: awssdk.String("state"), Values: []string{"available"}}},
	})
	if err != nil {
		return "", "", fmt.Errorf("aws: zones of %s: %w", region, classify(err))
	}
	for _, z := range out.AvailabilityZones {
		// Local Zones and Wavelength Zones are opt-in and not "availability-zone".
		if z.ZoneType == nil || awssdk.ToString(z.ZoneType) == "availability-zone" {
			if zone == "" || awssdk.ToString(z.ZoneName) < zone {
				zone = awssdk.ToString(z.ZoneName)
			}
		}
	}
	if zone == "" {
		return "", "", backends.Stalled(fmt.Errorf("aws: no available zone in %s", region))
	}
	p.mu.Lock()
	p.zones[region] = zone
	p.mu.Unlock()
	return region, zone, nil
}

// CreateVolume creates a gp3 EBS volume (dstack's volume type), idempotent
// on req.ID (the client token).
func (p *Provider) CreateVolume(ctx context.Context, req vm.VolumeRequest) (vm.Disk, error) {
	region, zone, err := p.zoneOf(ctx, req.Region)
	if err != nil {
		return vm.Disk{}, err
	}
	out, err := p.client(region).CreateVolume(ctx, &ec2.CreateVolumeInput{
		AvailabilityZone:  awssdk.String(zone),
		Size:              awssdk.Int32(int32(req.SizeGB)),
		VolumeType:        types.VolumeTypeGp3,
		ClientToken:       awssdk.String(clientToken(req.ID)),
		TagSpecifications: []types.TagSpecification{tagSpec(types.ResourceTypeVolume, p.resourceTags(req.Tags, req.Name))},
	})
	if err != nil {
		return vm.Disk{}, fmt.Errorf("aws: create volume in %s: %w", zone, classifyLaunch(err))
	}
	return p.disk(region, types.Volume{
		VolumeId: out.VolumeId, AvailabilityZone: out.AvailabilityZone, Size: out.Size,
		State: out.State, Attachments: out.Attachments, Tags: out.Tags,
	}), nil
}

func (p *Provider) disk(region string, v types.Volume) vm.Disk {
	d := vm.Disk{
		Ref:    ref(region, awssdk.ToString(v.VolumeId)),
		Region: region,
		SizeGB: int(awssdk.ToInt32(v.Size)),
		Tags:   readTags(v.Tags),
	}
	switch v.State {
	case types.VolumeStateCreating:
		d.State = vm.DiskCreating
	case types.VolumeStateInUse:
		d.State = vm.DiskInUse
	case types.VolumeStateDeleting:
		d.State = vm.DiskDeleting
	case types.VolumeStateDeleted:
		d.State = vm.DiskGone
	default: // available; error volumes show as available and fail to attach
		d.State = vm.DiskAvailable
	}
	for _, a := range v.Attachments {
		if a.State == types.VolumeAttachmentStateAttached || a.State == types.VolumeAttachmentStateAttaching {
			d.AttachedTo = ref(region, awssdk.ToString(a.InstanceId))
		}
	}
	return d
}

// volume describes volume r; r is region/vol-id, or a bare vol-id (a
// registered volume_id) looked up in every configured region.
func (p *Provider) volume(ctx context.Context, r string) (string, types.Volume, error) {
	regions := p.regions
	id := r
	if region, vid, ok := strings.Cut(r, "/"); ok {
		regions, id = []string{region}, vid
	}
	for _, region := range regions {
		out, err := p.client(region).DescribeVolumes(ctx, &ec2.DescribeVolumesInput{VolumeIds: []string{id}})
		if err = classify(err); err != nil {
			if errors.Is(err, backends.ErrNotFound) {
				continue
			}
			return "", types.Volume{}, fmt.Errorf("aws: describe volume %s: %w", r, err)
		}
		for _, v := range out.Volumes {
			if awssdk.ToString(v.VolumeId) == id {
				return region, v, nil
			}
		}
	}
	return "", types.Volume{}, fmt.Errorf("aws: volume %s: %w", r, backends.ErrNotFound)
}

// GetVolume observes a volume.
func (p *Provider) GetVolume(ctx context.Context, r string) (vm.Disk, error) {
	region, v, err := p.volume(ctx, r)
	if err != nil {
		return vm.Disk{}, err
	}
	return p.disk(region, v), nil
}

// attachPoints are the device names tried in turn, as dstack does
// (src/dstack/_internal/core/backends/aws/compute.py, attach_volume); on
// Nitro instances the volume shows up by its NVMe serial whatever the name.
var attachPoints = []string{"/dev/sdf", "/dev/sdg", "/dev/sdh", "/dev/sdi", "/dev/sdj", "/dev/sdk", "/dev/sdl", "/dev/sdm", "/dev/sdn", "/dev/sdo", "/dev/sdp"}

// AttachVolume attaches a volume to an instance under the first free
// device name and returns its NVMe by-id path.
func (p *Provider) AttachVolume(ctx context.Context, volRef, machineRef string) (string, error) {
	region, v, err := p.volume(ctx, volRef)
	if err != nil {
		return "", err
	}
	_, instID, err := parseRef(machineRef)
	if err != nil {
		return "", err
	}
	volID := awssdk.ToString(v.VolumeId)
	for _, a := range v.Attachments {
		if awssdk.ToString(a.InstanceId) == instID && a.State != types.VolumeAttachmentStateDetaching && a.State != types.VolumeAttachmentStateDetached {
			return DevicePath(volID), nil
		}
	}
	c := p.client(region)
	used := map[string]bool{}
	attached, err := c.DescribeVolumes(ctx, &ec2.DescribeVolumesInput{
		Filters: []types.Filter{{Name: awssdk.String("attachment.instance-id"), Values: []string{instID}}},
	})
	if err != nil {
		return "", fmt.Errorf("aws: volumes of %s: %w", machineRef, classify(err))
	}
	for _, av := range attached.Volumes {
		for _, a := range av.Attachments {
			used[awssdk.ToString(a.Device)] = true
		}
	}
	for _, dev := range attachPoints {
		if used[dev] {
			continue
		}
		_, err := c.AttachVolume(ctx, &ec2.AttachVolumeInput{Device: awssdk.String(dev), InstanceId: awssdk.String(instID), VolumeId: awssdk.String(volID)})
		if err == nil {
			return DevicePath(volID), nil
		}
		// A name taken meanwhile: "Invalid value '/dev/sdf' for unixDevice".
		if code(err) == "InvalidParameterValue" && strings.Contains(err.Error(), "unixDevice") {
			continue
		}
		if code(err) == "VolumeInUse" {
			return "", backends.Wait(fmt.Errorf("aws: attach %s to %s: %w", volRef, machineRef, err), detachPoll)
		}
		return "", fmt.Errorf("aws: attach %s to %s: %w", volRef, machineRef, classify(err))
	}
	return "", backends.Stalled(fmt.Errorf("aws: attach %s to %s: no free device name", volRef, machineRef))
}

// DetachVolume detaches a volume from an instance; not attached is
// success, a detach under way is ErrNotYetTerminated.
func (p *Provider) DetachVolume(ctx context.Context, volRef, machineRef string, force bool) error {
	region, v, err := p.volume(ctx, volRef)
	if err != nil {
		if errors.Is(err, backends.ErrNotFound) {
			return nil
		}
		return err
	}
	_, instID, err := parseRef(machineRef)
	if err != nil {
		return err
	}
	var att *types.VolumeAttachment
	for i, a := range v.Attachments {
		if awssdk.ToString(a.InstanceId) == instID {
			att = &v.Attachments[i]
		}
	}
	if att == nil || att.State == types.VolumeAttachmentStateDetached {
		return nil
	}
	if att.State != types.VolumeAttachmentStateDetaching {
		_, err := p.client(region).DetachVolume(ctx, &ec2.DetachVolumeInput{
			VolumeId: v.VolumeId, InstanceId: awssdk.String(instID), Force: awssdk.Bool(force),
		})
		switch {
		case code(err) == "IncorrectState" || code(err) == "InvalidAttachment.NotFound":
			return nil
		case err != nil:
			return fmt.Errorf("aws: detach %s from %s: %w", volRef, machineRef, classify(err))
		}
	}
	return backends.Wait(fmt.Errorf("aws: detach %s from %s: %w", volRef, machineRef, backends.ErrNotYetTerminated), detachPoll)
}

// DeleteVolume deletes a volume; gone is success, attached is
// ErrNotYetTerminated.
func (p *Provider) DeleteVolume(ctx context.Context, r string) error {
	region, v, err := p.volume(ctx, r)
	if err != nil {
		if errors.Is(err, backends.ErrNotFound) {
			return nil
		}
		return err
	}
	_, err = p.client(region).DeleteVolume(ctx, &ec2.DeleteVolumeInput{VolumeId: v.VolumeId})
	switch {
	case code(err) == "VolumeInUse":
		return backends.Wait(fmt.Errorf("aws: delete volume %s: %w: %w", r, backends.ErrNotYetTerminated, err), detachPoll)
	case err != nil:
		if err = classify(err); errors.Is(err, backends.ErrNotFound) {
			return nil
		}
		return fmt.Errorf("aws: delete volume %s: %w", r, err)
	}
	return nil
}

// CreatePlacementGroup creates a cluster placement group
// (src/dstack/_internal/core/backends/aws/compute.py, create_placement_group);
// one of that name already there is returned.
func (p *Provider) CreatePlacementGroup(ctx context.Context, name, region string, tags map[string]string) (string, error) {
	region, _ = splitZone(region)
	name = cut(name, 255)
	_, err := p.client(region).CreatePlacementGroup(ctx, &ec2.CreatePlacementGroupInput{
		GroupName:         awssdk.String(name),
		Strategy:          types.PlacementStrategyCluster,
		TagSpecifications: []types.TagSpecification{tagSpec(types.ResourceTypePlacementGroup, p.resourceTags(tags, ""))},
	})
	if err != nil && code(err) != "InvalidPlacementGroup.Duplicate" {
		return "", fmt.Errorf("aws: create placement group %s in %s: %w", name, region, classify(err))
	}
	return ref(region, name), nil
}

// DeletePlacementGroup deletes a placement group; unknown is success, in use
// is ErrNotYetTerminated.
func (p *Provider) DeletePlacementGroup(ctx context.Context, r string) error {
	region, name, err := parseRef(r)
	if err != nil {
		return err
	}
	_, err = p.client(region).DeletePlacementGroup(ctx, &ec2.DeletePlacementGroupInput{GroupName: awssdk.String(name)})
	switch code(err) {
	case "":
		if err != nil {
			return fmt.Errorf("aws: delete placement group %s: %w", r, classify(err))
		}
		return nil
	case "InvalidPlacementGroup.Unknown":
		return nil
	case "InvalidPlacementGroup.InUse":
		return backends.Wait(fmt.Errorf("aws: delete placement group %s: %w: %w", r, backends.ErrNotYetTerminated, err), detachPoll)
	}
	return fmt.Errorf("aws: delete placement group %s: %w", r, classify(err))
}
