package ec2

import (
	"encoding/base64"
	"fmt"
	"strings"
	"time"

	"hoist/backends/offers"
	"hoist/e2e/cloudsim/sim"
)

// Resource kinds of the simulated EC2 besides instances and volumes.
const (
	kindKeyPair        = "key_pair"
	kindSecurityGroup  = "security_group"
	kindPlacementGroup = "placement_group"
)

// Extra keys of an instance resource.
const (
	xClientToken    = "client_token"
	xReservation    = "reservation_id"
	xKeyName        = "key_name"
	xPlacementGroup = "placement_group"
	xSecurityGroups = "security_groups"
	xStateReason    = "state_reason"
	xSpotRequest    = "spot_request_id"
	xIAMProfile     = "iam_instance_profile"
	xStoppingSince  = "stopping_since"
	xSubnet         = "subnet_id"
	xVPC            = "vpc_id"
	xPublic         = "public_ip" // "false" when the instance has no public address
)

// EC2 instance state codes
// (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_InstanceState.html).
var stateCodes = map[string]int{"pending": 0, "running": 16, "shutting-down": 32, "terminated": 48}

// ec2State maps the simulator's state to EC2's instance state name.
func ec2State(s string) string {
	switch s {
	case sim.StatePending:
		return "pending"
	case sim.StateRunning:
		return "running"
	case sim.StateStopping:
		return "shutting-down"
	default:
		return "terminated"
	}
}

// terminatedVisible is how long EC2 keeps showing a terminated instance.
const terminatedVisible = time.Hour

