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

var (
	// errNoFleets means no fleet matches the run (dstack's "no fleets").
	errNoFleets = errors.New("no fleets")
	// errNoCapacity means matching fleets exist but none has a free
	// instance that fits.
	errNoCapacity = errors.New("no matching instance is free")
)

// localFleetSpec is the spec of the fleet of this host.
func (c *Controller) localFleetSpec() []byte {
	b, _ := json.Marshal(map[string]any{"type": "fleet", "name": c.cfg.LocalFleet, "backends": []string{c.cfg.LocalBackend}})
	return b
}

// ensureLocalFleet creates the fleet of this host and its one instance when
// the local backend is configured, so that runs need no fleet file.
func (c *Controller) ensureLocalFleet(ctx context.Context) error {
	if _, ok := c.bes[c.cfg.LocalBackend]; !ok || c.cfg.NoLocalFleet {
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

// tags are the ownership tags of everything created for a resource.
func (c *Controller) tags(kind schema.Kind, name, instanceID string) map[string]string {
	t := map[string]string{
		backends.TagInstallation: c.cfg.Installation,
		backends.TagProject:      c.cfg.Project,
		backends.TagResource:     string(kind) + "/" + name,
	}
	if instanceID != "" {
		t[backends.TagInstance] = instanceID
	}
	return t
}

// provisionInstance runs the instance worker once, synchronously.
func (c *Controller) provisionInstance(ctx context.Context, id string) error {
	_, err := c.reconcileInstance(ctx, id)
	return err
}

// reconcileInstance drives one instance: pending → provisioning → idle/busy
// → terminating → terminated (dstack's InstanceStatus,
// src/dstack/_internal/core/models/instances.py), observing it through its
// backend.
func (c *Controller) reconcileInstance(ctx context.Context, id string) (time.Duration, error) {
	l, ok, err := c.claim(ctx, "instances", id)
	if err != nil || !ok {
		return 0, err
	}
	defer c.release(l)
	ctx, stopKeep := c.keepAlive(ctx, l)
	defer stopKeep()
	inst, err := c.st.GetInstance(ctx, id)
	if err != nil {
		return 0, err
	}
	be, ok := c.bes[inst.Backend]
	if !ok {
		if inst.Status != store.InstanceTerminated {
			inst.StatusMessage = fmt.Sprintf("backend %q is not configured", inst.Backend)
			_ = c.st.UpdateInstanceLeased(ctx, l, &inst)
		}
		return 0, backends.Stalled(fmt.Errorf("instance %s: backend %q is not configured", inst.Name, inst.Backend))
	}
	switch inst.Status {
	case store.InstancePending, store.InstanceProvisioning:
		if inst.OwnershipTags == nil {
			inst.OwnershipTags = c.tags(schema.KindFleet, inst.Name, inst.ID)
		}
		tags := inst.OwnershipTags
		if tags == nil {
			tags = map[string]string{}
		}
		tags[backends.TagInstance] = inst.ID
		spec := backends.InstanceSpec{ID: inst.ID, Name: inst.Name, Tags: tags}
		if len(inst.Offer) > 0 {
			_ = json.Unmarshal(inst.Offer, &spec.Offer)
		}
		if len(inst.BackendData) > 0 {
			var h backends.SSHHost
			if json.Unmarshal(inst.BackendData, &h) == nil && h.Hostname != "" {
				if inst.HostKey != "" {
					h.HostKeys = []string{inst.HostKey}
				}
				if err := c.resolveHostKey(ctx, &h); err != nil {
					return 0, c.hostKeyMissing(ctx, l, &inst, err)
				}
				spec.Host = &h
			}
		}
		bi, err := be.Create(ctx, spec)
		if errors.Is(err, backends.ErrNoCapacity) && !c.sharedInstance(ctx, inst) && c.backendType(inst.Backend) != SSHBackend {
			// This offer has no capacity now: the instance ends, and a job
			// waiting for it tries the next offer.
			inst.Status, inst.TerminationReason, inst.StatusMessage = store.InstanceTerminated, "no_offers", err.Error()
			inst.FinishedAt = c.now().UTC()
			if uerr := c.st.UpdateInstanceLeased(ctx, l, &inst); uerr != nil {
				return 0, uerr
			}
			c.event(ctx, "instance", inst.Name, inst.ID, "terminated", "", "no capacity for the offer: "+err.Error())
			c.wakeJobsOn(ctx, inst.ID)
			return 0, nil
		}
		if err != nil {
			prev := inst.StatusMessage
			inst.StatusMessage = err.Error()
			inst.Unreachable = errors.Is(err, backends.ErrUnreachable)
			_ = c.st.UpdateInstanceLeased(ctx, l, &inst)
			if backends.IsStalled(err) && prev != inst.StatusMessage {
				c.event(ctx, "instance", inst.Name, inst.ID, "stalled", "", "instance needs attention: "+err.Error())
			}
			return 0, err
		}
		c.observeInstance(&inst, bi)
		if bi.Status == backends.StatusRunning {
			inst.Status, inst.StartedAt = store.InstanceIdle, c.now().UTC()
		} else {
			inst.Status = store.InstanceProvisioning
		}
		if err := c.st.UpdateInstanceLeased(ctx, l, &inst); err != nil {
			return 0, err
		}
		c.event(ctx, "instance", inst.Name, inst.ID, inst.Status, "", "instance "+inst.Status+" on "+inst.Backend)
		if inst.Status == store.InstanceProvisioning {
			return 2 * time.Second, nil
		}
		c.wakeWaitingJobs(ctx) // jobs waiting for the fleet's instances
		return 30 * time.Second, nil
	case store.InstanceIdle, store.InstanceBusy:
		if reap, why, err := c.idleReapable(ctx, inst); err != nil {
			return 0, err
		} else if reap {
			inst.Status, inst.TerminationReason, inst.StatusMessage = store.InstanceTerminating, "idle_timeout", why
			if err := c.st.UpdateInstanceLeased(ctx, l, &inst); err != nil {
				return 0, err
			}
			c.event(ctx, "instance", inst.Name, inst.ID, "terminating", "", "instance terminating: "+why)
			return time.Millisecond, nil
		}
		if _, ok := be.(backends.Connector); ok && !inst.Unreachable {
			c.sweepTasks(ctx, inst.ID)
		}
		bi, err := be.Describe(ctx, inst.ID)
		if errors.Is(err, backends.ErrNotFound) {
			inst.Status, inst.TerminationReason, inst.StatusMessage = store.InstanceTerminated, "error", "the instance is gone"
			inst.FinishedAt = c.now().UTC()
			return 0, c.st.UpdateInstanceLeased(ctx, l, &inst)
		}
		was := inst.Unreachable
		if err != nil {
			inst.Unreachable, inst.StatusMessage = true, err.Error()
		} else {
			c.observeInstance(&inst, bi)
		}
		if err := c.st.UpdateInstanceLeased(ctx, l, &inst); err != nil {
			return 0, err
		}
		if was != inst.Unreachable {
			what := "reachable again"
			if inst.Unreachable {
				what = "unreachable: " + inst.StatusMessage
			}
			c.event(ctx, "instance", inst.Name, inst.ID, "reachability", "", "instance "+what)
		}
		return 30 * time.Second, nil
	case store.InstanceTerminating:
		if busy, err := c.instanceBusy(ctx, inst.ID); err != nil {
			return 0, err
		} else if busy {
			return 5 * time.Second, nil
		}
		if err := be.Terminate(ctx, inst.ID); err != nil {
			// Show why the instance does not go away (e.g. a changed host
			// key refuses the drain); a stalled error is an event once.
			if msg := err.Error(); msg != inst.StatusMessage {
				inst.StatusMessage = msg
				inst.Unreachable = errors.Is(err, backends.ErrUnreachable) || errors.Is(err, backends.ErrHostKeyMismatch)
				_ = c.st.UpdateInstanceLeased(ctx, l, &inst)
				if backends.IsStalled(err) {
					c.event(ctx, "instance", inst.Name, inst.ID, "stalled", "", "instance needs attention: "+msg)
				}
			}
			return 0, err
		}
		c.dropConn(inst.ID)
		inst.Status, inst.FinishedAt = store.InstanceTerminated, c.now().UTC()
		if err := c.st.UpdateInstanceLeased(ctx, l, &inst); err != nil {
			return 0, err
		}
		c.event(ctx, "instance", inst.Name, inst.ID, "terminated", "", "instance terminated: "+inst.TerminationReason)
	}
	return 0, nil
}

func (c *Controller) observeInstance(inst *store.Instance, bi backends.Instance) {
	inst.Unreachable = bi.Unreachable
	inst.StatusMessage = bi.Message
	if bi.Hostname != "" {
		inst.Hostname = bi.Hostname
	}
	if bi.Region != "" {
		inst.Region = bi.Region
	}
	if bi.HostKey != "" && inst.HostKey == "" {
		inst.HostKey = bi.HostKey
	}
	if bi.Tags != nil {
		inst.OwnershipTags = bi.Tags
	}
	inst.Price = bi.Price
	if b, err := json.Marshal(bi.Offer); err == nil {
		inst.Offer = b
	}
	if !bi.Unreachable {
		inst.LastSeenAt = c.now().UTC()
	}
}

// idleReapable reports whether an instance of a backend fleet has been idle
// longer than the fleet's idle_duration while the fleet has more than
// nodes.min instances (dstack's src/dstack/_internal/server/services/fleets.py). The local host and SSH hosts are
// never reaped: they are the fleet.
func (c *Controller) idleReapable(ctx context.Context, inst store.Instance) (bool, string, error) {
	if c.backendType(inst.Backend) == SSHBackend || inst.FleetID == "" || c.sharedInstance(ctx, inst) {
		return false, "", nil
	}
	f, err := c.st.GetFleet(ctx, inst.FleetID)
	if err != nil {
		return false, "", err
	}
	var spec schema.Fleet
	if json.Unmarshal(f.Spec, &spec) != nil || spec.IdleDuration <= 0 || spec.Nodes == nil {
		return false, "", nil
	}
	jobs, err := c.st.ListJobsFiltered(ctx, store.JobFilter{InstanceID: inst.ID})
	if err != nil {
		return false, "", err
	}
	idleSince := inst.StartedAt
	for _, j := range jobs {
		if !store.IsJobFinished(j.Status) {
			return false, "", nil
		}
		if j.FinishedAt.After(idleSince) {
			idleSince = j.FinishedAt
		}
	}
	idle := time.Duration(spec.IdleDuration) * time.Second
	if idleSince.IsZero() || c.now().Sub(idleSince) < idle {
		return false, "", nil
	}
	insts, err := c.st.ListInstances(ctx, store.InfraFilter{Project: c.cfg.Project, FleetID: f.ID})
	if err != nil {
		return false, "", err
	}
	active := 0
	for _, i := range insts {
		if i.Status != store.InstanceTerminated && i.Status != store.InstanceTerminating {
			active++
		}
	}
	if active <= spec.Nodes.Min {
		return false, "", nil
	}
	return true, fmt.Sprintf("idle for more than %s and the fleet has more than nodes.min (%d) instances", idle, spec.Nodes.Min), nil
}

func (c *Controller) instanceBusy(ctx context.Context, id string) (bool, error) {
	jobs, err := c.st.ListJobsFiltered(ctx, store.JobFilter{InstanceID: id, Status: activeJobStatuses})
	return len(jobs) > 0, err
}

// place picks an instance for a job of run: one of the fleets the spec
// allows (all when it names none), whose instance fits the resources and
// profile. The local host is shared; other instances run one job at a time.
func (c *Controller) place(ctx context.Context, run *store.Run, spec runSpec, tried map[string]bool) (store.Instance, error) {
	fleets, err := c.st.ListFleets(ctx, store.InfraFilter{Project: c.cfg.Project})
	if err != nil {
		return store.Instance{}, err
	}
	q := instanceQuery(spec)
	matched := false
	var growable []store.Fleet
	var waiting []string // fleets whose instances that may fit are still provisioning
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
			if !onBackends(spec.Backends, i.Backend) {
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
			if len(offers.Filter([]offers.Offer{o}, q)) == 0 {
				continue
			}
			if f.Name != c.cfg.LocalFleet {
				busy, err := c.instanceBusy(ctx, i.ID)
				if err != nil {
					return store.Instance{}, err
				}
				if busy {
					continue
				}
			}
			return i, nil
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
	for _, f := range growable {
		inst, err := c.growFleet(ctx, f, q, spec.Backends, tried)
		if err == nil {
			return inst, errInstancePending
		}
		why = append(why, f.Name+": "+err.Error())
	}
	msg := "for the requested resources"
	if len(why) > 0 {
		msg += " (" + strings.Join(why, "; ") + ")"
	}
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
// SSH hosts are the backend "remote").
func onBackends(backends []string, be string) bool {
	return len(backends) == 0 || containsFold(backends, be) || (be == SSHBackend && containsFold(backends, "remote"))
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
	all = slices.DeleteFunc(all, func(o offers.Offer) bool { return !onBackends(backends, o.Backend) })
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

// instanceQuery is the offer filter an instance must pass to take a job of
// spec. Disk is the host's own and not filtered; spot policy and backends
// are the fleet's business (a host is what it is).
func instanceQuery(spec runSpec) offers.Query {
	q := query.FromSpec(spec.Resources, spec.Profile)
	q.Disk, q.Backends, q.SpotPolicy = offers.Range{}, nil, offers.SpotPolicyAuto
	return q
}

// shimFor returns a client of the shim of an instance, reusing one
// connection per instance.
func (c *Controller) shimFor(ctx context.Context, instanceID string) (*api.ShimClient, backends.Conn, error) {
	c.connsMu.Lock()
	conn, ok := c.conns[instanceID]
	c.connsMu.Unlock()
	if !ok {
		inst, err := c.st.GetInstance(ctx, instanceID)
		if err != nil {
			return nil, nil, err
		}
		be, ok := c.bes[inst.Backend]
		if !ok {
			return nil, nil, backends.Stalled(fmt.Errorf("backend %q is not configured", inst.Backend))
		}
		cn, ok := be.(backends.Connector)
		if !ok {
			return nil, nil, backends.Stalled(fmt.Errorf("backend %q runs no shim", inst.Backend))
		}
		bi := backends.Instance{ID: inst.ID, Backend: inst.Backend, Hostname: inst.Hostname, HostKey: inst.HostKey, Tags: inst.OwnershipTags}
		conn, err = cn.Connect(ctx, bi)
		if err != nil {
			return nil, nil, fmt.Errorf("connect to instance %s: %w", inst.Name, err)
		}
		c.connsMu.Lock()
		if prev, ok := c.conns[instanceID]; ok {
			_ = conn.Close()
			conn = prev
		} else {
			c.conns[instanceID] = conn
		}
		c.connsMu.Unlock()
	}
	return api.NewShimClient(conn.ShimURL(), conn.HTTPClient()), conn, nil
}

func (c *Controller) dropConn(instanceID string) {
	c.connsMu.Lock()
	conn, ok := c.conns[instanceID]
	delete(c.conns, instanceID)
	c.connsMu.Unlock()
	if ok {
		_ = conn.Close()
	}
}

func (c *Controller) closeConns() {
	c.connsMu.Lock()
	defer c.connsMu.Unlock()
	for id, conn := range c.conns {
		_ = conn.Close()
		delete(c.conns, id)
	}
}
