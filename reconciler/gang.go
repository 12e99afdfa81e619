package reconciler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"hoist/backends"
	"hoist/backends/offers"
	"hoist/schema"
	"hoist/store"
)

// Gang placement of multi-node runs. The jobs of one replica of a task
// with nodes above 1 (its gang) are placed together or not at all, on
// instances of one fleet that can reach each other, one whole instance per
// job. As dstack does (src/dstack/_internal/server/services/runs/plan.py,
// find_optimal_fleet_with_offers: "Limit multinode runs to cluster fleets
// to guarantee best connectivity"), only fleets with `placement: cluster`
// take them: an SSH fleet's hosts, a cloud fleet's instances in one
// backend, region and placement group, a Kubernetes fleet's cluster. The
// master job (job_num 0) places the whole gang; the other jobs wait for it.

// gangPoll is how often a gang waiting for instances looks again; an
// instance that becomes ready or free wakes it sooner.
const gangPoll = 2 * time.Second

// multiNode reports whether the run's jobs form a gang: a task of more
// than one node.
func (s runSpec) multiNode() bool {
	return schema.Kind(s.Type) == schema.KindTask && s.Nodes > 1
}

// gangFleetRule is what a multi-node run's refusal and wait messages say
// about the fleets it may use.
const gangFleetRule = "multi-node runs use only fleets with `placement: cluster` (as dstack does)"

// placeGang places the gang of a submitted job of a multi-node run: the
// master finds one fleet with enough free instances and assigns every
// job of the gang in one write; when the fleet can grow it first grows by
// the missing instances (reserved for the gang while they provision) and
// the gang waits for them; when instances it may use are busy it waits;
// when no fleet can ever hold the gang, the master fails for want of
// capacity (the run worker then stops the others). Never is a part of the
// gang started without the rest.
func (c *Controller) placeGang(ctx context.Context, l store.Lease, job *store.Job, run *store.Run, spec runSpec) (time.Duration, error) {
	if job.JobNum != 0 {
		return gangPoll, nil // the master places the gang
	}
	all, err := c.st.ListJobs(ctx, run.ID)
	if err != nil {
		return 0, err
	}
	var gang []store.Job
	for _, j := range latestSubmissions(all) {
		if j.ReplicaNum == job.ReplicaNum {
			gang = append(gang, j)
		}
	}
	slices.SortFunc(gang, func(a, b store.Job) int { return a.JobNum - b.JobNum })
	if len(gang) != spec.Nodes || slices.ContainsFunc(gang, func(j store.Job) bool {
		return j.Status != store.JobSubmitted || j.SubmissionNum != job.SubmissionNum
	}) {
		// A sibling of an older submission still ends, or this one's are
		// being created: the gang is placed once all are submitted.
		return c.holdJob(ctx, l, job, run, "waiting for the cluster's jobs to be submitted", gangPoll)
	}
	gang[0] = *job // the leased row, as the worker read it
	sites, after, done, err := c.volumeGate(ctx, l, job, run, spec)
	if done {
		return after, err
	}
	var pd provisioningData
	if len(job.ProvisioningData) > 0 {
		_ = json.Unmarshal(job.ProvisioningData, &pd)
	}
	if err := c.dropFailedReservations(ctx, gang, &pd); err != nil {
		return 0, err
	}
	// The master's row keeps what was learnt, whatever happens next.
	gang[0].ProvisioningData, _ = json.Marshal(pd)
	*job = gang[0]
	tried := map[string]bool{}
	for _, k := range pd.TriedOffers {
		tried[k] = true
	}
	pick, err := c.chooseGang(ctx, spec, gang, tried, sites)
	switch {
	case errors.Is(err, errNoFleets) || errors.Is(err, errNoCapacity):
		return 0, c.setTerminating(ctx, l, job, reasonNoCapacity, err.Error())
	case errors.Is(err, errGangWait):
		return c.holdJob(ctx, l, job, run, strings.TrimPrefix(err.Error(), errGangWait.Error()+": "), gangPoll)
	case err != nil:
		return 0, err
	}
	return c.writeGang(ctx, l, gang, run, pd, pick)
}

// gangPick is where a gang goes: an instance for each of its jobs, in
// job order, and whether all are ready (the gang is assigned) or some
// still provision (the gang reserves them and waits).
type gangPick struct {
	fleet string
	insts []store.Instance
	ready bool
}

// errGangWait says the gang cannot be placed now but may be later; its
// message (after the prefix) says what it waits for.
var errGangWait = errors.New("gang waits")

