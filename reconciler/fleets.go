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

// SSHBackend is the type of the SSH fleet backend; LocalBackendType the type
// of the backend of this host. A backend's name is the user's choice
// (`{name: gpu-hosts, type: ssh}`): compare types, via backendType.
const (
	SSHBackend       = "ssh"
	LocalBackendType = "local"
)

// backendType returns the type of the backend configured as name (its
// name when the config gave none).
func (c *Controller) backendType(name string) string {
	if t, ok := c.backTypes[name]; ok && t != "" {
		return t
	}
	return name
}

// sshBackend returns the name of the backend SSH fleets provision through:
// the configured backend of type ssh (the one named "ssh" when there are
// several).
func (c *Controller) sshBackend() (string, error) {
	var found []string
	for name := range c.bes {
		if c.backendType(name) == SSHBackend {
			found = append(found, name)
		}
	}
	switch {
	case len(found) == 1:
		return found[0], nil
	case slices.Contains(found, SSHBackend):
		return SSHBackend, nil
	case len(found) == 0:
		return "", backends.Stalled(errors.New("no backend of type ssh is configured: SSH fleets need one"))
	}
	slices.Sort(found)
	return "", backends.Stalled(fmt.Errorf("several backends of type ssh are configured (%s): name one of them \"ssh\"", strings.Join(found, ", ")))
}

