package gcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"cloud.google.com/go/compute/apiv1/computepb"

	"hoist/backends"
	"hoist/backends/vm"
)

// mutationWait bounds the wait for a disk, attach, detach or policy
// operation; dstack awaits them all.
const mutationWait = 2 * time.Minute

// devicePath is where a persistent disk attached as deviceName shows up on
// the VM (Compute Engine's udev rules,
// https://cloud.google.com/compute/docs/disks/format-mount-disk-linux), the
// path dstack's shim reads (runner/internal/shim/backends/gcp.go).
func devicePath(deviceName string) string { return "/dev/disk/by-id/google-" + deviceName }

// CreateVolume creates a pd-balanced persistent disk (dstack's
// create_volume, src/dstack/_internal/core/backends/gcp/compute.py) in
// req.Region: a zone, or the first zone of a region (where Launch tries
// first; a VM that landed in another zone of the region cannot attach it).
// The Disk's Region is the region, as instances report theirs; the zone is
// in the ref. A disk of that name already there with our instance label is
// taken as the one an earlier call created.
func (p *Provider) CreateVolume(ctx context.Context, req vm.VolumeRequest) (vm.Disk, error) {
	zone := req.Region
	if !isZone(zone) {
		zs, err := p.regionZones(ctx, zone)
		if err != nil {
			return vm.Disk{}, err
		}
		if len(zs) == 0 {
			return vm.Disk{}, backends.Stalled(fmt.Errorf("gcp: region %s has no zones", zone))
		}
		zone = zs[0]
	}
	op, err := p.disks.Insert(ctx, &computepb.InsertDiskRequest{
		Project: p.project, Zone: zone, RequestId: requestID(req.ID, "disk/"+zone),
		DiskResource: &computepb.Disk{
			Name:   ptr(req.Name),
			SizeGb: ptr(int64(req.SizeGB)),
			Type:   ptr("zones/" + zone + "/diskTypes/pd-balanced"),
			Labels: p.labelsOf(req.Tags),
		},
	})
	if err != nil {
		if code, _ := apiError(err); code != 409 {
			return vm.Disk{}, fmt.Errorf("gcp: create disk %s in %s: %w", req.Name, zone, classify(err))
		}
		// 409: an earlier call created it.
	} else if err := p.wait(ctx, op, mutationWait); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return vm.Disk{}, fmt.Errorf("gcp: create disk %s in %s: %w", req.Name, zone, err)
	}
	d, err := p.GetVolume(ctx, ref(zone, req.Name))
	if err != nil {
		return vm.Disk{}, err
	}
	if owner := d.Tags[backends.TagInstance]; req.Tags[backends.TagInstance] != "" && owner != req.Tags[backends.TagInstance] {
		return vm.Disk{}, backends.Stalled(fmt.Errorf("gcp: disk %s exists and is not this volume's", d.Ref))
	}
	return d, nil
}

// GetVolume observes a disk by its ref: zone/name, a disk link
// (projects/p/zones/z/disks/name), or a bare name looked up in the
// configured regions (a registered volume_id).
func (p *Provider) GetVolume(ctx context.Context, r string) (vm.Disk, error) {
	zone, name, err := p.diskRef(ctx, r)
	if err != nil {
		return vm.Disk{}, err
	}
	d, err := p.disks.Get(ctx, &computepb.GetDiskRequest{Project: p.project, Zone: zone, Disk: name})
	if err != nil {
		return vm.Disk{}, fmt.Errorf("gcp: get disk %s: %w", r, classify(err))
	}
	return diskOf(d), nil
}

// diskRef resolves a disk ref to its zone and name.
func (p *Provider) diskRef(ctx context.Context, r string) (zone, name string, err error) {
	if strings.Contains(r, "/disks/") {
		parts := strings.Split(r, "/")
		for i := 0; i+1 < len(parts); i++ {
			if parts[i] == "zones" {
				zone = parts[i+1]
			}
		}
		return zone, lastSegment(r), nil
	}
	if strings.Contains(r, "/") {
		return parseRef(r)
	}
	if !nameRE.MatchString(r) {
		return "", "", backends.Stalled(fmt.Errorf("gcp: %q is not a disk name", r))
	}
	it := p.disks.AggregatedList(ctx, &computepb.AggregatedListDisksRequest{Project: p.project, Filter: ptr(fmt.Sprintf("name = %q", r))})
	for {
		pair, err := it.Next()
		if isDone(err) {
			break
		}
		if err != nil {
			return "", "", fmt.Errorf("gcp: find disk %s: %w", r, classify(err))
		}
		for _, d := range pair.Value.GetDisks() {
			if z := lastSegment(d.GetZone()); d.GetName() == r && vm.InRegions(z, p.regions) {
				return z, r, nil
			}
		}
	}
	return "", "", fmt.Errorf("gcp: disk %s: %w", r, backends.ErrNotFound)
}

