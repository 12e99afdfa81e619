package reconciler

import (
	"errors"
	"strings"
	"testing"
	"time"

	"hoist/backends"
	"hoist/backends/fake"
	"hoist/backends/offers"
	"hoist/store"
)

// Tests of network volumes against backends/fake, named gcp here (a volume
// spec names one of dstack's volume backends).

const (
	dataVolume = "type: volume\nname: data\nbackend: gcp\nregion: west\nsize: 10GB\ntags: {team: ml}\n"
	// volFleet grows up to two instances from offers in two regions.
	volFleet = "type: fleet\nname: cloud\nnodes: 0..2\nidle_duration: 1h\n"
)

// withVolumeBackend gives the controller a fake backend named gcp with
// offers in regions east (cheaper) and west.
func (f *fixture) withVolumeBackend(createFor ...time.Duration) *fake.Backend {
	f.t.Helper()
	var cf time.Duration
	if len(createFor) > 0 {
		cf = createFor[0]
	}
	be := fake.New(fake.Config{Name: "gcp", Now: f.clock.Now, VolumeCreateFor: cf, Offers: []offers.Offer{
		{Instance: "small", Region: "east", CPUs: 4, MemoryGB: 16, DiskGB: 100, Price: 0.05, Availability: offers.AvailabilityAvailable},
		{Instance: "small", Region: "west", CPUs: 4, MemoryGB: 16, DiskGB: 100, Price: 0.10, Availability: offers.AvailabilityAvailable},
	}})
	f.t.Cleanup(func() { be.Close() })
	c, err := New(Config{Now: f.clock.Now, Owner: "test", UnreachableGrace: time.Minute},
		Deps{Store: f.st, Source: f.c.src, Backends: map[string]backends.Backend{"gcp": be}})
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { c.stopPumps(); c.pumpWG.Wait(); c.closeConns() })
	f.c = c
	return be
}

func (f *fixture) volume(name string) store.Volume {
	f.t.Helper()
	v, err := f.st.GetVolumeByName(f.ctx, store.DefaultProject, name)
	if err != nil {
		f.t.Fatalf("volume %s: %v", name, err)
	}
	return v
}

// onlyVolume returns the fake provider's only volume.
func onlyVolume(t *testing.T, be *fake.Backend) fake.VolumeState {
	t.Helper()
	vols := be.Volumes()
	if len(vols) != 1 {
		t.Fatalf("provider volumes = %+v, want one", vols)
	}
	for _, v := range vols {
		return v
	}
	return fake.VolumeState{}
}

// runVolumeJob runs run name's job to running on a grown instance and
// returns the instance.
func (f *fixture) runVolumeJob(name string) store.Instance {
	f.t.Helper()
	inst := f.provision(name)
	if inst.Status != store.InstanceIdle {
		f.t.Fatalf("instance %s is %s", inst.Name, inst.Status)
	}
	f.stepJob(name, store.JobProvisioning)
	f.stepJob(name, store.JobRunning)
	return inst
}

