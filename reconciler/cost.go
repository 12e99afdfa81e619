package reconciler

import (
	"context"
	"fmt"

	"hoist/reconciler/plan"
	"hoist/store"
)

// billedStatuses are the instance statuses plan.Billed counts.
var billedStatuses = []string{store.InstanceProvisioning, store.InstanceIdle, store.InstanceBusy, store.InstanceTerminating}

// priceCurrent sets the current resources' prices from the store's billed
// instances (plan.CurrentPrices): fleets carry their instances, runs the
// instances they occupy of fleets that are not resources.
func (c *Controller) priceCurrent(ctx context.Context, cur []plan.Current) error {
	insts, err := c.st.ListInstances(ctx, store.InfraFilter{Project: c.cfg.Project, Status: billedStatuses, Limit: 100000})
	if err != nil {
		return fmt.Errorf("observe instance prices: %w", err)
	}
	priced := insts[:0]
	for _, i := range insts {
		if i.Price > 0 {
			priced = append(priced, i)
		}
	}
	if len(priced) == 0 {
		return nil // nothing costs money: every price stays 0
	}
	fleets, err := c.st.ListFleets(ctx, store.InfraFilter{Project: c.cfg.Project, IncludeDeleted: true, Limit: 100000})
	if err != nil {
		return fmt.Errorf("observe fleets: %w", err)
	}
	names := make(map[string]string, len(fleets))
	for _, f := range fleets {
		names[f.ID] = f.Name
	}
	jobs, err := c.st.ListJobsFiltered(ctx, store.JobFilter{Project: c.cfg.Project, Active: true, Limit: 100000})
	if err != nil {
		return fmt.Errorf("observe active jobs: %w", err)
	}
	runsOn := map[string][]string{}
	for _, j := range jobs {
		if j.InstanceID != "" {
			runsOn[j.InstanceID] = append(runsOn[j.InstanceID], j.RunName)
		}
	}
	in := make([]plan.Instance, 0, len(priced))
	for _, i := range priced {
		in = append(in, plan.Instance{Fleet: names[i.FleetID], Status: i.Status, Price: i.Price, Runs: runsOn[i.ID]})
	}
	plan.CurrentPrices(cur, in)
	return nil
}
