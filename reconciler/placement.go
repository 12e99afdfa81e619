package reconciler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"hoist/agents/api"
	"hoist/backends"
	"hoist/backends/offers"
	"hoist/backends/offers/query"
	"hoist/schema"
	"hoist/store"
)

// placeJob assigns the job to an instance of a matching fleet.
func (c *Controller) placeJob(ctx context.Context, l store.Lease, job *store.Job, run *store.Run, spec runSpec) (time.Duration, error) {
	// A job whose spec needs a missing secret fails before it gets an
	// instance (dstack: secrets interpolation error of a submitted job).
	if _, err := c.resolveJobSecrets(ctx, spec); err != nil {
		return 0, c.failForSecrets(ctx, l, job, run, err)
	}
	// A replaced run's successor waits until its predecessor has finished
	// (a service's does not: rolling deployments overlap).
	if run.Type != string(schema.KindService) {
		older, err := c.olderActiveRun(ctx, run)
		if err != nil {
			return 0, err
		}
		if older {
			return 2 * time.Second, nil
		}
	}
	if spec.multiNode() {
		return c.placeGang(ctx, l, job, run, spec)
	}
	// A workflow's job waits for its dependencies and its master.
	if wait, fail, err := c.workflowGate(ctx, run, job, spec); err != nil || fail != "" {
		if err != nil {
			return 0, err
		}
		return 0, c.setTerminating(ctx, l, job, reasonDependencyFailed, fail)
	} else if wait != "" {
		return c.holdJob(ctx, l, job, run, wait, workflowDependencyPoll)
	}
	var pd provisioningData
	if len(job.ProvisioningData) > 0 {
		_ = json.Unmarshal(job.ProvisioningData, &pd)
	}
	if job.InstanceID != "" {
		// An instance was provisioned for this job: wait for it.
		inst, err := c.st.GetInstance(ctx, job.InstanceID)
		if err != nil {
			return 0, err
		}
		switch inst.Status {
		case store.InstanceIdle, store.InstanceBusy:
			return c.assign(ctx, l, job, run, spec, inst)
		case store.InstancePending, store.InstanceProvisioning:
			return time.Second, nil
		}
		// It failed: remember its offer and place the job anew.
		var o offers.Offer
		if json.Unmarshal(inst.Offer, &o) == nil {
			pd.TriedOffers = append(pd.TriedOffers, offerKey(o))
			job.ProvisioningData, _ = json.Marshal(pd)
		}
		job.InstanceID = ""
	}
	tried := map[string]bool{}
	for _, k := range pd.TriedOffers {
		tried[k] = true
	}
	sites, after, done, err := c.volumeGate(ctx, l, job, run, spec)
	if done {
		return after, err
	}
	claims, err := c.gangsAhead(ctx, job, run)
	if err != nil {
		return 0, err
	}
	inst, err := c.place(ctx, run, spec, tried, sites, claims)
	if errors.Is(err, errInstancePending) {
		job.InstanceID, job.StatusMessage = inst.ID, "waiting for instance "+inst.Name
		if err := c.st.UpdateJobLeased(ctx, l, job); err != nil {
			return 0, err
		}
		c.event(ctx, "job", job.JobName, job.ID, "waiting", run.Revision, "waiting for new instance "+inst.Name)
		return time.Second, nil
	}
	if errors.Is(err, errFleetProvisioning) {
		return c.waitForFleet(ctx, l, job, run, err.Error())
	}
	if errors.Is(err, errBudget) {
		return c.holdForBudget(ctx, l, job, run, err)
	}
	if errors.Is(err, errNoFleets) || errors.Is(err, errNoCapacity) {
		msg := "no fleets"
		if errors.Is(err, errNoCapacity) {
			msg = err.Error()
		}
		return 0, c.setTerminating(ctx, l, job, reasonNoCapacity, msg)
	}
	if err != nil {
		return 0, err
	}
	return c.assign(ctx, l, job, run, spec, inst)
}

// fleetWaitPoll is how often a job waiting for a fleet's instances looks
// again; an instance that becomes ready (or fails) wakes it at once.
const fleetWaitPoll = 2 * time.Second

// waitForFleet keeps a job submitted while the instances of its fleets are
// provisioning, its status message saying what it waits for; after
// provisioningTimeout it fails for want of capacity.
func (c *Controller) waitForFleet(ctx context.Context, l store.Lease, job *store.Job, run *store.Run, msg string) (time.Duration, error) {
	if waited := c.now().Sub(job.SubmittedAt); waited > provisioningTimeout {
		return 0, c.setTerminating(ctx, l, job, reasonNoCapacity,
			fmt.Sprintf("%s after %s; no instance became ready", msg, provisioningTimeout))
	}
	return c.holdJob(ctx, l, job, run, msg, fleetWaitPoll)
}

