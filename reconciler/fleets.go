package reconciler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/google/uuid"

	"hoist/backends"
	"hoist/backends/offers"
	"hoist/backends/offers/query"
	"hoist/reconciler/plan"
	"hoist/reconciler/source"
	"hoist/schema"
	"hoist/store"
)

func (c *Controller) applyFleet(ctx context.Context, rev source.Revision, s plan.Step) error {
	f, err := c.st.GetFleetByName(ctx, c.cfg.Project, s.Name)
	exists := err == nil
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	if s.Action == plan.Delete {
		if !exists {
			return nil
		}
		f.Status, f.RemovedFromGit, f.StatusMessage = store.FleetTerminating, true, "spec removed from Git; instances terminate once no active run uses them"
		if err := c.st.UpdateFleet(ctx, &f); err != nil {
			return err
		}
		c.event(ctx, "fleet", f.Name, f.ID, "terminating", rev.ID, f.StatusMessage)
		return c.terminateFleetInstances(ctx, f, nil, "terminated_by_user")
	}
	spec := s.Desired.Spec.(*schema.Fleet)
	if s.Action == plan.Replace && exists {
		if err := c.terminateFleetInstances(ctx, f, nil, "fleet_spec_mismatch"); err != nil {
			return err
		}
	}
	if !exists {
		f = store.Fleet{Project: c.cfg.Project, Name: s.Name, Status: store.FleetActive}
	}
	f.Spec, f.SpecHash, f.Revision, f.Status = s.Desired.JSON, specHash(s.Desired.JSON), rev.ID, store.FleetActive
	f.RemovedFromGit, f.Deleted = false, false
	f.TriedOffers = nil // a new spec walks its offers afresh
	if exists {
		err = c.st.UpdateFleet(ctx, &f)
	} else {
		err = c.st.CreateFleet(ctx, &f)
	}
	if err != nil {
		return err
	}
	c.event(ctx, "fleet", f.Name, f.ID, string(s.Action), rev.ID, "fleet "+string(s.Action)+"d from "+s.Desired.File)
	if spec.SSHConfig != nil {
		return c.consolidateSSHFleet(ctx, f, spec)
	}
	return c.withFleetLock(ctx, f.ID, func() error { return c.consolidateCloudFleet(ctx, f, spec, "") })
}

// consolidateSSHFleet keeps one instance per host of an SSH fleet: new
// hosts are added, removed hosts drained.
func (c *Controller) consolidateSSHFleet(ctx context.Context, f store.Fleet, spec *schema.Fleet) error {
	insts, err := c.st.ListInstances(ctx, store.InfraFilter{Project: c.cfg.Project, FleetID: f.ID})
	if err != nil {
		return err
	}
	have := map[string]store.Instance{}
	next := 0
	for _, i := range insts {
		if i.Status == store.InstanceTerminated || i.Status == store.InstanceTerminating {
			continue
		}
		have[i.Hostname] = i
		next = max(next, i.InstanceNum+1)
	}
	want := map[string]bool{}
	for _, h := range spec.SSHConfig.Hosts {
		want[h.Hostname] = true
		if _, ok := have[h.Hostname]; ok {
			continue
		}
		sshName, err := c.sshBackend()
		if err != nil {
			return err
		}
		host := sshHost(spec.SSHConfig, h)
		data, _ := json.Marshal(host)
		inst, err := c.addFleetInstance(ctx, f, store.Instance{
			InstanceNum: next, Backend: sshName, Hostname: h.Hostname, SSHPort: host.Port, SSHUser: host.User,
			BackendData: data,
		})
		if err != nil {
			return err
		}
		next++
		c.event(ctx, "instance", inst.Name, inst.ID, "pending", f.Revision, "host "+h.Hostname+" added to fleet "+f.Name)
	}
	var drop []string
	for host, i := range have {
		if !want[host] {
			drop = append(drop, i.ID)
		}
	}
	if len(drop) == 0 {
		return nil // a nil list would terminate every instance of the fleet
	}
	return c.terminateFleetInstances(ctx, f, drop, "terminated_by_user")
}

