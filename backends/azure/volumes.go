package azure

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"strconv"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"

	"hoist/backends"
	"hoist/backends/vm"
)

// maxLUNs is the number of data disk slots of a VM the driver uses (LUN 0
// to 63; the largest sizes take 64 data disks).
const maxLUNs = 64

// detachWait is how long a caller waits for a disk still attached.
const detachWait = 5 * time.Second

// DevicePath is where the data disk at lun shows up in a Linux VM: the link
// the udev rules of Azure's Linux agent make
// (https://learn.microsoft.com/troubleshoot/azure/virtual-machines/linux/troubleshoot-device-names-problems).
func DevicePath(lun int) string { return "/dev/disk/azure/scsi1/lun" + strconv.Itoa(lun) }

// parseDiskRef splits a disk's Ref, resource-group/name, also accepting the
// disk's Resource Manager id (what Azure's portal and CLI show, so what a
// user gives as volume_id) in the backend's subscription.
func (p *provider) parseDiskRef(r string) (rg, name string, err error) {
	if strings.HasPrefix(r, "/") {
		id, err := arm.ParseResourceID(r)
		if err != nil || !strings.EqualFold(id.ResourceType.String(), "Microsoft.Compute/disks") {
			return "", "", backends.Stalled(fmt.Errorf("azure: %q is not a managed disk id", r))
		}
		if !strings.EqualFold(id.SubscriptionID, p.sub) {
			return "", "", backends.Stalled(fmt.Errorf("azure: disk %s is in subscription %s, not the backend's %s", id.Name, id.SubscriptionID, p.sub))
		}
		return id.ResourceGroupName, id.Name, nil
	}
	rg, name, _, err = parseRef(r)
	return rg, name, err
}

// diskID is the Resource Manager id of disk name in resource group rg.
func (p *provider) diskID(rg, name string) string {
	return fmt.Sprintf("/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Compute/disks/%s", p.sub, rg, name)
}

// CreateVolume creates an empty managed disk (StandardSSD_LRS) named
// req.Name, so that a repeated create is the same PUT. It does not wait:
// GetVolume follows provisioningState.
func (p *provider) CreateVolume(ctx context.Context, req vm.VolumeRequest) (vm.Disk, error) {
	loc := strings.ToLower(req.Region)
	if loc == "" || req.SizeGB <= 0 {
		return vm.Disk{}, backends.Stalled(errors.New("azure: a volume needs a region and a size"))
	}
	tags := maps.Clone(p.tags)
	if tags == nil {
		tags = map[string]string{}
	}
	maps.Copy(tags, req.Tags)
	size := int32(req.SizeGB)
	poller, err := p.disks.BeginCreateOrUpdate(ctx, p.rg, req.Name, armcompute.Disk{
		Location: &loc,
		Tags:     ptrTags(tags),
		SKU:      &armcompute.DiskSKU{Name: ptr(armcompute.DiskStorageAccountTypesStandardSSDLRS)},
		Properties: &armcompute.DiskProperties{
			CreationData: &armcompute.CreationData{CreateOption: ptr(armcompute.DiskCreateOptionEmpty)},
			DiskSizeGB:   &size,
		},
	}, nil)
	if err != nil {
		return vm.Disk{}, classify("create disk "+req.Name, err)
	}
	d := vm.Disk{Ref: p.rg + "/" + req.Name, Region: loc, SizeGB: req.SizeGB, State: vm.DiskCreating, Tags: tags}
	if poller.Done() {
		res, err := poller.Result(ctx)
		if err != nil {
			return vm.Disk{}, classify("create disk "+req.Name, err)
		}
		d = disk(p.rg+"/"+req.Name, &res.Disk)
	}
	return d, nil
}

