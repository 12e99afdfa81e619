package reconciler

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"hoist/agents/api"
	"hoist/backends/fake"
	"hoist/store"
)

// Multi-node tasks on a backend whose jobs run in containers of their own
// (a runner runtime, as Kubernetes pods): the nodes' addresses are their
// containers', known once the containers exist, so every node's container
// is created first and the nodes then wait, holding in pulling, for each
// other's addresses and for their startup_order.

// TestWorkers_clusterOfContainersUsesTheContainersAddresses: on the
// Kubernetes fake a two-node task with startup_order master-first has both
// containers created at once (the worker's does not wait for the master,
// whose cluster needs the worker's address); the worker holds until the
// master runs; both get a ClusterInfo of the addresses their tasks
// reported (not their instances'), recorded on the jobs; the run is done.
func TestWorkers_clusterOfContainersUsesTheContainersAddresses(t *testing.T) {
	f := newFixture(t, map[string]string{
		"fleet.dstack.yml": clusterFleet,
		"task.dstack.yml":  clusterTask("echo rank $DSTACK_NODE_RANK master $DSTACK_MASTER_NODE_IP", "startup_order: master-first\n"),
	})
	be := f.withKubernetesFake()
	if res := f.sync(); res != resultSynced {
		t.Fatalf("sync = %s: %v", res, f.syncState().Errors)
	}
	insts := f.provisionNodes("train")

	// The worker's container is created, though the master does not run.
	w := f.stepNode("train", 1, store.JobPulling)
	if tasks := be.Tasks(insts[1].ID); len(tasks) != 1 {
		t.Fatalf("the worker's instance has tasks %v, want its container", tasks)
	}
	// It records its address and holds: the master's is unknown yet.
	if _, err := f.c.reconcileJob(f.ctx, w.ID); err != nil {
		t.Fatal(err)
	}
	w = f.node("train", 1)
	if w.Status != store.JobPulling || !strings.Contains(w.StatusMessage, "waiting for 1 of 2 nodes' containers to get an address") {
		t.Fatalf("worker = %s %q, want it pulling, waiting for the master's address", w.Status, w.StatusMessage)
	}
	workerIP := w.Runtime().InternalIP
	if !strings.HasPrefix(workerIP, "10.1.") {
		t.Fatalf("worker's recorded address %q, want its container's", workerIP)
	}

	// The master gets its container and, with both addresses known, runs.
	m := f.stepNode("train", 0, store.JobRunning)
	masterIP := m.Runtime().InternalIP
	if !strings.HasPrefix(masterIP, "10.1.") || masterIP == workerIP {
		t.Fatalf("master's recorded address %q (worker's %q), want its own container's", masterIP, workerIP)
	}
	f.stepNode("train", 1, store.JobRunning)
	for num, inst := range insts {
		j := f.node("train", num)
		js, _ := be.JobSpec(inst.ID, j.ID)
		want := &api.ClusterInfo{NodeRank: num, NodesNum: 2, NodesIPs: []string{masterIP, workerIP}, MasterIP: masterIP}
		if diff := cmp.Diff(want, js.Cluster, cmpopts.IgnoreFields(api.ClusterInfo{}, "SSHKey")); diff != "" {
			t.Errorf("node %d's cluster (-want +got):\n%s", num, diff)
		}
	}
	f.reconcileJobs("train")
	for num := range 2 {
		f.waitNode("train", num, store.JobTerminating)
		j := f.stepNode("train", num, store.JobDone)
		if want := fmt.Sprintf("rank %d master %s\n", num, masterIP); f.output(j.ID) != want {
			t.Errorf("node %d printed %q, want %q", num, f.output(j.ID), want)
		}
	}
	f.reconcileRun("train")
	f.reconcileRun("train")
	if run := f.run("train"); run.Status != store.RunDone {
		t.Errorf("run = %s (%s), want done", run.Status, run.TerminationReason)
	}
}

// TestWorkers_clusterOnAnIsolatedBackendFailsSayingWhy: on a backend whose
// containers cannot reach each other (Traits.Isolated: RunPod, Vast.ai) a
// two-node task's nodes end with the reason instead of waiting for
// addresses that never come.
func TestWorkers_clusterOnAnIsolatedBackendFailsSayingWhy(t *testing.T) {
	f := newFixture(t, map[string]string{
		"fleet.dstack.yml": clusterFleet,
		"task.dstack.yml":  clusterTask("echo never", ""),
	})
	f.withContainerFake(fake.Config{Name: "runpod", Isolated: true})
	if res := f.sync(); res != resultSynced {
		t.Fatalf("sync = %s: %v", res, f.syncState().Errors)
	}
	f.provisionNodes("train")
	for num := range 2 {
		j := f.stepNode("train", num, store.JobTerminating)
		if !strings.Contains(j.TerminationMessage, "backend runpod runs each job in a container of its own with no network between them") {
			t.Errorf("node %d ends with %q, want the reason", num, j.TerminationMessage)
		}
	}
}

// TestWorkers_podWithoutCommandsEndsSayingWhy: a task without commands on
// a backend whose pods run the start command in place of the image's
// entrypoint (the runner runtime) ends before any pod is created, saying
// it must set commands.
func TestWorkers_podWithoutCommandsEndsSayingWhy(t *testing.T) {
	f := newFixture(t, map[string]string{
		"fleet.dstack.yml": volFleet,
		"task.dstack.yml":  "type: task\nname: bare\nimage: busybox\n",
	})
	be := f.withContainerFake(fake.Config{Name: "runpod", Isolated: true})
	if res := f.sync(); res != resultSynced {
		t.Fatalf("sync = %s: %v", res, f.syncState().Errors)
	}
	inst := f.provision("bare")
	j := f.stepJob("bare", store.JobTerminating)
	if !strings.Contains(j.TerminationMessage, "backend runpod runs the job's image without its entrypoint: the job must set commands") {
		t.Errorf("job ends with %q, want the reason", j.TerminationMessage)
	}
	if tasks := be.Tasks(inst.ID); len(tasks) != 0 {
		t.Errorf("tasks %v were created", tasks)
	}
}