// TestWorkers_volumeAttachedBeforeTheTaskAndDetachedAfter: a `type: volume`
// is created at its backend with its tags; a task mounting it (short form
// `data:/data`) gets an instance in the volume's region although another
// region is cheaper, the volume is attached before the task is created (the
// fake shim fails a task whose volume is not attached) and the device path
// reaches the task; once the job is over it is detached and its last use
// recorded.
func TestWorkers_volumeAttachedBeforeTheTaskAndDetachedAfter(t *testing.T) {
	f := newFixture(t, map[string]string{
		"fleet.dstack.yml": volFleet,
		"vol.dstack.yml":   dataVolume,
		"task.dstack.yml":  "type: task\nname: train\nimage: busybox\ncommands: [echo hi]\nvolumes: [data:/data]\n",
	})
	be := f.withVolumeBackend()
	if res := f.sync(); res != resultSynced {
		t.Fatalf("sync = %s", res)
	}
	v := f.volume("data")
	pv := onlyVolume(t, be)
	if v.Status != store.VolumeActive || v.ExternalID != pv.ProviderID || pv.Region != "west" || !pv.Owned {
		t.Fatalf("volume = %s %q, provider %+v; want active in west", v.Status, v.ExternalID, pv)
	}
	if d, err := be.DescribeVolume(f.ctx, v.ID); err != nil || d.Tags["team"] != "ml" || d.Tags[backends.TagResource] != "volume/data" {
		t.Errorf("provider tags = %v, %v; want the spec's and hoist's", d.Tags, err)
	}

	inst := f.runVolumeJob("train")
	if inst.Region != "west" {
		t.Errorf("instance in %s, want west (the volume's region)", inst.Region)
	}
	if pv := onlyVolume(t, be); pv.AttachedTo != inst.ID {
		t.Errorf("volume attached to %q, want %s", pv.AttachedTo, inst.ID)
	}
	atts, err := f.st.ListVolumeAttachments(f.ctx, v.ID, "")
	if err != nil || len(atts) != 1 || decodeAttachment(atts[0]).DevicePath != fake.DevicePrefix+pv.ProviderID {
		t.Fatalf("attachments = %+v, %v", atts, err)
	}

	f.reconcileJobs("train") // hands the job to its pump
	f.waitJob("train", store.JobTerminating)
	f.clock.Advance(time.Minute)
	j := f.stepJob("train", store.JobDone)
	if out := f.output(j.ID); out != "hi\n" {
		t.Errorf("output %q", out)
	}
	if pv := onlyVolume(t, be); pv.AttachedTo != "" {
		t.Errorf("volume still attached to %s after the job", pv.AttachedTo)
	}
	if atts, _ := f.st.ListVolumeAttachments(f.ctx, v.ID, ""); len(atts) != 0 {
		t.Errorf("attachment rows after the job: %+v", atts)
	}
	if got := f.volume("data").LastJobProcessedAt; !got.Equal(f.clock.Now()) {
		t.Errorf("last_job_processed_at = %v, want %v", got, f.clock.Now())
	}
}

// TestWorkers_volumeInUseMakesTheNextJobWait: while one job has the volume
// attached, a second run's job mounting it waits (submitted, saying why);
// once the first is done and the volume detached, it attaches and runs.
func TestWorkers_volumeInUseMakesTheNextJobWait(t *testing.T) {
	f := newFixture(t, map[string]string{
		"fleet.dstack.yml": volFleet,
		"vol.dstack.yml":   dataVolume,
		"a.dstack.yml":     "type: task\nname: first\nimage: busybox\ncommands: [sleep 1h]\nvolumes: [{name: data, path: /data}]\n",
		"b.dstack.yml":     "type: task\nname: second\nimage: busybox\ncommands: [echo second]\nvolumes: [data:/mnt]\n",
	})
	be := f.withVolumeBackend()
	if res := f.sync(); res != resultSynced {
		t.Fatalf("sync = %s", res)
	}
	first := f.runVolumeJob("first")
	f.reconcileJobs("second")
	j := f.job("second")
	if j.Status != store.JobSubmitted || j.InstanceID != "" || !strings.Contains(j.StatusMessage, "volume data is in use by job") {
		t.Fatalf("second job = %s on %q (%q), want submitted waiting for the volume", j.Status, j.InstanceID, j.StatusMessage)
	}

	// The first job is stopped: its task goes, the volume is detached.
	if err := f.c.terminateJob(f.ctx, f.job("first").ID, reasonTerminatedByUser, "stop"); err != nil {
		t.Fatal(err)
	}
	f.stepJob("first", store.JobTerminated)
	if pv := onlyVolume(t, be); pv.AttachedTo != "" {
		t.Fatalf("volume attached to %s after the first job", pv.AttachedTo)
	}
	// The second job takes the idle instance of the volume's region.
	f.stepJob("second", store.JobProvisioning)
	j = f.stepJob("second", store.JobRunning)
	if j.InstanceID != first.ID {
		t.Errorf("second job on %s, want the idle instance %s in the volume's region", j.InstanceID, first.ID)
	}
	if pv := onlyVolume(t, be); pv.AttachedTo != first.ID {
		t.Errorf("volume attached to %q, want %s", pv.AttachedTo, first.ID)
	}
}

