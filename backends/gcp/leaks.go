package gcp

import (
	"context"
	"encoding/json"
	"fmt"

	"cloud.google.com/go/compute/apiv1/computepb"

	"hoist/backends"
	"hoist/backends/vm"
)

// ListVolumes returns the persistent disks carrying all of tags in the
// configured regions, with disks.aggregatedList filtered on the labels
// (https://cloud.google.com/compute/docs/reference/rest/v1/disks/aggregatedList).
func (p *Provider) ListVolumes(ctx context.Context, tags map[string]string) ([]vm.Disk, error) {
	req := &computepb.AggregatedListDisksRequest{Project: p.project}
	if f := labelFilter(tags); f != "" {
		req.Filter = ptr(f)
	}
	var out []vm.Disk
	it := p.disks.AggregatedList(ctx, req)
	for {
		pair, err := it.Next()
		if isDone(err) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("gcp: list disks: %w", classify(err))
		}
		for _, d := range pair.Value.GetDisks() {
			disk := diskOf(d)
			if disk.State == vm.DiskGone || !vm.InRegions(disk.Region, p.regions) || !backends.MatchTags(disk.Tags, tags) {
				continue
			}
			disk.CreatedAt = parseTime(d.GetCreationTimestamp())
			out = append(out, disk)
		}
	}
	return out, nil
}

// ListPlacementGroups returns the compact placement resource policies
// carrying all of tags in the configured regions. Resource policies have no
// labels, so every policy is listed (resourcePolicies.aggregatedList,
// https://cloud.google.com/compute/docs/reference/rest/v1/resourcePolicies/aggregatedList)
// and its tags read from the description CreatePlacementGroup wrote.
func (p *Provider) ListPlacementGroups(ctx context.Context, tags map[string]string) ([]vm.Group, error) {
	var out []vm.Group
	it := p.policies.AggregatedList(ctx, &computepb.AggregatedListResourcePoliciesRequest{Project: p.project})
	for {
		pair, err := it.Next()
		if isDone(err) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("gcp: list placement policies: %w", classify(err))
		}
		for _, rp := range pair.Value.GetResourcePolicies() {
			var desc struct {
				Hoist map[string]string `json:"hoist"`
			}
			if json.Unmarshal([]byte(rp.GetDescription()), &desc) != nil || len(desc.Hoist) == 0 {
				continue // not hoist's
			}
			region := lastSegment(rp.GetRegion())
			if !vm.InRegions(region, p.regions) || !backends.MatchTags(desc.Hoist, tags) {
				continue
			}
			out = append(out, vm.Group{
				Ref: region + "/" + rp.GetName(), Region: region, Tags: desc.Hoist,
				CreatedAt: parseTime(rp.GetCreationTimestamp()),
			})
		}
	}
	return out, nil
}
