package ec2

import (
	"fmt"
	"strings"

	"hoist/e2e/cloudsim/sim"
)

// SimVPCName is the Name tag of the one VPC besides the default one that
// every simulated region has (for vpc_name and vpc_ids); its subnets do not
// map public addresses on launch.
const SimVPCName = "hoist-sim-vpc"

// A vpc of the simulated regions. Every region has the same two.
type vpc struct {
	id, name, cidr string
	isDefault      bool
}

var vpcs = []vpc{
	{id: defaultVPC, cidr: "172.31.0.0/16", isDefault: true},
	{id: "vpc-0a11ce0000000001", name: SimVPCName, cidr: "10.77.0.0/16"},
}

// A subnet is one VPC's subnet in one zone.
type subnet struct {
	id, vpc, zone, cidr string
	public              bool // mapPublicIpOnLaunch
	defaultForAz        bool
}

// subnets returns region's subnets: one per VPC and zone.
func subnets(region string) []subnet {
	var out []subnet
	for vi, v := range vpcs {
		for zi, z := range zones(region) {
			out = append(out, subnet{
				id:   fmt.Sprintf("subnet-0%x%x%s", vi, zi, strings.Repeat("0", 14)),
				vpc:  v.id,
				zone: z,
				cidr: fmt.Sprintf("%s.%d.0/24", strings.Join(strings.Split(v.cidr, ".")[:2], "."), zi),
				// The default VPC's subnets map public addresses
				// (https://docs.aws.amazon.com/vpc/latest/userguide/default-vpc.html).
				public:       v.isDefault,
				defaultForAz: v.isDefault,
			})
		}
	}
	return out
}

func findVPC(id string) (vpc, bool) {
	for _, v := range vpcs {
		if v.id == id {
			return v, true
		}
	}
	return vpc{}, false
}

func (c *call) findSubnet(id string) (subnet, bool) {
	for _, s := range subnets(c.region) {
		if s.id == id {
			return s, true
		}
	}
	return subnet{}, false
}

func (c *call) describeVpcs() ([]node, *apiError) {
	ids := c.list("VpcId")
	var out []node
	for _, v := range vpcs {
		if len(ids) > 0 && !contains(ids, v.id) {
			continue
		}
		tags := map[string]string{}
		if v.name != "" {
			tags["Name"] = v.name
		}
		ok, e := c.matches(tags, func(name string) (string, bool) {
			switch name {
			case "is-default", "isDefault":
				return fmt.Sprint(v.isDefault), true
			case "vpc-id":
				return v.id, true
			case "state":
				return "available", true
			}
			return "", false
		})
		if e != nil {
			return nil, e
		}
		if !ok {
			continue
		}
		out = append(out, el("item",
			leaf("vpcId", v.id),
			leaf("ownerId", Account),
			leaf("state", "available"),
			leaf("cidrBlock", v.cidr),
			leaf("instanceTenancy", "default"),
			boolLeaf("isDefault", v.isDefault),
			tagSet(tags),
		))
	}
	for _, id := range ids {
		if _, ok := findVPC(id); !ok {
			return nil, badRequest("InvalidVpcID.NotFound", fmt.Sprintf("The vpc ID '%s' does not exist", id))
		}
	}
	return []node{items("vpcSet", out...)}, nil
}

func (c *call) describeSubnets() ([]node, *apiError) {
	ids := c.list("SubnetId")
	var out []node
	for _, s := range subnets(c.region) {
		if len(ids) > 0 && !contains(ids, s.id) {
			continue
		}
		ok := true
		for _, f := range c.filters() {
			switch f.name {
			case "vpc-id":
				ok = ok && f.match(s.vpc)
			case "availability-zone":
				ok = ok && f.match(s.zone)
			case "subnet-id":
				ok = ok && f.match(s.id)
			case "default-for-az":
				ok = ok && f.match(fmt.Sprint(s.defaultForAz))
			case "map-public-ip-on-launch":
				ok = ok && f.match(fmt.Sprint(s.public))
			case "state":
				ok = ok && f.match("available")
			default:
				return nil, badFilter(f)
			}
		}
		if !ok {
			continue
		}
		out = append(out, el("item",
			leaf("subnetId", s.id),
			leaf("state", "available"),
			leaf("vpcId", s.vpc),
			leaf("cidrBlock", s.cidr),
			intLeaf("availableIpAddressCount", 250),
			leaf("availabilityZone", s.zone),
			boolLeaf("defaultForAz", s.defaultForAz),
			boolLeaf("mapPublicIpOnLaunch", s.public),
			leaf("ownerId", Account),
			items("tagSet"),
		))
	}
	for _, id := range ids {
		if _, ok := c.findSubnet(id); !ok {
			return nil, badRequest("InvalidSubnetID.NotFound", fmt.Sprintf("The subnet ID '%s' does not exist", id))
		}
	}
	return []node{items("subnetSet", out...)}, nil
}

// vpcOf returns the VPC of an instance or security group resource.
func vpcOf(r sim.Resource) string {
	if v := r.Extra[xVPC]; v != "" {
		return v
	}
	return defaultVPC
}

// A launchNet is where RunInstances puts an instance.
type launchNet struct {
	subnet subnet
	groups []string
	public bool
}

// launchNetwork resolves RunInstances' network parameters: SubnetId and
// SecurityGroupId.N, or NetworkInterface.1 (SubnetId, SecurityGroupId.N,
// AssociatePublicIpAddress); without a subnet, the default VPC's subnet of
// zone (the first zone when zone is "").
func (c *call) launchNetwork(zone string) (launchNet, *apiError) {
	subnetID, groups, assoc := c.get("SubnetId"), c.list("SecurityGroupId"), ""
	if nics := c.members("NetworkInterface"); len(nics) > 0 {
		if subnetID != "" || len(groups) > 0 {
			return launchNet{}, badRequest("InvalidParameterCombination", "Network interfaces and an instance-level subnet ID or security groups may not be specified on the same request")
		}
		p := nics[0]
		subnetID, groups, assoc = c.get(p+"SubnetId"), c.list(p+"SecurityGroupId"), c.get(p+"AssociatePublicIpAddress")
	}
	var n launchNet
	if subnetID != "" {
		sn, ok := c.findSubnet(subnetID)
		if !ok {
			return launchNet{}, badRequest("InvalidSubnetID.NotFound", fmt.Sprintf("The subnet ID '%s' does not exist", subnetID))
		}
		if zone != "" && zone != sn.zone {
			return launchNet{}, badRequest("InvalidParameterValue", fmt.Sprintf("Value (%s) for parameter availabilityZone is invalid. Subnet '%s' is in the availability zone %s", zone, subnetID, sn.zone))
		}
		n.subnet = sn
	} else {
		if zone == "" {
			zone = zones(c.region)[0]
		}
		for _, sn := range subnets(c.region) {
			if sn.defaultForAz && sn.zone == zone {
				n.subnet = sn
			}
		}
	}
	n.public = n.subnet.public
	if assoc != "" {
		n.public = assoc == "true"
	}
	for _, id := range groups {
		sg, ok := c.s.Get(name, id)
		if !ok || sg.Kind != kindSecurityGroup || sg.Region != c.region || sg.State == sim.StateDeleted {
			return launchNet{}, badRequest("InvalidGroup.NotFound", fmt.Sprintf("The security group '%s' does not exist", id))
		}
		if vpcOf(sg) != n.subnet.vpc {
			return launchNet{}, badRequest("InvalidParameter", fmt.Sprintf("Security group %s and subnet %s belong to different networks.", id, n.subnet.id))
		}
	}
	n.groups = groups
	return n, nil
}
