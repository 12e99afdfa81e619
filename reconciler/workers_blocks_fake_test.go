package reconciler

import (
	"time"

	"testing"

	"hoist/agents/api"
	"hoist/backends/fake"
	"hoist/backends/offers"
	"hoist/store"
)

// Blocks: a fleet's `blocks: 2` splits its 2-GPU instance in two, so two
// one-GPU jobs run on it at once, each confined to its half on bridge
// networking, and a third waits for a free block.

// twoGPUOffer is the only offer: 4 CPUs, 16 GB and 2 GPUs.
var twoGPUOffer = []offers.Offer{{Instance: "fake-2gpu", Region: "loop", CPUs: 4, MemoryGB: 16, DiskGB: 100,
	GPUCount: 2, GPUName: "A10", GPUMemoryGB: 24, GPUVendor: "nvidia", Price: 1.00, Availability: offers.AvailabilityAvailable}}

const (
	blocksFleet = "type: fleet\nname: shared\nnodes: 1\nblocks: 2\n"
	oneGPUTask  = "type: task\nimage: busybox\ncommands: [sleep 1h]\nresources: {cpu: 1.., memory: 1GB.., gpu: 1}\n"
)

// readyFleetInstance brings fleet name's one instance to idle.
func (f *fixture) readyFleetInstance(name string) store.Instance {
	f.t.Helper()
	insts := f.fleetInstances(name)
	if len(insts) != 1 {
		f.t.Fatalf("fleet %s has %d instances, want 1", name, len(insts))
	}
	for range 10 {
		if i := f.instance(insts[0].ID); i.Status == store.InstanceIdle {
			return i
		}
		f.reconcileInstance(insts[0].ID)
	}
	i := f.instance(insts[0].ID)
	f.t.Fatalf("instance %s is %s (%s), want idle", i.Name, i.Status, i.StatusMessage)
	return i
}

// TestWorkers_blocksShareAnInstanceBetweenJobs is the proof the support
// table cites for a fleet's `blocks`.
func TestWorkers_blocksShareAnInstanceBetweenJobs(t *testing.T) {
	f := newFixture(t, map[string]string{
		"fleet.dstack.yml": blocksFleet,
		"a.dstack.yml":     "name: ja\n" + oneGPUTask,
		"b.dstack.yml":     "name: jb\n" + oneGPUTask,
		"c.dstack.yml":     "name: jc\n" + oneGPUTask + "retry: {on_events: [no-capacity], duration: 1h}\n",
	})
	be := f.withFakeBackend(fake.Config{Offers: twoGPUOffer})
	if res := f.sync(); res != resultSynced {
		t.Fatalf("sync = %s: %+v", res, f.syncState())
	}
	inst := f.readyFleetInstance("shared")

	// a and b each take one block: half the CPUs, memory and GPUs.
	for _, name := range []string{"ja", "jb"} {
		j := f.stepJob(name, store.JobPulling)
		if j.InstanceID != inst.ID || j.Blocks != 1 {
			t.Fatalf("job %s on %s holding %d blocks, want 1 block of %s", name, j.InstanceID, j.Blocks, inst.ID)
		}
		ts, ok := be.TaskSpec(inst.ID, j.ID)
		if !ok {
			t.Fatalf("job %s has no task on the instance", name)
		}
		if ts.GPUCount != 1 || ts.CPUs != 2 || ts.MemoryBytes != 8<<30 || ts.NetworkMode != api.NetworkBridge {
			t.Errorf("job %s task: %d gpus, %g cpus, %d bytes, network %q; want 1 gpu, 2 cpus, 8 GiB, bridge",
				name, ts.GPUCount, ts.CPUs, ts.MemoryBytes, ts.NetworkMode)
		}
	}

	// c finds no free block: it fails for capacity and its run retries.
	f.reconcileJobs("jc")
	f.reconcileJobs("jc")
	if j := f.job("jc"); j.InstanceID == inst.ID && !store.IsJobFinished(j.Status) {
		t.Fatalf("job c = %s on the full instance", j.Status)
	} else if j.TerminationReason != reasonNoCapacity {
		t.Fatalf("job c = %s (%s %q), want failed for no capacity", j.Status, j.TerminationReason, j.TerminationMessage)
	}
	f.reconcileRun("jc")
	if run := f.run("jc"); run.Status != store.RunPending {
		t.Fatalf("run c = %s (%s), want pending for a retry", run.Status, run.StatusMessage)
	}

	// a ends: its block is free and c's next submission takes it.
	if err := f.c.terminateJob(f.ctx, f.job("ja").ID, reasonTerminatedByUser, "stop"); err != nil {
		t.Fatal(err)
	}
	f.stepJob("ja", store.JobTerminated)
	f.clock.Advance(time.Minute)
	f.reconcileRun("jc")
	j := f.stepJob("jc", store.JobPulling)
	if j.InstanceID != inst.ID || j.Blocks != 1 {
		t.Fatalf("job c on %s holding %d blocks, want 1 block of %s", j.InstanceID, j.Blocks, inst.ID)
	}
	if busy, err := f.st.BusyBlocks(f.ctx, inst.ID, "", 2); err != nil || busy != 2 {
		t.Errorf("busy blocks = %d (%v), want 2", busy, err)
	}
}