func (c *call) runInstances() ([]node, *apiError) {
	c.p.mu.Lock()
	defer c.p.mu.Unlock()
	token := c.get("ClientToken")
	if token != "" {
		// Idempotency (https://docs.aws.amazon.com/ec2/latest/devguide/ec2-api-idempotency.html):
		// the same token returns the same reservation.
		var same []sim.Resource
		for _, r := range c.regional(sim.KindInstance) {
			if r.Extra[xClientToken] == token {
				same = append(same, r)
			}
		}
		if len(same) > 0 {
			if same[0].InstanceType != c.get("InstanceType") || same[0].Image != c.get("ImageId") {
				return nil, badRequest("IdempotentParameterMismatch", "The client token you have provided is associated with a request that had different parameters.")
			}
			return c.reservation(same), nil
		}
	}
	typ := c.get("InstanceType")
	if c.noCapacity {
		return nil, insufficientCapacity(typ, c.get("Placement.AvailabilityZone"))
	}
	min, e := c.intParam("MinCount", 1)
	if e != nil {
		return nil, e
	}
	max, e := c.intParam("MaxCount", 1)
	if e != nil {
		return nil, e
	}
	if min < 1 || max < min {
		return nil, badRequest("InvalidParameterValue", "MinCount and MaxCount must be positive, MinCount <= MaxCount")
	}
	img, e := c.image(c.get("ImageId"))
	if e != nil {
		return nil, e
	}
	zone := c.get("Placement.AvailabilityZone")
	if zone != "" && !contains(zones(c.region), zone) {
		return nil, badRequest("InvalidParameterValue", fmt.Sprintf("Invalid availability zone: [%s]", zone))
	}
	net, e := c.launchNetwork(zone)
	if e != nil {
		return nil, e
	}
	zone = net.subnet.zone
	spot := c.get("InstanceMarketOptions.MarketType") == "spot"
	price, e := c.price(typ, spot)
	if e != nil {
		return nil, e
	}
	if spot {
		if m := c.get("InstanceMarketOptions.SpotOptions.MaxPrice"); m != "" {
			var maxPrice float64
			if _, err := fmt.Sscan(m, &maxPrice); err != nil || maxPrice < price {
				return nil, badRequest("SpotMaxPriceTooLow", fmt.Sprintf("Your Spot request price of %s is lower than the minimum required Spot request fulfillment price of %g.", m, price))
			}
		}
	}
	extra := map[string]string{xClientToken: token, xReservation: newID("r")}
	var keys []string
	if kn := c.get("KeyName"); kn != "" {
		kp, ok := c.byName(kindKeyPair, kn)
		if !ok {
			return nil, badRequest("InvalidKeyPair.NotFound", fmt.Sprintf("The key pair '%s' does not exist", kn))
		}
		keys = append(keys, kp.Extra["public_key"])
		extra[xKeyName] = kn
	}
	userData := ""
	if ud := c.get("UserData"); ud != "" {
		raw, err := base64.StdEncoding.DecodeString(ud)
		if err != nil {
			return nil, badRequest("InvalidParameterValue", "Invalid BASE64 encoding of user data.")
		}
		// The simulator core authorizes the ssh_authorized_keys of a
		// #cloud-config user data on boot, as cloud-init does.
		userData = string(raw)
	}
	if g := c.get("Placement.GroupName"); g != "" {
		if _, ok := c.byName(kindPlacementGroup, g); !ok {
			return nil, badRequest("InvalidPlacementGroup.Unknown", fmt.Sprintf("The Placement Group '%s' is unknown.", g))
		}
		extra[xPlacementGroup] = g
	}
	extra[xSecurityGroups] = strings.Join(net.groups, ",")
	extra[xSubnet], extra[xVPC], extra[xPublic] = net.subnet.id, net.subnet.vpc, fmt.Sprint(net.public)
	if p := c.get("IamInstanceProfile.Name"); p != "" {
		extra[xIAMProfile] = p
	}
	size := 8
	for _, bd := range c.members("BlockDeviceMapping") {
		if v := c.get(bd + "Ebs.VolumeSize"); v != "" {
			if _, err := fmt.Sscan(v, &size); err != nil || size < 1 || size > 16384 {
				return nil, badRequest("InvalidParameterValue", fmt.Sprintf("Invalid value '%s' for volume size", v))
			}
		}
	}
	tags := c.tagSpecs("instance")
	var created []sim.Resource
	for i := 0; i < max; i++ {
		if !c.s.Take(typ) {
			if i < min {
				for _, r := range created {
					_ = c.s.Halt(name, r.ID)
				}
				return nil, insufficientCapacity(typ, zone)
			}
			break
		}
		x := map[string]string{}
		for k, v := range extra {
			x[k] = v
		}
		if spot {
			x[xSpotRequest] = newID("sir")
		}
		r, err := c.s.Create(sim.Resource{
			Provider: name, Kind: sim.KindInstance, ID: newID("i"), Name: tags["Name"],
			State: sim.StatePending, Region: c.region, Zone: zone, InstanceType: typ, Image: img.id,
			Spot: spot, Tags: tags, Price: price, SizeGB: size, User: img.user,
			AuthorizedKeys: keys, UserData: userData, Extra: x,
		})
		if err != nil {
			return nil, errorf(500, "InternalError", err.Error())
		}
		created = append(created, r)
	}
	for i, r := range created {
		if err := c.s.Boot(name, r.ID); err != nil {
			reason := "Server.InternalError: " + err.Error()
			_, _ = c.s.Update(name, r.ID, func(r *sim.Resource) error { r.Extra[xStateReason] = reason; return nil })
			_ = c.s.Halt(name, r.ID)
		}
		if r2, ok := c.s.Get(name, r.ID); ok {
			created[i] = r2
		}
	}
	return c.reservation(created), nil
}

// price returns the catalog price of typ in the call's region: the spot
// row's when spot and the catalog has one, else on-demand.
func (c *call) price(typ string, spot bool) (float64, *apiError) {
	cat, err := c.p.catalog()
	if err != nil {
		return 0, errorf(500, "InternalError", err.Error())
	}
	q := offers.Query{Backends: []string{name}, InstanceTypes: []string{typ}, Regions: []string{c.region}, Limit: 1}
	if spot {
		q.SpotPolicy = offers.SpotPolicySpot
		if o := cat.Query(q); len(o) > 0 {
			return o[0].Price, nil
		}
	}
	q.SpotPolicy = offers.SpotPolicyOnDemand
	if o := cat.Query(q); len(o) > 0 {
		return o[0].Price, nil
	}
	q.Regions = nil
	if o := cat.Query(q); len(o) > 0 {
		return 0, badRequest("Unsupported", fmt.Sprintf("Your requested instance type (%s) is not supported in your requested Availability Zone.", typ))
	}
	return 0, badRequest("InvalidParameterValue", fmt.Sprintf("Invalid value '%s' for InstanceType.", typ))
}

func (c *call) image(id string) (image, *apiError) {
	if !strings.HasPrefix(id, "ami-") {
		return image{}, badRequest("InvalidAMIID.Malformed", fmt.Sprintf("Invalid id: \"%s\" (expecting \"ami-...\")", id))
	}
	for _, img := range images {
		if img.id == id {
			return img, nil
		}
	}
	return image{}, badRequest("InvalidAMIID.NotFound", fmt.Sprintf("The image id '[%s]' does not exist", id))
}

