package aws

import (
	"context"
	"fmt"
	"sort"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"hoist/backends"
)

// A network is the VPC instances of a region are launched into, and its
// subnets.
type network struct {
	vpc     string
	subnets []types.Subnet
}

// customNetwork reports whether region launches into an explicit subnet:
// a configured VPC (vpc_ids, vpc_name), or the default VPC without public
// addresses. The common case, the default VPC with public addresses, needs
// no lookup: EC2 picks the zone's default subnet, which maps public
// addresses (https://docs.aws.amazon.com/vpc/latest/userguide/default-vpc.html).
func (p *Provider) customNetwork(region string) bool {
	return p.vpcName != "" || p.vpcIDs[region] != "" || !p.publicIPs
}

// network finds region's VPC, as dstack does
// (src/dstack/_internal/core/backends/aws/compute.py, get_vpc_id_subnet_id_or_error):
// vpc_ids[region], else the VPC whose Name tag is vpc_name, else the
// default VPC; and its available subnets. Unlike dstack it does not read
// route tables: a subnet that maps public addresses on launch counts as
// public.
func (p *Provider) network(ctx context.Context, region string) (network, error) {
	p.netMu.Lock()
	defer p.netMu.Unlock()
	p.mu.Lock()
	n, ok := p.nets[region]
	p.mu.Unlock()
	if ok {
		return n, nil
	}
	c := p.client(region)
	n.vpc = p.vpcIDs[region]
	if n.vpc == "" {
		filter, what := types.Filter{Name: awssdk.String("is-default"), Values: []string{"true"}}, "default VPC"
		if p.vpcName != "" {
			filter, what = types.Filter{Name: awssdk.String("tag:Name"), Values: []string{p.vpcName}}, fmt.Sprintf("VPC named %q (vpc_name)", p.vpcName)
		}
		out, err := c.DescribeVpcs(ctx, &ec2.DescribeVpcsInput{Filters: []types.Filter{filter}})
		if err != nil {
			return network{}, fmt.Errorf("aws: find the %s in %s: %w", what, region, classify(err))
		}
		if len(out.Vpcs) == 0 {
			return network{}, backends.Stalled(fmt.Errorf("aws: no %s in %s", what, region))
		}
		n.vpc = awssdk.ToString(out.Vpcs[0].VpcId)
	}
	out, err := c.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{Filters: []types.Filter{
		{Name: awssdk.String("vpc-id"), Values: []string{n.vpc}},
		{Name: awssdk.String("state"), Values: []string{"available"}},
	}})
	if err != nil {
		return network{}, fmt.Errorf("aws: subnets of %s in %s: %w", n.vpc, region, classify(err))
	}
	if len(out.Subnets) == 0 {
		return network{}, backends.Stalled(fmt.Errorf("aws: VPC %s in %s has no available subnet", n.vpc, region))
	}
	n.subnets = out.Subnets
	sort.Slice(n.subnets, func(i, j int) bool {
		return awssdk.ToString(n.subnets[i].SubnetId) < awssdk.ToString(n.subnets[j].SubnetId)
	})
	p.mu.Lock()
	p.nets[region] = n
	p.mu.Unlock()
	return n, nil
}

// subnetIn returns the subnet to launch into in zone: the first that maps
// public addresses on launch when public is set (that does not when
// unset), else the first of the zone.
func subnetIn(subnets []types.Subnet, zone string, public bool) (types.Subnet, bool) {
	var any *types.Subnet
	for i, sn := range subnets {
		if awssdk.ToString(sn.AvailabilityZone) != zone {
			continue
		}
		if awssdk.ToBool(sn.MapPublicIpOnLaunch) == public {
			return sn, true
		}
		if any == nil {
			any = &subnets[i]
		}
	}
	if any != nil {
		return *any, true
	}
	return types.Subnet{}, false
}

// networkZone returns the default zone of a region with a custom network:
// the first zone with a suitable subnet, else the first with any.
func (p *Provider) networkZone(ctx context.Context, region string) (string, error) {
	n, err := p.network(ctx, region)
	if err != nil {
		return "", err
	}
	best, fallback := "", ""
	for _, sn := range n.subnets {
		z := awssdk.ToString(sn.AvailabilityZone)
		if awssdk.ToBool(sn.MapPublicIpOnLaunch) == p.publicIPs && (best == "" || z < best) {
			best = z
		}
		if fallback == "" || z < fallback {
			fallback = z
		}
	}
	if best != "" {
		return best, nil
	}
	return fallback, nil
}
