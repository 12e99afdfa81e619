package aws

import (
	"context"
	"fmt"
	"sort"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"hoist/backends/vm"
)

// tagFilters are EC2 tag:<key> filters for every one of tags, in key order
// (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribeVolumes.html).
func tagFilters(tags map[string]string) []types.Filter {
	keys := make([]string, 0, len(tags))
	for k := range tags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]types.Filter, 0, len(keys))
	for _, k := range keys {
		out = append(out, types.Filter{Name: awssdk.String("tag:" + k), Values: []string{tags[k]}})
	}
	return out
}

// ListVolumes returns the EBS volumes carrying all of tags in every
// configured region (DescribeVolumes filtered on the tags in EC2), deleted
// ones left out.
func (p *Provider) ListVolumes(ctx context.Context, tags map[string]string) ([]vm.Disk, error) {
	var out []vm.Disk
	for _, region := range p.regions {
		pages := ec2.NewDescribeVolumesPaginator(p.client(region), &ec2.DescribeVolumesInput{Filters: tagFilters(tags)})
		for pages.HasMorePages() {
			page, err := pages.NextPage(ctx)
			if err != nil {
				return nil, fmt.Errorf("aws: list volumes in %s: %w", region, classify(err))
			}
			for _, v := range page.Volumes {
				if d := p.disk(region, v); d.State != vm.DiskGone {
					d.CreatedAt = awssdk.ToTime(v.CreateTime)
					out = append(out, d)
				}
			}
		}
	}
	return out, nil
}

// ListPlacementGroups returns the placement groups carrying all of tags in
// every configured region (DescribePlacementGroups filtered on the tags;
// EC2 does not say when a group was created), deleted ones left out.
func (p *Provider) ListPlacementGroups(ctx context.Context, tags map[string]string) ([]vm.Group, error) {
	var out []vm.Group
	for _, region := range p.regions {
		page, err := p.client(region).DescribePlacementGroups(ctx, &ec2.DescribePlacementGroupsInput{Filters: tagFilters(tags)})
		if err != nil {
			return nil, fmt.Errorf("aws: list placement groups in %s: %w", region, classify(err))
		}
		for _, g := range page.PlacementGroups {
			if g.State == types.PlacementGroupStateDeleted || g.State == types.PlacementGroupStateDeleting {
				continue
			}
			out = append(out, vm.Group{Ref: ref(region, awssdk.ToString(g.GroupName)), Region: region, Tags: readTags(g.Tags)})
		}
	}
	return out, nil
}
