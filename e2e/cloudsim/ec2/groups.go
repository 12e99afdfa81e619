package ec2

import (
	"fmt"
	"strings"

	"hoist/e2e/cloudsim/sim"
)

func (c *call) createSecurityGroup() ([]node, *apiError) {
	c.p.mu.Lock()
	defer c.p.mu.Unlock()
	n := c.get("GroupName")
	if n == "" || c.get("GroupDescription") == "" {
		return nil, badRequest("MissingParameter", "GroupName and GroupDescription are required")
	}
	vpcID := c.get("VpcId")
	if vpcID == "" {
		vpcID = defaultVPC
	}
	if _, ok := findVPC(vpcID); !ok {
		return nil, badRequest("InvalidVpcID.NotFound", fmt.Sprintf("The vpc ID '%s' does not exist", vpcID))
	}
	for _, sg := range c.regional(kindSecurityGroup) {
		if sg.Name == n && vpcOf(sg) == vpcID && sg.State != sim.StateDeleted {
			return nil, badRequest("InvalidGroup.Duplicate", fmt.Sprintf("The security group '%s' already exists for VPC '%s'", n, vpcID))
		}
	}
	r, err := c.s.Create(sim.Resource{
		Provider: name, Kind: kindSecurityGroup, ID: newID("sg"), Name: n, State: sim.StateAvailable,
		Region: c.region, Tags: c.tagSpecs("security-group"),
		Extra: map[string]string{"description": c.get("GroupDescription"), xVPC: vpcID},
	})
	if err != nil {
		return nil, errorf(500, "InternalError", err.Error())
	}
	return []node{leaf("groupId", r.ID), tagSet(r.Tags)}, nil
}

// rules are a security group's ingress rules, one "proto:from:to:source"
// per line in Extra["ingress"].
func rules(r sim.Resource) []string {
	if r.Extra["ingress"] == "" {
		return nil
	}
	return strings.Split(r.Extra["ingress"], "\n")
}

func (c *call) authorizeSecurityGroupIngress() ([]node, *apiError) {
	id := c.get("GroupId")
	sg, ok := c.s.Get(name, id)
	if !ok || sg.Kind != kindSecurityGroup || sg.Region != c.region || sg.State == sim.StateDeleted {
		return nil, badRequest("InvalidGroup.NotFound", fmt.Sprintf("The security group '%s' does not exist", id))
	}
	var add []string
	for _, p := range c.members("IpPermissions") {
		base := c.get(p+"IpProtocol") + ":" + c.get(p+"FromPort") + ":" + c.get(p+"ToPort") + ":"
		for _, rg := range c.members(p + "IpRanges") {
			add = append(add, base+c.get(rg+"CidrIp"))
		}
		for _, g := range c.members(p + "Groups") {
			add = append(add, base+c.get(g+"GroupId"))
		}
	}
	have := rules(sg)
	for _, rule := range add {
		if contains(have, rule) {
			return nil, badRequest("InvalidPermission.Duplicate", fmt.Sprintf("the specified rule \"%s\" already exists", rule))
		}
	}
	_, err := c.s.Update(name, id, func(r *sim.Resource) error {
		r.Extra["ingress"] = strings.Join(append(rules(*r), add...), "\n")
		return nil
	})
	if err != nil {
		return nil, errorf(500, "InternalError", err.Error())
	}
	return []node{boolLeaf("return", true)}, nil
}

func (c *call) describeSecurityGroups() ([]node, *apiError) {
	names, ids := c.list("GroupName"), c.list("GroupId")
	var out []node
	var found []string
	for _, sg := range c.regional(kindSecurityGroup) {
		if sg.State == sim.StateDeleted {
			continue
		}
		if len(names) > 0 && !contains(names, sg.Name) || len(ids) > 0 && !contains(ids, sg.ID) {
			continue
		}
		ok, e := c.matches(sg.Tags, func(name string) (string, bool) {
			switch name {
			case "group-name":
				return sg.Name, true
			case "group-id":
				return sg.ID, true
			case "vpc-id":
				return vpcOf(sg), true
			}
			return "", false
		})
		if e != nil {
			return nil, e
		}
		if !ok {
			continue
		}
		found = append(found, sg.Name, sg.ID)
		var perms []node
		for _, rule := range rules(sg) {
			p := strings.SplitN(rule, ":", 4)
			src := el("ipRanges", el("item", leaf("cidrIp", p[3])))
			groups := items("groups")
			if strings.HasPrefix(p[3], "sg-") {
				src, groups = items("ipRanges"), items("groups", el("item", leaf("groupId", p[3])))
			}
			perms = append(perms, el("item", leaf("ipProtocol", p[0]), opt("fromPort", p[1]), opt("toPort", p[2]), groups, src))
		}
		out = append(out, el("item",
			leaf("ownerId", Account),
			leaf("groupId", sg.ID),
			leaf("groupName", sg.Name),
			leaf("groupDescription", sg.Extra["description"]),
			leaf("vpcId", vpcOf(sg)),
			items("ipPermissions", perms...),
			items("ipPermissionsEgress", el("item", leaf("ipProtocol", "-1"), items("ipRanges", el("item", leaf("cidrIp", "0.0.0.0/0"))))),
			tagSet(sg.Tags),
		))
	}
	for _, n := range append(names, ids...) {
		if !contains(found, n) {
			return nil, badRequest("InvalidGroup.NotFound", fmt.Sprintf("The security group '%s' does not exist in default VPC '%s'", n, defaultVPC))
		}
	}
	return []node{items("securityGroupInfo", out...)}, nil
}