// TestWorkers_volumeErrors: a run mounting a volume that does not exist, a
// volume whose backend has none, or a volume on a backend the run does not
// allow, fails with volume_error saying why.
func TestWorkers_volumeErrors(t *testing.T) {
	f := newFixture(t, map[string]string{
		"fleet.dstack.yml": volFleet,
		"vol.dstack.yml":   "type: volume\nname: elsewhere\nbackend: aws\nregion: us-east-1\nsize: 1GB\n",
		"a.dstack.yml":     "type: task\nname: missing\nimage: busybox\ncommands: [echo]\nvolumes: [nope:/data]\n",
		"b.dstack.yml":     "type: task\nname: nobackend\nimage: busybox\ncommands: [echo]\nvolumes: [elsewhere:/data]\n",
		"c.dstack.yml":     "type: task\nname: otherbackend\nimage: busybox\ncommands: [echo]\nbackends: [aws]\nvolumes: [data:/data]\n",
		"d.dstack.yml":     dataVolume,
	})
	f.withVolumeBackend()
	if res := f.sync(); res != resultSynced {
		t.Fatalf("sync = %s: %v", res, f.syncState().Errors)
	}
	if v := f.volume("elsewhere"); v.Status != store.VolumeFailed || !strings.Contains(v.StatusMessage, `backend "aws"`) {
		t.Errorf("volume on an unconfigured backend = %s %q, want failed", v.Status, v.StatusMessage)
	}
	for name, want := range map[string]string{"missing": "volume nope not found", "nobackend": "volume elsewhere failed",
		"otherbackend": "on backend gcp, not among the run's backends (aws)"} {
		f.reconcileJobs(name)
		j := f.job(name)
		if j.Status != store.JobTerminating || j.TerminationReason != reasonVolumeError || !strings.Contains(j.TerminationMessage, want) {
			t.Errorf("job %s = %s %s %q, want terminating with volume_error %q", name, j.Status, j.TerminationReason, j.TerminationMessage, want)
		}
	}
}

// TestWorkers_volumeAutoCleanup: an owned volume unused for its
// auto_cleanup_duration is deleted at its backend by the volume sweep, not
// before and not while attached; a registered one is never cleaned up.
func TestWorkers_volumeAutoCleanup(t *testing.T) {
	f := newFixture(t, map[string]string{
		"fleet.dstack.yml": volFleet,
		"vol.dstack.yml":   "type: volume\nname: scratch\nbackend: gcp\nregion: west\nsize: 1GB\nauto_cleanup_duration: 1h\n",
		"task.dstack.yml":  "type: task\nname: use\nimage: busybox\ncommands: [sleep 1h]\nvolumes: [scratch:/s]\n",
	})
	be := f.withVolumeBackend()
	if res := f.sync(); res != resultSynced {
		t.Fatalf("sync = %s", res)
	}
	f.runVolumeJob("use")
	f.clock.Advance(2 * time.Hour)
	f.c.sweepVolumes(f.ctx)
	if len(be.Volumes()) != 1 || f.volume("scratch").Deleted {
		t.Fatalf("an attached volume was cleaned up")
	}
	if err := f.c.terminateJob(f.ctx, f.job("use").ID, reasonTerminatedByUser, "stop"); err != nil {
		t.Fatal(err)
	}
	f.stepJob("use", store.JobTerminated)
	f.clock.Advance(59 * time.Minute)
	f.c.sweepVolumes(f.ctx)
	if len(be.Volumes()) != 1 {
		t.Fatalf("volume cleaned up 59 min after its last use, want after 1h")
	}
	f.clock.Advance(2 * time.Minute)
	f.c.sweepVolumes(f.ctx)
	if len(be.Volumes()) != 0 {
		t.Errorf("provider volumes = %+v, want the idle volume deleted", be.Volumes())
	}
	if _, err := f.st.GetVolumeByName(f.ctx, store.DefaultProject, "scratch"); err == nil {
		t.Errorf("volume row still live after clean-up")
	}
}

