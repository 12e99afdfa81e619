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
// than one node (in all its groups).
func (s runSpec) multiNode() bool {
	return schema.Kind(s.Type) == schema.KindTask && s.nodeCount() > 1
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
	if len(gang) != spec.nodeCount() || slices.ContainsFunc(gang, func(j store.Job) bool {
		return j.Status != store.JobSubmitted || j.SubmissionNum != job.SubmissionNum
	}) {
		// A sibling of an older submission still ends, or this one's are
		// being created: the gang is placed once all are submitted.
		return c.holdJob(ctx, l, job, run, "waiting for the cluster's jobs to be submitted", gangPoll)
	}
	gang[0] = *job // the leased row, as the worker read it
	stored := job.ProvisioningData
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
	claims, err := c.gangsAhead(ctx, job, run)
	if err != nil {
		return 0, err
	}
	pick, err := c.chooseGang(ctx, spec, gang, tried, sites, claims)
	switch {
	case errors.Is(err, errNoFleets) || errors.Is(err, errNoCapacity):
		return 0, c.setTerminating(ctx, l, job, reasonNoCapacity, err.Error())
	case errors.Is(err, errGangWait) && errors.Is(err, errBudget):
		msg := strings.TrimPrefix(err.Error(), errGangWait.Error()+": ")
		c.budgetBlocked("job", job.StatusMessage, msg)
		return budgetPoll, c.holdGang(ctx, l, job, run, pd, stored, pick.fleetID, msg)
	case errors.Is(err, errGangWait):
		return gangPoll, c.holdGang(ctx, l, job, run, pd, stored, pick.fleetID, strings.TrimPrefix(err.Error(), errGangWait.Error()+": "))
	case err != nil:
		return 0, err
	}
	return c.writeGang(ctx, l, gang, run, pd, pick)
}

// gangPick is where a gang goes: an instance for each of its jobs, in
// job order, and whether all are ready (the gang is assigned) or some
// still provision (the gang reserves them and waits).
type gangPick struct {
	fleet, fleetID string
	insts          []store.Instance
	ready          bool
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
	// held are the fitting instances other jobs hold, that are
	// unreachable, or that gangs ahead claim (gangorder.go): they may be
	// free later.
	held []store.Instance
	// fits says, by instance id, which of the gang's queries
	// (gangNeeds.queries) each instance fits.
	fits map[string][]bool
	// headroom is how many instances the fleet may still grow by (-1:
	// unbounded; 0 for SSH fleets and fleets without nodes).
	headroom int
	// growErr is why growing the fleet for the gang failed (its headroom
	// then does not count).
	growErr error
}

// gangNeeds is what the jobs of a gang ask of their instances: one offer
// query per group of the task (one in all for a task without groups), and
// for each job, in job order, the index of its group's query.
type gangNeeds struct {
	queries []offers.Query
	of      []int
}

// gangNeedsOf is the needs of gang, jobs of spec: each job's query is
// its group's resources (forJob).
func gangNeedsOf(spec runSpec, gang []store.Job) gangNeeds {
	var nd gangNeeds
	index := map[int]int{}
	for _, j := range gang {
		g, _, _ := spec.nodeGroup(j.JobNum) // 0 for a task without groups
		k, ok := index[g]
		if !ok {
			k = len(nd.queries)
			index[g] = k
			nd.queries = append(nd.queries, instanceQuery(spec.forJob(j.JobNum)))
		}
		nd.of = append(nd.of, k)
	}
	return nd
}

// match gives the jobs of the gang instances of insts that fit them
// (matchGang).
func (g gangFleet) match(nd gangNeeds, gang []store.Job, insts []store.Instance) []int {
	return matchGang(gang, insts, func(k, i int) bool { return g.fits[insts[i].ID][nd.of[k]] })
}

// capacity is the most jobs of the gang the fleet could ever hold.
func (g gangFleet) capacity(nd gangNeeds, gang []store.Job) int {
	all := append(append(slices.Clone(g.free), g.coming...), g.held...)
	have := matched(g.match(nd, gang, all))
	switch {
	case g.growErr != nil:
		return have
	case g.headroom < 0:
		return 1 << 30
	}
	return have + g.headroom
}

