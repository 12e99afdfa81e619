package reconciler

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"hoist/agents/api"
	"hoist/backends"
	"hoist/backends/offers"
	"hoist/reconciler/plan"
	"hoist/reconciler/source"
	"hoist/schema"
	"hoist/store"
)

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
	region := spec.Region
	if region == "" && exists {
		region = v.Region // the backend's, recorded by provisionVolume
	}
	v.Spec, v.SpecHash, v.Revision, v.Backend, v.Region = s.Desired.JSON, specHash(s.Desired.JSON), rev.ID, spec.Backend, region
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
	return c.provisionVolume(ctx, rev.ID, &v)
}

// provisionVolume creates (or registers, with volume_id or a Kubernetes
// claim_name) a submitted volume at its backend. A volume the provider is still creating becomes
// provisioning, one it refused for good (a stalled error, or no such
// backend) failed; after a transient error it stays submitted, and
// refreshVolume tries again.
func (c *Controller) provisionVolume(ctx context.Context, rev string, v *store.Volume) error {
	spec := volumeSpec(*v)
	vb, ok := c.bes[spec.Backend].(backends.VolumeBackend)
	if !ok {
		v.Status, v.StatusMessage = store.VolumeFailed, fmt.Sprintf("backend %q is not configured or has no volumes", spec.Backend)
		c.event(ctx, "volume", v.Name, v.ID, "failed", rev, v.StatusMessage)
		return c.st.UpdateVolume(ctx, v)
	}
	// The spec's tags, under hoist's ownership tags.
	tags := maps.Clone(spec.Tags)
	if tags == nil {
		tags = map[string]string{}
	}
	maps.Copy(tags, c.tags(schema.KindVolume, v.Name, ""))
	vs := backends.VolumeSpec{ID: v.ID, Name: v.Name, Region: spec.Region, ExternalID: externalID(spec),
		StorageClass: spec.StorageClassName, AccessModes: spec.AccessModes, Tags: tags}
	var got backends.Volume
	var err error
	if vs.ExternalID != "" {
		got, err = vb.RegisterVolume(ctx, vs)
	} else {
		if spec.Size != nil {
			vs.SizeGB = *spec.Size
		}
		got, err = vb.CreateVolume(ctx, vs)
	}
	_ = c.backendFailed(ctx, spec.Backend, err)
	switch {
	case err != nil && !backends.IsStalled(err):
		c.log.Warn("volume not created yet", "volume", v.Name, "error", err)
		if msg := err.Error(); v.StatusMessage != msg {
			v.StatusMessage = msg
			return c.st.UpdateVolume(ctx, v)
		}
		return nil
	case err != nil:
		v.Status, v.StatusMessage = store.VolumeFailed, err.Error()
	case got.Status == volumeCreating:
		// Not attachable yet: refreshVolume makes it active once the
		// provider says it is available.
		v.Status, v.StatusMessage, v.ExternalID, v.SizeGB = store.VolumeProvisioning, "", got.ProviderID, got.SizeGB
	default:
		v.Status, v.StatusMessage, v.ExternalID, v.SizeGB = store.VolumeActive, "", got.ProviderID, got.SizeGB
	}
	if err == nil && v.Region == "" {
		// A spec may leave the region to the backend (a Kubernetes volume
		// lives in the cluster's context): jobs are placed by the region the
		// backend gives.
		v.Region = got.Region
	}
	c.event(ctx, "volume", v.Name, v.ID, v.Status, rev, "volume "+v.Status+" "+v.StatusMessage)
	return c.st.UpdateVolume(ctx, v)
}

