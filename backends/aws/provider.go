package aws

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"hoist/backends"
	"hoist/backends/offers"
	"hoist/backends/vm"
)

// Provider is the EC2 side of the AWS backend, the vm.Provider the engine
// drives. Use Factory.
type Provider struct {
	cfg       awssdk.Config
	endpoint  string
	regions   []string
	publicIPs bool
	vpcName   string
	vpcIDs    map[string]string
	profile   string
	tags      map[string]string
	cpuImage  vm.OSImage
	gpuImage  vm.OSImage
	now       func() time.Time
	hostKeys  vm.HostKeyCache // host keys read from console output, by ref

	mu       sync.Mutex
	clients  map[string]*ec2.Client // by region
	images   map[string]image       // by region + "/" + cpu|nvidia
	groups   map[string]string      // security group id by region + "/" + name
	launched map[string]time.Time   // refs this process launched, for eventual consistency
	zones    map[string]string      // default zone by region (zoneOf)
	nets     map[string]network     // VPC and subnets by region, when not the default network
	netMu    sync.Mutex             // serializes VPC lookups, one per region
	sgMu     sync.Mutex             // serializes finding or creating security groups
	imgMu    sync.Mutex             // serializes image lookups, one DescribeImages per region and kind
	zoneMu   sync.Mutex             // serializes zone lookups, one DescribeAvailabilityZones per region
}

var (
	_ vm.Provider          = (*Provider)(nil)
	_ vm.VolumeProvider    = (*Provider)(nil)
	_ vm.PlacementProvider = (*Provider)(nil)
)

// image is a resolved AMI.
type image struct {
	id, rootDevice string
}

// consistencyGrace is how long after RunInstances an instance EC2 does not
// know yet counts as pending: EC2's API is eventually consistent
// (https://docs.aws.amazon.com/ec2/latest/devguide/eventual-consistency.html).
const consistencyGrace = 2 * time.Minute

// ref and parseRef join and split "region/id".
func ref(region, id string) string { return region + "/" + id }

func parseRef(r string) (region, id string, err error) {
	region, id, ok := strings.Cut(r, "/")
	if !ok || region == "" || id == "" {
		return "", "", backends.Stalled(fmt.Errorf("aws: malformed reference %q (want region/id)", r))
	}
	return region, id, nil
}

// splitZone returns the region and zone of an offer's location: a zone
// (us-east-1a) names both; a region leaves the zone to EC2.
func splitZone(loc string) (region, zone string) {
	if n := len(loc); n > 0 && loc[n-1] >= 'a' && loc[n-1] <= 'z' {
		return loc[:n-1], loc
	}
	return loc, ""
}

// clientToken returns an EC2 idempotency token for id: at most 64 ASCII
// characters (https://docs.aws.amazon.com/ec2/latest/devguide/ec2-api-idempotency.html).
func clientToken(id string) string {
	if len(id) <= 64 {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:])
}