// addFleetInstance records instance inst (InstanceNum and what to provision
// set) of fleet f, pending and tagged as the fleet's, and queues it for
// provisioning.
func (c *Controller) addFleetInstance(ctx context.Context, f store.Fleet, inst store.Instance) (store.Instance, error) {
	inst.ID = uuid.Must(uuid.NewV7()).String()
	inst.Project, inst.FleetID, inst.Status = c.cfg.Project, f.ID, store.InstancePending
	inst.Name = fmt.Sprintf("%s-%d", f.Name, inst.InstanceNum)
	inst.OwnershipTags = c.tags(schema.KindFleet, f.Name, inst.ID)
	if err := c.st.CreateInstance(ctx, &inst); err != nil {
		return store.Instance{}, err
	}
	c.insts.Add(inst.ID)
	return inst, nil
}

// offerInstance is instance num provisioned from offer on backend be.
func offerInstance(num int, be string, offer offers.Offer) store.Instance {
	data, _ := json.Marshal(offer)
	return store.Instance{InstanceNum: num, Backend: be, Region: offer.Region, Price: offer.Price, Offer: data}
}

func sshHost(cfg *schema.SSHConfig, h schema.SSHHost) backends.SSHHost {
	out := backends.SSHHost{Hostname: h.Hostname, Port: h.Port, User: h.User, IdentityFile: h.IdentityFile, InternalIP: h.InternalIP}
	if out.Port == 0 {
		out.Port = cfg.Port
	}
	if out.User == "" {
		out.User = cfg.User
	}
	if out.IdentityFile == "" {
		out.IdentityFile = cfg.IdentityFile
	}
	pj := h.ProxyJump
	if pj == nil {
		pj = cfg.ProxyJump
	}
	if pj != nil {
		out.ProxyJump = &backends.SSHHost{Hostname: pj.Hostname, Port: pj.Port, User: pj.User, IdentityFile: pj.IdentityFile}
	}
	return out
}

// consolidateCloudFleet keeps a backend fleet at nodes.target (at least
// nodes.min, at most nodes.max) instances, each from the cheapest matching
// offer the fleet has not tried in vain (nextFleetOffer). The instance
// exclude (one that just failed, not yet marked so) does not count.
func (c *Controller) consolidateCloudFleet(ctx context.Context, f store.Fleet, spec *schema.Fleet, exclude string) error {
	insts, err := c.st.ListInstances(ctx, store.InfraFilter{Project: c.cfg.Project, FleetID: f.ID})
	if err != nil {
		return err
	}
	var active []store.Instance
	next := 0
	for _, i := range insts {
		next = max(next, i.InstanceNum+1)
		if i.ID != exclude && i.Status != store.InstanceTerminated && i.Status != store.InstanceTerminating {
			active = append(active, i)
		}
	}
	target := 0
	if spec.Nodes != nil {
		target = max(spec.Nodes.Target, spec.Nodes.Min)
		if spec.Nodes.Max != nil {
			target = min(target, *spec.Nodes.Max)
		}
	}
	for len(active) < target {
		offer, err := c.nextFleetOffer(ctx, f, spec, active)
		if err != nil {
			inst := store.Instance{
				Project: c.cfg.Project, Name: fmt.Sprintf("%s-%d", f.Name, next), FleetID: f.ID, InstanceNum: next,
				Status: store.InstanceTerminated, TerminationReason: "no_offers", StatusMessage: err.Error(),
			}
			if cerr := c.st.CreateInstance(ctx, &inst); cerr != nil {
				return cerr
			}
			c.event(ctx, "instance", inst.Name, inst.ID, "terminated", f.Revision, "no offers: "+err.Error())
			return nil
		}
		if err := c.withinBudget(ctx, 1, offer.Price); errors.Is(err, errBudget) {
			return c.blockFleetForBudget(ctx, f, err)
		} else if err != nil {
			return err
		}
		inst, err := c.addFleetInstance(ctx, f, offerInstance(next, offer.Backend, offer))
		if err != nil {
			return err
		}
		c.event(ctx, "instance", inst.Name, inst.ID, "pending", f.Revision,
			fmt.Sprintf("instance of fleet %s from offer %s %s %s at $%.4g/h", f.Name, offer.Backend, offer.Region, offer.Instance, offer.Price))
		next++
		active = append(active, inst)
	}
	if err := c.clearFleetBudget(ctx, &f); err != nil {
		return err
	}
	if spec.Nodes != nil && spec.Nodes.Max != nil && len(active) > *spec.Nodes.Max {
		var drop []string
		for _, i := range active[*spec.Nodes.Max:] {
			drop = append(drop, i.ID)
		}
		return c.terminateFleetInstances(ctx, f, drop, "max_instances_limit")
	}
	return nil
}

