package gce

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"hoist/e2e/cloudsim/sim"
)

// Instance statuses (https://cloud.google.com/compute/docs/instances/instance-life-cycle).
const (
	statusProvisioning = "PROVISIONING"
	statusStaging      = "STAGING"
	statusRunning      = "RUNNING"
	statusStopping     = "STOPPING"
	statusTerminated   = "TERMINATED"
)

// provisioningFor is how long a pending instance shows PROVISIONING before
// STAGING.
const provisioningFor = time.Second

// extraSpec keeps the instance as inserted (protojson), echoed back by get.
const extraSpec = "spec"

func deleted(r sim.Resource) bool { return r.Extra[extraDeleted] == "true" }

// findInstance returns the live instance name in zone.
func findInstance(s *sim.Sim, zone, name string) (sim.Resource, bool) {
	return find(s, sim.KindInstance, func(r sim.Resource) bool { return r.Zone == zone && r.Name == name })
}

func find(s *sim.Sim, kind string, match func(sim.Resource) bool) (sim.Resource, bool) {
	for _, r := range s.List(Name, kind) {
		if !deleted(r) && match(r) {
			return r, true
		}
	}
	return sim.Resource{}, false
}

// findInstanceByID finds an instance by its numeric id or by zone/name.
func (p *Provider) findInstanceByID(s *sim.Sim, id string) (sim.Resource, bool) {
	if zone, name, ok := strings.Cut(id, "/"); ok {
		return findInstance(s, zone, name)
	}
	r, ok := s.Get(Name, id)
	return r, ok && r.Kind == sim.KindInstance && !deleted(r)
}

func (p *Provider) insertInstance(s *sim.Sim, r *http.Request, rid string) (*computepb.Operation, *apiError) {
	zone := r.PathValue("zone")
	in := &computepb.Instance{}
	if e := decodeBody(r, in); e != nil {
		return nil, e
	}
	if e := checkName("resource.name", in.GetName()); e != nil {
		return nil, e
	}
	if e := checkLabels(in.GetLabels()); e != nil {
		return nil, e
	}
	mt := in.GetMachineType()
	if mt == "" {
		return nil, badRequest("required", "Invalid value for field 'resource.machineType': ''. Machine type must be specified.")
	}
	if z := zoneInLink(mt); z != "" && z != zone {
		return nil, badRequest("invalid", fmt.Sprintf("Invalid value for field 'resource.machineType': '%s'. Machine type must be in zone %s.", mt, zone))
	}
	machine := lastSegment(mt)
	image, e := bootImage(in)
	if e != nil {
		return nil, e
	}
	region := regionOf(zone)
	for _, pol := range in.GetResourcePolicies() {
		prg, pname := regionInLink(pol), lastSegment(pol)
		if prg == "" {
			prg = region
		}
		if prg != region {
			return nil, badRequest("invalid", fmt.Sprintf("Invalid value for field 'resource.resourcePolicies[0]': '%s'. Resource policy must be in the same region as the instance.", pol))
		}
		if _, ok := findPolicy(s, prg, pname); !ok {
			return nil, notFound(strings.TrimPrefix(policyLink(prg, pname), "https://www.googleapis.com/compute/v1/"))
		}
	}
	if _, ok := findInstance(s, zone, in.GetName()); ok {
		return nil, &apiError{Code: http.StatusConflict, Reason: "alreadyExists",
			Message: fmt.Sprintf("The resource 'projects/%s/zones/%s/instances/%s' already exists", Project, zone, in.GetName())}
	}
	link := instanceLink(zone, in.GetName())
	if noCapacity(r) || !s.Take(machine) {
		// A stockout: the operation fails with the zone's resource-pool
		// error and HTTP 503 (https://cloud.google.com/compute/docs/troubleshooting/troubleshooting-resource-availability).
		return p.newOp(s, scopeZone(zone), "insert", link, "", &opFailure{
			code:     "ZONE_RESOURCE_POOL_EXHAUSTED",
			message:  fmt.Sprintf("The zone 'projects/%s/zones/%s' does not have enough resources available to fulfill the request.  Try a different zone, or try again later.", Project, zone),
			httpCode: http.StatusServiceUnavailable,
			httpMsg:  "SERVICE UNAVAILABLE",
		}), nil
	}
	spec, _ := protojson.Marshal(in)
	sched := in.GetScheduling()
	spot := sched.GetProvisioningModel() == "SPOT" || sched.GetPreemptible()
	user, keys := sshKeys(in.GetMetadata())
	res := sim.Resource{
		Provider:       Name,
		Kind:           sim.KindInstance,
		ID:             p.newID(),
		Name:           in.GetName(),
		State:          sim.StatePending,
		Region:         region,
		Zone:           zone,
		InstanceType:   machine,
		Image:          image,
		Spot:           spot,
		Tags:           in.GetLabels(),
		Price:          price(machine, zone, spot),
		User:           user,
		AuthorizedKeys: keys,
		UserData:       metadataValue(in.GetMetadata(), "user-data"),
		Extra: map[string]string{
			extraSpec:        string(spec),
			extraRequestID:   rid,
			extraPolicies:    strings.Join(in.GetResourcePolicies(), " "),
			extraTermination: sched.GetInstanceTerminationAction(),
		},
	}
	created, err := s.Create(res)
	if err != nil {
		return nil, &apiError{Code: 500, Reason: "internalError", Message: err.Error()}
	}
	if err := s.Boot(Name, created.ID); err != nil {
		return nil, &apiError{Code: 500, Reason: "internalError", Message: err.Error()}
	}
	return p.newOp(s, scopeZone(zone), "insert", link, created.ID, nil), nil
}