// resourceTags merges the configured tags, the request's ownership tags
// (which win, as dstack's base tags do) and Name, cut to EC2's limits
// (keys 128, values 256 characters; "aws:" keys are reserved:
// https://docs.aws.amazon.com/tag-editor/latest/userguide/tagging.html).
func (p *Provider) resourceTags(own map[string]string, name string) []types.Tag {
	all := map[string]string{}
	for k, v := range p.tags {
		all[k] = v
	}
	for k, v := range own {
		all[k] = v
	}
	if name != "" {
		all["Name"] = name
	}
	keys := make([]string, 0, len(all))
	for k := range all {
		if k != "" && !strings.HasPrefix(strings.ToLower(k), "aws:") {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	out := make([]types.Tag, 0, len(keys))
	for _, k := range keys {
		out = append(out, types.Tag{Key: awssdk.String(cut(k, 128)), Value: awssdk.String(cut(all[k], 256))})
	}
	return out
}

func cut(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// readTags returns tags as a map without EC2's Name tag.
func readTags(tags []types.Tag) map[string]string {
	out := map[string]string{}
	for _, t := range tags {
		k := awssdk.ToString(t.Key)
		if k != "Name" {
			out[k] = awssdk.ToString(t.Value)
		}
	}
	return out
}

func tagSpec(kind types.ResourceType, tags []types.Tag) types.TagSpecification {
	return types.TagSpecification{ResourceType: kind, Tags: tags}
}

// Launch runs one instance with RunInstances, idempotent on req.ID (the
// client token), in the offer's zone or its region's default zone (see
// zoneOf; dstack tries every zone of the region in turn, hoist moves to the
// next offer instead). The key goes in as cloud-config user data, dstack's
// way (src/dstack/_internal/core/backends/base/compute.py, get_user_data).
func (p *Provider) Launch(ctx context.Context, req vm.LaunchRequest) (vm.Machine, error) {
	region, zone, err := p.zoneOf(ctx, req.Offer.Region)
	if err != nil {
		return vm.Machine{}, err
	}
	gpu := req.Offer.GPUCount > 0 && (req.Offer.GPUVendor == "" || req.Offer.GPUVendor == offers.VendorNVIDIA)
	img, err := p.image(ctx, region, gpu)
	if err != nil {
		return vm.Machine{}, err
	}
	var nic *types.InstanceNetworkInterfaceSpecification
	vpcID := ""
	if p.customNetwork(region) {
		net, err := p.network(ctx, region)
		if err != nil {
			return vm.Machine{}, err
		}
		sn, ok := subnetIn(net.subnets, zone, p.publicIPs)
		if !ok {
			return vm.Machine{}, fmt.Errorf("aws: no subnet of %s in %s: %w", net.vpc, zone, backends.ErrNoCapacity)
		}
		vpcID = net.vpc
		nic = &types.InstanceNetworkInterfaceSpecification{
			DeviceIndex:              awssdk.Int32(0),
			SubnetId:                 sn.SubnetId,
			AssociatePublicIpAddress: awssdk.Bool(p.publicIPs),
			DeleteOnTermination:      awssdk.Bool(true),
		}
	}
	sg, err := p.securityGroup(ctx, region, vpcID, req.Tags, false)
	if err != nil {
		return vm.Machine{}, err
	}
	groups := []string{sg}
	if req.Gateway {
		gw, err := p.securityGroup(ctx, region, vpcID, req.Tags, true)
		if err != nil {
			return vm.Machine{}, err
		}
		groups = append(groups, gw)
	}
	userData := req.UserData
	if userData == "" {
		userData = fmt.Sprintf("#cloud-config\nssh_authorized_keys:\n  - %q\n", strings.TrimSpace(req.PublicKey))
	}
	tags := p.resourceTags(req.Tags, req.Name)
	in := &ec2.RunInstancesInput{
		ClientToken:       awssdk.String(clientToken(req.ID)),
		ImageId:           awssdk.String(img.id),
		InstanceType:      types.InstanceType(req.Offer.Instance),
		MinCount:          awssdk.Int32(1),
		MaxCount:          awssdk.Int32(1),
		UserData:          awssdk.String(base64.StdEncoding.EncodeToString([]byte(userData))),
		TagSpecifications: []types.TagSpecification{tagSpec(types.ResourceTypeInstance, tags), tagSpec(types.ResourceTypeVolume, tags)},
	}
	if nic != nil {
		nic.Groups = groups
		in.NetworkInterfaces = []types.InstanceNetworkInterfaceSpecification{*nic}
	} else {
		in.SecurityGroupIds = groups
	}
	if req.Offer.DiskGB > 0 {
		in.BlockDeviceMappings = []types.BlockDeviceMapping{{
			DeviceName: awssdk.String(img.rootDevice),
			Ebs: &types.EbsBlockDevice{
				VolumeSize:          awssdk.Int32(int32(req.Offer.DiskGB)),
				VolumeType:          types.VolumeTypeGp3,
				DeleteOnTermination: awssdk.Bool(true),
			},
		}}
	}
	in.Placement = &types.Placement{AvailabilityZone: awssdk.String(zone)}
	if req.PlacementGroup != "" {
		_, group, err := parseRef(req.PlacementGroup)
		if err != nil {
			return vm.Machine{}, err
		}
		in.Placement.GroupName = awssdk.String(group)
	}
	if req.Offer.Spot {
		// dstack's spot request: one-time, terminated on interruption.
		in.InstanceMarketOptions = &types.InstanceMarketOptionsRequest{
			MarketType: types.MarketTypeSpot,
			SpotOptions: &types.SpotMarketOptions{
				SpotInstanceType:             types.SpotInstanceTypeOneTime,
				InstanceInterruptionBehavior: types.InstanceInterruptionBehaviorTerminate,
			},
		}
	}
	if p.profile != "" {
		in.IamInstanceProfile = &types.IamInstanceProfileSpecification{Name: awssdk.String(p.profile)}
	}
	out, err := p.client(region).RunInstances(ctx, in)
	if err != nil {
		return vm.Machine{}, fmt.Errorf("aws: run %s in %s: %w", req.Offer.Instance, req.Offer.Region, classifyLaunch(err))
	}
	if len(out.Instances) == 0 {
		return vm.Machine{}, backends.Transient(fmt.Errorf("aws: run %s in %s: no instance in the response", req.Offer.Instance, req.Offer.Region))
	}
	m := p.machine(region, out.Instances[0])
	p.mu.Lock()
	p.launched[m.Ref] = p.now()
	p.mu.Unlock()
	return m, nil
}

// machine maps an EC2 instance to what the engine sees.
func (p *Provider) machine(region string, in types.Instance) vm.Machine {
	m := vm.Machine{
		Ref:          ref(region, awssdk.ToString(in.InstanceId)),
		Region:       region,
		InstanceType: string(in.InstanceType),
		Tags:         readTags(in.Tags),
		Message:      awssdk.ToString(in.StateTransitionReason),
		CreatedAt:    awssdk.ToTime(in.LaunchTime),
	}
	m.PrivateAddress = awssdk.ToString(in.PrivateIpAddress)
	if p.publicIPs {
		m.Address = awssdk.ToString(in.PublicIpAddress)
	} else {
		m.Address = awssdk.ToString(in.PrivateIpAddress)
	}
	var state types.InstanceStateName
	if in.State != nil {
		state = in.State.Name
	}
	switch state {
	case types.InstanceStateNamePending:
		m.State = vm.StatePending
	case types.InstanceStateNameRunning:
		m.State = vm.StateRunning
	case types.InstanceStateNameTerminated:
		m.State = vm.StateGone
	default: // shutting-down, stopping, stopped
		m.State = vm.StateStopping
	}
	if r := in.StateReason; r != nil {
		m.Message = awssdk.ToString(r.Message)
		// A reclaimed spot instance ends with this state reason
		// (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_StateReason.html).
		if awssdk.ToString(r.Code) == "Server.SpotInstanceTermination" {
			m.Interrupted = true
		}
	}
	return m
}

// Get observes an instance with DescribeInstances and, once it runs, reads
// its host keys from the console output (once; they are kept).
func (p *Provider) Get(ctx context.Context, r string) (vm.Machine, error) {
	region, id, err := parseRef(r)
	if err != nil {
		return vm.Machine{}, err
	}
	out, err := p.client(region).DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	if err != nil {
		err = classify(err)
		if errors.Is(err, backends.ErrNotFound) && p.recentlyLaunched(r) {
			return vm.Machine{Ref: r, Region: region, State: vm.StatePending, Message: "not yet visible to DescribeInstances"}, nil
		}
		return vm.Machine{}, fmt.Errorf("aws: describe %s: %w", r, err)
	}
	for _, res := range out.Reservations {
		for _, in := range res.Instances {
			if awssdk.ToString(in.InstanceId) != id {
				continue
			}
			m := p.machine(region, in)
			if m.State == vm.StateRunning {
				if m.HostKeys, err = p.consoleHostKeys(ctx, region, id); err != nil {
					return vm.Machine{}, err
				}
			}
			return m, nil
		}
	}
	if p.recentlyLaunched(r) {
		return vm.Machine{Ref: r, Region: region, State: vm.StatePending}, nil
	}
	return vm.Machine{}, fmt.Errorf("aws: describe %s: %w", r, backends.ErrNotFound)
}

func (p *Provider) recentlyLaunched(r string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	t, ok := p.launched[r]
	return ok && p.now().Sub(t) < consistencyGrace
}

// consoleHostKeys returns the sshd host keys cloud-init printed on the
// serial console (vm.ParseHostKeys), remembered once seen; nil while the
// console shows none yet (the engine then falls back to first contact). A
// failed call is an error, not "no keys", so that throttling never
// downgrades a pinned host key to first contact.
func (p *Provider) consoleHostKeys(ctx context.Context, region, id string) ([]string, error) {
	r := ref(region, id)
	return p.hostKeys.Get(r, func() (string, error) {
		out, err := p.client(region).GetConsoleOutput(ctx, &ec2.GetConsoleOutputInput{InstanceId: awssdk.String(id), Latest: awssdk.Bool(true)})
		if err != nil {
			if code(err) == "UnsupportedOperation" {
				// Latest is for Nitro instances only; the others show no keys here.
				return "", nil
			}
			return "", fmt.Errorf("aws: console output of %s: %w", r, classify(err))
		}
		raw, err := base64.StdEncoding.DecodeString(awssdk.ToString(out.Output))
		if err != nil {
			return "", nil
		}
		return string(raw), nil
	})
}

// Delete terminates an instance; one EC2 no longer knows is success.
func (p *Provider) Delete(ctx context.Context, r string) error {
	region, id, err := parseRef(r)
	if err != nil {
		return err
	}
	_, err = p.client(region).TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{id}})
	if err = classify(err); err != nil && !errors.Is(err, backends.ErrNotFound) {
		return fmt.Errorf("aws: terminate %s: %w", r, err)
	}
	p.hostKeys.Forget(r)
	return nil
}

// liveStates are the instance states List reports; terminated instances
// stay visible in EC2 for about an hour and are left out.
var liveStates = []string{"pending", "running", "shutting-down", "stopping", "stopped"}

// List returns the live instances carrying all of tags in every configured
// region, filtering on the tags in EC2.
func (p *Provider) List(ctx context.Context, tags map[string]string) ([]vm.Machine, error) {
	filters := []types.Filter{{Name: awssdk.String("instance-state-name"), Values: liveStates}}
	keys := make([]string, 0, len(tags))
	for k := range tags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		filters = append(filters, types.Filter{Name: awssdk.String("tag:" + k), Values: []string{tags[k]}})
	}
	var out []vm.Machine
	for _, region := range p.regions {
		pages := ec2.NewDescribeInstancesPaginator(p.client(region), &ec2.DescribeInstancesInput{Filters: filters})
		for pages.HasMorePages() {
			page, err := pages.NextPage(ctx)
			if err != nil {
				return nil, fmt.Errorf("aws: list instances in %s: %w", region, classify(err))
			}
			for _, res := range page.Reservations {
				for _, in := range res.Instances {
					out = append(out, p.machine(region, in))
				}
			}
		}
	}
	return out, nil
}