// nextFleetOffer is the offer walk of a fleet's instances (dstack's
// src/dstack/_internal/server/background/pipeline_tasks/instances/cloud_provisioning.py,
// which tries at most MAX_OFFERS_TRIED offers): the cheapest offer that
// fits the fleet (its cluster's backend and region, for `placement:
// cluster`, see clusterOffers) and that none of its instances failed on
// since its spec was applied (Fleet.TriedOffers). When every offer failed,
// or maxOffersTried did, the error says so with the last failures.
func (c *Controller) nextFleetOffer(ctx context.Context, f store.Fleet, spec *schema.Fleet, active []store.Instance) (offers.Offer, error) {
	all, err := c.fleetOffers(ctx, spec, nil)
	if err != nil {
		return offers.Offer{}, err
	}
	if all, err = clusterOffers(spec, all, active); err != nil {
		return offers.Offer{}, err
	}
	tried := map[string]bool{}
	for _, t := range f.TriedOffers {
		tried[t.Offer] = true
	}
	if len(f.TriedOffers) >= maxOffersTried {
		return offers.Offer{}, fmt.Errorf("%d offers tried, none could be had (%s)", len(f.TriedOffers), lastFailures(f.TriedOffers))
	}
	i := slices.IndexFunc(all, func(o offers.Offer) bool { return !tried[offerKey(o)] })
	if i < 0 {
		return offers.Offer{}, fmt.Errorf("all %d offers failed (%s)", len(all), lastFailures(f.TriedOffers))
	}
	return all[i], nil
}

// lastFailures says why the last (up to three) tried offers failed.
func lastFailures(tried []store.TriedOffer) string {
	var out []string
	for _, t := range tried[max(0, len(tried)-3):] {
		out = append(out, t.Offer+": "+t.Error)
	}
	return strings.Join(out, "; ")
}

// clusterOffers keeps, for a `placement: cluster` fleet with instances,
// the offers in the backend and region of its oldest instance: a cluster's
// instances are provisioned together (dstack restricts a cluster fleet's
// offers to its master instance's backend and region, in
// src/dstack/_internal/server/services/fleets.py). Other fleets' offers are
// returned as they are.
func clusterOffers(spec *schema.Fleet, all []offers.Offer, active []store.Instance) ([]offers.Offer, error) {
	if spec.Placement != "cluster" {
		return all, nil
	}
	for _, i := range active {
		if i.Backend == "" || i.Region == "" {
			continue
		}
		all = slices.DeleteFunc(slices.Clone(all), func(o offers.Offer) bool {
			return !strings.EqualFold(o.Backend, i.Backend) || o.Region != i.Region
		})
		if len(all) == 0 {
			return nil, fmt.Errorf("no offer in the cluster's backend %s and region %s", i.Backend, i.Region)
		}
		return all, nil
	}
	return all, nil
}

// fleetOffers returns the offers that fit a fleet (and job, when set),
// cheapest first; an error when there are none.
func (c *Controller) fleetOffers(ctx context.Context, spec *schema.Fleet, job *offers.Query) ([]offers.Offer, error) {
	var res schema.Resources
	if spec.Resources != nil {
		res = *spec.Resources
	}
	q := query.FromSpec(res, schema.Profile{Backends: spec.Backends, Regions: spec.Regions,
		InstanceTypes: spec.InstanceTypes, SpotPolicy: spec.SpotPolicy, MaxPrice: spec.MaxPrice})
	ask := q
	if job != nil {
		// The backends and spot policy are the fleet's; the regions and
		// instance types are the job's when it names some (dstack filters
		// offers by the run's profile too), and every offer must fit the
		// fleet's as well (the Filter by q below).
		ask = *job
		ask.Backends, ask.SpotPolicy = q.Backends, q.SpotPolicy
		if len(ask.Regions) == 0 {
			ask.Regions = q.Regions
		}
		if len(ask.InstanceTypes) == 0 {
			ask.InstanceTypes = q.InstanceTypes
		}
	}
	var all []offers.Offer
	var errs []string
	for name, be := range c.bes {
		if t := be.Traits(); t.TakesOverHosts || (t.SharedHost && !containsFold(spec.Backends, name)) {
			continue
		}
		if len(spec.Backends) > 0 && !containsFold(spec.Backends, name) {
			continue
		}
		os, err := be.Offers(ctx, ask)
		if err != nil {
			errs = append(errs, name+": "+err.Error())
			continue
		}
		for _, o := range os {
			o.Backend = name
			all = append(all, o)
		}
	}
	all = divisibleOffers(offers.Filter(all, q), spec.Blocks)
	if job != nil {
		all = offers.Filter(all, ask)
	}
	if len(all) == 0 {
		msg := "no offers match the fleet"
		if len(errs) > 0 {
			msg += " (" + strings.Join(errs, "; ") + ")"
		}
		return nil, errors.New(msg)
	}
	return all, nil
}