// gangFleet is what chooseGang knows of one candidate fleet.
type gangFleet struct {
	fleet store.Fleet
	// free are ready instances no job outside the gang holds, mine
	// (reserved by the gang) first, then cheapest first; coming are
	// provisioning ones the gang holds or no job does.
	free, coming []store.Instance
	// held counts the fitting instances other jobs hold or that are
	// unreachable: they may be free later.
	held int
	// headroom is how many instances the fleet may still grow by (-1:
	// unbounded; 0 for SSH fleets and fleets without nodes).
	headroom int
	// growErr is why growing the fleet for the gang failed (its headroom
	// then does not count).
	growErr error
}

// capacity is the most jobs of the gang the fleet could ever hold.
func (g gangFleet) capacity() int {
	have := len(g.free) + len(g.coming) + g.held
	switch {
	case g.growErr != nil:
		return have
	case g.headroom < 0:
		return 1 << 30
	}
	return have + g.headroom
}

// chooseGang picks the fleet and instances of a gang of len(gang) jobs.
func (c *Controller) chooseGang(ctx context.Context, spec runSpec, gang []store.Job, tried map[string]bool, sites []volumeSite) (gangPick, error) {
	n := len(gang)
	fleets, err := c.st.ListFleets(ctx, store.InfraFilter{Project: c.cfg.Project})
	if err != nil {
		return gangPick{}, err
	}
	mine := map[string]bool{}
	for _, j := range gang {
		mine[j.ID] = true
	}
	q := instanceQuery(spec)
	var cands []gangFleet
	var notCluster []string
	for _, f := range fleets {
		if f.Status != store.FleetActive || f.Deleted {
			continue
		}
		if len(spec.Fleets) > 0 && !slices.ContainsFunc(spec.Fleets, func(r schema.EntityRef) bool { return r.Name == f.Name }) {
			continue
		}
		var fs schema.Fleet
		if json.Unmarshal(f.Spec, &fs) != nil || fs.Placement != "cluster" || f.Name == c.cfg.LocalFleet {
			notCluster = append(notCluster, f.Name)
			continue
		}
		g, err := c.gangFleetOf(ctx, f, fs, q, mine, sites, spec.Backends)
		if err != nil {
			return gangPick{}, err
		}
		cands = append(cands, g)
	}
	if len(cands) == 0 {
		if len(notCluster) == 0 {
			return gangPick{}, errNoFleets
		}
		return gangPick{}, fmt.Errorf("%w: %s; fleet %s %s not", errNoCapacity, gangFleetRule,
			strings.Join(notCluster, ", "), map[bool]string{true: "is", false: "are"}[len(notCluster) == 1])
	}
	// Ready now: the n free instances, of one fleet and in one backend and
	// region, that cost least.
	var best gangPick
	for _, g := range cands {
		for _, site := range bySite(g.free) {
			if len(site) >= n && (best.insts == nil || gangPrice(site[:n]) < gangPrice(best.insts)) {
				best = gangPick{fleet: g.fleet.Name, insts: site[:n], ready: true}
			}
		}
	}
	if best.insts != nil {
		return best, nil
	}
	// Ready once instances on their way are, or once the fleet has grown
	// by all the missing ones (all-or-nothing: provisioned, and reserved
	// for the gang, before any job is placed).
	for i, g := range cands {
		have := append(slices.Clone(g.free), g.coming...)
		if len(have) >= n {
			return gangPick{fleet: g.fleet.Name, insts: have[:n]}, nil
		}
		missing := n - len(have)
		if g.headroom >= 0 && g.headroom < missing {
			continue
		}
		grown, err := c.growGang(ctx, g.fleet, spec, sites, tried, missing)
		if err == nil {
			return gangPick{fleet: g.fleet.Name, insts: append(have, grown...)}, nil
		}
		if backends.KindOf(err) == backends.KindWait {
			return gangPick{}, fmt.Errorf("%w: fleet %s is busy: %v", errGangWait, g.fleet.Name, err)
		}
		if err != nil {
			cands[i].growErr = err
		}
	}
	// Ready once instances other jobs hold are free.
	for _, g := range cands {
		if g.capacity() >= n {
			return gangPick{}, fmt.Errorf("%w: waiting for %d free instances of fleet %s (%d free, %d provisioning, %d in use)",
				errGangWait, n, g.fleet.Name, len(g.free), len(g.coming), g.held)
		}
	}
	var why []string
	for _, g := range cands {
		msg := fmt.Sprintf("%s holds at most %d", g.fleet.Name, g.capacity())
		if g.growErr != nil {
			msg += ": " + g.growErr.Error()
		}
		why = append(why, msg)
	}
	return gangPick{}, fmt.Errorf("%w: no fleet with `placement: cluster` can hold %d nodes (%s); %s",
		errNoCapacity, n, strings.Join(why, "; "), gangFleetRule)
}