// deleteVolume deletes a volume whose spec was removed (or replaced): at
// its backend (only what hoist owns) and in the store. A volume still
// attached for a job, or one its backend cannot delete yet (KindWait: a
// Kubernetes claim is kept while a pod, even a finished one, uses it), is
// marked to be deleted; the volume sweep deletes it later.
func (c *Controller) deleteVolume(ctx context.Context, rev source.Revision, v *store.Volume) error {
	atts, err := c.st.ListVolumeAttachments(ctx, v.ID, "")
	if err != nil {
		return err
	}
	if len(atts) > 0 {
		v.ToBeDeleted, v.RemovedFromGit, v.StatusMessage = true, true, "to be deleted once detached"
		c.event(ctx, "volume", v.Name, v.ID, "deleting", rev.ID, "volume is deleted once detached")
		return c.st.UpdateVolume(ctx, v)
	}
	v.RemovedFromGit = true
	err = c.deleteVolumeNow(ctx, rev.ID, v, "volume deleted")
	if backends.KindOf(err) == backends.KindWait {
		v.ToBeDeleted, v.StatusMessage = true, "to be deleted once no longer in use"
		c.event(ctx, "volume", v.Name, v.ID, "deleting", rev.ID, "volume is deleted once no longer in use: "+err.Error())
		return c.st.UpdateVolume(ctx, v)
	}
	return err
}

// deleteVolumeNow deletes an unattached volume at its backend (a registered
// one the backend only forgets) and marks its row deleted.
func (c *Controller) deleteVolumeNow(ctx context.Context, rev string, v *store.Volume, msg string) error {
	// Gone is success: whatever the status, the provider may hold it.
	if vb, ok := c.bes[v.Backend].(backends.VolumeBackend); ok {
		if err := c.backendFailed(ctx, v.Backend, vb.DeleteVolume(ctx, v.ID)); err != nil {
			return err
		}
	}
	v.Deleted = true
	c.event(ctx, "volume", v.Name, v.ID, "deleted", rev, msg)
	return c.st.UpdateVolume(ctx, v)
}

// volumeCreating is the backends.Volume status of a volume the provider is
// still creating.
const volumeCreating = "creating"

// refreshVolume tries again to create a volume still submitted (after a
// transient error), and asks the backend about one still provisioning,
// recording it active once the provider has it, failed once it is gone.
func (c *Controller) refreshVolume(ctx context.Context, v *store.Volume) error {
	if v.Status == store.VolumeSubmitted && !v.ToBeDeleted {
		return c.provisionVolume(ctx, "", v)
	}
	if v.Status != store.VolumeProvisioning {
		return nil
	}
	vb, ok := c.bes[v.Backend].(backends.VolumeBackend)
	if !ok {
		return nil
	}
	got, err := vb.DescribeVolume(ctx, v.ID)
	_ = c.backendFailed(ctx, v.Backend, err)
	switch {
	case errors.Is(err, backends.ErrNotFound):
		v.Status, v.StatusMessage = store.VolumeFailed, "the provider no longer has the volume"
	case err != nil:
		return err
	case got.Status == volumeCreating:
		return nil
	case got.Status == "deleting" || got.Status == "gone":
		v.Status, v.StatusMessage = store.VolumeFailed, "the provider is deleting the volume"
	default:
		v.Status, v.SizeGB = store.VolumeActive, got.SizeGB
	}
	c.event(ctx, "volume", v.Name, v.ID, v.Status, "", "volume "+v.Status+" "+v.StatusMessage)
	return c.st.UpdateVolume(ctx, v)
}

// Network volumes of runs (`volumes: [{name: data, path: /data}]`). A job
// that mounts one is placed only on an instance of a volume's backend and
// region, waits while the volume is attached for another job, has it
// attached to its instance before its task is created (the device path goes
// in the task spec; the shim mounts it), and has it detached once its task
// is gone, before the job's final status is written (dstack:
// server/background/pipeline_tasks/jobs_submitted.py attaches,
// jobs_terminating.py detaches, force-detaching after max(60 s,
// stop_duration)). One job uses a volume at a time: the attachment row
// (store.VolumeAttachment) names the job.

// volumeWaitPoll is how often a job waiting for a volume looks again.
const volumeWaitPoll = 2 * time.Second

// minForceDetach is how long a detach may take before it is forced
// (dstack's 60 s floor under stop_duration).
const minForceDetach = 60 * time.Second

// attachmentData is what an attachment row keeps.
type attachmentData struct {
	// JobID is the job the volume is attached for.
	JobID string `json:"job_id"`
	// DevicePath is where the volume shows up on the instance, once
	// attached.
	DevicePath string `json:"device_path,omitempty"`
	// Claim is, on a backend whose tasks are pods, the
	// PersistentVolumeClaim the job's pod mounts, once attached (the
	// attachment of such a volume has no device).
	Claim string `json:"claim,omitempty"`
	// DetachStartedAt is when the first detach was asked for.
	DetachStartedAt *time.Time `json:"detach_started_at,omitempty"`
}

