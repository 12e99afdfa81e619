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
	return c.consolidateCloudFleet(ctx, f, spec)
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
	out := backends.SSHHost{Hostname: h.Hostname, Port: h.Port, User: h.User, IdentityFile: h.IdentityFile}
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
// nodes.min, at most nodes.max) instances, provisioned from the cheapest
// matching offers.
func (c *Controller) consolidateCloudFleet(ctx context.Context, f store.Fleet, spec *schema.Fleet) error {
	insts, err := c.st.ListInstances(ctx, store.InfraFilter{Project: c.cfg.Project, FleetID: f.ID})
	if err != nil {
		return err
	}
	var active []store.Instance
	next := 0
	for _, i := range insts {
		next = max(next, i.InstanceNum+1)
		if i.Status != store.InstanceTerminated && i.Status != store.InstanceTerminating {
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
		offer, be, err := c.cheapestOffer(ctx, spec, nil)
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
		inst, err := c.addFleetInstance(ctx, f, offerInstance(next, be, offer))
		if err != nil {
			return err
		}
		next++
		active = append(active, inst)
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

// cheapestOffer asks the fleet's backends (all configured ones when it
// names none) for offers and returns the cheapest that fits.
//
// With job set (a job asking the fleet for a new instance), the backends are
// asked for the job's resources and the offers must fit both. Backends that
// take over hosts offer nothing here (their hosts are their SSH fleets'),
// and a backend sharing this host offers it only to fleets that name it in
// `backends`.
func (c *Controller) cheapestOffer(ctx context.Context, spec *schema.Fleet, job *offers.Query) (offers.Offer, string, error) {
	all, err := c.fleetOffers(ctx, spec, job)
	if err != nil {
		return offers.Offer{}, "", err
	}
	return all[0], all[0].Backend, nil
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
	all = offers.Filter(all, q)
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
		i.Status, i.TerminationReason = store.InstanceTerminating, reason
		if busy, _ := c.instanceBusy(ctx, i.ID); busy {
			i.StatusMessage = "draining: waits until its active jobs finish"
		}
		if err := c.st.UpdateInstance(ctx, &i); err != nil {
			return err
		}
		c.event(ctx, "instance", i.Name, i.ID, "terminating", f.Revision, "instance terminating: "+reason)
		c.insts.Add(i.ID)
	}
	return nil
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
	inst, err := c.addFleetInstance(ctx, f, store.Instance{Backend: c.cfg.LocalBackend})
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

// growFleet adds an instance to a backend fleet (not an SSH fleet, not this
// host's fleet) when it has fewer than nodes.max, from the cheapest offer
// that fits both the fleet and the job (and is on one of the job's
// backends, when it names any).
func (c *Controller) growFleet(ctx context.Context, f store.Fleet, job offers.Query, backends []string, tried map[string]bool) (store.Instance, error) {
	var spec schema.Fleet
	if f.Name == c.cfg.LocalFleet || json.Unmarshal(f.Spec, &spec) != nil || spec.SSHConfig != nil || spec.Nodes == nil {
		return store.Instance{}, errors.New("the fleet does not provision instances")
	}
	insts, err := c.st.ListInstances(ctx, store.InfraFilter{Project: c.cfg.Project, FleetID: f.ID})
	if err != nil {
		return store.Instance{}, err
	}
	active, next := 0, 0
	for _, i := range insts {
		next = max(next, i.InstanceNum+1)
		if i.Status != store.InstanceTerminated && i.Status != store.InstanceTerminating {
			active++
		}
	}
	if spec.Nodes.Max != nil && active >= *spec.Nodes.Max {
		return store.Instance{}, fmt.Errorf("the fleet is at nodes.max (%d)", *spec.Nodes.Max)
	}
	if len(tried) >= maxOffersTried {
		return store.Instance{}, fmt.Errorf("%d offers tried", len(tried))
	}
	all, err := c.fleetOffers(ctx, &spec, &job)
	if err != nil {
		return store.Instance{}, err
	}
	all = slices.DeleteFunc(all, func(o offers.Offer) bool { return !c.onBackends(backends, o.Backend) })
	if len(all) == 0 {
		return store.Instance{}, fmt.Errorf("no offer of the fleet is on the job's backends (%s)", strings.Join(backends, ", "))
	}
	i := slices.IndexFunc(all, func(o offers.Offer) bool { return !tried[offerKey(o)] })
	if i < 0 {
		return store.Instance{}, fmt.Errorf("all %d fitting offers tried", len(all))
	}
	offer, be := all[i], all[i].Backend
	inst, err := c.addFleetInstance(ctx, f, offerInstance(next, be, offer))
	if err != nil {
		return store.Instance{}, err
	}
	c.event(ctx, "instance", inst.Name, inst.ID, "pending", f.Revision,
		fmt.Sprintf("instance for a job from offer %s %s at $%.4g/h", be, offer.Instance, offer.Price))
	return inst, nil
}