func (c *call) placementGroupNode(pg sim.Resource) node {
	return el("item",
		leaf("groupName", pg.Name),
		leaf("groupId", pg.ID),
		leaf("state", "available"),
		leaf("strategy", pg.Extra["strategy"]),
		tagSet(pg.Tags),
	)
}

func (c *call) createPlacementGroup() ([]node, *apiError) {
	c.p.mu.Lock()
	defer c.p.mu.Unlock()
	n := c.get("GroupName")
	strategy := c.get("Strategy")
	if strategy != "cluster" && strategy != "spread" && strategy != "partition" {
		return nil, badRequest("InvalidParameterValue", fmt.Sprintf("Invalid value '%s' for strategy", strategy))
	}
	if _, ok := c.byName(kindPlacementGroup, n); ok {
		return nil, badRequest("InvalidPlacementGroup.Duplicate", fmt.Sprintf("The Placement Group '%s' already exists.", n))
	}
	pg, err := c.s.Create(sim.Resource{
		Provider: name, Kind: kindPlacementGroup, ID: newID("pg"), Name: n, State: sim.StateAvailable,
		Region: c.region, Tags: c.tagSpecs("placement-group"), Extra: map[string]string{"strategy": strategy},
	})
	if err != nil {
		return nil, errorf(500, "InternalError", err.Error())
	}
	n2 := c.placementGroupNode(pg)
	n2.name = "placementGroup"
	return []node{n2}, nil
}

func (c *call) deletePlacementGroup() ([]node, *apiError) {
	c.p.mu.Lock()
	defer c.p.mu.Unlock()
	n := c.get("GroupName")
	pg, ok := c.byName(kindPlacementGroup, n)
	if !ok {
		return nil, badRequest("InvalidPlacementGroup.Unknown", fmt.Sprintf("The Placement Group '%s' is unknown.", n))
	}
	for _, r := range c.regional(sim.KindInstance) {
		if r.Extra[xPlacementGroup] == n && r.State != sim.StateTerminated {
			return nil, badRequest("InvalidPlacementGroup.InUse", fmt.Sprintf("The placement group '%s' is in use and may not be deleted.", n))
		}
	}
	c.markDeleted(pg.ID)
	return []node{boolLeaf("return", true)}, nil
}

func (c *call) describePlacementGroups() ([]node, *apiError) {
	names, ids := c.list("GroupName"), c.list("GroupId")
	var out []node
	var found []string
	for _, pg := range c.regional(kindPlacementGroup) {
		if pg.State == sim.StateDeleted {
			continue
		}
		if len(names) > 0 && !contains(names, pg.Name) || len(ids) > 0 && !contains(ids, pg.ID) {
			continue
		}
		ok, e := c.matches(pg.Tags, func(name string) (string, bool) {
			switch name {
			case "group-name":
				return pg.Name, true
			case "strategy":
				return pg.Extra["strategy"], true
			case "state":
				return "available", true
			}
			return "", false
		})
		if e != nil {
			return nil, e
		}
		if ok {
			found = append(found, pg.Name, pg.ID)
			out = append(out, c.placementGroupNode(pg))
		}
	}
	for _, n := range append(names, ids...) {
		if !contains(found, n) {
			return nil, badRequest("InvalidPlacementGroup.Unknown", fmt.Sprintf("The Placement Group '%s' is unknown.", n))
		}
	}
	return []node{items("placementGroupSet", out...)}, nil
}