// attached reports whether the backend attached the volume: it gave a
// device path or a claim.
func (d attachmentData) attached() bool { return d.DevicePath != "" || d.Claim != "" }

// where says where an attached volume shows up, for events.
func (d attachmentData) where() string {
	if d.Claim != "" {
		return "claim " + d.Claim
	}
	return d.DevicePath
}

func decodeAttachment(a store.VolumeAttachment) attachmentData {
	var d attachmentData
	_ = json.Unmarshal(a.AttachmentData, &d)
	return d
}

func (c *Controller) recordAttachment(ctx context.Context, volumeID, instanceID string, d attachmentData) error {
	b, err := json.Marshal(d)
	if err != nil {
		return err
	}
	return c.st.AttachVolume(ctx, volumeID, instanceID, b)
}

// volumeSite is a backend and region a job may run in for its volumes.
type volumeSite struct{ backend, region string }

// on reports whether an instance of backend be in region is at the site.
func (s volumeSite) on(be, region string) bool {
	return strings.EqualFold(s.backend, be) && strings.EqualFold(s.region, region)
}

// networkMounts returns the network volume mounts of job number jobNum
// of a run: the spec's, with `${{ dstack.job_num }}` and
// `${{ dstack.node_rank }}` in their names resolved to jobNum, as dstack
// resolves them per job (server/services/jobs/configurators/base.py,
// interpolate_job_volumes): per-node volumes of a multi-node task.
func networkMounts(spec runSpec, jobNum int) []schema.MountPoint {
	var out []schema.MountPoint
	for _, m := range spec.Volumes {
		if len(m.Name) == 0 {
			continue
		}
		names := make([]string, len(m.Name))
		for i, n := range m.Name {
			names[i] = schema.JobVolumeName(n, jobNum)
		}
		m.Name = names
		out = append(out, m)
	}
	return out
}

// gateMounts returns the network volume mounts volumeGate checks for job:
// its own, and for the master of a multi-node run, which places the jobs
// of its replica together (placeGang), theirs too (each once).
func gateMounts(spec runSpec, job *store.Job) []schema.MountPoint {
	nums := []int{job.JobNum}
	if spec.multiNode() && job.JobNum == 0 {
		nums = nil
		for _, jn := range spec.jobNums() {
			if jn.replica == job.ReplicaNum {
				nums = append(nums, jn.job)
			}
		}
	}
	var out []schema.MountPoint
	seen := map[string]bool{}
	for _, n := range nums {
		for _, m := range networkMounts(spec, n) {
			k := strings.Join(m.Name, "\x00") + "\x00" + m.Path
			if !seen[k] {
				seen[k] = true
				out = append(out, m)
			}
		}
	}
	return out
}

// externalID is the provider's id of the existing volume a spec registers:
// its volume_id, or a Kubernetes volume's claim_name; "" for a volume hoist
// creates (and owns).
func externalID(s schema.Volume) string {
	return cmp.Or(s.VolumeID, s.ClaimName)
}

// volumeSpec decodes a volume row's spec.
func volumeSpec(v store.Volume) schema.Volume {
	var s schema.Volume
	_ = json.Unmarshal(v.Spec, &s)
	return s
}

