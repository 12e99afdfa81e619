package reconciler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"hoist/agents/api"
	"hoist/backends"
	"hoist/backends/offers"
	"hoist/schema"
	"hoist/store"
)

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
		cloud := !c.sharedInstance(ctx, inst) && !be.Traits().TakesOverHosts
		if cloud && c.now().Sub(inst.CreatedAt) > instanceProvisioningTimeout {
			// Create keeps saying provisioning: give the offer up, let the
			// backend delete what it made, and try the next offer.
			return c.giveUpOffer(ctx, l, &inst, store.InstanceTerminating, "provisioning_timeout",
				fmt.Sprintf("the instance did not become ready within %s", instanceProvisioningTimeout))
		}
		if cloud {
			pg, err := c.placementGroupFor(ctx, inst, be, spec.Offer)
			if err != nil {
				inst.StatusMessage = "placement group: " + err.Error()
				_ = c.st.UpdateInstanceLeased(ctx, l, &inst)
				return 0, err
			}
			spec.PlacementGroup = pg
		}
		bi, err := be.Create(ctx, spec)
		_ = c.backendFailed(ctx, inst.Backend, err)
		if cloud && errors.Is(err, backends.ErrNoCapacity) {
			// This offer has no capacity now (or its VM did not boot in
			// time, which the cloud engine reports the same way, having
			// deleted it): the instance ends, and the next offer is tried
			// by its fleet or by the job waiting for it.
			return c.giveUpOffer(ctx, l, &inst, store.InstanceTerminated, "no_offers", "no capacity for the offer: "+err.Error())
		}
		if cloud && err == nil && bi.Status == backends.StatusTerminated {
			// Gone before it was ready (a spot instance reclaimed while it
			// booted): the backend releases what is left.
			msg := "the instance was gone before it became ready"
			if bi.Message != "" {
				msg += ": " + bi.Message
			}
			return c.giveUpOffer(ctx, l, &inst, store.InstanceTerminating, "no_offers", msg)
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
		c.wakeWaitingJobs(ctx)           // jobs waiting for the fleet's instances
		c.wakeGangsOn(ctx, inst.FleetID) // gangs too, those holding instances on their way included
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
		_ = c.backendFailed(ctx, inst.Backend, err)
		if errors.Is(err, backends.ErrNotFound) || (err == nil && bi.Status == backends.StatusTerminated) {
			return c.instanceGone(ctx, l, &inst, bi, err)
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
		if err := c.backendFailed(ctx, inst.Backend, be.Terminate(ctx, inst.ID)); err != nil {
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
		if err := c.deletePlacementGroups(ctx, inst.FleetID); err != nil {
			// The periodic resync deletes them once the provider lets go.
			c.log.Info("placement groups not deleted yet", "fleet_id", inst.FleetID, "error", err)
		}
	}
	return 0, nil
}

// instanceProvisioningTimeout bounds how long a cloud instance may stay
// pending or provisioning before its offer is given up (dstack's default
// provisioning timeout, src/dstack/_internal/server/background/pipeline_tasks/instances/check.py
// get_provisioning_timeout).
const instanceProvisioningTimeout = 10 * time.Minute

// giveUpOffer ends a cloud instance whose offer could not be had (no
// capacity, no boot in time, gone while booting) with status (terminated,
// or terminating when the backend may still hold something) and reason,
// and has its fleet try the next offer (replaceInstance). A job waiting
// for the instance is woken: it tries its next offer itself.
func (c *Controller) giveUpOffer(ctx context.Context, l store.Lease, inst *store.Instance, status, reason, msg string) (time.Duration, error) {
	// The replacement first, and both under the fleet's lock: a crash
	// after it leaves this instance to be given up again (consolidation
	// then counts the replacement), and another instance of the fleet
	// given up at the same time counts this one as gone.
	err := c.withFleetLock(ctx, inst.FleetID, func() error {
		if err := c.replaceInstance(ctx, *inst, msg, true); err != nil {
			return err
		}
		inst.Status, inst.TerminationReason, inst.StatusMessage = status, reason, msg
		if status == store.InstanceTerminated {
			inst.FinishedAt = c.now().UTC()
		}
		return c.st.UpdateInstanceLeased(ctx, l, inst)
	})
	if err != nil {
		return 0, err
	}
	c.event(ctx, "instance", inst.Name, inst.ID, status, "", "instance "+status+": "+msg)
	c.wakeJobsOn(ctx, inst.ID)
	if status == store.InstanceTerminating {
		return time.Millisecond, nil
	}
	if err := c.deletePlacementGroups(ctx, inst.FleetID); err != nil {
		c.log.Info("placement groups not deleted yet", "fleet_id", inst.FleetID, "error", err)
	}
	return 0, nil
}

// withFleetLock runs fn holding the lease of fleet id (nothing to lock
// for ""), so that what consolidates the fleet — applying its spec, giving
// up or replacing its instances, its placement groups — runs one at a
// time across workers and servers. Another holder is waited for briefly;
// past that the error is a wait, to try again later.
func (c *Controller) withFleetLock(ctx context.Context, id string, fn func() error) error {
	if id == "" {
		return fn()
	}
	for attempt := 0; ; attempt++ {
		l, ok, err := c.claim(ctx, "fleets", id)
		if err != nil {
			return err
		}
		if ok {
			defer c.release(l)
			return fn()
		}
		if attempt == 20 {
			return backends.Wait(fmt.Errorf("fleet %s: another worker is consolidating it", id), time.Second)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// replaceInstance has the active backend fleet of an instance that ended
// against its will (its offer failed, the provider reclaimed or lost it)
// provision what it now lacks to nodes.target, from the next offer when
// the instance's offer failed (offerFailed: it is recorded as tried, with
// why). An instance a submitted job waits for is the job's: the job tries
// its next offer (placeJob).
func (c *Controller) replaceInstance(ctx context.Context, inst store.Instance, why string, offerFailed bool) error {
	if inst.FleetID == "" {
		return nil
	}
	if reserved, err := c.instanceReserved(ctx, inst.ID); err != nil || reserved {
		return err
	}
	var o offers.Offer
	if len(inst.Offer) == 0 || json.Unmarshal(inst.Offer, &o) != nil {
		return nil
	}
	o.Backend = inst.Backend
	for attempt := 0; ; attempt++ {
		f, err := c.st.GetFleet(ctx, inst.FleetID)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		var spec schema.Fleet
		if f.Status != store.FleetActive || f.Deleted || f.RemovedFromGit || f.Name == c.cfg.LocalFleet ||
			json.Unmarshal(f.Spec, &spec) != nil || spec.SSHConfig != nil {
			return nil
		}
		key := offerKey(o)
		if offerFailed && !slices.ContainsFunc(f.TriedOffers, func(t store.TriedOffer) bool { return t.Offer == key }) {
			f.TriedOffers = append(f.TriedOffers, store.TriedOffer{Offer: key, Error: why, At: c.now().UTC()})
			err := c.st.UpdateFleet(ctx, &f)
			if errors.Is(err, store.ErrConflict) && attempt < 5 {
				continue
			}
			if err != nil {
				return err
			}
		}
		return c.consolidateCloudFleet(ctx, f, &spec, inst.ID)
	}
}

// instanceGone ends an idle or busy instance its backend no longer has
// (Describe said not found, or terminated). A spot instance that went
// (Instance.Interrupted, or not found while its offer is spot) was
// interrupted: its jobs end as interrupted_by_no_capacity, which a run
// with `retry.on_events: [interruption]` retries; other jobs end as
// instance_unreachable. The instance goes through terminating, so that
// the backend releases whatever is left, and its fleet provisions a new
// one when it is below nodes.target.
func (c *Controller) instanceGone(ctx context.Context, l store.Lease, inst *store.Instance, bi backends.Instance, derr error) (time.Duration, error) {
	var o offers.Offer
	if len(inst.Offer) > 0 {
		_ = json.Unmarshal(inst.Offer, &o)
	}
	reason, jobReason, msg := "error", reasonInstanceUnreachable, "the instance is gone"
	if bi.Interrupted || (derr != nil && o.Spot) {
		reason, jobReason, msg = "interrupted", reasonInterruptedCapacity, "the provider reclaimed the spot instance"
	}
	if bi.Message != "" {
		msg += ": " + bi.Message
	}
	// Jobs placed on it end; a submitted one waiting for it is placed anew.
	jobs, err := c.st.ListJobsFiltered(ctx, store.JobFilter{InstanceID: inst.ID,
		Status: []string{store.JobProvisioning, store.JobPulling, store.JobRunning}})
	if err != nil {
		return 0, err
	}
	for _, j := range jobs {
		if err := c.terminateJob(ctx, j.ID, jobReason, msg); err != nil {
			return 0, err
		}
		c.runs.Add(j.RunID)
	}
	c.dropConn(inst.ID)
	c.wakeJobsOn(ctx, inst.ID)
	// A reclaimed or lost instance says nothing about its offer now: the
	// fleet provisions from it again (and walks on if it has no capacity).
	err = c.withFleetLock(ctx, inst.FleetID, func() error {
		if err := c.replaceInstance(ctx, *inst, msg, false); err != nil {
			return err
		}
		inst.Status, inst.TerminationReason, inst.StatusMessage = store.InstanceTerminating, reason, msg
		inst.Unreachable = true
		return c.st.UpdateInstanceLeased(ctx, l, inst)
	})
	if err != nil {
		return 0, err
	}
	c.event(ctx, "instance", inst.Name, inst.ID, "terminating", "", "instance terminating: "+msg)
	return time.Millisecond, nil
}

func (c *Controller) observeInstance(inst *store.Instance, bi backends.Instance) {
	inst.Unreachable = bi.Unreachable
	inst.StatusMessage = bi.Message
	if bi.Hostname != "" {
		inst.Hostname = bi.Hostname
	}
	if bi.InternalIP != "" {
		inst.InternalIP = bi.InternalIP
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
	if c.traitsOf(inst.Backend).TakesOverHosts || inst.FleetID == "" || c.sharedInstance(ctx, inst) {
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
		// A runner-runtime backend may answer the shim API itself
		// (Kubernetes: each task a pod); the Conn hides the difference.
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

// markInstance sets an idle or busy instance's status from whether an
// active job uses it (the local host, shared by every job, stays idle);
// one that becomes idle wakes the gangs waiting for its fleet.
func (c *Controller) markInstance(ctx context.Context, id string) {
	for attempt := 0; attempt < 5; attempt++ {
		inst, err := c.st.GetInstance(ctx, id)
		if err != nil || (inst.Status != store.InstanceIdle && inst.Status != store.InstanceBusy) || c.sharedInstance(ctx, inst) {
			return
		}
		busy, err := c.instanceBusy(ctx, id)
		if err != nil {
			return
		}
		want := store.InstanceIdle
		if busy {
			want = store.InstanceBusy
		}
		if inst.Status == want {
			return
		}
		inst.Status = want
		err = c.st.UpdateInstance(ctx, &inst)
		if err == nil && want == store.InstanceIdle {
			c.wakeGangsOn(ctx, inst.FleetID) // free: a gang waiting for it may now be placed
		}
		if !errors.Is(err, store.ErrConflict) {
			return
		}
	}
}

// sharedInstance reports whether an instance is this host's, which every
// job shares; every other instance runs one job at a time.
func (c *Controller) sharedInstance(ctx context.Context, inst store.Instance) bool {
	if !c.traitsOf(inst.Backend).SharedHost || inst.FleetID == "" {
		return false
	}
	f, err := c.st.GetFleet(ctx, inst.FleetID)
	return err == nil && f.Name == c.cfg.LocalFleet
}
