package ec2

import (
	"fmt"
	"strings"

	"hoist/e2e/cloudsim/sim"
)

// Extra keys of a volume resource.
const (
	xVolumeType  = "volume_type"
	xIOPS        = "iops"
	xAttachPoint = "attach_point" // the device name given to AttachVolume (/dev/sdf)
)

// DevicePath is where an attached EBS volume shows up on a Nitro
// instance: the udev link of its NVMe serial, "vol" and the id without its
// dash (https://docs.aws.amazon.com/ebs/latest/userguide/identify-nvme-ebs-device.html;
// dstack's shim looks the volume up the same way, runner/internal/shim/backends/aws.go).
func DevicePath(volumeID string) string {
	return "/dev/disk/by-id/nvme-Amazon_Elastic_Block_Store_" + strings.ReplaceAll(volumeID, "-", "")
}

// attachDisk attaches volume volID to instance at its EC2 device name: the
// simulator core backs it with a loop device behind DevicePath, where the
// instance's shim finds it.
func attachDisk(s *sim.Sim, volID, instance, attachPoint string) error {
	if err := s.AttachDisk(name, volID, instance, DevicePath(volID)); err != nil {
		return err
	}
	_, err := s.Update(name, volID, func(r *sim.Resource) error {
		r.Extra[xAttachPoint] = attachPoint
		return nil
	})
	return err
}

// detachDisk undoes attachDisk.
func detachDisk(s *sim.Sim, volID string) error {
	if err := s.DetachDisk(name, volID); err != nil {
		return err
	}
	_, err := s.Update(name, volID, func(r *sim.Resource) error {
		delete(r.Extra, xAttachPoint)
		return nil
	})
	return err
}

func (c *call) volumeNode(v sim.Resource, itemName string) node {
	st := v.State
	if st == sim.StateDeleted {
		st = "deleted"
	}
	var att []node
	if v.AttachedTo != "" {
		att = append(att, el("item",
			leaf("volumeId", v.ID),
			leaf("instanceId", v.AttachedTo),
			leaf("device", v.Extra[xAttachPoint]),
			leaf("status", "attached"),
			leaf("attachTime", isoTime(v.CreatedAt)),
			boolLeaf("deleteOnTermination", false),
		))
	}
	n := el(itemName,
		leaf("volumeId", v.ID),
		intLeaf("size", v.SizeGB),
		leaf("snapshotId", ""),
		leaf("availabilityZone", v.Zone),
		leaf("status", st),
		leaf("createTime", isoTime(v.CreatedAt)),
		items("attachmentSet", att...),
		leaf("volumeType", v.Extra[xVolumeType]),
		opt("iops", v.Extra[xIOPS]),
		boolLeaf("encrypted", false),
		boolLeaf("multiAttachEnabled", false),
		tagSet(v.Tags),
	)
	return n
}

func (c *call) createVolume() ([]node, *apiError) {
	c.p.mu.Lock()
	defer c.p.mu.Unlock()
	if token := c.get("ClientToken"); token != "" {
		for _, v := range c.regional(sim.KindVolume) {
			if v.Extra["client_token"] == token {
				return c.volumeNode(v, "volume").children, nil
			}
		}
	}
	zone := c.get("AvailabilityZone")
	if !contains(zones(c.region), zone) {
		return nil, badRequest("InvalidParameterValue", fmt.Sprintf("Invalid availability zone: [%s]", zone))
	}
	size, e := c.intParam("Size", 0)
	if e != nil {
		return nil, e
	}
	typ := c.get("VolumeType")
	if typ == "" {
		typ = "gp2"
	}
	if size < 1 || size > 16384 {
		return nil, badRequest("InvalidParameterValue", fmt.Sprintf("Volume of %dGiB is out of range for %s (1-16384)", size, typ))
	}
	iops := c.get("Iops")
	if iops == "" && typ == "gp3" {
		iops = "3000"
	}
	tags := c.tagSpecs("volume")
	v, err := c.s.Create(sim.Resource{
		Provider: name, Kind: sim.KindVolume, ID: newID("vol"), Name: tags["Name"], State: sim.StateAvailable,
		Region: c.region, Zone: zone, SizeGB: size, Tags: tags,
		// EBS gp3 is $0.08 per GB-month (https://aws.amazon.com/ebs/pricing/); per hour:
		Price: float64(size) * 0.08 / 730,
		Extra: map[string]string{xVolumeType: typ, xIOPS: iops, "client_token": c.get("ClientToken")},
	})
	if err != nil {
		return nil, errorf(500, "InternalError", err.Error())
	}
	out := c.volumeNode(v, "volume").children
	// A new volume is reported "creating" by CreateVolume, as EC2 does.
	for i := range out {
		if out[i].name == "status" {
			out[i].text = "creating"
		}
	}
	return out, nil
}