// byName finds a live regional resource of kind by name.
func (c *call) byName(kind, n string) (sim.Resource, bool) {
	for _, r := range c.regional(kind) {
		if r.Name == n && r.State != sim.StateDeleted {
			return r, true
		}
	}
	return sim.Resource{}, false
}

func (c *call) reservation(rs []sim.Resource) []node {
	var insts []node
	for _, r := range rs {
		insts = append(insts, c.instanceNode(r))
	}
	return []node{
		leaf("reservationId", rs[0].Extra[xReservation]),
		leaf("ownerId", Account),
		items("groupSet"),
		items("instancesSet", insts...),
	}
}

func (c *call) instanceNode(r sim.Resource) node {
	st := ec2State(r.State)
	var groups []node
	for _, id := range strings.Split(r.Extra[xSecurityGroups], ",") {
		if sg, ok := c.s.Get(name, id); ok {
			groups = append(groups, el("item", leaf("groupId", id), leaf("groupName", sg.Name)))
		}
	}
	var reason node
	if m := r.Extra[xStateReason]; m != "" || r.Message != "" {
		if m == "" {
			m = "Server.InternalError: " + r.Message
		}
		code, _, _ := strings.Cut(m, ":")
		reason = el("stateReason", leaf("code", code), leaf("message", m))
	}
	addr := ""
	if st == "running" || st == "pending" {
		addr = r.Address
	}
	publicAddr := addr
	if r.Extra[xPublic] == "false" {
		publicAddr = ""
	}
	lifecycle := ""
	if r.Spot {
		lifecycle = "spot"
	}
	return el("item",
		leaf("instanceId", r.ID),
		leaf("imageId", r.Image),
		el("instanceState", intLeaf("code", stateCodes[st]), leaf("name", st)),
		leaf("privateDnsName", ""),
		leaf("dnsName", ""),
		leaf("reason", r.Extra[xStateReason]),
		opt("keyName", r.Extra[xKeyName]),
		intLeaf("amiLaunchIndex", 0),
		leaf("instanceType", r.InstanceType),
		leaf("launchTime", isoTime(r.CreatedAt)),
		el("placement", leaf("availabilityZone", r.Zone), opt("groupName", r.Extra[xPlacementGroup]), leaf("tenancy", "default")),
		el("monitoring", leaf("state", "disabled")),
		opt("privateIpAddress", addr),
		opt("ipAddress", publicAddr),
		opt("subnetId", r.Extra[xSubnet]),
		opt("vpcId", vpcOf(r)),
		items("groupSet", groups...),
		reason,
		leaf("architecture", "x86_64"),
		leaf("rootDeviceType", "ebs"),
		leaf("rootDeviceName", "/dev/sda1"),
		opt("instanceLifecycle", lifecycle),
		opt("spotInstanceRequestId", r.Extra[xSpotRequest]),
		opt("clientToken", r.Extra[xClientToken]),
		tagSet(r.Tags),
		leaf("hypervisor", "xen"),
		leaf("virtualizationType", "hvm"),
	)
}

// settle finishes the shutdown of r if its ShutdownDelay is over (the
// timer that would have done it may have died with a simulator restart)
// and returns r as it is then.
func (c *call) settle(r sim.Resource) sim.Resource {
	if r.Kind != sim.KindInstance || r.State != sim.StateStopping {
		return r
	}
	since, err := time.Parse(time.RFC3339Nano, r.Extra[xStoppingSince])
	if err == nil && c.s.Now().Sub(since) < c.p.ShutdownDelay {
		return r
	}
	c.p.finishShutdown(c.s, r.ID)
	if r2, ok := c.s.Get(name, r.ID); ok {
		return r2
	}
	return r
}

// visible reports whether DescribeInstances still shows r.
func (c *call) visible(r sim.Resource) bool {
	return r.TerminatedAt == nil || c.s.Now().Sub(*r.TerminatedAt) < terminatedVisible
}

// instanceFilters are the DescribeInstances filters the simulator knows
// besides tag:<key> and tag-key.
var instanceFilters = map[string]bool{
	"instance-state-name": true, "instance-id": true, "instance-type": true,
	"availability-zone": true, "client-token": true, "placement-group-name": true,
}