// mountCandidates returns the volumes mount m may use for job jobID: those
// of its names that are active and not attached for another job. With none,
// why says what is wrong and wait whether that may pass (a volume being
// created, or in use).
func (c *Controller) mountCandidates(ctx context.Context, m schema.MountPoint, jobID string) (cands []store.Volume, why string, wait bool, err error) {
	var reasons []string
	for _, name := range m.Name {
		v, err := c.st.GetVolumeByName(ctx, c.cfg.Project, name)
		if errors.Is(err, store.ErrNotFound) || (err == nil && v.ToBeDeleted) {
			reasons = append(reasons, fmt.Sprintf("volume %s not found", name))
			continue
		}
		if err != nil {
			return nil, "", false, err
		}
		if err := c.refreshVolume(ctx, &v); err != nil && !errors.Is(err, store.ErrConflict) {
			return nil, "", false, err
		}
		switch v.Status {
		case store.VolumeActive:
		case store.VolumeFailed:
			reasons = append(reasons, fmt.Sprintf("volume %s failed: %s", name, v.StatusMessage))
			continue
		default:
			reasons, wait = append(reasons, fmt.Sprintf("volume %s is %s", name, v.Status)), true
			continue
		}
		atts, err := c.st.ListVolumeAttachments(ctx, v.ID, "")
		if err != nil {
			return nil, "", false, err
		}
		if other := otherJob(atts, jobID); other != "" {
			reasons, wait = append(reasons, fmt.Sprintf("volume %s is in use by job %s", name, other)), true
			continue
		}
		cands = append(cands, v)
	}
	return cands, strings.Join(reasons, "; "), wait, nil
}

// otherJob returns a job other than jobID that one of atts is for.
func otherJob(atts []store.VolumeAttachment, jobID string) string {
	for _, a := range atts {
		if d := decodeAttachment(a); d.JobID != jobID {
			return cmp.Or(d.JobID, "unknown")
		}
	}
	return ""
}

// volumeGate decides, before a submitted job is placed, where its network
// volumes (a multi-node run's master: those of every node, gateMounts) let
// it run. It returns the sites (nil: anywhere), or ends the
// call (done) after it made the job wait (a volume being created or in
// use) or fail (volume_error: a volume missing or failed, or no backend
// and region holding a volume of every mount).
func (c *Controller) volumeGate(ctx context.Context, l store.Lease, job *store.Job, run *store.Run, spec runSpec) (sites []volumeSite, after time.Duration, done bool, err error) {
	first := true
	for _, m := range gateMounts(spec, job) {
		cands, why, wait, err := c.mountCandidates(ctx, m, job.ID)
		if err != nil {
			return nil, 0, true, err
		}
		if len(cands) == 0 {
			if m.Optional {
				continue
			}
			if wait {
				after, err := c.holdJob(ctx, l, job, run, "waiting for volumes: "+why, volumeWaitPoll)
				return nil, after, true, err
			}
			return nil, 0, true, c.setTerminating(ctx, l, job, reasonVolumeError, why)
		}
		if m.Optional {
			continue // an optional mount does not steer placement
		}
		var ms []volumeSite
		for _, v := range cands {
			ms = append(ms, volumeSite{v.Backend, v.Region})
		}
		if first {
			sites, first = ms, false
			continue
		}
		sites = slices.DeleteFunc(sites, func(s volumeSite) bool {
			return !slices.ContainsFunc(ms, func(o volumeSite) bool { return o.on(s.backend, s.region) })
		})
		if len(sites) == 0 {
			return nil, 0, true, c.setTerminating(ctx, l, job, reasonVolumeError,
				"the run's network volumes are not in one backend and region")
		}
	}
	if sites != nil {
		on := slices.DeleteFunc(slices.Clone(sites), func(s volumeSite) bool { return !c.onBackends(spec.Backends, s.backend) })
		if len(on) == 0 {
			return nil, 0, true, c.setTerminating(ctx, l, job, reasonVolumeError,
				fmt.Sprintf("the run's network volumes are on backend %s, not among the run's backends (%s)", sites[0].backend, strings.Join(spec.Backends, ", ")))
		}
		sites = on
	}
	return sites, 0, false, nil
}

// atVolumeSites reports whether an instance may take a job whose volumes
// are at sites (nil: no constraint).
func atVolumeSites(sites []volumeSite, inst store.Instance) bool {
	return sites == nil || slices.ContainsFunc(sites, func(s volumeSite) bool { return s.on(inst.Backend, inst.Region) })
}

// narrowToSites narrows the offers a fleet grows an instance from to the
// volumes' sites: their regions, and their backends among those the job
// names.
func narrowToSites(sites []volumeSite, q *offers.Query, bes []string) []string {
	if sites == nil {
		return bes
	}
	q.Regions = nil
	var out []string
	for _, s := range sites {
		q.Regions = append(q.Regions, s.region)
		if (len(bes) == 0 || containsFold(bes, s.backend)) && !containsFold(out, s.backend) {
			out = append(out, s.backend)
		}
	}
	if len(out) == 0 {
		out = []string{"-"} // the job's backends hold none of its volumes: no offer
	}
	return out
}

