package reconciler

import (
	"slices"
	"strings"
	"testing"
	"time"

	"hoist/agents/api"
	"hoist/backends"
	"hoist/backends/fake"
	"hoist/backends/offers"
	"hoist/store"
)

// Tests of the reconciler's side of the Kubernetes backend against
// backends/fake named kubernetes: a runner-runtime backend whose shim API
// the server answers (as the pod shim does), whose volumes attach as claims
// (as PersistentVolumeClaims do) and whose shim can end a task with the
// reason the pod shim gives an unschedulable pod. The backend itself is tested
// against a real cluster (backends/kubernetes, e2e).

// withKubernetesFake gives the controller a fake backend named kubernetes,
// with volumes attached as claims and its offers in region "ctx" (a
// cluster's context).
func (f *fixture) withKubernetesFake() *fake.Backend {
	f.t.Helper()
	return f.withContainerFake(fake.Config{Name: "kubernetes", VolumeClaims: true})
}

// withContainerFake is withKubernetesFake for the fake cfg describes (its
// name, traits), with the runner runtime.
func (f *fixture) withContainerFake(cfg fake.Config) *fake.Backend {
	f.t.Helper()
	cfg.Now, cfg.Runtime = f.clock.Now, backends.RuntimeRunner
	cfg.Offers = []offers.Offer{
		{Instance: "localhost", Region: "ctx", CPUs: 4, MemoryGB: 16, DiskGB: 100, Availability: offers.AvailabilityAvailable},
	}
	be := fake.New(cfg)
	f.t.Cleanup(func() { be.Close() })
	c, err := New(Config{Now: f.clock.Now, Owner: "test", UnreachableGrace: time.Minute},
		Deps{Store: f.st, Source: f.c.src, Backends: map[string]backends.Backend{cfg.Name: be}})
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { c.stopPumps(); c.pumpWG.Wait(); c.closeConns() })
	f.c = c
	return be
}

// taskVolumes returns the network volumes the shim of instance was given
// for run name's job.
func (f *fixture) taskVolumes(be *fake.Backend, inst store.Instance, name string) []api.NetworkVolume {
	f.t.Helper()
	ts, ok := be.TaskSpec(inst.ID, f.job(name).ID)
	if !ok {
		f.t.Fatalf("instance %s has no task for %s", inst.Name, name)
	}
	return ts.NetworkVolumes
}

// TestWorkers_kubernetesClaimIsRegisteredAndMountedReadOnly: a Kubernetes
// volume naming an existing claim (claim_name, read_only, no region) is
// registered, takes the backend's region, and reaches the task as that
// claim, read-only, with nothing to format; the attachment row keeps the
// claim, the job finishes and detaches it, and the claim stays the user's.
func TestWorkers_kubernetesClaimIsRegisteredAndMountedReadOnly(t *testing.T) {
	f := newFixture(t, map[string]string{
		"fleet.dstack.yml": volFleet,
		"vol.dstack.yml":   "type: volume\nname: shared\nbackend: kubernetes\nclaim_name: team-data\nread_only: true\n",
		"task.dstack.yml":  "type: task\nname: train\nimage: busybox\ncommands: [echo hi]\nvolumes: [shared:/data]\n",
	})
	be := f.withKubernetesFake()
	be.AddExternalVolume("team-data", "ctx", 5)
	if res := f.sync(); res != resultSynced {
		t.Fatalf("sync = %s: %v", res, f.syncState().Errors)
	}
	v := f.volume("shared")
	if v.Status != store.VolumeActive || v.ExternalID != "team-data" || v.Region != "ctx" {
		t.Fatalf("volume = %s %q in %q (%s), want active team-data in the backend's region ctx", v.Status, v.ExternalID, v.Region, v.StatusMessage)
	}

	inst := f.runVolumeJob("train")
	want := []api.NetworkVolume{{Name: "shared", Claim: "team-data", Path: "/data", ReadOnly: true}}
	if got := f.taskVolumes(be, inst, "train"); !slices.Equal(got, want) {
		t.Errorf("task volumes = %+v, want %+v", got, want)
	}
	atts, err := f.st.ListVolumeAttachments(f.ctx, v.ID, "")
	if err != nil || len(atts) != 1 || decodeAttachment(atts[0]).Claim != "team-data" || decodeAttachment(atts[0]).DevicePath != "" {
		t.Fatalf("attachments = %+v, %v; want one with the claim", atts, err)
	}

	f.reconcileJobs("train") // hands the job to its pump
	f.waitJob("train", store.JobTerminating)
	f.stepJob("train", store.JobDone)
	if pv := be.Volumes()["team-data"]; pv.AttachedTo != "" || pv.Owned {
		t.Errorf("claim after the job = %+v, want detached and still the user's", pv)
	}
	if atts, _ := f.st.ListVolumeAttachments(f.ctx, v.ID, ""); len(atts) != 0 {
		t.Errorf("attachment rows after the job: %+v", atts)
	}
}

