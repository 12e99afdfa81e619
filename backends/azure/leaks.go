package azure

import (
	"context"
	"errors"

	"hoist/backends"
	"hoist/backends/vm"
)

// ListVolumes returns the managed disks of the backend's resource group
// carrying all of tags. Disks - List By Resource Group has no tag filter
// (https://learn.microsoft.com/en-us/rest/api/compute/disks/list-by-resource-group),
// so the tags are matched here. A resource group not there yet holds none.
func (p *provider) ListVolumes(ctx context.Context, tags map[string]string) ([]vm.Disk, error) {
	var out []vm.Disk
	pager := p.disks.NewListByResourceGroupPager(p.rg, nil)
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			err = classify("list disks", err)
			if errors.Is(err, backends.ErrNotFound) {
				return nil, nil
			}
			return nil, err
		}
		for _, d := range page.Value {
			if d == nil || !backends.MatchTags(unptrTags(d.Tags), tags) {
				continue
			}
			v := disk(p.rg+"/"+deref(d.Name), d)
			if d.Properties != nil && d.Properties.TimeCreated != nil {
				v.CreatedAt = *d.Properties.TimeCreated
			}
			out = append(out, v)
		}
	}
	return out, nil
}