// attachVolumes attaches the job's network volumes to its instance before
// its task is created and returns them for the task spec. A volume another
// job claimed meanwhile makes the job wait (after > 0); a refused attach
// fails it (done, with volume_error).
func (c *Controller) attachVolumes(ctx context.Context, l store.Lease, job *store.Job, run *store.Run, spec runSpec) (nvs []api.NetworkVolume, after time.Duration, done bool, err error) {
	mounts := networkMounts(spec, job.JobNum)
	if len(mounts) == 0 {
		return nil, 0, false, nil
	}
	inst, err := c.st.GetInstance(ctx, job.InstanceID)
	if err != nil {
		return nil, 0, true, err
	}
	fail := func(msg string) ([]api.NetworkVolume, time.Duration, bool, error) {
		return nil, 0, true, c.setTerminating(ctx, l, job, reasonVolumeError, msg)
	}
	for _, m := range mounts {
		cands, why, wait, err := c.mountCandidates(ctx, m, job.ID)
		if err != nil {
			return nil, 0, true, err
		}
		i := slices.IndexFunc(cands, func(v store.Volume) bool { return volumeSite{v.Backend, v.Region}.on(inst.Backend, inst.Region) })
		if i < 0 {
			switch {
			case m.Optional:
				continue
			case wait:
				after, err := c.holdJob(ctx, l, job, run, "waiting for volumes: "+why, volumeWaitPoll)
				return nil, after, true, err
			case why == "":
				why = fmt.Sprintf("no volume of %s is in backend %s region %s, where instance %s is", strings.Join(m.Name, ", "), inst.Backend, inst.Region, inst.Name)
			}
			return fail(why)
		}
		v := cands[i]
		vb, ok := c.bes[v.Backend].(backends.VolumeBackend)
		if !ok {
			return fail(fmt.Sprintf("backend %q of volume %s is not configured or has no volumes", v.Backend, v.Name))
		}
		d, won, err := c.claimVolume(ctx, v, inst.ID, job.ID)
		if err != nil {
			return nil, 0, true, err
		}
		if !won {
			after, err := c.holdJob(ctx, l, job, run, fmt.Sprintf("waiting for volumes: volume %s is in use by another job", v.Name), volumeWaitPoll)
			return nil, after, true, err
		}
		if !d.attached() {
			att, err := vb.AttachVolume(ctx, v.ID, inst.ID)
			_ = c.backendFailed(ctx, v.Backend, err)
			if backends.IsStalled(err) {
				_ = c.st.DetachVolume(ctx, v.ID, inst.ID)
				return fail(fmt.Sprintf("attach volume %s: %v", v.Name, err))
			}
			if err != nil {
				return nil, 0, true, fmt.Errorf("attach volume %s: %w", v.Name, err)
			}
			d.DevicePath, d.Claim = att.DevicePath, att.Claim
			if !d.attached() {
				_ = c.st.DetachVolume(ctx, v.ID, inst.ID)
				return fail(fmt.Sprintf("attach volume %s: backend %s gave neither a device nor a claim", v.Name, v.Backend))
			}
			if err := c.recordAttachment(ctx, v.ID, inst.ID, d); err != nil {
				return nil, 0, true, err
			}
			c.event(ctx, "volume", v.Name, v.ID, "attached", run.Revision,
				fmt.Sprintf("volume attached to instance %s at %s for job %s", inst.Name, d.where(), job.JobName))
		}
		vspec := volumeSpec(v)
		nvs = append(nvs, api.NetworkVolume{Name: v.Name, DevicePath: d.DevicePath, Claim: d.Claim, Path: m.Path,
			// A claim is mounted by its pod: nothing to format.
			InitFS: externalID(vspec) == "" && d.Claim == "", ReadOnly: vspec.ReadOnly})
	}
	return nvs, 0, false, nil
}