func (c *call) describeInstances() ([]node, *apiError) {
	for _, f := range c.filters() {
		if !instanceFilters[f.name] && !strings.HasPrefix(f.name, "tag:") && f.name != "tag-key" {
			return nil, badFilter(f)
		}
	}
	ids := c.list("InstanceId")
	var rs []sim.Resource
	if len(ids) > 0 {
		for _, id := range ids {
			r, e := c.instance(id)
			if e != nil {
				return nil, e
			}
			rs = append(rs, r)
		}
	} else {
		for _, r := range c.regional(sim.KindInstance) {
			if r = c.settle(r); c.visible(r) {
				rs = append(rs, r)
			}
		}
	}
	var out []sim.Resource
	for _, r := range rs {
		ok, e := c.matchInstance(r)
		if e != nil {
			return nil, e
		}
		if ok {
			out = append(out, r)
		}
	}
	var resv []node
	for _, r := range out {
		resv = append(resv, el("item", c.reservation([]sim.Resource{r})...))
	}
	return []node{items("reservationSet", resv...)}, nil
}

func (c *call) matchInstance(r sim.Resource) (bool, *apiError) {
	for _, f := range c.filters() {
		if m, ok := f.matchTags(r.Tags); ok {
			if !m {
				return false, nil
			}
			continue
		}
		var v string
		switch f.name {
		case "instance-state-name":
			v = ec2State(r.State)
		case "instance-id":
			v = r.ID
		case "instance-type":
			v = r.InstanceType
		case "availability-zone":
			v = r.Zone
		case "client-token":
			v = r.Extra[xClientToken]
		case "placement-group-name":
			v = r.Extra[xPlacementGroup]
		default:
			return false, badFilter(f)
		}
		if !f.match(v) {
			return false, nil
		}
	}
	return true, nil
}

// instance returns a visible instance of the call's region, or EC2's
// InvalidInstanceID error.
func (c *call) instance(id string) (sim.Resource, *apiError) {
	if !strings.HasPrefix(id, "i-") {
		return sim.Resource{}, badRequest("InvalidInstanceID.Malformed", fmt.Sprintf("Invalid id: \"%s\"", id))
	}
	r, ok := c.s.Get(name, id)
	r = c.settle(r)
	if !ok || r.Kind != sim.KindInstance || r.Region != c.region || !c.visible(r) {
		return sim.Resource{}, badRequest("InvalidInstanceID.NotFound", fmt.Sprintf("The instance ID '%s' does not exist", id))
	}
	return r, nil
}

func (c *call) terminateInstances() ([]node, *apiError) {
	ids := c.list("InstanceId")
	var rs []sim.Resource
	for _, id := range ids {
		r, e := c.instance(id)
		if e != nil {
			return nil, e
		}
		rs = append(rs, r)
	}
	var changes []node
	for _, r := range rs {
		prev := ec2State(r.State)
		if r.State == sim.StatePending || r.State == sim.StateRunning {
			if err := c.p.shutdown(c.s, r.ID, "Client.UserInitiatedShutdown: User initiated shutdown", false); err != nil {
				return nil, errorf(500, "InternalError", err.Error())
			}
		}
		cur := "shutting-down"
		if prev == "terminated" {
			cur = "terminated"
		}
		changes = append(changes, el("item",
			leaf("instanceId", r.ID),
			el("currentState", intLeaf("code", stateCodes[cur]), leaf("name", cur)),
			el("previousState", intLeaf("code", stateCodes[prev]), leaf("name", prev)),
		))
	}
	return []node{items("instancesSet", changes...)}, nil
}

// shutdown moves instance id to shutting-down now and to terminated after
// the provider's ShutdownDelay, detaching its volumes as EC2 does.
func (p *Provider) shutdown(s *sim.Sim, id, reason string, interrupted bool) error {
	_, err := s.Update(name, id, func(r *sim.Resource) error {
		if r.State == sim.StateStopping || r.State == sim.StateTerminated {
			return nil
		}
		r.State = sim.StateStopping
		if r.Extra == nil {
			r.Extra = map[string]string{}
		}
		r.Extra[xStateReason] = reason
		r.Extra[xStoppingSince] = s.Now().UTC().Format(time.RFC3339Nano)
		r.Interrupted = interrupted
		return nil
	})
	if err != nil {
		return err
	}
	time.AfterFunc(p.ShutdownDelay, func() { p.finishShutdown(s, id) })
	return nil
}

