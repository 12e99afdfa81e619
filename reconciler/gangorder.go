package reconciler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"hoist/backends/offers"
	"hoist/store"
)

// The order of waiting gangs. dstack processes submitted jobs by their
// run's priority, highest first, then in submission order
// (src/dstack/_internal/server/background/pipeline_tasks/jobs_submitted.py),
// so a job never overtakes an earlier one for the instances both could
// use. hoist places a single-node job on any free instance as soon as one
// is free, while a gang (a multi-node run, gang.go) needs several free at
// once: without an order, later single-node jobs would take each instance
// of a busy cluster fleet as it frees, and the gang could wait for ever.
//
// So the master of a gang that waits for a fleet's instances records the
// fleet (provisioningData.WaitFleet), and the instances of that fleet that
// fit the gang are its claim: a job behind it (lower priority, or equal
// priority and submitted later), neither a single-node job nor another
// gang, takes none of them, while the instances the gang cannot use (they
// do not fit its resources or backends, or are of other fleets) stay free
// for anyone. The gang's network volumes are not weighed: an instance at
// a site its volumes rule out is still claimed, erring towards the gang.
// The claim holds only while the master waits: placed, or ended, it has
// none. An instance of such a fleet that becomes ready or free
// wakes the waiting masters at once (wakeGangsOn), the poll being only
// the fallback.
//
// The claim is a rule of placement, not a lock: the write that places a
// job still takes its instance's blocks in one transaction
// (AssignJobBlocksLeased, AssignJobsLeased), so whichever order two
// servers decide in, no instance is ever given twice.

// gangClaim is what a waiting gang ahead of a job claims of its fleet.
type gangClaim struct {
	// run is the gang's run, named in messages.
	run string
	// qs (one per group of its nodes) and backends select the fleet's
	// instances the gang can use.
	qs       []offers.Query
	backends []string
}

// gangClaims are the claims of the gangs waiting ahead of one job, by the
// id of the fleet each waits for.
type gangClaims map[string][]gangClaim

// claimedBy returns the run of a gang ahead that claims instance i of
// fleet fleetID (offer o), and whether one does.
func (c *Controller) claimedBy(claims gangClaims, fleetID string, i store.Instance, o offers.Offer) (string, bool) {
	for _, g := range claims[fleetID] {
		if !c.onBackends(g.backends, i.Backend) {
			continue
		}
		// An instance whose offer is not known yet may fit any node.
		if len(i.Offer) == 0 || slices.ContainsFunc(g.qs, func(q offers.Query) bool {
			return len(offers.Filter([]offers.Offer{o}, q)) > 0
		}) {
			return g.run, true
		}
	}
	return "", false
}

// gangsAhead returns the claims of the gangs that wait for a fleet's
// instances ahead of job of run (by priority, then submission): the
// masters of other runs, still submitted, whose provisioning data names
// the fleet they wait for and that hold no instances yet (a master that
// holds some reserved its gang's all, and claims no others).
func (c *Controller) gangsAhead(ctx context.Context, job *store.Job, run *store.Run) (gangClaims, error) {
	submitted, err := c.st.ListJobsFiltered(ctx, store.JobFilter{Project: c.cfg.Project, Status: []string{store.JobSubmitted}, Limit: 1 << 30})
	if err != nil {
		return nil, err
	}
	claims := gangClaims{}
	for _, j := range submitted {
		if j.JobNum != 0 || j.RunID == run.ID || j.InstanceID != "" || len(j.ProvisioningData) == 0 {
			continue
		}
		var pd provisioningData
		if json.Unmarshal(j.ProvisioningData, &pd) != nil || pd.WaitFleet == "" {
			continue
		}
		r, err := c.st.GetRun(ctx, j.RunID)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if r.Priority < run.Priority || (r.Priority == run.Priority && !j.SubmittedAt.Before(job.SubmittedAt)) {
			continue // not ahead
		}
		spec, err := decodeRunSpec(j.Spec)
		if err != nil || !spec.multiNode() {
			continue
		}
		nodes := make([]store.Job, spec.nodeCount())
		for k := range nodes {
			nodes[k].JobNum = k
		}
		claims[pd.WaitFleet] = append(claims[pd.WaitFleet], gangClaim{run: r.Name, qs: gangNeedsOf(spec, nodes).queries, backends: spec.Backends})
	}
	return claims, nil
}

// claimNote is what a job that found no instance says of the instances
// it left to gangs ahead of it (by instance name, the gang's run).
func claimNote(left map[string]string) string {
	if len(left) == 0 {
		return ""
	}
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(left)) {
		parts = append(parts, fmt.Sprintf("%s for run %s", name, left[name]))
	}
	return "; held for multi-node runs submitted earlier: " + strings.Join(parts, ", ")
}

// holdGang keeps a gang's master waiting for the instances of fleet
// fleetID, its status message saying what for, and records the fleet
// (provisioningData.WaitFleet) so that later jobs leave those instances to
// it and their becoming free wakes it. stored is the master's provisioning
// data as read.
func (c *Controller) holdGang(ctx context.Context, l store.Lease, job *store.Job, run *store.Run, pd provisioningData, stored []byte, fleetID, msg string) error {
	pd.WaitFleet = fleetID
	job.ProvisioningData, _ = json.Marshal(pd)
	if job.StatusMessage == msg && string(job.ProvisioningData) != string(stored) {
		// Only the fleet changed (holdJob writes the rest).
		if err := c.st.UpdateJobLeased(ctx, l, job); err != nil {
			return err
		}
	}
	_, err := c.holdJob(ctx, l, job, run, msg, gangPoll)
	return err
}

// wakeGangsOn wakes the masters of the gangs that wait for the instances
// of fleet fleetID: one of them became ready or free.
func (c *Controller) wakeGangsOn(ctx context.Context, fleetID string) {
	if fleetID == "" {
		return
	}
	jobs, err := c.st.ListJobsFiltered(ctx, store.JobFilter{Project: c.cfg.Project, Status: []string{store.JobSubmitted}, Limit: 1 << 30})
	if err != nil {
		return
	}
	for _, j := range jobs {
		if j.JobNum != 0 || len(j.ProvisioningData) == 0 {
			continue
		}
		var pd provisioningData
		if json.Unmarshal(j.ProvisioningData, &pd) == nil && pd.WaitFleet == fleetID {
			c.jobs.Add(j.ID)
		}
	}
}