// GetVolume observes a managed disk by its Ref, resource-group/name (or
// its Resource Manager id: a registered volume_id).
func (p *provider) GetVolume(ctx context.Context, r string) (vm.Disk, error) {
	rg, name, err := p.parseDiskRef(r)
	if err != nil {
		return vm.Disk{}, err
	}
	res, err := p.disks.Get(ctx, rg, name, nil)
	if err != nil {
		return vm.Disk{}, classify("get disk "+name, err)
	}
	return disk(rg+"/"+name, &res.Disk), nil
}

// disk maps a managed disk onto vm.Disk; AttachedTo is the VM's
// resource-group/name (without the spot mark of its Ref).
func disk(r string, d *armcompute.Disk) vm.Disk {
	out := vm.Disk{Ref: r, Region: deref(d.Location), Tags: unptrTags(d.Tags), State: vm.DiskAvailable}
	if d.ManagedBy != nil {
		if id, err := arm.ParseResourceID(*d.ManagedBy); err == nil {
			out.AttachedTo = id.ResourceGroupName + "/" + id.Name
		}
	}
	props := d.Properties
	if props == nil {
		return out
	}
	out.SizeGB = int(deref(props.DiskSizeGB))
	switch strings.ToLower(deref(props.ProvisioningState)) {
	case "creating", "updating":
		if out.AttachedTo == "" {
			out.State = vm.DiskCreating
		}
	case "deleting":
		out.State = vm.DiskDeleting
	}
	if out.State == vm.DiskAvailable && props.DiskState != nil && *props.DiskState != armcompute.DiskStateUnattached {
		out.State = vm.DiskInUse
	}
	return out
}

// AttachVolume attaches a managed disk to a VM at LUN hash(disk id) mod 64
// (the next free one when taken), with a PATCH of the VM's
// storageProfile.dataDisks, and waits for it. It returns the disk's device
// path in the VM. A disk already attached to the VM returns its path.
func (p *provider) AttachVolume(ctx context.Context, volRef, machineRef string) (string, error) {
	drg, dname, err := p.parseDiskRef(volRef)
	if err != nil {
		return "", err
	}
	rg, name, _, err := parseRef(machineRef)
	if err != nil {
		return "", err
	}
	d, err := p.disks.Get(ctx, drg, dname, nil)
	if err != nil {
		return "", classify("get disk "+dname, err)
	}
	diskID := deref(d.ID)
	if d.ManagedBy != nil {
		if owner, err := arm.ParseResourceID(*d.ManagedBy); err == nil && !(strings.EqualFold(owner.ResourceGroupName, rg) && strings.EqualFold(owner.Name, name)) {
			return "", backends.Wait(fmt.Errorf("azure: disk %s is attached to virtual machine %s", dname, owner.Name), detachWait)
		}
	}
	v, err := p.vms.Get(ctx, rg, name, nil)
	if err != nil {
		return "", classify("get virtual machine "+name, err)
	}
	var disks []*armcompute.DataDisk
	if v.Properties != nil && v.Properties.StorageProfile != nil {
		disks = v.Properties.StorageProfile.DataDisks
	}
	used := map[int]bool{}
	for _, dd := range disks {
		if dd == nil || dd.Lun == nil {
			continue
		}
		if dd.ManagedDisk != nil && strings.EqualFold(deref(dd.ManagedDisk.ID), diskID) && !deref(dd.ToBeDetached) {
			return DevicePath(int(*dd.Lun)), nil
		}
		used[int(*dd.Lun)] = true
	}
	lun, ok := pickLUN(diskID, used)
	if !ok {
		return "", backends.Stalled(fmt.Errorf("azure: virtual machine %s has no free LUN for disk %s", name, dname))
	}
	disks = append(disks, &armcompute.DataDisk{
		Lun:          ptr(int32(lun)),
		CreateOption: ptr(armcompute.DiskCreateOptionTypesAttach),
		ManagedDisk:  &armcompute.ManagedDiskParameters{ID: &diskID},
	})
	if err := p.updateDisks(ctx, rg, name, disks); err != nil {
		return "", fmt.Errorf("attach disk %s: %w", dname, err)
	}
	p.log.Info("azure_disk_attached", "disk", dname, "vm", name, "lun", lun)
	return DevicePath(lun), nil
}