// finishShutdown detaches instance id's volumes and halts its VM: it is
// terminated.
func (p *Provider) finishShutdown(s *sim.Sim, id string) {
	if r, ok := s.Get(name, id); !ok || r.State != sim.StateStopping {
		// Finished already (by a look at it after ShutdownDelay): nothing
		// to write, also into the state of a simulator since closed.
		return
	}
	for _, v := range s.List(name, sim.KindVolume) {
		if v.AttachedTo == id && v.State == sim.StateInUse {
			_ = detachDisk(s, v.ID)
		}
	}
	_ = s.Halt(name, id)
}

// consoleOutput is what cloud-init prints on the serial console of a booted
// instance, with the block of sshd host keys it writes between
// -----BEGIN SSH HOST KEY KEYS----- and -----END SSH HOST KEY KEYS-----
// (cloudinit/config/cc_keys_to_console.py).
func consoleOutput(r sim.Resource) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[    0.000000] Linux version 6.8.0-1021-aws (buildd@lcy02-amd64-101) #23-Ubuntu SMP\r\n")
	fmt.Fprintf(&b, "Cloud-init v. 24.4 running 'modules:config' at %s.\r\n", r.CreatedAt.UTC().Format(time.RFC1123))
	b.WriteString("-----BEGIN SSH HOST KEY KEYS-----\r\n")
	for _, k := range r.HostKeys {
		fmt.Fprintf(&b, "%s root@ip-%s\r\n", strings.TrimSpace(k), strings.ReplaceAll(r.Address, ".", "-"))
	}
	b.WriteString("-----END SSH HOST KEY KEYS-----\r\n")
	fmt.Fprintf(&b, "Cloud-init v. 24.4 finished. Datasource DataSourceEc2Local.\r\n")
	return b.String()
}

func (c *call) getConsoleOutput() ([]node, *apiError) {
	r, e := c.instance(c.get("InstanceId"))
	if e != nil {
		return nil, e
	}
	out := []node{leaf("instanceId", r.ID), leaf("timestamp", isoTime(c.s.Now()))}
	if r.State == sim.StateRunning && len(r.HostKeys) > 0 {
		out = append(out, leaf("output", base64.StdEncoding.EncodeToString([]byte(consoleOutput(r)))))
	}
	return out, nil
}

func (c *call) resourceForTags(id string) (sim.Resource, *apiError) {
	r, ok := c.s.Get(name, id)
	if !ok || r.Region != c.region {
		kind := "InvalidID"
		switch {
		case strings.HasPrefix(id, "i-"):
			kind = "InvalidInstanceID.NotFound"
		case strings.HasPrefix(id, "vol-"):
			kind = "InvalidVolume.NotFound"
		}
		return sim.Resource{}, badRequest(kind, fmt.Sprintf("The ID '%s' is not valid", id))
	}
	return r, nil
}

func (c *call) createTags() ([]node, *apiError) {
	return c.changeTags(func(tags map[string]string, k, v string) { tags[k] = v })
}

func (c *call) deleteTags() ([]node, *apiError) {
	return c.changeTags(func(tags map[string]string, k, _ string) { delete(tags, k) })
}

func (c *call) changeTags(fn func(tags map[string]string, k, v string)) ([]node, *apiError) {
	ids := c.list("ResourceId")
	for _, id := range ids {
		if _, e := c.resourceForTags(id); e != nil {
			return nil, e
		}
	}
	for _, id := range ids {
		_, err := c.s.Update(name, id, func(r *sim.Resource) error {
			if r.Tags == nil {
				r.Tags = map[string]string{}
			}
			for _, t := range c.members("Tag") {
				fn(r.Tags, c.get(t+"Key"), c.get(t+"Value"))
			}
			if r.Kind == sim.KindInstance {
				r.Name = r.Tags["Name"]
			}
			return nil
		})
		if err != nil {
			return nil, errorf(500, "InternalError", err.Error())
		}
	}
	return []node{boolLeaf("return", true)}, nil
}