// TestWorkers_volumeDeleteWaitsForDetach: removing a pruned volume's spec
// while a job has it attached deletes it only once the job let go.
func TestWorkers_volumeDeleteWaitsForDetach(t *testing.T) {
	f := newFixture(t, map[string]string{
		"fleet.dstack.yml": volFleet,
		"vol.dstack.yml":   dataVolume + "hoist: {prune: true}\n",
		"task.dstack.yml":  "type: task\nname: use\nimage: busybox\ncommands: [sleep 1h]\nvolumes: [data:/data]\n",
	})
	be := f.withVolumeBackend()
	if res := f.sync(); res != resultSynced {
		t.Fatalf("sync = %s", res)
	}
	f.runVolumeJob("use")
	f.remove("vol.dstack.yml")
	if res := f.sync(); res != resultSynced {
		t.Fatalf("sync = %s", res)
	}
	vols, err := f.st.ListVolumes(f.ctx, store.InfraFilter{})
	if err != nil || len(vols) != 1 || !vols[0].ToBeDeleted || vols[0].Deleted || len(be.Volumes()) != 1 {
		t.Fatalf("volumes = %+v, %v; want the attached one marked to be deleted, still there", vols, err)
	}
	if err := f.c.terminateJob(f.ctx, f.job("use").ID, reasonTerminatedByUser, "stop"); err != nil {
		t.Fatal(err)
	}
	f.stepJob("use", store.JobTerminated)
	f.c.sweepVolumes(f.ctx)
	if len(be.Volumes()) != 0 {
		t.Errorf("provider volumes = %+v after the detach, want none", be.Volumes())
	}
}

// TestWorkers_volumeRegisteredAndOptional: a `volume_id` volume is
// registered, not created, attached for a job and only forgotten when its
// spec is pruned; an `optional` mount of a volume that does not exist is
// skipped, and the job runs anywhere.
func TestWorkers_volumeRegisteredAndOptional(t *testing.T) {
	f := newFixture(t, map[string]string{
		"fleet.dstack.yml": volFleet,
		"vol.dstack.yml":   "type: volume\nname: ext\nbackend: gcp\nregion: west\nvolume_id: disk-1\nhoist: {prune: true}\n",
		"task.dstack.yml": "type: task\nname: use\nimage: busybox\ncommands: [echo]\n" +
			"volumes: [ext:/ext, {name: nope, path: /opt, optional: true}]\n",
		"opt.dstack.yml": "type: task\nname: opt\nimage: busybox\ncommands: [echo]\nvolumes: [{name: nope, path: /opt, optional: true}]\n",
	})
	be := f.withVolumeBackend()
	be.AddExternalVolume("disk-1", "west", 50)
	if res := f.sync(); res != resultSynced {
		t.Fatalf("sync = %s: %v", res, f.syncState().Errors)
	}
	v := f.volume("ext")
	if v.Status != store.VolumeActive || v.ExternalID != "disk-1" || v.SizeGB != 50 {
		t.Fatalf("registered volume = %s %q %g GB", v.Status, v.ExternalID, v.SizeGB)
	}
	inst := f.runVolumeJob("use")
	if pv := be.Volumes()["disk-1"]; pv.AttachedTo != inst.ID || pv.Owned {
		t.Errorf("external volume = %+v, want attached to %s", pv, inst.ID)
	}
	f.reconcileJobs("use")
	f.waitJob("use", store.JobTerminating)
	f.stepJob("use", store.JobDone)

	j := f.runVolumeJobAnywhere("opt")
	if j.Status != store.JobRunning {
		t.Errorf("job with an optional missing volume = %s (%s %q)", j.Status, j.TerminationReason, j.TerminationMessage)
	}

	f.remove("vol.dstack.yml")
	if res := f.sync(); res != resultSynced {
		t.Fatalf("sync = %s: %v", res, f.syncState().Errors)
	}
	if pv, ok := be.Volumes()["disk-1"]; !ok || pv.ID != "" {
		t.Errorf("after pruning the spec the provider has %+v (%v), want the external volume kept, unregistered", pv, ok)
	}
}