func containsFold(list []string, s string) bool {
	for _, x := range list {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}

// terminateFleetInstances moves instances (ids, or all of the fleet's when
// nil) to terminating; the instance worker waits until no job uses them.
func (c *Controller) terminateFleetInstances(ctx context.Context, f store.Fleet, ids []string, reason string) error {
	insts, err := c.st.ListInstances(ctx, store.InfraFilter{Project: c.cfg.Project, FleetID: f.ID})
	if err != nil {
		return err
	}
	for _, i := range insts {
		if ids != nil && !containsFold(ids, i.ID) {
			continue
		}
		if i.Status == store.InstanceTerminated || i.Status == store.InstanceTerminating {
			continue
		}
		if err := c.markTerminating(ctx, i, reason); err != nil {
			return err
		}
		c.event(ctx, "instance", i.Name, i.ID, "terminating", f.Revision, "instance terminating: "+reason)
		c.insts.Add(i.ID)
	}
	return nil
}

// markTerminating moves instance i to terminating for reason. The instance's
// worker may write the row meanwhile (a health check): a stale write is
// retried on the row read again, a few times, rather than failing the sync
// that asked for it.
func (c *Controller) markTerminating(ctx context.Context, i store.Instance, reason string) error {
	for attempt := 0; ; attempt++ {
		if i.Status == store.InstanceTerminated || i.Status == store.InstanceTerminating {
			return nil
		}
		i.Status, i.TerminationReason = store.InstanceTerminating, reason
		if busy, _ := c.instanceBusy(ctx, i.ID); busy {
			i.StatusMessage = "draining: waits until its active jobs finish"
		}
		err := c.st.UpdateInstance(ctx, &i)
		if !errors.Is(err, store.ErrConflict) || attempt == 4 {
			return err
		}
		if i, err = c.st.GetInstance(ctx, i.ID); err != nil {
			return err
		}
	}
}

// localFleetSpec is the spec of the fleet of this host.
func (c *Controller) localFleetSpec() []byte {
	b, _ := json.Marshal(map[string]any{"type": "fleet", "name": c.cfg.LocalFleet, "backends": []string{c.cfg.LocalBackend}})
	return b
}

// ensureLocalFleet creates the fleet of this host and its one instance when
// the local backend is configured, so that runs need no fleet file.
func (c *Controller) ensureLocalFleet(ctx context.Context) error {
	if !c.traitsOf(c.cfg.LocalBackend).SharedHost || c.cfg.NoLocalFleet {
		return nil
	}
	f, err := c.st.GetFleetByName(ctx, c.cfg.Project, c.cfg.LocalFleet)
	if errors.Is(err, store.ErrNotFound) {
		spec := c.localFleetSpec()
		f = store.Fleet{Project: c.cfg.Project, Name: c.cfg.LocalFleet, Spec: spec, SpecHash: specHash(spec), Status: store.FleetActive}
		if err := c.st.CreateFleet(ctx, &f); err != nil {
			return err
		}
		c.event(ctx, "fleet", f.Name, f.ID, "created", "", "fleet of this host created (local backend)")
	} else if err != nil {
		return err
	}
	insts, err := c.st.ListInstances(ctx, store.InfraFilter{Project: c.cfg.Project, FleetID: f.ID})
	if err != nil {
		return err
	}
	for _, i := range insts {
		if i.Status != store.InstanceTerminated && i.Status != store.InstanceTerminating {
			c.insts.Add(i.ID)
			return nil
		}
	}
	inst := store.Instance{Backend: c.cfg.LocalBackend}
	if c.cfg.LocalShares > 1 {
		o, err := c.localShare(ctx)
		if err != nil {
			return err
		}
		inst = offerInstance(0, c.cfg.LocalBackend, o)
	}
	inst, err = c.addFleetInstance(ctx, f, inst)
	if err != nil {
		return err
	}
	if err := c.provisionInstance(ctx, inst.ID); err != nil && !backends.IsStalled(err) {
		return err
	}
	// A stalled instance (e.g. no runner binary for this host) keeps its
	// error as its status message; the server runs on.
	return nil
}

// localShare is this project's share of this host when Config.LocalShares
// projects make a fleet of it: the host's offer (the local backend's
// answer to an empty query is the whole host) with its CPUs, memory and
// GPUs divided among them.
func (c *Controller) localShare(ctx context.Context) (offers.Offer, error) {
	b, ok := c.bes[c.cfg.LocalBackend]
	if !ok {
		return offers.Offer{}, fmt.Errorf("fleet %s: backend %q is not configured", c.cfg.LocalFleet, c.cfg.LocalBackend)
	}
	host, err := b.Offers(ctx, offers.Query{})
	if err != nil || len(host) == 0 {
		return offers.Offer{}, fmt.Errorf("fleet %s: no offer of this host from backend %s: %w", c.cfg.LocalFleet, c.cfg.LocalBackend, err)
	}
	n := c.cfg.LocalShares
	o := host[0]
	o.CPUs = max(1, o.CPUs/n)
	o.MemoryGB /= float64(n)
	o.GPUCount /= n
	if o.GPUCount == 0 {
		o.GPUVendor, o.GPUName, o.GPUMemoryGB = "", "", 0
	}
	return o, nil
}

// growFleet adds an instance to a backend fleet (not an SSH fleet, not this
// host's fleet) when it has fewer than nodes.max, from the cheapest offer
// that fits both the fleet and the job (and is on one of the job's
// backends, when it names any). The fleet's live instances are counted
// again, and the instance added, holding the fleet's lease, so jobs placed
// at once (on this server or others) never grow it past nodes.max; a
// fleet another worker holds is a wait error, for the job to try again.
func (c *Controller) growFleet(ctx context.Context, f store.Fleet, job offers.Query, backends []string, tried map[string]bool) (store.Instance, error) {
	insts, err := c.growFleetBy(ctx, f, job, backends, tried, 1)
	if err != nil {
		return store.Instance{}, err
	}
	return insts[0], nil
}

// growFleetBy is growFleet for n instances at once, all or none (the
// nodes of a multi-node run): the fleet must have room for all n below
// nodes.max, and they are added under one hold of the fleet's lease, each
// from the cheapest fitting offer not tried.
func (c *Controller) growFleetBy(ctx context.Context, f store.Fleet, job offers.Query, backends []string, tried map[string]bool, n int) ([]store.Instance, error) {
	grown, err := c.growFleetFor(ctx, f, []growAsk{{job: job, n: n}}, backends, tried)
	if err != nil {
		return nil, err
	}
	return grown[0], nil
}

// growAsk is n instances for jobs that ask job of them.
type growAsk struct {
	job offers.Query
	n   int
}

// growFleetFor is growFleetBy for several asks at once (the groups of a
// multi-node task), all or none: each ask's instances come from the
// cheapest fitting offer not tried for it, all in one backend and region
// (a cluster's; for several asks, where they cost least together). It
// returns the instances of each ask, in the order of asks.
func (c *Controller) growFleetFor(ctx context.Context, f store.Fleet, asks []growAsk, backends []string, tried map[string]bool) ([][]store.Instance, error) {
	var spec schema.Fleet
	if f.Name == c.cfg.LocalFleet || json.Unmarshal(f.Spec, &spec) != nil || spec.SSHConfig != nil || spec.Nodes == nil {
		return nil, errors.New("the fleet does not provision instances")
	}
	n := 0
	for _, a := range asks {
		n += a.n
	}
	// A fleet already full is told apart before its offers are looked up.
	if _, _, err := c.growableInstances(ctx, f, &spec, n); err != nil {
		return nil, err
	}
	if len(tried) >= maxOffersTried {
		return nil, fmt.Errorf("%d offers tried", len(tried))
	}
	all := make([][]offers.Offer, len(asks))
	for k := range asks {
		fit, err := c.fleetOffers(ctx, &spec, &asks[k].job)
		if err != nil {
			return nil, err
		}
		fit = slices.DeleteFunc(fit, func(o offers.Offer) bool { return !c.onBackends(backends, o.Backend) })
		if len(fit) == 0 {
			return nil, fmt.Errorf("no offer of the fleet is on the job's backends (%s)", strings.Join(backends, ", "))
		}
		all[k] = fit
	}
	out := make([][]store.Instance, len(asks))
	var made []store.Instance
	var picked []offers.Offer
	err := c.withFleetLock(ctx, f.ID, func() error {
		live, next, err := c.growableInstances(ctx, f, &spec, n)
		if err != nil {
			return err
		}
		pick, err := pickGrowOffers(&spec, all, asks, live, tried)
		if err != nil {
			return err
		}
		add := 0.0
		for k, a := range asks {
			add += float64(a.n) * pick[k].Price
		}
		if err := c.withinBudget(ctx, n, add); err != nil {
			return err
		}
		for k, a := range asks {
			for range a.n {
				inst, err := c.addFleetInstance(ctx, f, offerInstance(next, pick[k].Backend, pick[k]))
				if err != nil {
					return err
				}
				next++
				out[k] = append(out[k], inst)
				made, picked = append(made, inst), append(picked, pick[k])
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for k, inst := range made {
		c.event(ctx, "instance", inst.Name, inst.ID, "pending", f.Revision,
			fmt.Sprintf("instance for a job from offer %s %s at $%.4g/h", picked[k].Backend, picked[k].Instance, picked[k].Price))
	}
	return out, nil
}

// pickGrowOffers picks the offer of each ask (all[k] are ask k's, cheapest
// first): the cheapest not tried that fits the fleet's cluster
// (clusterOffers), every ask's in one backend and region, the one where
// they cost least together.
func pickGrowOffers(spec *schema.Fleet, all [][]offers.Offer, asks []growAsk, live []store.Instance, tried map[string]bool) ([]offers.Offer, error) {
	// The cheapest untried offer of each ask at each site.
	type site struct{ backend, region string }
	var sites []site // in the order of the first ask's offers
	cheapest := make([]map[site]offers.Offer, len(asks))
	for k := range asks {
		fit, err := clusterOffers(spec, all[k], live)
		if err != nil {
			return nil, err
		}
		cheapest[k] = map[site]offers.Offer{}
		for _, o := range fit {
			s := site{strings.ToLower(o.Backend), o.Region}
			if _, ok := cheapest[k][s]; ok || tried[offerKey(o)] {
				continue
			}
			cheapest[k][s] = o
			if k == 0 {
				sites = append(sites, s)
			}
		}
		if len(cheapest[k]) == 0 {
			return nil, fmt.Errorf("all %d fitting offers tried", len(fit))
		}
	}
	var best []offers.Offer
	bestCost := 0.0
	for _, s := range sites {
		pick := make([]offers.Offer, len(asks))
		cost := 0.0
		for k, a := range asks {
			o, ok := cheapest[k][s]
			if !ok {
				pick = nil
				break
			}
			pick[k] = o
			cost += float64(a.n) * o.Price
		}
		if pick != nil && (best == nil || cost < bestCost) {
			best, bestCost = pick, cost
		}
	}
	if best == nil {
		return nil, errors.New("no backend and region has an untried offer for every node group")
	}
	return best, nil
}

// growableInstances returns the live (not terminating or terminated)
// instances of fleet f and the number its next instance takes, or an error
// when f has no room for n more below nodes.max.
func (c *Controller) growableInstances(ctx context.Context, f store.Fleet, spec *schema.Fleet, n int) ([]store.Instance, int, error) {
	insts, err := c.st.ListInstances(ctx, store.InfraFilter{Project: c.cfg.Project, FleetID: f.ID})
	if err != nil {
		return nil, 0, fmt.Errorf("list instances of fleet %s: %w", f.Name, err)
	}
	var live []store.Instance
	next := 0
	for _, i := range insts {
		next = max(next, i.InstanceNum+1)
		if i.Status != store.InstanceTerminated && i.Status != store.InstanceTerminating {
			live = append(live, i)
		}
	}
	if spec.Nodes.Max != nil && len(live) >= *spec.Nodes.Max {
		return nil, 0, fmt.Errorf("the fleet is at nodes.max (%d)", *spec.Nodes.Max)
	}
	if spec.Nodes.Max != nil && len(live)+n > *spec.Nodes.Max {
		return nil, 0, fmt.Errorf("the fleet has room for %d more below nodes.max (%d), not %d", *spec.Nodes.Max-len(live), *spec.Nodes.Max, n)
	}
	return live, next, nil
}