// bootImage returns the source image of the instance's boot disk.
func bootImage(in *computepb.Instance) (string, *apiError) {
	for _, d := range in.GetDisks() {
		if d.GetBoot() {
			if img := d.GetInitializeParams().GetSourceImage(); img != "" {
				return img, nil
			}
			if d.GetSource() != "" {
				return d.GetSource(), nil
			}
		}
	}
	return "", badRequest("invalid", "Invalid value for field 'resource.disks': ''. Boot disk must be specified.")
}

// sshKeys reads the ssh-keys metadata item ("user:ssh-ed25519 AAAA... comment"
// lines, https://cloud.google.com/compute/docs/connect/add-ssh-keys#metadata):
// the first line's user and that user's keys.
func sshKeys(md *computepb.Metadata) (user string, keys []string) {
	for _, line := range strings.Split(metadataValue(md, "ssh-keys"), "\n") {
		u, key, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || key == "" {
			continue
		}
		if user == "" {
			user = u
		}
		if u == user {
			keys = append(keys, strings.TrimSpace(key))
		}
	}
	return user, keys
}

func metadataValue(md *computepb.Metadata, key string) string {
	for _, it := range md.GetItems() {
		if it.GetKey() == key {
			return it.GetValue()
		}
	}
	return ""
}

// zoneInLink returns the zone of ".../zones/<z>/..." links, "" if none.
func zoneInLink(link string) string { return segmentAfter(link, "zones") }

// regionInLink returns the region of ".../regions/<r>/..." links.
func regionInLink(link string) string { return segmentAfter(link, "regions") }

func segmentAfter(link, key string) string {
	parts := strings.Split(link, "/")
	for i := 0; i+1 < len(parts); i++ {
		if parts[i] == key {
			return parts[i+1]
		}
	}
	return ""
}