// runVolumeJobAnywhere runs run name's job to running on any free or grown
// instance.
func (f *fixture) runVolumeJobAnywhere(name string) store.Job {
	f.t.Helper()
	f.reconcileJobs(name)
	if j := f.job(name); j.Status == store.JobSubmitted && j.InstanceID != "" {
		for range 10 {
			f.reconcileInstance(j.InstanceID)
		}
	}
	return f.stepJob(name, store.JobRunning)
}

// TestWorkers_volumeStillBeingCreatedMakesTheJobWait: a volume the provider
// is still creating is provisioning; a job mounting it waits, and runs once
// the provider has it available.
func TestWorkers_volumeStillBeingCreatedMakesTheJobWait(t *testing.T) {
	f := newFixture(t, map[string]string{
		"fleet.dstack.yml": volFleet,
		"vol.dstack.yml":   dataVolume,
		"task.dstack.yml":  "type: task\nname: train\nimage: busybox\ncommands: [echo hi]\nvolumes: [data:/data]\n",
	})
	be := f.withVolumeBackend(time.Minute)
	if res := f.sync(); res != resultSynced {
		t.Fatalf("sync = %s", res)
	}
	if v := f.volume("data"); v.Status != store.VolumeProvisioning {
		t.Fatalf("volume = %s, want provisioning while the provider creates it", v.Status)
	}
	f.reconcileJobs("train")
	if j := f.job("train"); j.Status != store.JobSubmitted || !strings.Contains(j.StatusMessage, "volume data is provisioning") {
		t.Fatalf("job = %s (%q), want submitted waiting for the volume", j.Status, j.StatusMessage)
	}
	f.clock.Advance(time.Minute)
	inst := f.runVolumeJob("train")
	if v := f.volume("data"); v.Status != store.VolumeActive {
		t.Errorf("volume = %s, want active", v.Status)
	}
	if pv := onlyVolume(t, be); pv.AttachedTo != inst.ID {
		t.Errorf("volume attached to %q, want %s", pv.AttachedTo, inst.ID)
	}
}