// bySite groups instances by backend and region (a cluster fleet's are
// all in one; see clusterOffers), keeping their order.
func bySite(insts []store.Instance) [][]store.Instance {
	var keys []string
	groups := map[string][]store.Instance{}
	for _, i := range insts {
		k := strings.ToLower(i.Backend) + "/" + i.Region
		if _, ok := groups[k]; !ok {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], i)
	}
	out := make([][]store.Instance, 0, len(keys))
	for _, k := range keys {
		out = append(out, groups[k])
	}
	return out
}

func gangPrice(insts []store.Instance) float64 {
	var p float64
	for _, i := range insts {
		p += i.Price
	}
	return p
}

// gangFleetOf sorts the instances of cluster fleet f that fit the gang's
// jobs (query q, the run's backends, its volumes' sites).
func (c *Controller) gangFleetOf(ctx context.Context, f store.Fleet, fs schema.Fleet, q offers.Query, mine map[string]bool, sites []volumeSite, bes []string) (gangFleet, error) {
	g := gangFleet{fleet: f}
	insts, err := c.st.ListInstances(ctx, store.InfraFilter{Project: c.cfg.Project, FleetID: f.ID})
	if err != nil {
		return g, err
	}
	live := 0
	ours := map[string]bool{}
	for _, i := range insts {
		if i.Status == store.InstanceTerminated || i.Status == store.InstanceTerminating {
			continue
		}
		live++
		if !c.onBackends(bes, i.Backend) || !atVolumeSites(sites, i) {
			continue
		}
		var o offers.Offer
		if len(i.Offer) > 0 {
			_ = json.Unmarshal(i.Offer, &o)
			if len(offers.Filter([]offers.Offer{o}, q)) == 0 {
				continue // never fits, whatever its state
			}
		}
		held, ourOwn, err := c.heldOutside(ctx, i.ID, mine)
		if err != nil {
			return g, err
		}
		ours[i.ID] = ourOwn
		switch {
		case i.Status == store.InstancePending || i.Status == store.InstanceProvisioning:
			if held {
				g.held++
			} else {
				g.coming = append(g.coming, i)
			}
		case i.Unreachable || held || (i.Status != store.InstanceIdle && i.Status != store.InstanceBusy):
			g.held++
		default:
			g.free = append(g.free, i)
		}
	}
	order := func(a, b store.Instance) int {
		if ours[a.ID] != ours[b.ID] {
			if ours[a.ID] {
				return -1
			}
			return 1
		}
		switch {
		case a.Price < b.Price:
			return -1
		case a.Price > b.Price:
			return 1
		}
		return a.InstanceNum - b.InstanceNum
	}
	slices.SortStableFunc(g.free, order)
	slices.SortStableFunc(g.coming, order)
	switch {
	case fs.SSHConfig != nil || fs.Nodes == nil || f.Name == c.cfg.LocalFleet:
	case fs.Nodes.Max == nil:
		g.headroom = -1
	default:
		g.headroom = max(*fs.Nodes.Max-live, 0)
	}
	return g, nil
}

// heldOutside reports whether an active job outside the gang (ids in
// mine) is placed on or waits for instance id, and whether one of the
// gang's is.
func (c *Controller) heldOutside(ctx context.Context, id string, mine map[string]bool) (held, ours bool, err error) {
	jobs, err := c.st.ListJobsFiltered(ctx, store.JobFilter{InstanceID: id, Status: activeJobStatuses})
	if err != nil {
		return false, false, err
	}
	for _, j := range jobs {
		if mine[j.ID] {
			ours = true
		} else {
			held = true
		}
	}
	return held, ours, nil
}

// growGang grows cluster fleet f by the missing instances of a gang, all
// or none, from the cheapest offer that fits the fleet and the jobs (in
// the cluster's backend and region, growFleetBy).
func (c *Controller) growGang(ctx context.Context, f store.Fleet, spec runSpec, sites []volumeSite, tried map[string]bool, missing int) ([]store.Instance, error) {
	q := instanceQuery(spec)
	bes := narrowToSites(sites, &q, spec.Backends)
	return c.growFleetBy(ctx, f, q, bes, tried, missing)
}