// diskOf maps a disk to what the engine sees.
func diskOf(d *computepb.Disk) vm.Disk {
	zone := lastSegment(d.GetZone())
	out := vm.Disk{Ref: ref(zone, d.GetName()), Region: regionOf(zone), SizeGB: int(d.GetSizeGb()), Tags: tagsOf(d.GetLabels())}
	switch d.GetStatus() {
	case "CREATING", "RESTORING":
		out.State = vm.DiskCreating
	case "DELETING":
		out.State = vm.DiskDeleting
	case "FAILED":
		out.State = vm.DiskGone
	default: // READY, UNAVAILABLE
		out.State = vm.DiskAvailable
	}
	if users := d.GetUsers(); len(users) > 0 {
		out.AttachedTo = ref(zoneOfLink(users[0]), lastSegment(users[0]))
		if out.State == vm.DiskAvailable {
			out.State = vm.DiskInUse
		}
	}
	return out
}

func zoneOfLink(link string) string {
	parts := strings.Split(link, "/")
	for i := 0; i+1 < len(parts); i++ {
		if parts[i] == "zones" {
			return parts[i+1]
		}
	}
	return ""
}

// AttachVolume attaches a disk to an instance read-write under the disk's
// name as device name (attachDisk, awaited) and returns
// /dev/disk/by-id/google-<deviceName>. A disk already attached to that
// instance gives its path again.
func (p *Provider) AttachVolume(ctx context.Context, volRef, machineRef string) (string, error) {
	dzone, dname, err := p.diskRef(ctx, volRef)
	if err != nil {
		return "", err
	}
	zone, name, err := parseRef(machineRef)
	if err != nil {
		return "", err
	}
	if dzone != zone {
		return "", backends.Stalled(fmt.Errorf("gcp: disk %s is in zone %s, instance %s in %s", dname, dzone, name, zone))
	}
	if dev, ok, err := p.attachedAs(ctx, zone, name, dname); err != nil || ok {
		return devicePath(dev), err
	}
	op, err := p.instances.AttachDisk(ctx, &computepb.AttachDiskInstanceRequest{
		// No requestId: the same disk may be attached to the same
		// instance again after a detach; attachedAs makes a retry safe.
		Project: p.project, Zone: zone, Instance: name,
		AttachedDiskResource: &computepb.AttachedDisk{
			Source: ptr("projects/" + p.project + "/zones/" + zone + "/disks/" + dname),
			// Device names are RFC 1035 labels like disk names: the
			// disk's name is one (and Compute Engine's default).
			DeviceName: ptr(dname), AutoDelete: ptr(false), Mode: ptr("READ_WRITE"),
		},
	})
	if err != nil {
		return "", fmt.Errorf("gcp: attach %s to %s: %w", volRef, machineRef, classifyInUse(err))
	}
	if err := p.wait(ctx, op, mutationWait); err != nil {
		return "", fmt.Errorf("gcp: attach %s to %s: %w", volRef, machineRef, err)
	}
	return devicePath(dname), nil
}

// attachedAs returns the device name disk dname is attached under to
// instance zone/name.
func (p *Provider) attachedAs(ctx context.Context, zone, name, dname string) (string, bool, error) {
	in, err := p.instances.Get(ctx, &computepb.GetInstanceRequest{Project: p.project, Zone: zone, Instance: name})
	if err != nil {
		return "", false, fmt.Errorf("gcp: get %s: %w", ref(zone, name), classify(err))
	}
	for _, d := range in.GetDisks() {
		if !d.GetBoot() && lastSegment(d.GetSource()) == dname && zoneOfLink(d.GetSource()) == zone {
			return d.GetDeviceName(), true, nil
		}
	}
	return "", false, nil
}

// classifyInUse classifies an error of a disk or policy mutation: a
// resource in use by another (400 resourceInUseByAnotherResource, "is
// already being used by") is a wait, to be retried once the other lets go.
func classifyInUse(err error) error {
	code, reason := apiError(err)
	if code == 400 && (reason == "resourceInUseByAnotherResource" || strings.Contains(err.Error(), "is already being used by")) {
		return backends.Wait(fmt.Errorf("%w: %w", backends.ErrNotYetTerminated, err), 10*time.Second)
	}
	return classify(err)
}