// image resolves the configured image of region: the newest available AMI
// with the configured name and owner, as dstack picks it.
func (p *Provider) image(ctx context.Context, region string, gpu bool) (image, error) {
	want, kind := p.cpuImage, "cpu"
	if gpu {
		want, kind = p.gpuImage, "nvidia"
	}
	key := region + "/" + kind
	p.imgMu.Lock()
	defer p.imgMu.Unlock()
	p.mu.Lock()
	img, ok := p.images[key]
	p.mu.Unlock()
	if ok {
		return img, nil
	}
	out, err := p.client(region).DescribeImages(ctx, &ec2.DescribeImagesInput{
		Owners: []string{want.Owner},
		Filters: []types.Filter{
			{Name: awssdk.String("name"), Values: []string{want.Name}},
			{Name: awssdk.String("state"), Values: []string{"available"}},
		},
	})
	if err != nil {
		return image{}, fmt.Errorf("aws: find image %q of %s in %s: %w", want.Name, want.Owner, region, classify(err))
	}
	var best *types.Image
	for i, im := range out.Images {
		if best == nil || awssdk.ToString(im.CreationDate) > awssdk.ToString(best.CreationDate) {
			best = &out.Images[i]
		}
	}
	if best == nil {
		return image{}, backends.Stalled(fmt.Errorf("aws: no available image %q owned by %s in %s (os_images.%s)", want.Name, want.Owner, region, kind))
	}
	img = image{id: awssdk.ToString(best.ImageId), rootDevice: awssdk.ToString(best.RootDeviceName)}
	if img.rootDevice == "" {
		img.rootDevice = "/dev/sda1"
	}
	p.mu.Lock()
	p.images[key] = img
	p.mu.Unlock()
	return img, nil
}