// matchGang gives each job k of gang a distinct instance of insts that
// fits it (fits(k, i)), to as many jobs as can have one: a maximum
// matching of jobs to instances, found by augmenting paths. A job keeps
// the instance it already holds (a reservation of the gang) when it fits,
// and otherwise takes the first free one in the order of insts; a job
// takes another's only to give that one a different instance. It returns,
// for each job, the index in insts of its instance, or -1.
func matchGang(gang []store.Job, insts []store.Instance, fits func(k, i int) bool) []int {
	instOf := make([]int, len(gang))
	jobOf := make([]int, len(insts))
	for k := range instOf {
		instOf[k] = -1
	}
	for i := range jobOf {
		jobOf[i] = -1
	}
	for k, j := range gang {
		for i, inst := range insts {
			if j.InstanceID != "" && inst.ID == j.InstanceID && jobOf[i] < 0 && fits(k, i) {
				jobOf[i], instOf[k] = k, i
			}
		}
	}
	var augment func(k int, seen []bool) bool
	augment = func(k int, seen []bool) bool {
		for i := range insts {
			if jobOf[i] < 0 && fits(k, i) {
				jobOf[i], instOf[k] = k, i
				return true
			}
		}
		for i := range insts {
			if seen[i] || !fits(k, i) {
				continue
			}
			seen[i] = true
			if augment(jobOf[i], seen) {
				jobOf[i], instOf[k] = k, i
				return true
			}
		}
		return false
	}
	for k := range gang {
		if instOf[k] < 0 {
			augment(k, make([]bool, len(insts)))
		}
	}
	return instOf
}

// matched counts the jobs a matching gives an instance.
func matched(m []int) int {
	n := 0
	for _, i := range m {
		if i >= 0 {
			n++
		}
	}
	return n
}