// provisioningData is what a job keeps about getting an instance.
type provisioningData struct {
	// TriedOffers are the offers whose instances could not be had.
	TriedOffers []string `json:"tried_offers,omitempty"`
	// AssignedAt is when a job of a multi-node run was assigned with the
	// rest of its cluster (placeGang); its provisioning timeout counts
	// from then.
	AssignedAt time.Time `json:"assigned_at,omitzero"`
	// ClusterSSHKey is the key pair the nodes of a multi-node run's
	// submission SSH into each other with, kept by its master (job 0)
	// from its creation on (newJobs, clusterFor).
	ClusterSSHKey *api.ClusterSSHKey `json:"cluster_ssh_key,omitempty"`
	// WaitFleet is the id of the fleet whose instances the master of a
	// waiting gang waits for (gangorder.go); empty once it is placed.
	WaitFleet string `json:"wait_fleet,omitempty"`
}

// assign puts a submitted job on an instance.
func (c *Controller) assign(ctx context.Context, l store.Lease, job *store.Job, run *store.Run, spec runSpec, inst store.Instance) (time.Duration, error) {
	// Instances other than this host's hold their fleet's blocks (one
	// unless the fleet splits them): the check and the write are one
	// transaction, so two servers never both take the same free blocks.
	total := 0
	if !c.sharedInstance(ctx, inst) {
		sh, err := c.jobShare(ctx, inst, spec)
		if err != nil {
			return 0, err
		}
		if sh.blocks == 0 {
			// No share of the instance fits (it cannot be split as its
			// fleet asks): the job is placed anew, elsewhere.
			job.InstanceID = ""
			if err := c.st.UpdateJobLeased(ctx, l, job); err != nil {
				return 0, err
			}
			return time.Second, nil
		}
		total, job.Blocks = sh.total, sh.blocks
	}
	job.InstanceID, job.Backend, job.Status, job.StatusMessage = inst.ID, inst.Backend, store.JobProvisioning, ""
	if err := c.st.AssignJobBlocksLeased(ctx, l, job, total); err != nil {
		if errors.Is(err, store.ErrInstanceBusy) {
			return time.Millisecond, nil // placed anew from the stored job
		}
		return 0, err
	}
	c.event(ctx, "job", job.JobName, job.ID, "provisioning", run.Revision, "assigned to instance "+inst.Name)
	c.markInstance(ctx, inst.ID)
	c.runs.Add(run.ID)
	c.wakeNodes(ctx, job) // the other nodes of its cluster may wait for its instance
	return time.Millisecond, nil
}

var (
	// errNoFleets means no fleet matches the run (dstack's "no fleets").
	errNoFleets = errors.New("no fleets")
	// errNoCapacity means matching fleets exist but none has a free
	// instance that fits.
	errNoCapacity = errors.New("no matching instance is free")
)

