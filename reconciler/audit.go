package reconciler

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"hoist/backends"
	"hoist/store"
)

// Kinds of resources the audit looks at.
const (
	AuditInstance       = "instance"
	AuditVolume         = "volume"
	AuditPlacementGroup = "placement_group"
	AuditJob            = "job"
)

// An AuditReport is one pass of the audit of a project: what the providers
// hold that the store does not know (Leaked), what the store believes
// exists that the providers no longer have (Lost), what must exist once
// and exists twice (Duplicated), and the backends that could not be asked
// (Errors: their resources are then neither leaked nor lost, not
// counted as none).
type AuditReport struct {
	// Project is the audited project.
	Project string
	// CheckedAt is when the pass started.
	CheckedAt time.Time
	// Grace is Config.LeakGrace: a leaked resource is deleted once it is
	// that old.
	Grace time.Duration
	// Leaked are the resources with this installation's and project's
	// ownership tags that the store does not know.
	Leaked []LeakedResource
	// Lost are the resources the store holds as existing that the
	// provider does not have.
	Lost []LostResource
	// Duplicated are the things found twice that must exist once.
	Duplicated []Duplicate
	// Errors are the backends (and kinds) that could not be listed.
	Errors []AuditError
}

// A LeakedResource is a provider resource that carries this installation's
// and project's tags but that the store does not know (or knows as
// terminated or deleted).
type LeakedResource struct {
	// Backend is the backend's name.
	Backend string
	// Kind is AuditInstance, AuditVolume or AuditPlacementGroup.
	Kind string
	// ID is hoist's id as the tags carry it.
	ID string
	// ProviderID is the provider's id.
	ProviderID string
	// CreatedAt is when the provider created it; zero when unknown.
	CreatedAt time.Time
	// ReapAt is when the periodic audit deletes it: CreatedAt plus the
	// grace (CheckedAt when CreatedAt is unknown).
	ReapAt time.Time
}

// A LostResource is a resource the store holds as existing (an instance
// not terminated, a volume not deleted) that the provider does not have.
type LostResource struct {
	// Backend is the backend's name.
	Backend string
	// Kind is AuditInstance or AuditVolume.
	Kind string
	// ID is hoist's id.
	ID string
	// Name is the store's name for it.
	Name string
	// ProviderID is the provider's id when the provider still answers
	// for it (as terminated).
	ProviderID string
	// Status is its status in the store.
	Status string
	// Owner is the fleet (instances) or the volume's name (volumes).
	Owner string
	// Action says what the reconciler does about it.
	Action string
}

// A Duplicate is something that must exist once and exists more often.
type Duplicate struct {
	// Kind is AuditJob, AuditInstance or AuditVolume.
	Kind string
	// Run is the run's name (jobs).
	Run string
	// Job names the job: its number, or its replica's.
	Job string
	// IDs are the ids of the copies.
	IDs []string
	// Message says what is duplicated.
	Message string
}

// An AuditError is a backend the audit could not ask.
type AuditError struct {
	// Backend is the backend's name.
	Backend string
	// Kind is what could not be listed.
	Kind string
	// Error is why.
	Error string
}

// Actions the reconciler takes on lost resources, as the report says them.
const (
	lostInstanceAction = "the instance health check marks it terminated (instance_gone) within 30s and ends its jobs, which retry as their runs allow"
	lostVolumeAction   = "none: reported only; a job that mounts it fails to attach"
)

// Audit computes the project's audit report: for every backend, the
// instances, network volumes and placement groups carrying this
// installation's and this project's tags are listed and compared with the
// store, both ways; the store's live jobs and instances are checked for
// duplicates. The periodic leak audit (leakLoop) deletes the report's
// Leaked once past their ReapAt; the API serves it (GET /api/v1/audit).
// Shared resources (the AWS driver's security group per installation and
// region) are not audited: they are reused, never deleted.
func (c *Controller) Audit(ctx context.Context) AuditReport {
	rep := AuditReport{Project: c.cfg.Project, CheckedAt: c.now().UTC(), Grace: c.cfg.LeakGrace,
		Leaked: []LeakedResource{}, Lost: []LostResource{}, Duplicated: []Duplicate{}, Errors: []AuditError{}}
	names := make([]string, 0, len(c.bes))
	for name := range c.bes {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		b := c.bes[name]
		c.auditInstances(ctx, &rep, name, b)
		if vb, ok := b.(backends.VolumeBackend); ok {
			c.auditVolumeList(ctx, &rep, name, vb)
		}
		if pb, ok := b.(backends.PlacementBackend); ok {
			c.auditPlacementGroupList(ctx, &rep, name, pb)
		}
	}
	c.auditJobDuplicates(ctx, &rep)
	return rep
}