// claimVolume records that volume v is attached to instance instID for job
// jobID, unless another job holds it. Two jobs claiming at once both write
// and then read: on one instance the last write wins (one row), on two the
// older row does (then the lower instance id); the loser takes its row back.
func (c *Controller) claimVolume(ctx context.Context, v store.Volume, instID, jobID string) (attachmentData, bool, error) {
	atts, err := c.st.ListVolumeAttachments(ctx, v.ID, "")
	if err != nil {
		return attachmentData{}, false, err
	}
	for _, a := range atts {
		if d := decodeAttachment(a); d.JobID == jobID && a.InstanceID == instID {
			return d, true, nil
		}
	}
	if otherJob(atts, jobID) != "" {
		return attachmentData{}, false, nil
	}
	d := attachmentData{JobID: jobID}
	if err := c.recordAttachment(ctx, v.ID, instID, d); err != nil {
		return attachmentData{}, false, err
	}
	atts, err = c.st.ListVolumeAttachments(ctx, v.ID, "")
	if err != nil {
		return attachmentData{}, false, err
	}
	var mine *store.VolumeAttachment
	for i, a := range atts {
		if a.InstanceID == instID {
			mine = &atts[i]
		}
	}
	if mine == nil || decodeAttachment(*mine).JobID != jobID {
		return attachmentData{}, false, nil // another job on this instance wrote last
	}
	for _, a := range atts {
		if a.InstanceID != instID && decodeAttachment(a).JobID != jobID &&
			(a.CreatedAt.Before(mine.CreatedAt) || (a.CreatedAt.Equal(mine.CreatedAt) && a.InstanceID < instID)) {
			if err := c.st.DetachVolume(ctx, v.ID, instID); err != nil {
				return attachmentData{}, false, err
			}
			return attachmentData{}, false, nil
		}
	}
	return d, true, nil
}

// detachVolumes detaches the volumes attached for a terminating job, whose
// task is gone (its volumes unmounted), and records when a job last used
// each. It returns how long to wait while a detach is under way; a detach
// that takes longer than max(60 s, stop_duration) is forced.
func (c *Controller) detachVolumes(ctx context.Context, job *store.Job, spec runSpec) (time.Duration, error) {
	if job.InstanceID == "" {
		return 0, nil
	}
	atts, err := c.st.ListVolumeAttachments(ctx, "", job.InstanceID)
	if err != nil {
		return 0, err
	}
	forceAfter := max(minForceDetach, time.Duration(spec.StopDuration)*time.Second)
	pending := false
	for _, a := range atts {
		d := decodeAttachment(a)
		if d.JobID != job.ID {
			continue
		}
		v, err := c.st.GetVolume(ctx, a.VolumeID)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return 0, err
		}
		now := c.now().UTC()
		// A terminated instance took its attachments with it.
		inst, ierr := c.st.GetInstance(ctx, a.InstanceID)
		gone := errors.Is(ierr, store.ErrNotFound) || (ierr == nil && inst.Status == store.InstanceTerminated)
		if vb, ok := c.bes[v.Backend].(backends.VolumeBackend); ok && err == nil && d.attached() && !gone {
			if d.DetachStartedAt == nil {
				d.DetachStartedAt = &now
				if err := c.recordAttachment(ctx, a.VolumeID, a.InstanceID, d); err != nil {
					return 0, err
				}
			}
			force := now.Sub(*d.DetachStartedAt) >= forceAfter
			err := c.backendFailed(ctx, v.Backend, vb.DetachVolume(ctx, v.ID, job.InstanceID, force))
			if errors.Is(err, backends.ErrNotYetTerminated) || backends.KindOf(err) == backends.KindWait {
				pending = true
				continue
			}
			if err != nil && !errors.Is(err, backends.ErrNotFound) { // a volume or instance gone is detached
				return 0, fmt.Errorf("detach volume %s: %w", v.Name, err)
			}
		}
		if err := c.st.DetachVolume(ctx, a.VolumeID, a.InstanceID); err != nil {
			return 0, err
		}
		if v.ID != "" {
			if err := c.volumeUsed(ctx, v.ID, now); err != nil {
				return 0, err
			}
			c.event(ctx, "volume", v.Name, v.ID, "detached", "", "volume detached after job "+job.JobName)
		}
	}
	if pending {
		return volumeWaitPoll, nil
	}
	return 0, nil
}