// fleetsFor returns the live fleets a job may be placed on, in creation
// order: those named in refs, read by name, or every fleet of the project
// when refs is empty. A repository of thousands of fleets then costs a
// job naming its fleet one read per name, and no fleet is left out past a
// list's limit.
func (c *Controller) fleetsFor(ctx context.Context, refs []schema.EntityRef) ([]store.Fleet, error) {
	if len(refs) == 0 {
		return c.st.ListFleets(ctx, store.InfraFilter{Project: c.cfg.Project, Limit: everyRow})
	}
	var out []store.Fleet
	seen := map[string]bool{}
	for _, r := range refs {
		if seen[r.Name] {
			continue
		}
		seen[r.Name] = true
		f, err := c.st.GetFleetByName(ctx, c.cfg.Project, r.Name)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	slices.SortFunc(out, func(a, b store.Fleet) int {
		if d := a.CreatedAt.Compare(b.CreatedAt); d != 0 {
			return d
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out, nil
}

// place picks an instance for a job of run: one of the fleets the spec
// allows (all when it names none), whose instance fits the resources and
// profile, at one of the sites of its network volumes (nil: anywhere),
// and that no gang waiting ahead of the job claims (claims, gangorder.go).
// The local host is shared; other instances run one job at a time.
func (c *Controller) place(ctx context.Context, run *store.Run, spec runSpec, tried map[string]bool, sites []volumeSite, claims gangClaims) (store.Instance, error) {
	fleets, err := c.fleetsFor(ctx, spec.Fleets)
	if err != nil {
		return store.Instance{}, err
	}
	q := instanceQuery(spec)
	matched := false
	var growable []store.Fleet
	var waiting []string        // fleets whose instances that may fit are still provisioning
	left := map[string]string{} // instances left to gangs ahead: their runs
	for _, f := range fleets {
		if f.Status != store.FleetActive || f.Deleted {
			continue
		}
		if len(spec.Fleets) > 0 && !slices.ContainsFunc(spec.Fleets, func(r schema.EntityRef) bool { return r.Name == f.Name }) {
			continue
		}
		matched = true
		insts, err := c.st.ListInstances(ctx, store.InfraFilter{Project: c.cfg.Project, FleetID: f.ID})
		if err != nil {
			return store.Instance{}, err
		}
		provisioning, note := 0, ""
		for _, i := range insts {
			if !c.onBackends(spec.Backends, i.Backend) || !atVolumeSites(sites, i) {
				continue
			}
			var o offers.Offer
			if len(i.Offer) > 0 {
				_ = json.Unmarshal(i.Offer, &o)
			}
			if i.Status == store.InstancePending || i.Status == store.InstanceProvisioning {
				// Not ready yet: the job may wait for it when its offer is
				// unknown (an SSH host is known once reached) or fits, and
				// no other job waits for it (one made for that job).
				if len(i.Offer) > 0 && len(offers.Filter([]offers.Offer{o}, q)) == 0 {
					continue
				}
				if taken, err := c.instanceReserved(ctx, i.ID); err != nil {
					return store.Instance{}, err
				} else if !taken {
					provisioning++
					if note == "" && i.StatusMessage != "" {
						note = fmt.Sprintf(" (%s: %s)", i.Name, i.StatusMessage)
					}
				}
				continue
			}
			if i.Unreachable || (i.Status != store.InstanceIdle && i.Status != store.InstanceBusy) {
				continue
			}
			if f.Name == c.cfg.LocalFleet {
				if len(offers.Filter([]offers.Offer{o}, q)) == 0 {
					continue
				}
				return i, nil
			}
			if sh, err := c.shareOn(ctx, f, i, o, q, spec.multiNode()); err != nil {
				return store.Instance{}, err
			} else if sh.fits() {
				if who, ok := c.claimedBy(claims, f.ID, i, o); ok {
					left[i.Name] = who
					continue
				}
				return i, nil
			}
		}
		if provisioning > 0 {
			waiting = append(waiting, fmt.Sprintf("fleet %s: %d %s provisioning%s", f.Name, provisioning, plural(provisioning, "instance"), note))
		}
		growable = append(growable, f)
	}
	if !matched {
		return store.Instance{}, errNoFleets
	}
	if len(waiting) > 0 {
		// Instances that may fit are on their way (e.g. the hosts of an
		// SSH fleet committed with the run): wait for them rather than
		// fail or grow a fleet.
		return store.Instance{}, fmt.Errorf("%w %s", errFleetProvisioning, strings.Join(waiting, "; "))
	}
	// No free instance fits: a backend fleet below nodes.max gets a new one
	// from its offers, cheapest first, for this job.
	var why []string
	var overBudget error
	bes := narrowToSites(sites, &q, spec.Backends)
	for _, f := range growable {
		inst, err := c.growFleet(ctx, f, q, bes, tried)
		if err == nil {
			return inst, errInstancePending
		}
		if backends.KindOf(err) == backends.KindWait {
			// Another worker holds the fleet: try again, not fail.
			return store.Instance{}, fmt.Errorf("grow fleet %s: %w", f.Name, err)
		}
		if errors.Is(err, errBudget) && overBudget == nil {
			overBudget = err
		}
		why = append(why, f.Name+": "+err.Error())
	}
	if overBudget != nil {
		// A fleet could grow but for the budget: the job waits for it.
		return store.Instance{}, overBudget
	}
	msg := "for the requested resources"
	if len(why) > 0 {
		msg += " (" + strings.Join(why, "; ") + ")"
	}
	msg += claimNote(left)
	return store.Instance{}, fmt.Errorf("%w %s", errNoCapacity, msg)
}

// errInstancePending says place created an instance for the job that is
// still being provisioned; the job waits for it.
var errInstancePending = errors.New("a new instance is being provisioned")

// errFleetProvisioning says no instance is free now but instances of the
// candidate fleets that may fit are still being provisioned; the job waits
// for them. Its message is the job's status message.
var errFleetProvisioning = errors.New("waiting for")

// onBackends reports whether an instance of backend be may take a job
// whose spec names backends: a job that names backends runs only on their
// instances (dstack filters a fleet's instances by the run's backends; its
// SSH hosts, of a backend that takes over hosts, are the backend "remote").
func (c *Controller) onBackends(backends []string, be string) bool {
	return len(backends) == 0 || containsFold(backends, be) || (c.traitsOf(be).TakesOverHosts && containsFold(backends, "remote"))
}

// instanceReserved reports whether a submitted job waits for instance id
// (one a fleet grew for that job).
func (c *Controller) instanceReserved(ctx context.Context, id string) (bool, error) {
	jobs, err := c.st.ListJobsFiltered(ctx, store.JobFilter{InstanceID: id, Status: []string{store.JobSubmitted}, Limit: 1})
	return len(jobs) > 0, err
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

// instanceQuery is the offer filter an instance must pass to take a job of
// spec. Disk is the host's own and not filtered; spot policy and backends
// are the fleet's business (a host is what it is).
func instanceQuery(spec runSpec) offers.Query {
	q := query.FromSpec(spec.Resources, spec.Profile)
	q.Disk, q.Backends, q.SpotPolicy = offers.Range{}, nil, offers.SpotPolicyAuto
	return q
}

// maxOffersTried is how many offers a job's new instance may try before
// the job fails for want of capacity (dstack's MAX_OFFERS_TRIED).
const maxOffersTried = 25

// offerKey identifies an offer among a job's tried ones.
func offerKey(o offers.Offer) string {
	return fmt.Sprintf("%s/%s/%s/%t", o.Backend, o.Region, o.Instance, o.Spot)
}