// applyInfra carries out a plan step for a fleet, volume or gateway.
func (c *Controller) applyInfra(ctx context.Context, rev source.Revision, s plan.Step) error {
	switch s.Action {
	case plan.Noop:
		return nil
	case plan.Delete:
	default:
		if _, err := c.upsert(ctx, rev, s); err != nil {
			return err
		}
	}
	var err error
	switch s.Kind {
	case schema.KindFleet:
		err = c.applyFleet(ctx, rev, s)
	case schema.KindVolume:
		err = c.applyVolume(ctx, rev, s)
	case schema.KindGateway:
		err = c.applyGateway(ctx, rev, s)
	}
	if err != nil || s.Action != plan.Delete {
		return err
	}
	// Marked deleted last: once marked, no later sync plans this delete
	// again, so a crash before the kind's own delete must not skip it.
	if err := c.st.MarkResourceDeleted(ctx, c.cfg.Project, string(s.Kind), s.Name); err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	return nil
}

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
// asked for the job's resources and the offers must fit both. The local
// backend offers this host only to fleets that name it in `backends`.
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
		ask = *job
		ask.Backends, ask.Regions, ask.InstanceTypes, ask.SpotPolicy = q.Backends, q.Regions, q.InstanceTypes, q.SpotPolicy
	}
	var all []offers.Offer
	var errs []string
	for name, be := range c.bes {
		if c.backendType(name) == SSHBackend || (name == c.cfg.LocalBackend && !containsFold(spec.Backends, name)) {
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

// maxOffersTried is how many offers a job's new instance may try before
// the job fails for want of capacity (dstack's MAX_OFFERS_TRIED).
const maxOffersTried = 25

// offerKey identifies an offer among a job's tried ones.
func offerKey(o offers.Offer) string {
	return fmt.Sprintf("%s/%s/%s/%t", o.Backend, o.Region, o.Instance, o.Spot)
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

func (c *Controller) applyVolume(ctx context.Context, rev source.Revision, s plan.Step) error {
	v, err := c.st.GetVolumeByName(ctx, c.cfg.Project, s.Name)
	exists := err == nil
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	if s.Action == plan.Delete || s.Action == plan.Replace {
		if exists {
			if err := c.deleteVolume(ctx, rev, &v); err != nil {
				return err
			}
		}
		if s.Action == plan.Delete {
			return nil
		}
		exists = false
	}
	spec := s.Desired.Spec.(*schema.Volume)
	if !exists {
		v = store.Volume{Project: c.cfg.Project, Name: s.Name, Status: store.VolumeSubmitted}
	}
	v.Spec, v.SpecHash, v.Revision, v.Backend, v.Region = s.Desired.JSON, specHash(s.Desired.JSON), rev.ID, spec.Backend, spec.Region
	if exists {
		err = c.st.UpdateVolume(ctx, &v)
	} else {
		err = c.st.CreateVolume(ctx, &v)
	}
	if err != nil {
		return err
	}
	if v.Status != store.VolumeSubmitted {
		return nil
	}
	vb, ok := c.bes[spec.Backend].(backends.VolumeBackend)
	if !ok {
		v.Status, v.StatusMessage = store.VolumeFailed, fmt.Sprintf("backend %q is not configured or has no volumes", spec.Backend)
		c.event(ctx, "volume", v.Name, v.ID, "failed", rev.ID, v.StatusMessage)
		return c.st.UpdateVolume(ctx, &v)
	}
	vs := backends.VolumeSpec{ID: v.ID, Name: v.Name, Region: spec.Region, ExternalID: spec.VolumeID,
		Tags: c.tags(schema.KindVolume, v.Name, "")}
	var got backends.Volume
	if spec.VolumeID != "" {
		got, err = vb.RegisterVolume(ctx, vs)
	} else {
		if spec.Size != nil {
			vs.SizeGB = *spec.Size
		}
		got, err = vb.CreateVolume(ctx, vs)
	}
	if err != nil {
		v.Status, v.StatusMessage = store.VolumeFailed, err.Error()
	} else {
		v.Status, v.ExternalID, v.SizeGB = store.VolumeActive, got.ProviderID, got.SizeGB
	}
	c.event(ctx, "volume", v.Name, v.ID, v.Status, rev.ID, "volume "+v.Status+" "+v.StatusMessage)
	return c.st.UpdateVolume(ctx, &v)
}

// deleteVolume deletes a volume at its backend (only what hoist owns) and
// marks the row deleted.
func (c *Controller) deleteVolume(ctx context.Context, rev source.Revision, v *store.Volume) error {
	if vb, ok := c.bes[v.Backend].(backends.VolumeBackend); ok && v.Status == store.VolumeActive {
		if err := vb.DeleteVolume(ctx, v.ID); err != nil {
			return err
		}
	}
	v.Deleted, v.RemovedFromGit = true, true
	c.event(ctx, "volume", v.Name, v.ID, "deleted", rev.ID, "volume deleted")
	return c.st.UpdateVolume(ctx, v)
}

func (c *Controller) applyGateway(ctx context.Context, rev source.Revision, s plan.Step) error {
	g, err := c.st.GetGatewayByName(ctx, c.cfg.Project, s.Name)
	exists := err == nil
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	if s.Action == plan.Delete || s.Action == plan.Replace {
		if exists {
			if gb, ok := c.bes[g.Backend].(backends.GatewayBackend); ok {
				if err := gb.TerminateGateway(ctx, g.ID); err != nil {
					return err
				}
			}
			g.Deleted, g.RemovedFromGit = true, true
			if err := c.st.UpdateGateway(ctx, &g); err != nil {
				return err
			}
			c.event(ctx, "gateway", g.Name, g.ID, "deleted", rev.ID, "gateway deleted")
		}
		if s.Action == plan.Delete {
			return nil
		}
		exists = false
	}
	spec := s.Desired.Spec.(*schema.Gateway)
	if !exists {
		g = store.Gateway{Project: c.cfg.Project, Name: s.Name, Status: store.GatewaySubmitted}
	}
	g.Spec, g.SpecHash, g.Revision, g.Backend, g.Region = s.Desired.JSON, specHash(s.Desired.JSON), rev.ID, spec.Backend, spec.Region
	g.OwnershipTags = c.tags(schema.KindGateway, g.Name, "")
	if exists {
		err = c.st.UpdateGateway(ctx, &g)
	} else {
		err = c.st.CreateGateway(ctx, &g)
	}
	if err != nil {
		return err
	}
	if g.Status != store.GatewaySubmitted {
		return nil
	}
	gb, ok := c.bes[spec.Backend].(backends.GatewayBackend)
	if !ok {
		g.Status, g.StatusMessage = store.GatewayFailed, fmt.Sprintf("backend %q is not configured or has no gateways", spec.Backend)
	} else if got, err := gb.CreateGateway(ctx, backends.GatewaySpec{ID: g.ID, Region: spec.Region, PublicIP: true, Tags: g.OwnershipTags}); err != nil {
		g.Status, g.StatusMessage = store.GatewayFailed, err.Error()
	} else {
		g.Status, g.Hostname, g.IPAddress = store.GatewayProvisioning, got.Hostname, got.IP
	}
	c.event(ctx, "gateway", g.Name, g.ID, g.Status, rev.ID, "gateway "+g.Status+" "+g.StatusMessage)
	return c.st.UpdateGateway(ctx, &g)
}