// leak adds a leaked resource to rep.
func (c *Controller) leak(rep *AuditReport, backend, kind, id, providerID string, created time.Time) {
	reap := rep.CheckedAt
	if !created.IsZero() {
		reap = created.Add(c.cfg.LeakGrace).UTC()
	}
	rep.Leaked = append(rep.Leaked, LeakedResource{Backend: backend, Kind: kind, ID: id, ProviderID: providerID, CreatedAt: created, ReapAt: reap})
}

// auditErr adds an error to rep.
func auditErr(rep *AuditReport, backend, kind string, err error) {
	rep.Errors = append(rep.Errors, AuditError{Backend: backend, Kind: kind, Error: err.Error()})
}

// auditInstances compares backend b's tagged instances with the store's
// live instances of the project on it.
func (c *Controller) auditInstances(ctx context.Context, rep *AuditReport, name string, b backends.Backend) {
	insts, err := b.List(ctx, c.leakTags())
	err = c.backendFailed(ctx, name, err)
	if err != nil {
		auditErr(rep, name, AuditInstance, err)
		return
	}
	listed := map[string][]string{}
	for _, inst := range insts {
		if inst.Status == backends.StatusTerminated {
			continue // gone: neither leaked nor there (EC2 lists terminated instances for an hour)
		}
		listed[inst.ID] = append(listed[inst.ID], inst.ProviderID)
		if len(listed[inst.ID]) > 1 {
			continue
		}
		known, err := c.knownInstance(ctx, inst.ID)
		if err != nil {
			auditErr(rep, name, AuditInstance, err)
			continue
		}
		if !known {
			c.leak(rep, name, AuditInstance, inst.ID, inst.ProviderID, inst.CreatedAt)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(listed)) {
		if p := listed[id]; len(p) > 1 {
			rep.Duplicated = append(rep.Duplicated, Duplicate{Kind: AuditInstance, IDs: p, Message: fmt.Sprintf(
				"instance %s exists %d times on backend %s", id, len(p), name)})
		}
	}
	rows, err := c.st.ListInstances(ctx, store.InfraFilter{Project: c.cfg.Project,
		Status: []string{store.InstanceIdle, store.InstanceBusy}, Limit: 100000})
	if err != nil {
		auditErr(rep, name, AuditInstance, err)
		return
	}
	byName := map[string][]string{}
	for _, row := range rows {
		if row.Backend != name {
			continue
		}
		byName[row.Name] = append(byName[row.Name], row.ID)
		if _, ok := listed[row.ID]; ok {
			continue
		}
		bi, err := b.Describe(ctx, row.ID)
		switch {
		case errors.Is(err, backends.ErrNotFound) || (err == nil && bi.Status == backends.StatusTerminated):
		case err != nil:
			auditErr(rep, name, AuditInstance, fmt.Errorf("describe instance %s: %w", row.Name, c.backendFailed(ctx, name, err)))
			continue
		default:
			continue // there, without our tags (an SSH host, the local one)
		}
		owner := ""
		if row.FleetID != "" {
			if fl, err := c.st.GetFleet(ctx, row.FleetID); err == nil {
				owner = fl.Name
			}
		}
		rep.Lost = append(rep.Lost, LostResource{Backend: name, Kind: AuditInstance, ID: row.ID, Name: row.Name,
			ProviderID: bi.ProviderID, Status: row.Status, Owner: owner, Action: lostInstanceAction})
	}
	for _, n := range slices.Sorted(maps.Keys(byName)) {
		if ids := byName[n]; len(ids) > 1 {
			rep.Duplicated = append(rep.Duplicated, Duplicate{Kind: AuditInstance, IDs: ids, Message: fmt.Sprintf(
				"%d live instances named %s on backend %s", len(ids), n, name)})
		}
	}
}

// auditVolumeList compares backend b's tagged volumes with the store's
// active volumes of the project on it. A registered (external) volume is
// never leaked.
func (c *Controller) auditVolumeList(ctx context.Context, rep *AuditReport, name string, vb backends.VolumeBackend) {
	vols, err := vb.ListVolumes(ctx, c.leakTags())
	err = c.backendFailed(ctx, name, err)
	if err != nil {
		auditErr(rep, name, AuditVolume, err)
		return
	}
	listed := map[string][]string{}
	for _, v := range vols {
		listed[v.ID] = append(listed[v.ID], v.ProviderID)
		if len(listed[v.ID]) > 1 || !v.Owned || v.Status == volumeDeleting {
			continue
		}
		row, err := c.st.GetVolume(ctx, v.ID)
		switch {
		case err == nil && !row.Deleted:
			continue
		case err != nil && !errors.Is(err, store.ErrNotFound):
			auditErr(rep, name, AuditVolume, err)
			continue
		}
		c.leak(rep, name, AuditVolume, v.ID, v.ProviderID, v.CreatedAt)
	}
	for _, id := range slices.Sorted(maps.Keys(listed)) {
		if p := listed[id]; len(p) > 1 {
			rep.Duplicated = append(rep.Duplicated, Duplicate{Kind: AuditVolume, IDs: p, Message: fmt.Sprintf(
				"volume %s exists %d times on backend %s", id, len(p), name)})
		}
	}
	rows, err := c.st.ListVolumes(ctx, store.InfraFilter{Project: c.cfg.Project, Status: []string{store.VolumeActive}, Limit: 100000})
	if err != nil {
		auditErr(rep, name, AuditVolume, err)
		return
	}
	for _, row := range rows {
		if row.Backend != name || row.Deleted {
			continue
		}
		if _, ok := listed[row.ID]; ok {
			continue
		}
		got, err := vb.DescribeVolume(ctx, row.ID)
		switch {
		case errors.Is(err, backends.ErrNotFound):
		case err != nil:
			auditErr(rep, name, AuditVolume, fmt.Errorf("describe volume %s: %w", row.Name, c.backendFailed(ctx, name, err)))
			continue
		default:
			continue // there, without our tags (a registered volume)
		}
		rep.Lost = append(rep.Lost, LostResource{Backend: name, Kind: AuditVolume, ID: row.ID, Name: row.Name,
			ProviderID: got.ProviderID, Status: row.Status, Owner: row.Name, Action: lostVolumeAction})
	}
}

// auditPlacementGroupList adds backend b's tagged placement groups that no
// fleet in the store records (deleted fleets included: their groups are
// the placement group sweep's).
func (c *Controller) auditPlacementGroupList(ctx context.Context, rep *AuditReport, name string, pb backends.PlacementBackend) {
	groups, err := pb.ListPlacementGroups(ctx, c.leakTags())
	err = c.backendFailed(ctx, name, err)
	if err != nil {
		auditErr(rep, name, AuditPlacementGroup, err)
		return
	}
	for _, g := range groups {
		_, err := c.st.GetFleetByPlacementGroup(ctx, g.ID)
		switch {
		case err == nil:
			continue
		case !errors.Is(err, store.ErrNotFound):
			auditErr(rep, name, AuditPlacementGroup, err)
			continue
		}
		c.leak(rep, name, AuditPlacementGroup, g.ID, g.ProviderID, g.CreatedAt)
	}
}

// auditJobDuplicates adds the jobs of the project's runs that have more
// than one live (not finished) submission: a job (node) or service replica
// runs once at a time.
func (c *Controller) auditJobDuplicates(ctx context.Context, rep *AuditReport) {
	jobs, err := c.st.ListJobsFiltered(ctx, store.JobFilter{Project: c.cfg.Project, Status: activeJobStatuses, Limit: 1 << 30})
	if err != nil {
		auditErr(rep, "", AuditJob, err)
		return
	}
	type slot struct {
		run          string
		num, replica int
	}
	live := map[slot][]string{}
	var order []slot
	for _, j := range jobs {
		k := slot{j.RunID, j.JobNum, j.ReplicaNum}
		if live[k] == nil {
			order = append(order, k)
		}
		live[k] = append(live[k], j.ID)
	}
	for _, k := range order {
		ids := live[k]
		if len(ids) < 2 {
			continue
		}
		run := k.run
		if r, err := c.st.GetRun(ctx, k.run); err == nil {
			run = r.Name
		}
		job := strconv.Itoa(k.num)
		if k.replica > 0 {
			job = "replica " + strconv.Itoa(k.replica) + " job " + job
		}
		slices.Sort(ids)
		rep.Duplicated = append(rep.Duplicated, Duplicate{Kind: AuditJob, Run: run, Job: job, IDs: ids, Message: fmt.Sprintf(
			"run %s job %s has %d live submissions", run, job, len(ids))})
	}
}
