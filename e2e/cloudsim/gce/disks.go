package gce

import (
	"fmt"
	"net/http"
	"strconv"

	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/protobuf/proto"

	"hoist/e2e/cloudsim/sim"
)

func findDisk(s *sim.Sim, zone, name string) (sim.Resource, bool) {
	return find(s, sim.KindVolume, func(r sim.Resource) bool { return r.Zone == zone && r.Name == name })
}

func (p *Provider) insertDisk(s *sim.Sim, r *http.Request, rid string) (*computepb.Operation, *apiError) {
	zone := r.PathValue("zone")
	d := &computepb.Disk{}
	if e := decodeBody(r, d); e != nil {
		return nil, e
	}
	if e := checkName("resource.name", d.GetName()); e != nil {
		return nil, e
	}
	if e := checkLabels(d.GetLabels()); e != nil {
		return nil, e
	}
	if d.GetSizeGb() <= 0 || d.GetSizeGb() > 65536 {
		return nil, badRequest("invalid", fmt.Sprintf("Invalid value for field 'resource.sizeGb': '%d'. Disk size must be between 1 and 65536 GB.", d.GetSizeGb()))
	}
	if _, ok := findDisk(s, zone, d.GetName()); ok {
		return nil, &apiError{Code: http.StatusConflict, Reason: "alreadyExists",
			Message: fmt.Sprintf("The resource 'projects/%s/zones/%s/disks/%s' already exists", Project, zone, d.GetName())}
	}
	created, err := s.Create(sim.Resource{
		Provider: Name, Kind: sim.KindVolume, ID: p.newID(), Name: d.GetName(),
		State: sim.StateAvailable, Region: regionOf(zone), Zone: zone,
		SizeGB: int(d.GetSizeGb()), Tags: d.GetLabels(),
		// Standard persistent disk pricing, pd-balanced
		// (https://cloud.google.com/compute/disks-image-pricing).
		Price: 0.1 * float64(d.GetSizeGb()) / 730,
		Extra: map[string]string{
			extraDiskType:  cmpOr(d.GetType(), zoneLink(zone)+"/diskTypes/pd-standard"),
			extraRequestID: rid,
		},
	})
	if err != nil {
		return nil, &apiError{Code: 500, Reason: "internalError", Message: err.Error()}
	}
	return p.newOp(s, scopeZone(zone), "insert", diskLink(zone, d.GetName()), created.ID, nil), nil
}

func diskView(s *sim.Sim, r sim.Resource) *computepb.Disk {
	id, _ := strconv.ParseUint(r.ID, 10, 64)
	status := "READY"
	d := &computepb.Disk{
		Kind:                   proto.String("compute#disk"),
		Id:                     proto.Uint64(id),
		Name:                   proto.String(r.Name),
		Zone:                   proto.String(zoneLink(r.Zone)),
		SizeGb:                 proto.Int64(int64(r.SizeGB)),
		Type:                   proto.String(zoneLink(r.Zone) + "/diskTypes/" + lastSegment(r.Extra[extraDiskType])),
		Status:                 proto.String(status),
		Labels:                 r.Tags,
		LabelFingerprint:       proto.String("42WmSpB8rSM="),
		SelfLink:               proto.String(diskLink(r.Zone, r.Name)),
		CreationTimestamp:      proto.String(timestamp(r.CreatedAt)),
		PhysicalBlockSizeBytes: proto.Int64(4096),
	}
	if r.AttachedTo != "" {
		if inst, ok := s.Get(Name, r.AttachedTo); ok {
			d.Users = []string{instanceLink(inst.Zone, inst.Name)}
		}
	}
	return d
}

func (p *Provider) getDisk(s *sim.Sim, r *http.Request) (proto.Message, *apiError) {
	zone, name := r.PathValue("zone"), r.PathValue("name")
	d, ok := findDisk(s, zone, name)
	if !ok {
		return nil, notFound(fmt.Sprintf("projects/%s/zones/%s/disks/%s", Project, zone, name))
	}
	return diskView(s, d), nil
}

func (p *Provider) deleteDisk(s *sim.Sim, r *http.Request, rid string) (*computepb.Operation, *apiError) {
	zone, name := r.PathValue("zone"), r.PathValue("name")
	d, ok := findDisk(s, zone, name)
	if !ok {
		return nil, notFound(fmt.Sprintf("projects/%s/zones/%s/disks/%s", Project, zone, name))
	}
	if d.AttachedTo != "" {
		inst, _ := s.Get(Name, d.AttachedTo)
		return nil, &apiError{Code: http.StatusBadRequest, Reason: "resourceInUseByAnotherResource",
			Message: fmt.Sprintf("The disk resource 'projects/%s/zones/%s/disks/%s' is already being used by 'projects/%s/zones/%s/instances/%s'", Project, zone, name, Project, inst.Zone, inst.Name)}
	}
	if err := s.DeleteDisk(Name, d.ID); err != nil {
		return nil, &apiError{Code: 500, Reason: "internalError", Message: err.Error()}
	}
	now := s.Now().UTC()
	if _, err := s.Update(Name, d.ID, func(r *sim.Resource) error {
		r.State, r.TerminatedAt = sim.StateDeleted, &now
		r.Extra[extraDeleted] = "true"
		return nil
	}); err != nil {
		return nil, &apiError{Code: 500, Reason: "internalError", Message: err.Error()}
	}
	return p.newOp(s, scopeZone(zone), "delete", diskLink(zone, name), d.ID, nil), nil
}

func (p *Provider) listDisks(s *sim.Sim, r *http.Request) (proto.Message, *apiError) {
	zone := r.PathValue("zone")
	match, e := parseFilter(r.URL.Query().Get("filter"))
	if e != nil {
		return nil, e
	}
	out := &computepb.DiskList{Kind: proto.String("compute#diskList"), SelfLink: proto.String(zoneLink(zone) + "/disks")}
	for _, d := range s.List(Name, sim.KindVolume) {
		if !deleted(d) && d.Zone == zone && match(d.Name, d.Tags) {
			out.Items = append(out.Items, diskView(s, d))
		}
	}
	return out, nil
}

func (p *Provider) aggregatedDisks(s *sim.Sim, r *http.Request) (proto.Message, *apiError) {
	match, e := parseFilter(r.URL.Query().Get("filter"))
	if e != nil {
		return nil, e
	}
	out := &computepb.DiskAggregatedList{Kind: proto.String("compute#diskAggregatedList"),
		Items: map[string]*computepb.DisksScopedList{}, SelfLink: proto.String(linkBase + "/aggregated/disks")}
	for _, d := range s.List(Name, sim.KindVolume) {
		if deleted(d) || !match(d.Name, d.Tags) {
			continue
		}
		key := "zones/" + d.Zone
		if out.Items[key] == nil {
			out.Items[key] = &computepb.DisksScopedList{}
		}
		out.Items[key].Disks = append(out.Items[key].Disks, diskView(s, d))
	}
	return out, nil
}