func (c *call) describeImages() ([]node, *apiError) {
	owners := c.list("Owner")
	ids := c.list("ImageId")
	var out []node
	for _, img := range images {
		if len(owners) > 0 && !containsOwner(owners, img.owner) {
			continue
		}
		if len(ids) > 0 && !contains(ids, img.id) {
			continue
		}
		ok := true
		for _, f := range c.filters() {
			var v string
			switch f.name {
			case "name":
				v = img.name
			case "image-id":
				v = img.id
			case "state":
				v = "available"
			case "owner-id":
				v = img.owner
			case "architecture":
				v = "x86_64"
			default:
				return nil, badFilter(f)
			}
			ok = ok && f.match(v)
		}
		if !ok {
			continue
		}
		out = append(out, el("item",
			leaf("imageId", img.id),
			leaf("imageLocation", img.owner+"/"+img.name),
			leaf("imageState", "available"),
			leaf("imageOwnerId", img.owner),
			leaf("creationDate", img.created),
			boolLeaf("isPublic", true),
			leaf("architecture", "x86_64"),
			leaf("imageType", "machine"),
			leaf("name", img.name),
			leaf("rootDeviceType", "ebs"),
			leaf("rootDeviceName", "/dev/sda1"),
			leaf("virtualizationType", "hvm"),
			leaf("hypervisor", "xen"),
		))
	}
	return []node{items("imagesSet", out...)}, nil
}

func containsOwner(owners []string, owner string) bool {
	for _, o := range owners {
		if o == owner || (o == "self" && owner == Account) {
			return true
		}
	}
	return false
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

func (c *call) describeAvailabilityZones() ([]node, *apiError) {
	var out []node
	for i, z := range zones(c.region) {
		out = append(out, el("item",
			leaf("zoneName", z),
			leaf("zoneState", "available"),
			leaf("regionName", c.region),
			leaf("zoneId", fmt.Sprintf("%s-az%d", strings.ReplaceAll(c.region, "-", ""), i+1)),
			leaf("zoneType", "availability-zone"),
			leaf("optInStatus", "opt-in-not-required"),
		))
	}
	return []node{items("availabilityZoneInfo", out...)}, nil
}

func (c *call) describeRegions() ([]node, *apiError) {
	var out []node
	for _, r := range c.p.Regions {
		out = append(out, el("item",
			leaf("regionName", r),
			leaf("regionEndpoint", "ec2."+r+".amazonaws.com"),
			leaf("optInStatus", "opt-in-not-required"),
		))
	}
	return []node{items("regionInfo", out...)}, nil
}

func (c *call) importKeyPair() ([]node, *apiError) {
	c.p.mu.Lock()
	defer c.p.mu.Unlock()
	kn := c.get("KeyName")
	if _, ok := c.byName(kindKeyPair, kn); ok {
		return nil, badRequest("InvalidKeyPair.Duplicate", fmt.Sprintf("The keypair '%s' already exists.", kn))
	}
	raw, err := base64.StdEncoding.DecodeString(c.get("PublicKeyMaterial"))
	if err != nil || !strings.HasPrefix(string(raw), "ssh-") {
		return nil, badRequest("InvalidKey.Format", "Key is not in valid OpenSSH public key format")
	}
	r, err := c.s.Create(sim.Resource{
		Provider: name, Kind: kindKeyPair, ID: newID("key"), Name: kn, State: sim.StateAvailable,
		Region: c.region, Tags: c.tagSpecs("key-pair"),
		Extra: map[string]string{"public_key": strings.TrimSpace(string(raw))},
	})
	if err != nil {
		return nil, errorf(500, "InternalError", err.Error())
	}
	return []node{leaf("keyFingerprint", randHex(32)), leaf("keyName", kn), leaf("keyPairId", r.ID), tagSet(r.Tags)}, nil
}

func (c *call) deleteKeyPair() ([]node, *apiError) {
	kn := c.get("KeyName")
	if kp, ok := c.byName(kindKeyPair, kn); ok {
		c.markDeleted(kp.ID)
	}
	return []node{boolLeaf("return", true)}, nil
}

// markDeleted records a regional resource as deleted.
func (c *call) markDeleted(id string) {
	now := c.s.Now().UTC()
	_, _ = c.s.Update(name, id, func(r *sim.Resource) error {
		r.State, r.TerminatedAt = sim.StateDeleted, &now
		return nil
	})
}

// insufficientCapacity is EC2's InsufficientInstanceCapacity for typ in
// zone (a 400, see badRequest).
func insufficientCapacity(typ, zone string) *apiError {
	return badRequest("InsufficientInstanceCapacity", fmt.Sprintf("We currently do not have sufficient %s capacity in the Availability Zone you requested (%s). Our system will be working on provisioning additional capacity.", typ, zone))
}