// DetachVolume detaches a disk from an instance (detachDisk by its device
// name, awaited). Not attached, or the instance gone, is success. force
// changes nothing: Compute Engine detaches at once.
func (p *Provider) DetachVolume(ctx context.Context, volRef, machineRef string, force bool) error {
	_, dname, err := p.diskRef(ctx, volRef)
	if err != nil {
		return err
	}
	zone, name, err := parseRef(machineRef)
	if err != nil {
		return err
	}
	dev, ok, err := p.attachedAs(ctx, zone, name, dname)
	if errors.Is(err, backends.ErrNotFound) || err == nil && !ok {
		return nil
	}
	if err != nil {
		return err
	}
	op, err := p.instances.DetachDisk(ctx, &computepb.DetachDiskInstanceRequest{
		Project: p.project, Zone: zone, Instance: name, DeviceName: dev,
	})
	if err != nil {
		if errors.Is(classify(err), backends.ErrNotFound) {
			return nil
		}
		return fmt.Errorf("gcp: detach %s from %s: %w", volRef, machineRef, classify(err))
	}
	if err := p.wait(ctx, op, mutationWait); err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return backends.Wait(fmt.Errorf("gcp: detach %s from %s: %w", volRef, machineRef, backends.ErrNotYetTerminated), 5*time.Second)
		}
		return fmt.Errorf("gcp: detach %s from %s: %w", volRef, machineRef, err)
	}
	return nil
}

// DeleteVolume deletes a disk (awaited); gone is success, attached is a
// wait.
func (p *Provider) DeleteVolume(ctx context.Context, r string) error {
	zone, name, err := p.diskRef(ctx, r)
	if errors.Is(err, backends.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	op, err := p.disks.Delete(ctx, &computepb.DeleteDiskRequest{Project: p.project, Zone: zone, Disk: name})
	if err != nil {
		if err = classifyInUse(err); errors.Is(err, backends.ErrNotFound) {
			return nil
		}
		return fmt.Errorf("gcp: delete disk %s: %w", r, err)
	}
	if err := p.wait(ctx, op, mutationWait); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("gcp: delete disk %s: %w", r, err)
	}
	return nil
}

// CreatePlacementGroup creates a compact placement resource policy
// (groupPlacementPolicy COLLOCATED, as dstack's
// src/dstack/_internal/core/backends/gcp/resources.py) in the region of
// region, awaited, and returns "region/name". Resource policies carry no
// labels: the ownership tags go into the description as JSON.
func (p *Provider) CreatePlacementGroup(ctx context.Context, name, region string, tags map[string]string) (string, error) {
	region = regionOf(region)
	desc, _ := json.Marshal(map[string]any{"hoist": tags})
	op, err := p.policies.Insert(ctx, &computepb.InsertResourcePolicyRequest{
		// No requestId: a 409 on the name makes a retry safe.
		Project: p.project, Region: region,
		ResourcePolicyResource: &computepb.ResourcePolicy{
			Name:        ptr(name),
			Description: ptr(string(desc)),
			GroupPlacementPolicy: &computepb.ResourcePolicyGroupPlacementPolicy{
				Collocation: ptr("COLLOCATED"), AvailabilityDomainCount: ptr(int32(1)),
			},
		},
	})
	if err != nil {
		if code, _ := apiError(err); code == 409 {
			return region + "/" + name, nil
		}
		return "", fmt.Errorf("gcp: create placement policy %s in %s: %w", name, region, classify(err))
	}
	if err := p.wait(ctx, op, mutationWait); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return "", fmt.Errorf("gcp: create placement policy %s in %s: %w", name, region, err)
	}
	return region + "/" + name, nil
}

// DeletePlacementGroup deletes a placement resource policy (awaited); gone
// is success, one still used by an instance is a wait.
func (p *Provider) DeletePlacementGroup(ctx context.Context, r string) error {
	region, name, ok := strings.Cut(r, "/")
	if !ok {
		return backends.Stalled(fmt.Errorf("gcp: bad placement group ref %q (want region/name)", r))
	}
	op, err := p.policies.Delete(ctx, &computepb.DeleteResourcePolicyRequest{Project: p.project, Region: region, ResourcePolicy: name})
	if err != nil {
		if err = classifyInUse(err); errors.Is(err, backends.ErrNotFound) {
			return nil
		}
		return fmt.Errorf("gcp: delete placement policy %s: %w", r, err)
	}
	if err := p.wait(ctx, op, mutationWait); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("gcp: delete placement policy %s: %w", r, classifyInUse(err))
	}
	return nil
}