// chooseGang picks the fleet and instances of a gang of len(gang) jobs,
// each job's instance fitting its group's resources. Instances that gangs
// waiting ahead of it claim (claims) it leaves to them.
func (c *Controller) chooseGang(ctx context.Context, spec runSpec, gang []store.Job, tried map[string]bool, sites []volumeSite, claims gangClaims) (gangPick, error) {
	n := len(gang)
	fleets, err := c.fleetsFor(ctx, spec.Fleets)
	if err != nil {
		return gangPick{}, err
	}
	mine := map[string]bool{}
	for _, j := range gang {
		mine[j.ID] = true
	}
	nd := gangNeedsOf(spec, gang)
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
		g, err := c.gangFleetOf(ctx, f, fs, nd.queries, mine, sites, spec.Backends, claims)
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
	// Ready now: a free instance for each job, of one fleet and in one
	// backend and region, that cost least.
	var best gangPick
	for _, g := range cands {
		for _, site := range bySite(g.free) {
			m := g.match(nd, gang, site)
			if matched(m) < n {
				continue
			}
			insts := make([]store.Instance, n)
			for k, i := range m {
				insts[k] = site[i]
			}
			if best.insts == nil || gangPrice(insts) < gangPrice(best.insts) {
				best = gangPick{fleet: g.fleet.Name, fleetID: g.fleet.ID, insts: insts, ready: true}
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
		m := g.match(nd, gang, have)
		insts := make([]store.Instance, n)
		var need []int // the jobs without an instance
		for k, x := range m {
			if x < 0 {
				need = append(need, k)
			} else {
				insts[k] = have[x]
			}
		}
		if len(need) == 0 {
			return gangPick{fleet: g.fleet.Name, fleetID: g.fleet.ID, insts: insts}, nil
		}
		if g.headroom >= 0 && g.headroom < len(need) {
			continue
		}
		grown, err := c.growGang(ctx, g.fleet, spec, nd, need, sites, tried)
		if err == nil {
			for x, k := range need {
				insts[k] = grown[x]
			}
			return gangPick{fleet: g.fleet.Name, fleetID: g.fleet.ID, insts: insts}, nil
		}
		if backends.KindOf(err) == backends.KindWait {
			return gangPick{fleet: g.fleet.Name, fleetID: g.fleet.ID}, fmt.Errorf("%w: fleet %s is busy: %v", errGangWait, g.fleet.Name, err)
		}
		if err != nil {
			cands[i].growErr = err
		}
	}
	// Ready once instances other jobs hold are free.
	for _, g := range cands {
		if g.capacity(nd, gang) >= n {
			return gangPick{fleet: g.fleet.Name, fleetID: g.fleet.ID}, fmt.Errorf("%w: waiting for %d free instances of fleet %s (%d free, %d provisioning, %d in use)",
				errGangWait, n, g.fleet.Name, len(g.free), len(g.coming), len(g.held))
		}
	}
	for _, g := range cands {
		if errors.Is(g.growErr, errBudget) {
			// A fleet could grow but for the budget: the gang waits.
			return gangPick{fleet: g.fleet.Name, fleetID: g.fleet.ID}, fmt.Errorf("%w: %w", errGangWait, g.growErr)
		}
	}
	var why []string
	for _, g := range cands {
		msg := fmt.Sprintf("%s holds at most %d", g.fleet.Name, g.capacity(nd, gang))
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

// gangFleetOf sorts the instances of cluster fleet f that fit some job of
// the gang (one of queries qs, the run's backends, its volumes' sites);
// those that gangs ahead claim count as held.
func (c *Controller) gangFleetOf(ctx context.Context, f store.Fleet, fs schema.Fleet, qs []offers.Query, mine map[string]bool, sites []volumeSite, bes []string, claims gangClaims) (gangFleet, error) {
	g := gangFleet{fleet: f, fits: map[string][]bool{}}
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
		// An instance whose offer is not known yet (an SSH host not yet
		// reached) may fit any job.
		fits, some := make([]bool, len(qs)), false
		var o offers.Offer
		known := len(i.Offer) > 0 && json.Unmarshal(i.Offer, &o) == nil
		for k, q := range qs {
			fits[k] = !known || len(offers.Filter([]offers.Offer{o}, q)) > 0
			some = some || fits[k]
		}
		if !some {
			continue // never fits, whatever its state
		}
		g.fits[i.ID] = fits
		held, ourOwn, err := c.heldOutside(ctx, i.ID, mine)
		if err != nil {
			return g, err
		}
		ours[i.ID] = ourOwn
		if _, claimed := c.claimedBy(claims, f.ID, i, o); claimed && !ourOwn {
			held = true
		}
		switch {
		case i.Status == store.InstancePending || i.Status == store.InstanceProvisioning:
			if held {
				g.held = append(g.held, i)
			} else {
				g.coming = append(g.coming, i)
			}
		case i.Unreachable || held || (i.Status != store.InstanceIdle && i.Status != store.InstanceBusy):
			g.held = append(g.held, i)
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

// growGang grows cluster fleet f by an instance for each job of the gang
// need names (by index), all or none: the jobs of one group from the
// cheapest offer that fits the fleet and the group's resources, every
// group's in the cluster's backend and region (growFleetFor). It returns
// the instances in the order of need.
func (c *Controller) growGang(ctx context.Context, f store.Fleet, spec runSpec, nd gangNeeds, need []int, sites []volumeSite, tried map[string]bool) ([]store.Instance, error) {
	var asks []growAsk
	askOf := map[int]int{} // by query index
	var bes []string
	for _, k := range need {
		a, ok := askOf[nd.of[k]]
		if !ok {
			q := nd.queries[nd.of[k]]
			bes = narrowToSites(sites, &q, spec.Backends)
			a = len(asks)
			askOf[nd.of[k]] = a
			asks = append(asks, growAsk{job: q})
		}
		asks[a].n++
	}
	grown, err := c.growFleetFor(ctx, f, asks, bes, tried)
	if err != nil {
		return nil, err
	}
	out := make([]store.Instance, len(need))
	next := make([]int, len(asks))
	for x, k := range need {
		a := askOf[nd.of[k]]
		out[x] = grown[a][next[a]]
		next[a]++
	}
	return out, nil
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
				jpd.TriedOffers, jpd.ClusterSSHKey = pd.TriedOffers, pd.ClusterSSHKey
			}
			j.ProvisioningData, _ = json.Marshal(jpd)
		} else if k == 0 {
			pd.WaitFleet = pick.fleetID // woken when its instances are ready
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