// dropFailedReservations forgets the gang's reserved instances that ended
// before the gang got them, remembering their offers as tried (the next
// growth takes another offer).
func (c *Controller) dropFailedReservations(ctx context.Context, gang []store.Job, pd *provisioningData) error {
	for k := range gang {
		j := &gang[k]
		if j.InstanceID == "" {
			continue
		}
		inst, err := c.st.GetInstance(ctx, j.InstanceID)
		if errors.Is(err, store.ErrNotFound) {
			j.InstanceID = ""
			continue
		}
		if err != nil {
			return err
		}
		if inst.Status != store.InstanceTerminated && inst.Status != store.InstanceTerminating {
			continue
		}
		var o offers.Offer
		if json.Unmarshal(inst.Offer, &o) == nil && o.Instance != "" && !slices.Contains(pd.TriedOffers, offerKey(o)) {
			pd.TriedOffers = append(pd.TriedOffers, offerKey(o))
		}
		j.InstanceID = ""
	}
	return nil
}

// writeGang writes a pick: every job of the gang on its instance, in one
// transaction under the master's lease (l). A ready pick assigns them
// (provisioning, as assign does for one job); a pick with instances still
// provisioning reserves them (the jobs stay submitted, the master saying
// what they wait for).
func (c *Controller) writeGang(ctx context.Context, l store.Lease, gang []store.Job, run *store.Run, pd provisioningData, pick gangPick) (time.Duration, error) {
	now := c.now()
	ptrs := make([]*store.Job, len(gang))
	changed := false
	for k := range gang {
		j := &gang[k]
		was := *j
		j.InstanceID, j.Backend = pick.insts[k].ID, pick.insts[k].Backend
		if pick.ready {
			j.Status, j.StatusMessage = store.JobProvisioning, ""
			jpd := provisioningData{AssignedAt: now}
			if k == 0 {
				jpd.TriedOffers = pd.TriedOffers
			}
			j.ProvisioningData, _ = json.Marshal(jpd)
		} else if k == 0 {
			j.ProvisioningData, _ = json.Marshal(pd)
			ready := 0
			for _, i := range pick.insts {
				if i.Status == store.InstanceIdle || i.Status == store.InstanceBusy {
					ready++
				}
			}
			j.StatusMessage = fmt.Sprintf("waiting for the cluster's instances: fleet %s: %d of %d ready", pick.fleet, ready, len(gang))
		}
		ptrs[k] = j
		changed = changed || j.InstanceID != was.InstanceID || j.Status != was.Status ||
			j.StatusMessage != was.StatusMessage || string(j.ProvisioningData) != string(was.ProvisioningData)
	}
	if !changed {
		return gangPoll, nil // the gang still waits for the instances it holds
	}
	err := c.st.AssignJobsLeased(ctx, l, ptrs)
	if errors.Is(err, store.ErrInstanceBusy) || errors.Is(err, store.ErrConflict) {
		return time.Millisecond, nil // chosen anew from the stored jobs
	}
	if err != nil {
		return 0, err
	}
	for _, j := range gang {
		if pick.ready {
			c.event(ctx, "job", j.JobName, j.ID, "provisioning", run.Revision,
				fmt.Sprintf("assigned to instance %s with the rest of its cluster (fleet %s)", instanceName(pick.insts, j.InstanceID), pick.fleet))
			c.markInstance(ctx, j.InstanceID)
			c.jobs.Add(j.ID)
		}
	}
	if !pick.ready {
		c.event(ctx, "job", gang[0].JobName, gang[0].ID, "waiting", run.Revision, gang[0].StatusMessage)
		c.runs.Add(run.ID)
		return gangPoll, nil
	}
	c.runs.Add(run.ID)
	return time.Millisecond, nil
}

func instanceName(insts []store.Instance, id string) string {
	for _, i := range insts {
		if i.ID == id {
			return i.Name
		}
	}
	return id
}

// provisioningSince is when a provisioning job's provisioning timeout
// counts from: when it was assigned (a gang may wait long for its
// instances before), else when it was submitted.
func provisioningSince(job store.Job) time.Time {
	var pd provisioningData
	if len(job.ProvisioningData) > 0 && json.Unmarshal(job.ProvisioningData, &pd) == nil && !pd.AssignedAt.IsZero() {
		return pd.AssignedAt
	}
	return job.SubmittedAt
}