// TestWorkers_blocksWholeInstanceJob: a job whose resources need both
// blocks takes the whole instance, and waits while one block is taken.
func TestWorkers_blocksWholeInstanceJob(t *testing.T) {
	f := newFixture(t, map[string]string{
		"fleet.dstack.yml": blocksFleet,
		"a.dstack.yml":     "name: ja\n" + oneGPUTask,
		"big.dstack.yml":   "type: task\nname: big\nimage: busybox\ncommands: [sleep 1h]\nresources: {cpu: 3.., memory: 1GB.., gpu: 2}\n",
	})
	be := f.withFakeBackend(fake.Config{Offers: twoGPUOffer})
	if res := f.sync(); res != resultSynced {
		t.Fatalf("sync = %s: %+v", res, f.syncState())
	}
	inst := f.readyFleetInstance("shared")
	f.stepJob("ja", store.JobPulling)
	f.reconcileJobs("big")
	if j := f.job("big"); j.InstanceID == inst.ID && !store.IsJobFinished(j.Status) {
		t.Fatalf("job big = %s on an instance with a block taken", j.Status)
	}
	if err := f.c.terminateJob(f.ctx, f.job("ja").ID, reasonTerminatedByUser, "stop"); err != nil {
		t.Fatal(err)
	}
	f.stepJob("ja", store.JobTerminated)
	f.write("big.dstack.yml", "type: task\nname: big\nimage: busybox\ncommands: [sleep 2h]\nresources: {cpu: 3.., memory: 1GB.., gpu: 2}\n")
	if res := f.sync(); res != resultSynced {
		t.Fatalf("sync = %s: %+v", res, f.syncState())
	}
	j := f.stepJob("big", store.JobPulling)
	if j.InstanceID != inst.ID || j.Blocks != 2 {
		t.Fatalf("job big on %s holding %d blocks, want both blocks of %s", j.InstanceID, j.Blocks, inst.ID)
	}
	ts, _ := be.TaskSpec(inst.ID, j.ID)
	if ts.GPUCount != 2 || ts.CPUs != 0 || ts.MemoryBytes != 0 {
		t.Errorf("whole-instance task: %d gpus, %g cpus, %d bytes; want 2 gpus and no limits", ts.GPUCount, ts.CPUs, ts.MemoryBytes)
	}
}

// TestPlaceJob_sshHostBlocks is the proof the support table cites for an
// SSH host's own `blocks`: a host of 2 GPUs split in two by its
// `blocks: 2` takes two one-GPU jobs, one block each, and no third; a host
// whose `blocks` does not divide its GPUs takes no job.
func TestPlaceJob_sshHostBlocks(t *testing.T) {
	for _, tc := range []struct {
		name, blocks string
		placed       int
	}{
		{"two blocks", "2", 2},
		{"auto", "auto", 2},
		{"not divisible", "3", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			task := func(name string) string {
				return "type: task\nname: " + name + "\nimage: busybox\ncommands: [x]\nfleets: [gpu-host]\nresources: {cpu: 1.., memory: 1GB.., gpu: 1}\n"
			}
			f := newFixture(t, map[string]string{
				"fleet.dstack.yml": "type: fleet\nname: gpu-host\nssh_config:\n  user: ubuntu\n  identity_file: ~/.ssh/id\n  hosts:\n  - {hostname: 127.0.0.201, blocks: " + tc.blocks + "}\n",
				"ja.dstack.yml":    task("ja"),
				"jb.dstack.yml":    task("jb"),
				"jc.dstack.yml":    task("jc"),
			}).withSSHBackend()
			if res := f.sync(); res != resultSynced {
				t.Fatalf("sync = %s: %+v", res, f.syncState())
			}
			insts := f.setFleetInstances("gpu-host", store.InstanceIdle)
			insts[0].Offer = []byte(`{"backend":"ssh","cpus":2,"cpu_arch":"x86","memory_gb":8,"gpu_count":2,"gpu_vendor":"nvidia","gpu_name":"A10","gpu_memory_gb":24}`)
			if err := f.st.UpdateInstance(f.ctx, &insts[0]); err != nil {
				t.Fatal(err)
			}
			placed := 0
			for _, name := range []string{"ja", "jb", "jc"} {
				f.reconcileJobs(name)
				j := f.job(name)
				switch {
				case j.Status == store.JobProvisioning && j.InstanceID == insts[0].ID && j.Blocks == 1:
					placed++
				case j.Status == store.JobTerminating && j.TerminationReason == reasonNoCapacity:
				default:
					t.Fatalf("job %s = %s (%s %q) on %q holding %d blocks", name, j.Status, j.TerminationReason, j.TerminationMessage, j.InstanceID, j.Blocks)
				}
			}
			if placed != tc.placed {
				t.Errorf("%d jobs placed on the host, want %d", placed, tc.placed)
			}
		})
	}
}

// TestWorkers_blocksFleetProvisionsDivisibleOffers: a fleet of `blocks: 2`
// is provisioned from the cheapest offer whose CPUs and GPUs divide in two,
// passing over a cheaper one of 3 GPUs.
func TestWorkers_blocksFleetProvisionsDivisibleOffers(t *testing.T) {
	three := twoGPUOffer[0]
	three.Instance, three.CPUs, three.GPUCount, three.Price = "fake-3gpu", 6, 3, 0.50
	f := newFixture(t, map[string]string{"fleet.dstack.yml": blocksFleet})
	f.withFakeBackend(fake.Config{Offers: []offers.Offer{three, twoGPUOffer[0]}})
	if res := f.sync(); res != resultSynced {
		t.Fatalf("sync = %s: %+v", res, f.syncState())
	}
	inst := f.readyFleetInstance("shared")
	if o := instanceOffer(t, inst); o.Instance != "fake-2gpu" {
		t.Errorf("instance from offer %s, want fake-2gpu (the 3-GPU one does not divide in two)", o.Instance)
	}
}
