package reconciler

import (
	"strings"
	"testing"
	"time"

	"hoist/store"
)

// fleetAndTask is one revision holding an SSH fleet of two hosts and a task
// pinned to it: the natural GitOps commit.
var fleetAndTask = map[string]string{
	"fleet.dstack.yml": "type: fleet\nname: gpu-hosts\nssh_config:\n  user: ubuntu\n  identity_file: ~/.ssh/id\n  hosts: [127.0.0.201, 127.0.0.202]\n",
	"task.dstack.yml":  "type: task\nname: train\nimage: busybox\ncommands: [x]\nfleets: [gpu-hosts]\n",
}

// setFleetInstances puts every instance of fleet name in status.
func (f *fixture) setFleetInstances(name, status string) []store.Instance {
	f.t.Helper()
	fl, err := f.st.GetFleetByName(f.ctx, store.DefaultProject, name)
	if err != nil {
		f.t.Fatal(err)
	}
	insts, err := f.st.ListInstances(f.ctx, store.InfraFilter{Project: store.DefaultProject, FleetID: fl.ID})
	if err != nil {
		f.t.Fatal(err)
	}
	for i := range insts {
		insts[i].Status = status
		insts[i].Offer = []byte(`{"backend":"ssh","cpus":16,"cpu_arch":"x86","memory_gb":64}`) // as a reached host reports
		if err := f.st.UpdateInstance(f.ctx, &insts[i]); err != nil {
			f.t.Fatal(err)
		}
	}
	return insts
}

// TestPlaceJob_waitsForProvisioningFleet: a task committed with the SSH
// fleet it names stays submitted, saying what it waits for, while the
// fleet's hosts are provisioning, and is placed once one is ready.
func TestPlaceJob_waitsForProvisioningFleet(t *testing.T) {
	f := newFixture(t, fleetAndTask).withSSHBackend()
	if res := f.sync(); res != resultSynced {
		t.Fatalf("sync = %s", res)
	}
	const want = "waiting for fleet gpu-hosts: 2 instances provisioning"
	for range 2 { // a second pass changes nothing
		f.reconcileJobs("train")
		if j := f.jobs(f.run("train").ID)[0]; j.Status != store.JobSubmitted || j.StatusMessage != want || j.InstanceID != "" {
			t.Fatalf("job = %s %q on %q, want submitted %q on no instance", j.Status, j.StatusMessage, j.InstanceID, want)
		}
	}
	f.reconcileRun("train")
	if run := f.run("train"); run.Status != store.RunSubmitted || run.StatusMessage != want {
		t.Fatalf("run = %s %q, want submitted %q", run.Status, run.StatusMessage, want)
	}
	insts := f.setFleetInstances("gpu-hosts", store.InstanceIdle)
	f.reconcileJobs("train")
	j := f.jobs(f.run("train").ID)[0]
	if j.Status != store.JobProvisioning || (j.InstanceID != insts[0].ID && j.InstanceID != insts[1].ID) || j.StatusMessage != "" {
		t.Fatalf("job = %s %q on %q, want provisioning on a host of gpu-hosts", j.Status, j.StatusMessage, j.InstanceID)
	}
}

// TestPlaceJob_failsWhenNoInstanceCanFit: a job waiting for a fleet fails
// for want of capacity once no instance can come (every host failed), or
// when the hosts stay unready for provisioningTimeout.
func TestPlaceJob_failsWhenNoInstanceCanFit(t *testing.T) {
	for _, tc := range []struct {
		name, msg string
		then      func(f *fixture)
	}{
		{"every host failed", "no matching instance is free", func(f *fixture) {
			f.setFleetInstances("gpu-hosts", store.InstanceTerminated)
		}},
		{"hosts never ready", "waiting for fleet gpu-hosts: 2 instances provisioning after 10m0s", func(f *fixture) {
			f.clock.Advance(provisioningTimeout + time.Second)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, fleetAndTask).withSSHBackend()
			f.sync()
			f.reconcileJobs("train")
			tc.then(f)
			f.reconcileJobs("train") // submitted → terminating
			f.reconcileJobs("train") // terminating → failed
			j := f.jobs(f.run("train").ID)[0]
			if j.Status != store.JobFailed || j.TerminationReason != reasonNoCapacity || !strings.Contains(j.TerminationMessage, tc.msg) {
				t.Fatalf("job = %s (%s, %q), want failed for no capacity with %q", j.Status, j.TerminationReason, j.TerminationMessage, tc.msg)
			}
		})
	}
}

// TestPlaceJob_backendsFilterInstances: a job naming backends waits only
// for, and is placed only on, instances of those backends (an SSH host is
// dstack's backend "remote").
func TestPlaceJob_backendsFilterInstances(t *testing.T) {
	for _, tc := range []struct {
		backends, status string
	}{
		{"[aws]", store.JobFailed},
		{"[remote]", store.JobSubmitted},
	} {
		t.Run(tc.backends, func(t *testing.T) {
			f := newFixture(t, map[string]string{
				"fleet.dstack.yml": fleetAndTask["fleet.dstack.yml"],
				"task.dstack.yml":  "type: task\nname: train\nimage: busybox\ncommands: [x]\nbackends: " + tc.backends + "\n",
			}).withSSHBackend()
			f.sync()
			f.reconcileJobs("train")
			f.reconcileJobs("train")
			if j := f.jobs(f.run("train").ID)[0]; j.Status != tc.status {
				t.Fatalf("job = %s (%s %q %q), want %s", j.Status, j.TerminationReason, j.TerminationMessage, j.StatusMessage, tc.status)
			}
		})
	}
}