// volume returns a live volume of the call's region, or EC2's errors.
func (c *call) volume(id string) (sim.Resource, *apiError) {
	if !strings.HasPrefix(id, "vol-") {
		return sim.Resource{}, badRequest("InvalidVolumeID.Malformed", fmt.Sprintf("Invalid id: \"%s\" (expecting \"vol-...\")", id))
	}
	v, ok := c.s.Get(name, id)
	if !ok || v.Kind != sim.KindVolume || v.Region != c.region || v.State == sim.StateDeleted {
		return sim.Resource{}, badRequest("InvalidVolume.NotFound", fmt.Sprintf("The volume '%s' does not exist.", id))
	}
	return v, nil
}

func (c *call) describeVolumes() ([]node, *apiError) {
	ids := c.list("VolumeId")
	var vs []sim.Resource
	if len(ids) > 0 {
		for _, id := range ids {
			v, e := c.volume(id)
			if e != nil {
				return nil, e
			}
			vs = append(vs, v)
		}
	} else {
		for _, v := range c.regional(sim.KindVolume) {
			if v.State != sim.StateDeleted {
				vs = append(vs, v)
			}
		}
	}
	var out []node
	for _, v := range vs {
		ok, e := c.matches(v.Tags, func(name string) (string, bool) {
			switch name {
			case "status":
				return v.State, true
			case "availability-zone":
				return v.Zone, true
			case "attachment.instance-id":
				return v.AttachedTo, true
			case "volume-id":
				return v.ID, true
			}
			return "", false
		})
		if e != nil {
			return nil, e
		}
		if ok {
			out = append(out, c.volumeNode(v, "item"))
		}
	}
	return []node{el("volumeSet", out...)}, nil
}

func attachmentNode(volID, instance, device, status string) []node {
	return []node{
		leaf("volumeId", volID),
		leaf("instanceId", instance),
		leaf("device", device),
		leaf("status", status),
	}
}

func (c *call) attachVolume() ([]node, *apiError) {
	c.p.mu.Lock()
	defer c.p.mu.Unlock()
	v, e := c.volume(c.get("VolumeId"))
	if e != nil {
		return nil, e
	}
	inst, e := c.instance(c.get("InstanceId"))
	if e != nil {
		return nil, e
	}
	if inst.State != sim.StateRunning {
		return nil, badRequest("IncorrectState", fmt.Sprintf("Instance '%s' is not 'running'.", inst.ID))
	}
	if v.AttachedTo != "" {
		return nil, badRequest("VolumeInUse", fmt.Sprintf("%s is already attached to an instance", v.ID))
	}
	if v.Zone != inst.Zone {
		return nil, badRequest("InvalidVolume.ZoneMismatch", fmt.Sprintf("The volume '%s' is not in the same availability zone as instance '%s'", v.ID, inst.ID))
	}
	dev := c.get("Device")
	for _, other := range c.regional(sim.KindVolume) {
		if other.AttachedTo == inst.ID && other.Extra[xAttachPoint] == dev {
			return nil, badRequest("InvalidParameterValue", fmt.Sprintf("Invalid value '%s' for unixDevice. Attachment point %s is already in use", dev, dev))
		}
	}
	if dev == "/dev/sda1" || !strings.HasPrefix(dev, "/dev/") {
		return nil, badRequest("InvalidParameterValue", fmt.Sprintf("Invalid value '%s' for unixDevice.", dev))
	}
	if err := attachDisk(c.s, v.ID, inst.ID, dev); err != nil {
		return nil, errorf(500, "InternalError", err.Error())
	}
	return append(attachmentNode(v.ID, inst.ID, dev, "attaching"), leaf("attachTime", isoTime(c.s.Now()))), nil
}

func (c *call) detachVolume() ([]node, *apiError) {
	c.p.mu.Lock()
	defer c.p.mu.Unlock()
	v, e := c.volume(c.get("VolumeId"))
	if e != nil {
		return nil, e
	}
	if v.AttachedTo == "" {
		return nil, badRequest("IncorrectState", fmt.Sprintf("Volume '%s' is in the 'available' state.", v.ID))
	}
	if id := c.get("InstanceId"); id != "" && id != v.AttachedTo {
		return nil, badRequest("InvalidAttachment.NotFound", fmt.Sprintf("Volume '%s' is not attached to instance '%s'", v.ID, id))
	}
	dev := v.Extra[xAttachPoint]
	if err := detachDisk(c.s, v.ID); err != nil {
		return nil, errorf(500, "InternalError", err.Error())
	}
	return attachmentNode(v.ID, v.AttachedTo, dev, "detaching"), nil
}

func (c *call) deleteVolume() ([]node, *apiError) {
	c.p.mu.Lock()
	defer c.p.mu.Unlock()
	v, e := c.volume(c.get("VolumeId"))
	if e != nil {
		return nil, e
	}
	if v.AttachedTo != "" {
		return nil, badRequest("VolumeInUse", fmt.Sprintf("Volume %s is currently attached to %s", v.ID, v.AttachedTo))
	}
	if err := c.s.DeleteDisk(name, v.ID); err != nil {
		return nil, errorf(500, "InternalError", err.Error())
	}
	c.markDeleted(v.ID)
	return []node{boolLeaf("return", true)}, nil
}