// TestWorkers_kubernetesVolumeIsCreatedAsAClaim: a Kubernetes volume with a
// size is created with its storage_class_name and access_modes, in the
// backend's region, and its task mounts the claim read-write.
func TestWorkers_kubernetesVolumeIsCreatedAsAClaim(t *testing.T) {
	f := newFixture(t, map[string]string{
		"fleet.dstack.yml": volFleet,
		"vol.dstack.yml":   "type: volume\nname: data\nbackend: kubernetes\nsize: 1GB\nstorage_class_name: fast\naccess_modes: [ReadWriteMany]\n",
		"task.dstack.yml":  "type: task\nname: train\nimage: busybox\ncommands: [echo hi]\nvolumes: [{name: data, path: /data}]\n",
	})
	be := f.withKubernetesFake()
	if res := f.sync(); res != resultSynced {
		t.Fatalf("sync = %s: %v", res, f.syncState().Errors)
	}
	pv := onlyVolume(t, be)
	if pv.StorageClass != "fast" || !slices.Equal(pv.AccessModes, []string{"ReadWriteMany"}) || !pv.Owned {
		t.Errorf("provider volume = %+v, want storage class fast, ReadWriteMany, owned", pv)
	}
	if v := f.volume("data"); v.Status != store.VolumeActive || v.Region != "ctx" {
		t.Fatalf("volume = %s in %q, want active in ctx", v.Status, v.Region)
	}
	inst := f.runVolumeJob("train")
	want := []api.NetworkVolume{{Name: "data", Claim: pv.ProviderID, Path: "/data"}}
	if got := f.taskVolumes(be, inst, "train"); !slices.Equal(got, want) {
		t.Errorf("task volumes = %+v, want %+v", got, want)
	}
}

// unschedulable is the pod shim's message for a pod left unschedulable.
const unschedulable = "0/1 nodes are available: 1 Insufficient cpu"

// TestWorkers_taskWithoutCapacityIsRetriedOnNoCapacity: a task the shim
// ends as failed_to_start_due_to_no_capacity (the Kubernetes backend's pod
// left unschedulable past its limit) fails the job with that reason and
// "no capacity"; with `retry: on_events: [no-capacity]` the run is
// resubmitted after the back-off and, capacity back, its next submission
// runs to done.
func TestWorkers_taskWithoutCapacityIsRetriedOnNoCapacity(t *testing.T) {
	f := newFixture(t, map[string]string{
		"fleet.dstack.yml": cloudFleet,
		"task.dstack.yml":  "type: task\nname: train\nimage: busybox\ncommands: [echo hi]\nretry: {on_events: [no-capacity], duration: 1h}\n",
	})
	be := f.withKubernetesFake()
	be.SetTaskError("busybox", api.ReasonNoCapacity, unschedulable)
	if res := f.sync(); res != resultSynced {
		t.Fatalf("sync = %s: %v", res, f.syncState().Errors)
	}
	inst := f.provision("train")
	j := f.stepJob("train", store.JobFailed)
	if j.TerminationReason != reasonNoCapacity || j.TerminationMessage != unschedulable || j.StatusMessage != "no capacity" {
		t.Fatalf("job failed as %s %q (%q), want %s %q (no capacity)", j.TerminationReason, j.TerminationMessage, j.StatusMessage, reasonNoCapacity, unschedulable)
	}
	if got := be.Tasks(inst.ID); len(got) != 0 {
		t.Errorf("shim keeps tasks %v, want none", got)
	}
	after := f.reconcileRun("train")
	if run := f.run("train"); run.Status != store.RunPending || run.StatusMessage != "retrying" || after <= 0 {
		t.Fatalf("run = %s (%s), wake in %s; want pending (retrying)", run.Status, run.StatusMessage, after)
	}

	be.SetTaskError("busybox", "", "")
	f.clock.Advance(after)
	f.reconcileRun("train")
	if j := f.job("train"); j.SubmissionNum != 1 || j.Status != store.JobSubmitted {
		t.Fatalf("after the back-off the job is %s (submission %d), want submitted again", j.Status, j.SubmissionNum)
	}
	f.stepJob("train", store.JobRunning)
	f.reconcileJobs("train") // hands the job to its pump
	f.waitJob("train", store.JobTerminating)
	if j := f.stepJob("train", store.JobDone); !strings.Contains(f.output(j.ID), "hi") {
		t.Errorf("output %q", f.output(j.ID))
	}
}