// instanceView renders an instance as instances.get answers it.
func instanceView(s *sim.Sim, r sim.Resource) *computepb.Instance {
	in := &computepb.Instance{}
	_ = protojson.Unmarshal([]byte(r.Extra[extraSpec]), in)
	id, _ := strconv.ParseUint(r.ID, 10, 64)
	in.Kind = proto.String("compute#instance")
	in.Id = proto.Uint64(id)
	in.Zone = proto.String(zoneLink(r.Zone))
	in.SelfLink = proto.String(instanceLink(r.Zone, r.Name))
	in.CreationTimestamp = proto.String(timestamp(r.CreatedAt))
	in.MachineType = proto.String(zoneLink(r.Zone) + "/machineTypes/" + r.InstanceType)
	in.Labels = r.Tags
	in.LabelFingerprint = proto.String("42WmSpB8rSM=")
	in.Status = proto.String(instanceStatus(s, r))
	in.CpuPlatform = proto.String("Intel Cascade Lake")
	if r.Interrupted {
		in.StatusMessage = proto.String("Instance was preempted.")
	}
	if r.TerminatedAt != nil {
		in.LastStopTimestamp = proto.String(timestamp(*r.TerminatedAt))
	}
	if len(in.NetworkInterfaces) == 0 {
		in.NetworkInterfaces = []*computepb.NetworkInterface{{}}
	}
	nic := in.NetworkInterfaces[0]
	nic.Name = proto.String("nic0")
	nic.Network = proto.String(linkBase + "/global/networks/default")
	if r.Address != "" && r.State != sim.StateTerminated {
		nic.NetworkIP = proto.String(r.Address)
		for _, ac := range nic.AccessConfigs {
			ac.NatIP = proto.String(r.Address)
			ac.Kind = proto.String("compute#accessConfig")
		}
	}
	for i, d := range in.Disks {
		if d.GetBoot() {
			d.Source = proto.String(diskLink(r.Zone, r.Name))
			d.DeviceName = proto.String(cmpOr(d.GetDeviceName(), "persistent-disk-0"))
			d.Index = proto.Int32(int32(i))
			d.InitializeParams = nil
		}
	}
	for _, a := range attachedDisks(r) {
		in.Disks = append(in.Disks, &computepb.AttachedDisk{
			Kind: proto.String("compute#attachedDisk"), Type: proto.String("PERSISTENT"),
			Mode: proto.String("READ_WRITE"), Source: proto.String(a.link),
			DeviceName: proto.String(a.device), Index: proto.Int32(int32(len(in.Disks))),
			AutoDelete: proto.Bool(false), Interface: proto.String("SCSI"),
		})
	}
	return in
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func instanceStatus(s *sim.Sim, r sim.Resource) string {
	switch r.State {
	case sim.StatePending:
		if s.Now().Sub(r.CreatedAt) < provisioningFor {
			return statusProvisioning
		}
		return statusStaging
	case sim.StateRunning:
		return statusRunning
	case sim.StateStopping:
		return statusStopping
	}
	return statusTerminated
}

// An attachment is one disk attached to an instance besides its boot disk.
type attachment struct{ device, link string }

func attachedDisks(r sim.Resource) []attachment {
	var out []attachment
	for _, f := range strings.Fields(r.Extra[extraDisks]) {
		dev, link, _ := strings.Cut(f, "=")
		out = append(out, attachment{dev, link})
	}
	return out
}

func setAttachedDisks(r *sim.Resource, as []attachment) {
	var fs []string
	for _, a := range as {
		fs = append(fs, a.device+"="+a.link)
	}
	if r.Extra == nil {
		r.Extra = map[string]string{}
	}
	r.Extra[extraDisks] = strings.Join(fs, " ")
}

func (p *Provider) getInstance(s *sim.Sim, r *http.Request) (proto.Message, *apiError) {
	zone, name := r.PathValue("zone"), r.PathValue("name")
	res, ok := findInstance(s, zone, name)
	if !ok {
		return nil, notFound(fmt.Sprintf("projects/%s/zones/%s/instances/%s", Project, zone, name))
	}
	return instanceView(s, res), nil
}

func (p *Provider) deleteInstance(s *sim.Sim, r *http.Request, rid string) (*computepb.Operation, *apiError) {
	zone, name := r.PathValue("zone"), r.PathValue("name")
	res, ok := findInstance(s, zone, name)
	if !ok {
		return nil, notFound(fmt.Sprintf("projects/%s/zones/%s/instances/%s", Project, zone, name))
	}
	if res.State != sim.StateTerminated {
		if err := s.Halt(Name, res.ID); err != nil {
			return nil, &apiError{Code: 500, Reason: "internalError", Message: err.Error()}
		}
	}
	for _, a := range attachedDisks(res) {
		if e := detachVolume(s, zone, lastSegment(a.link)); e != nil {
			return nil, e
		}
	}
	if _, err := s.Update(Name, res.ID, func(r *sim.Resource) error {
		r.Extra[extraDeleted] = "true"
		r.Extra[extraDisks] = ""
		return nil
	}); err != nil {
		return nil, &apiError{Code: 500, Reason: "internalError", Message: err.Error()}
	}
	return p.newOp(s, scopeZone(zone), "delete", instanceLink(zone, name), res.ID, nil), nil
}

func (p *Provider) listInstances(s *sim.Sim, r *http.Request) (proto.Message, *apiError) {
	zone := r.PathValue("zone")
	match, e := parseFilter(r.URL.Query().Get("filter"))
	if e != nil {
		return nil, e
	}
	out := &computepb.InstanceList{Kind: proto.String("compute#instanceList"), Id: proto.String("projects/" + Project + "/zones/" + zone + "/instances"),
		SelfLink: proto.String(zoneLink(zone) + "/instances")}
	for _, res := range s.List(Name, sim.KindInstance) {
		if !deleted(res) && res.Zone == zone && match(res.Name, res.Tags) {
			out.Items = append(out.Items, instanceView(s, res))
		}
	}
	return out, nil
}

func (p *Provider) aggregatedInstances(s *sim.Sim, r *http.Request) (proto.Message, *apiError) {
	match, e := parseFilter(r.URL.Query().Get("filter"))
	if e != nil {
		return nil, e
	}
	out := &computepb.InstanceAggregatedList{Kind: proto.String("compute#instanceAggregatedList"),
		Id: proto.String("projects/" + Project + "/aggregated/instances"), Items: map[string]*computepb.InstancesScopedList{},
		SelfLink: proto.String(linkBase + "/aggregated/instances")}
	for _, res := range s.List(Name, sim.KindInstance) {
		if deleted(res) || !match(res.Name, res.Tags) {
			continue
		}
		key := "zones/" + res.Zone
		if out.Items[key] == nil {
			out.Items[key] = &computepb.InstancesScopedList{}
		}
		out.Items[key].Instances = append(out.Items[key].Instances, instanceView(s, res))
	}
	for _, rg := range regionNames {
		for _, z := range Regions[rg] {
			if out.Items["zones/"+z] == nil {
				out.Items["zones/"+z] = &computepb.InstancesScopedList{Warning: noResults("zones/" + z)}
			}
		}
	}
	return out, nil
}

func noResults(scope string) *computepb.Warning {
	return &computepb.Warning{Code: proto.String("NO_RESULTS_ON_PAGE"),
		Message: proto.String("There are no results for scope '" + scope + "' on this page."),
		Data:    []*computepb.Data{{Key: proto.String("scope"), Value: proto.String(scope)}}}
}

// serialPort answers getSerialPortOutput with a boot log that, once the VM's
// sshd runs, carries cloud-init's SSH HOST KEY KEYS block, as a cloud-init
// image writes it to the serial console.
func (p *Provider) serialPort(s *sim.Sim, r *http.Request) (proto.Message, *apiError) {
	zone, name := r.PathValue("zone"), r.PathValue("name")
	res, ok := findInstance(s, zone, name)
	if !ok {
		return nil, notFound(fmt.Sprintf("projects/%s/zones/%s/instances/%s", Project, zone, name))
	}
	port := cmpOr(r.URL.Query().Get("port"), "1")
	if port < "1" || port > "4" || len(port) != 1 {
		return nil, badRequest("invalid", "Invalid value for field 'port': '"+port+"'. Must be between 1 and 4.")
	}
	var b strings.Builder
	if port == "1" {
		b.WriteString(consoleLog(res))
	}
	contents := b.String()
	start, _ := strconv.ParseInt(r.URL.Query().Get("start"), 10, 64)
	if start < 0 || start > int64(len(contents)) {
		start = int64(len(contents))
	}
	return &computepb.SerialPortOutput{
		Kind:     proto.String("compute#serialPortOutput"),
		Contents: proto.String(contents[start:]),
		Start:    proto.Int64(start),
		Next:     proto.Int64(int64(len(contents))),
		SelfLink: proto.String(instanceLink(zone, name) + "/serialPort?port=" + port),
	}, nil
}

func consoleLog(r sim.Resource) string {
	var b strings.Builder
	fmt.Fprintf(&b, "SeaBIOS (version 1.8.2)\r\nBooting from Hard Disk 0...\r\n")
	fmt.Fprintf(&b, "[    0.000000] Linux version 6.8.0-1015-gcp (hoist cloudsim) #16-Ubuntu SMP\r\n")
	fmt.Fprintf(&b, "[    1.234567] cloud-init[412]: Cloud-init v. 24.1.3 running 'init' at %s. Up 5.12 seconds.\r\n",
		r.CreatedAt.UTC().Format(time.RFC1123Z))
	if len(r.HostKeys) == 0 || r.State != sim.StateRunning {
		return b.String()
	}
	b.WriteString("-----BEGIN SSH HOST KEY KEYS-----\r\n")
	for _, k := range r.HostKeys {
		fmt.Fprintf(&b, "%s root@%s\r\n", strings.Join(strings.Fields(k)[:min(2, len(strings.Fields(k)))], " "), r.Name)
	}
	b.WriteString("-----END SSH HOST KEY KEYS-----\r\n")
	fmt.Fprintf(&b, "[    9.876543] cloud-init[733]: Cloud-init v. 24.1.3 finished. Datasource DataSourceGCELocal.  Up 9.87 seconds\r\n")
	return b.String()
}

// attachDisk attaches a persistent disk (state only: the block device on the
// VM is the simulator core's sim.AttachDisk, see attachVolume).
func (p *Provider) attachDisk(s *sim.Sim, r *http.Request, rid string) (*computepb.Operation, *apiError) {
	zone, name := r.PathValue("zone"), r.PathValue("name")
	ad := &computepb.AttachedDisk{}
	if e := decodeBody(r, ad); e != nil {
		return nil, e
	}
	inst, ok := findInstance(s, zone, name)
	if !ok {
		return nil, notFound(fmt.Sprintf("projects/%s/zones/%s/instances/%s", Project, zone, name))
	}
	dzone := cmpOr(zoneInLink(ad.GetSource()), zone)
	dname := lastSegment(ad.GetSource())
	if dzone != zone {
		return nil, badRequest("invalid", fmt.Sprintf("Invalid value for field 'resource.source': '%s'. Disk must be in the instance's zone.", ad.GetSource()))
	}
	disk, ok := findDisk(s, zone, dname)
	if !ok {
		return nil, notFound(fmt.Sprintf("projects/%s/zones/%s/disks/%s", Project, zone, dname))
	}
	device := cmpOr(ad.GetDeviceName(), dname)
	if disk.AttachedTo != "" && disk.AttachedTo != inst.ID {
		other, _ := s.Get(Name, disk.AttachedTo)
		return nil, &apiError{Code: http.StatusBadRequest, Reason: "resourceInUseByAnotherResource",
			Message: fmt.Sprintf("The disk resource 'projects/%s/zones/%s/disks/%s' is already being used by 'projects/%s/zones/%s/instances/%s'", Project, zone, dname, Project, zone, other.Name)}
	}
	if slices.ContainsFunc(attachedDisks(inst), func(a attachment) bool { return a.device == device && lastSegment(a.link) != dname }) {
		return nil, badRequest("invalid", fmt.Sprintf("Invalid value for field 'resource.deviceName': '%s'. A disk with this device name is already attached.", device))
	}
	if disk.AttachedTo == "" {
		if e := attachVolume(s, inst, disk, device); e != nil {
			return nil, e
		}
	}
	return p.newOp(s, scopeZone(zone), "attachDisk", instanceLink(zone, name), inst.ID, nil), nil
}

// DevicePath is where a persistent disk attached under deviceName shows up
// on a Linux VM (https://cloud.google.com/compute/docs/disks/format-mount-disk-linux).
func DevicePath(deviceName string) string { return "/dev/disk/by-id/google-" + deviceName }

// attachVolume attaches disk to inst under device: the simulator core's
// block device (a loop device linked at DevicePath(device)) and the
// instance's disk list.
func attachVolume(s *sim.Sim, inst, disk sim.Resource, device string) *apiError {
	link := diskLink(disk.Zone, disk.Name)
	if err := s.AttachDisk(Name, disk.ID, inst.ID, DevicePath(device)); err != nil {
		return &apiError{Code: 500, Reason: "internalError", Message: err.Error()}
	}
	if _, err := s.Update(Name, disk.ID, func(r *sim.Resource) error {
		r.Extra[extraDeviceName] = device
		return nil
	}); err != nil {
		return &apiError{Code: 500, Reason: "internalError", Message: err.Error()}
	}
	if _, err := s.Update(Name, inst.ID, func(r *sim.Resource) error {
		setAttachedDisks(r, append(attachedDisks(*r), attachment{device, link}))
		return nil
	}); err != nil {
		return &apiError{Code: 500, Reason: "internalError", Message: err.Error()}
	}
	return nil
}

// detachVolume detaches disk name in zone (block device and state).
func detachVolume(s *sim.Sim, zone, name string) *apiError {
	disk, ok := findDisk(s, zone, name)
	if !ok {
		return nil
	}
	if err := s.DetachDisk(Name, disk.ID); err != nil {
		return &apiError{Code: 500, Reason: "internalError", Message: err.Error()}
	}
	_, _ = s.Update(Name, disk.ID, func(r *sim.Resource) error {
		delete(r.Extra, extraDeviceName)
		return nil
	})
	return nil
}

func (p *Provider) detachDisk(s *sim.Sim, r *http.Request, rid string) (*computepb.Operation, *apiError) {
	zone, name := r.PathValue("zone"), r.PathValue("name")
	device := r.URL.Query().Get("deviceName")
	inst, ok := findInstance(s, zone, name)
	if !ok {
		return nil, notFound(fmt.Sprintf("projects/%s/zones/%s/instances/%s", Project, zone, name))
	}
	as := attachedDisks(inst)
	i := slices.IndexFunc(as, func(a attachment) bool { return a.device == device })
	if i < 0 {
		return nil, badRequest("invalid", fmt.Sprintf("Invalid value for field 'deviceName': '%s'. No attached disk found with device name '%s'", device, device))
	}
	if e := detachVolume(s, zone, lastSegment(as[i].link)); e != nil {
		return nil, e
	}
	if _, err := s.Update(Name, inst.ID, func(r *sim.Resource) error {
		setAttachedDisks(r, slices.Delete(as, i, i+1))
		return nil
	}); err != nil {
		return nil, &apiError{Code: 500, Reason: "internalError", Message: err.Error()}
	}
	return p.newOp(s, scopeZone(zone), "detachDisk", instanceLink(zone, name), inst.ID, nil), nil
}