// pickLUN returns hash(disk id) mod 64, or the next free LUN after it.
func pickLUN(diskID string, used map[int]bool) (int, bool) {
	h := fnv.New32a()
	h.Write([]byte(strings.ToLower(diskID)))
	start := int(h.Sum32() % maxLUNs)
	for i := range maxLUNs {
		if lun := (start + i) % maxLUNs; !used[lun] {
			return lun, true
		}
	}
	return 0, false
}

// updateDisks PATCHes a VM's data disks and waits for the update. A
// conflict (the disk in use elsewhere, another operation on the VM) is a
// wait, not a capacity error.
func (p *provider) updateDisks(ctx context.Context, rg, name string, disks []*armcompute.DataDisk) error {
	poller, err := p.vms.BeginUpdate(ctx, rg, name, armcompute.VirtualMachineUpdate{
		Properties: &armcompute.VirtualMachineProperties{StorageProfile: &armcompute.StorageProfile{DataDisks: disks}},
	}, nil)
	if err == nil {
		_, err = poller.PollUntilDone(ctx, &runtime.PollUntilDoneOptions{Frequency: p.poll})
	}
	if err == nil {
		return nil
	}
	var re *azcore.ResponseError
	if errors.As(err, &re) && re.StatusCode == 409 {
		return backends.Wait(fmt.Errorf("azure: update virtual machine %s: %w", name, err), detachWait)
	}
	return classify("update virtual machine "+name, err)
}

// DetachVolume detaches a managed disk from a VM (toBeDetached, with
// detachOption ForceDetach when force) and waits for it. A disk not
// attached, or a VM gone, is success.
func (p *provider) DetachVolume(ctx context.Context, volRef, machineRef string, force bool) error {
	drg, dname, err := p.parseDiskRef(volRef)
	if err != nil {
		return err
	}
	rg, name, _, err := parseRef(machineRef)
	if err != nil {
		return err
	}
	diskID := p.diskID(drg, dname)
	v, err := p.vms.Get(ctx, rg, name, nil)
	if err != nil {
		err = classify("get virtual machine "+name, err)
		if errors.Is(err, backends.ErrNotFound) {
			return nil
		}
		return err
	}
	if v.Properties == nil || v.Properties.StorageProfile == nil {
		return nil
	}
	disks := v.Properties.StorageProfile.DataDisks
	found := false
	for _, dd := range disks {
		if dd != nil && dd.ManagedDisk != nil && strings.EqualFold(deref(dd.ManagedDisk.ID), diskID) {
			found = true
			dd.ToBeDetached = ptr(true)
			if force {
				dd.DetachOption = ptr(armcompute.DiskDetachOptionTypesForceDetach)
			}
		}
	}
	if !found {
		return nil
	}
	if err := p.updateDisks(ctx, rg, name, disks); err != nil {
		return fmt.Errorf("detach disk %s: %w", dname, err)
	}
	p.log.Info("azure_disk_detached", "disk", dname, "vm", name, "force", force)
	return nil
}

// DeleteVolume deletes a managed disk without waiting. Gone is success; a
// disk still attached is backends.ErrNotYetTerminated (wait).
func (p *provider) DeleteVolume(ctx context.Context, r string) error {
	rg, name, err := p.parseDiskRef(r)
	if err != nil {
		return err
	}
	if _, err := p.disks.BeginDelete(ctx, rg, name, nil); err != nil {
		var re *azcore.ResponseError
		if errors.As(err, &re) && re.StatusCode == 409 {
			return backends.Wait(fmt.Errorf("azure: delete disk %s: %w: %w", name, backends.ErrNotYetTerminated, err), detachWait)
		}
		err = classify("delete disk "+name, err)
		if errors.Is(err, backends.ErrNotFound) {
			return nil
		}
		return err
	}
	return nil
}