// TestWorkers_volumeFreedWhenItsInstanceIsGone: the instance of a job with
// a volume attached disappears at the provider; the job ends without a
// detach call that cannot succeed, and the volume is free for the next job.
func TestWorkers_volumeFreedWhenItsInstanceIsGone(t *testing.T) {
	f := newFixture(t, map[string]string{
		"fleet.dstack.yml": volFleet,
		"vol.dstack.yml":   dataVolume,
		"task.dstack.yml":  "type: task\nname: use\nimage: busybox\ncommands: [sleep 1h]\nvolumes: [data:/data]\n",
	})
	be := f.withVolumeBackend()
	if res := f.sync(); res != resultSynced {
		t.Fatalf("sync = %s", res)
	}
	inst := f.runVolumeJob("use")
	if err := be.Terminate(f.ctx, inst.ID); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(2 * time.Minute) // past the unreachable grace
	deadline := time.Now().Add(5 * time.Second)
	for j := f.job("use"); !store.IsJobFinished(j.Status); j = f.job("use") {
		if time.Now().After(deadline) {
			t.Fatalf("job = %s (%s %q), instance %s; want the job finished", j.Status, j.TerminationReason, j.TerminationMessage, f.instance(inst.ID).Status)
		}
		f.reconcileInstance(inst.ID)
		if !f.c.pumping(j.ID) {
			if _, err := f.c.reconcileJob(f.ctx, j.ID); err != nil {
				t.Logf("reconcile job: %v", err)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if atts, _ := f.st.ListVolumeAttachments(f.ctx, f.volume("data").ID, ""); len(atts) != 0 {
		t.Errorf("attachments after the instance went: %+v", atts)
	}
}

// TestWorkers_volumeCreateRetriedAfterATransientError: a volume whose
// create failed transiently stays submitted, saying why, and is created
// when a job waiting for it looks again; a stalled error fails it.
func TestWorkers_volumeCreateRetriedAfterATransientError(t *testing.T) {
	f := newFixture(t, map[string]string{
		"fleet.dstack.yml": volFleet,
		"vol.dstack.yml":   dataVolume,
		"task.dstack.yml":  "type: task\nname: train\nimage: busybox\ncommands: [echo hi]\nvolumes: [data:/data]\n",
	})
	be := f.withVolumeBackend()
	be.SetCreateError(backends.Transient(errors.New("RequestLimitExceeded")))
	if res := f.sync(); res != resultSynced {
		t.Fatalf("sync = %s", res)
	}
	if v := f.volume("data"); v.Status != store.VolumeSubmitted || !strings.Contains(v.StatusMessage, "RequestLimitExceeded") {
		t.Fatalf("volume = %s %q, want submitted with the error", v.Status, v.StatusMessage)
	}
	f.reconcileJobs("train")
	if j := f.job("train"); j.Status != store.JobSubmitted || !strings.Contains(j.StatusMessage, "volume data is submitted") {
		t.Fatalf("job = %s (%q), want waiting for the volume", j.Status, j.StatusMessage)
	}
	be.SetCreateError(nil)
	f.runVolumeJob("train")
	if v := f.volume("data"); v.Status != store.VolumeActive || v.StatusMessage != "" {
		t.Errorf("volume = %s %q, want active", v.Status, v.StatusMessage)
	}

	f.write("vol2.dstack.yml", "type: volume\nname: other\nbackend: gcp\nregion: west\nsize: 1GB\n")
	be.SetCreateError(backends.Stalled(errors.New("InvalidParameterValue")))
	if res := f.sync(); res != resultSynced {
		t.Fatalf("sync = %s", res)
	}
	if v := f.volume("other"); v.Status != store.VolumeFailed || !strings.Contains(v.StatusMessage, "InvalidParameterValue") {
		t.Errorf("volume = %s %q, want failed", v.Status, v.StatusMessage)
	}
}

// TestWorkers_volumeClaimedByOneOfTwoPlacedJobs: two jobs mounting the same
// volume are placed at once, on two instances; the first to attach it runs,
// the other waits (provisioning, saying why) until it is detached.
func TestWorkers_volumeClaimedByOneOfTwoPlacedJobs(t *testing.T) {
	f := newFixture(t, map[string]string{
		"fleet.dstack.yml": volFleet,
		"vol.dstack.yml":   dataVolume,
		"a.dstack.yml":     "type: task\nname: first\nimage: busybox\ncommands: [sleep 1h]\nvolumes: [data:/data]\n",
		"b.dstack.yml":     "type: task\nname: second\nimage: busybox\ncommands: [echo second]\nvolumes: [data:/data]\n",
	})
	be := f.withVolumeBackend()
	if res := f.sync(); res != resultSynced {
		t.Fatalf("sync = %s", res)
	}
	i1, i2 := f.provision("first"), f.provision("second")
	if i1.ID == i2.ID {
		t.Fatalf("both jobs on %s", i1.ID)
	}
	f.stepJob("first", store.JobProvisioning)
	f.stepJob("second", store.JobProvisioning)
	f.stepJob("first", store.JobRunning)
	f.reconcileJobs("second")
	if j := f.job("second"); j.Status != store.JobProvisioning || !strings.Contains(j.StatusMessage, "volume data is in use by job") {
		t.Fatalf("second job = %s (%q), want provisioning waiting for the volume", j.Status, j.StatusMessage)
	}
	if pv := onlyVolume(t, be); pv.AttachedTo != i1.ID {
		t.Fatalf("volume attached to %q, want %s", pv.AttachedTo, i1.ID)
	}
	if err := f.c.terminateJob(f.ctx, f.job("first").ID, reasonTerminatedByUser, "stop"); err != nil {
		t.Fatal(err)
	}
	f.stepJob("first", store.JobTerminated)
	f.stepJob("second", store.JobRunning)
	if pv := onlyVolume(t, be); pv.AttachedTo != i2.ID {
		t.Errorf("volume attached to %q, want %s", pv.AttachedTo, i2.ID)
	}
}