// volumeUsed records that a job last used volume id at t.
func (c *Controller) volumeUsed(ctx context.Context, id string, t time.Time) error {
	for range 5 {
		v, err := c.st.GetVolume(ctx, id)
		if err != nil {
			return err
		}
		v.LastJobProcessedAt = t
		err = c.st.UpdateVolume(ctx, &v)
		if !errors.Is(err, store.ErrConflict) {
			return err
		}
	}
	return fmt.Errorf("record volume %s use: %w", id, store.ErrConflict)
}

// volumeSweepInterval is how often volumes are swept (dstack's
// process_idle_volumes runs every 60 s).
const volumeSweepInterval = time.Minute

// volumeLoop sweeps volumes every volumeSweepInterval.
func (c *Controller) volumeLoop(ctx context.Context) {
	every(ctx, volumeSweepInterval, c.sweepVolumes)
}

// sweepVolumes drops the attachment rows of finished jobs whose instance is
// gone (the provider detached the volume with the instance), then deletes
// the unattached volumes whose deletion waited for a detach, and the owned,
// active, unattached ones unused for longer than their
// auto_cleanup_duration (since a job last used them, or since creation).
func (c *Controller) sweepVolumes(ctx context.Context) {
	vols, err := c.st.ListVolumes(ctx, store.InfraFilter{Project: c.cfg.Project, Limit: everyRow})
	if err != nil {
		c.log.Warn("list volumes failed", "error", err)
		return
	}
	now := c.now()
	for _, v := range vols {
		if err := c.refreshVolume(ctx, &v); err != nil {
			c.log.Warn("refresh volume failed", "volume", v.Name, "error", err)
			continue
		}
		atts, err := c.st.ListVolumeAttachments(ctx, v.ID, "")
		if err != nil {
			c.log.Warn("list volume attachments failed", "volume", v.Name, "error", err)
			continue
		}
		attached := 0
		for _, a := range atts {
			if c.staleAttachment(ctx, a) {
				if err := c.st.DetachVolume(ctx, a.VolumeID, a.InstanceID); err != nil {
					c.log.Warn("drop stale volume attachment failed", "volume", v.Name, "error", err)
				}
				continue
			}
			attached++
		}
		if attached > 0 {
			continue
		}
		if v.ToBeDeleted {
			err := c.deleteVolumeNow(ctx, "", &v, "volume deleted after its last use")
			switch {
			case backends.KindOf(err) == backends.KindWait:
				c.log.Info("volume not deletable yet", "volume", v.Name, "reason", err)
			case err != nil:
				c.log.Warn("delete volume failed", "volume", v.Name, "error", err)
			}
			continue
		}
		spec := volumeSpec(v)
		if v.Status != store.VolumeActive || externalID(spec) != "" || spec.AutoCleanupDuration <= 0 {
			continue
		}
		since := v.CreatedAt
		if v.LastJobProcessedAt.After(since) {
			since = v.LastJobProcessedAt
		}
		idle := time.Duration(spec.AutoCleanupDuration) * time.Second
		if now.Sub(since) < idle {
			continue
		}
		if err := c.deleteVolumeNow(ctx, "", &v, fmt.Sprintf("volume deleted: unused for %s (auto_cleanup_duration)", idle)); err != nil {
			c.log.Warn("auto clean-up of volume failed", "volume", v.Name, "error", err)
		}
	}
}

// staleAttachment reports whether an attachment row outlived its use: its
// job finished (or is unknown) and its instance is terminated or gone.
func (c *Controller) staleAttachment(ctx context.Context, a store.VolumeAttachment) bool {
	if d := decodeAttachment(a); d.JobID != "" {
		if j, err := c.st.GetJob(ctx, d.JobID); err == nil && !store.IsJobFinished(j.Status) {
			return false
		}
	}
	inst, err := c.st.GetInstance(ctx, a.InstanceID)
	return errors.Is(err, store.ErrNotFound) || (err == nil && inst.Status == store.InstanceTerminated)
}