// TestWorkers_noCapacityWithoutRetryFailsTheRun: without a retry policy the
// same failure fails the run (job_failed).
func TestWorkers_noCapacityWithoutRetryFailsTheRun(t *testing.T) {
	f := newFixture(t, map[string]string{
		"fleet.dstack.yml": cloudFleet,
		"task.dstack.yml":  "type: task\nname: train\nimage: busybox\ncommands: [echo hi]\n",
	})
	be := f.withKubernetesFake()
	be.SetTaskError("busybox", reasonNoCapacity, unschedulable)
	f.sync()
	f.provision("train")
	f.stepJob("train", store.JobFailed)
	f.reconcileRun("train") // → terminating
	f.reconcileRun("train") // → failed
	if run := f.run("train"); run.Status != store.RunFailed || run.TerminationReason != runReasonJobFailed {
		t.Errorf("run = %s (%s), want failed (job_failed)", run.Status, run.TerminationReason)
	}
}

// TestWorkers_volumeStillInUseIsDeletedLater: removing a pruned volume's
// spec while its backend cannot delete it yet (a Kubernetes claim is kept
// while a pod still uses it: KindWait) applies the revision and marks the
// volume to be deleted; the volume sweep deletes it once the backend can.
func TestWorkers_volumeStillInUseIsDeletedLater(t *testing.T) {
	f := newFixture(t, map[string]string{
		"vol.dstack.yml":  "type: volume\nname: data\nbackend: kubernetes\nsize: 1GB\nhoist: {prune: true}\n",
		"keep.dstack.yml": volFleet,
	})
	be := f.withKubernetesFake()
	if res := f.sync(); res != resultSynced {
		t.Fatalf("sync = %s: %v", res, f.syncState().Errors)
	}
	pv := onlyVolume(t, be)
	be.SetVolumeInUse(pv.ProviderID, true)
	f.remove("vol.dstack.yml")
	if res := f.sync(); res != resultSynced {
		t.Fatalf("sync = %s: %v; want the revision applied", res, f.syncState().Errors)
	}
	if v := f.volume("data"); !v.ToBeDeleted || v.Deleted || len(be.Volumes()) != 1 {
		t.Fatalf("volume = %+v, provider %+v; want it marked to be deleted and still there", v, be.Volumes())
	}
	f.c.sweepVolumes(f.ctx)
	if len(be.Volumes()) != 1 {
		t.Fatalf("provider volumes = %+v while in use, want it kept", be.Volumes())
	}
	be.SetVolumeInUse(pv.ProviderID, false)
	f.c.sweepVolumes(f.ctx)
	if len(be.Volumes()) != 0 {
		t.Errorf("provider volumes = %+v once no longer in use, want none", be.Volumes())
	}
	vols, err := f.st.ListVolumes(f.ctx, store.InfraFilter{})
	if err != nil || len(vols) != 0 {
		t.Errorf("volume rows = %+v, %v; want it deleted", vols, err)
	}
}