// securityGroup finds or creates the installation's security group in
// region's VPC vpcID ("" for the default VPC): SSH from anywhere and all
// traffic between its members, as dstack's dstack_security_group_<project>
// (src/dstack/_internal/core/backends/aws/resources.py, create_security_group).
// With gateway, it is instead the group gateway instances get in addition:
// HTTP and HTTPS from anywhere, as dstack's gateway security group
// (same file, create_gateway_security_group).
func (p *Provider) securityGroup(ctx context.Context, region, vpcID string, own map[string]string, gateway bool) (string, error) {
	inst := own[backends.TagInstallation]
	name, desc := "hoist", "hoist instances: SSH in, all traffic between members"
	if gateway {
		name, desc = "hoist-gateway", "hoist gateways: HTTP and HTTPS in"
	}
	if inst != "" {
		name = cut(name+"-"+sanitizeGroupName(inst), 255)
	}
	key := region + "/" + vpcID + "/" + name
	p.sgMu.Lock()
	defer p.sgMu.Unlock()
	p.mu.Lock()
	id, ok := p.groups[key]
	p.mu.Unlock()
	if ok {
		return id, nil
	}
	c := p.client(region)
	find := func() (*types.SecurityGroup, error) {
		filters := []types.Filter{{Name: awssdk.String("group-name"), Values: []string{name}}}
		if vpcID != "" {
			filters = append(filters, types.Filter{Name: awssdk.String("vpc-id"), Values: []string{vpcID}})
		}
		found, err := c.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{Filters: filters})
		if err != nil {
			return nil, fmt.Errorf("aws: find security group %s in %s: %w", name, region, classify(err))
		}
		if len(found.SecurityGroups) == 0 {
			return nil, nil
		}
		return &found.SecurityGroups[0], nil
	}
	sg, err := find()
	if err != nil {
		return "", err
	}
	var perms []types.IpPermission
	if sg != nil {
		id = awssdk.ToString(sg.GroupId)
		perms = sg.IpPermissions
	} else {
		tags := map[string]string{}
		if inst != "" {
			tags[backends.TagInstallation] = inst
		}
		var vpc *string
		if vpcID != "" {
			vpc = awssdk.String(vpcID)
		}
		created, err := c.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{
			GroupName:         awssdk.String(name),
			VpcId:             vpc,
			Description:       awssdk.String(desc),
			TagSpecifications: []types.TagSpecification{tagSpec(types.ResourceTypeSecurityGroup, p.resourceTags(tags, name))},
		})
		switch {
		case code(err) == "InvalidGroup.Duplicate":
			// Another server (or a retried call) created it meanwhile.
			if sg, err = find(); err != nil {
				return "", err
			}
			if sg == nil {
				return "", backends.Transient(fmt.Errorf("aws: security group %s in %s: duplicate, yet not found", name, region))
			}
			id, perms = awssdk.ToString(sg.GroupId), sg.IpPermissions
		case err != nil:
			return "", fmt.Errorf("aws: create security group %s in %s: %w", name, region, classify(err))
		default:
			id = awssdk.ToString(created.GroupId)
		}
	}
	var add []types.IpPermission
	open := []int32{22}
	if gateway {
		open = []int32{80, 443}
	}
	for _, port := range open {
		if !hasRule(perms, "tcp", port, "0.0.0.0/0") {
			add = append(add, types.IpPermission{IpProtocol: awssdk.String("tcp"), FromPort: awssdk.Int32(port), ToPort: awssdk.Int32(port), IpRanges: []types.IpRange{{CidrIp: awssdk.String("0.0.0.0/0")}}})
		}
	}
	if !gateway && !hasRule(perms, "-1", 0, id) {
		add = append(add, types.IpPermission{IpProtocol: awssdk.String("-1"), UserIdGroupPairs: []types.UserIdGroupPair{{GroupId: awssdk.String(id)}}})
	}
	if len(add) > 0 {
		_, err := c.AuthorizeSecurityGroupIngress(ctx, &ec2.AuthorizeSecurityGroupIngressInput{GroupId: awssdk.String(id), IpPermissions: add})
		if err != nil && code(err) != "InvalidPermission.Duplicate" {
			return "", fmt.Errorf("aws: open security group %s in %s: %w", name, region, classify(err))
		}
	}
	p.mu.Lock()
	p.groups[key] = id
	p.mu.Unlock()
	return id, nil
}

// hasRule reports whether perms has an ingress rule for proto (from port)
// from source (a CIDR or a security group id).
func hasRule(perms []types.IpPermission, proto string, port int32, source string) bool {
	for _, pm := range perms {
		if awssdk.ToString(pm.IpProtocol) != proto || (proto != "-1" && awssdk.ToInt32(pm.FromPort) != port) {
			continue
		}
		for _, r := range pm.IpRanges {
			if awssdk.ToString(r.CidrIp) == source {
				return true
			}
		}
		for _, g := range pm.UserIdGroupPairs {
			if awssdk.ToString(g.GroupId) == source {
				return true
			}
		}
	}
	return false
}

// sanitizeGroupName keeps the characters EC2 allows in security group
// names of a VPC (a-z, A-Z, 0-9, spaces, ._-:/()#,@[]+=&;{}!$*).
func sanitizeGroupName(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', strings.ContainsRune("._-:/()#,@[]+=&;{}!$*", r):
			return r
		}
		return '-'
	}, s)
}
