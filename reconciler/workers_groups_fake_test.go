package reconciler

import (
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"hoist/agents/api"
	"hoist/backends/fake"
	"hoist/backends/offers"
	"hoist/schema"
	"hoist/store"
)

// Tasks with groups (heterogeneous multi-node tasks) against
// backends/fake: one job per node through the groups in order, each on an
// instance fitting its own group's resources, running its group's
// commands with its group's GPUs and ports, the nodes' IPs interpolated
// into the commands when the job starts.

// groupOffers are a GPU offer cheaper than a large CPU one, so that which
// job gets which instance matters: a job content with either must leave
// the GPU instance to the job that needs it.
var groupOffers = []offers.Offer{
	{Instance: "gpu-small", Region: "loop", CPUs: 16, MemoryGB: 64, DiskGB: 100, GPUCount: 1, GPUName: "A10", GPUMemoryGB: 24, GPUVendor: "nvidia", Price: 0.5},
	{Instance: "cpu-large", Region: "loop", CPUs: 32, MemoryGB: 128, DiskGB: 100, Price: 0.8},
}

// groupsTask is a task of a one-GPU head node and two 32-CPU workers: the
// head publishes port 8000 and prints the first worker's IP, the workers
// print the head's, and the last command keeps an escaped reference as
// written.
const groupsTask = `type: task
name: train
image: busybox
groups:
  - name: head
    resources:
      gpu: 1
    ports: [8000]
    commands:
      - echo head $DSTACK_NODE_RANK sees ${{ groups[1].nodes[0].IP_ADDRESS }}
  - name: workers
    nodes: 2
    resources:
      cpu: 32..
    commands:
      - echo worker $DSTACK_NODE_RANK sees ${{groups[0].nodes[0].IP_ADDRESS}}
      - ': keeps $${{ groups[0].nodes[0].IP_ADDRESS }}'
`

// TestWorkers_groupsRunEachGroupsCommandsWithItsResources: a task of two
// groups grows an empty cluster fleet by an instance of each group's
// offer (one GPU instance, two large CPU ones) in one pass of its master;
// each job runs on its group's instance with its group's commands, GPUs
// and ports, host networking and the cluster of all three nodes, and the
// nodes' IPs replace the references in its commands (an escaped one stays
// as written). The instances, now idle, then take a task whose groups are
// the other way round without growing the fleet: the job that could have
// either instance leaves the GPU one to the job that needs it.
func TestWorkers_groupsRunEachGroupsCommandsWithItsResources(t *testing.T) {
	f := newFixture(t, map[string]string{
		"fleet.dstack.yml": clusterFleet,
		"task.dstack.yml":  groupsTask,
	})
	be := f.withFakeBackend(fake.Config{Offers: groupOffers})
	if res := f.sync(); res != resultSynced {
		t.Fatalf("sync = %s", res)
	}
	if js := f.nodes("train"); len(js) != 3 {
		t.Fatalf("%d jobs, want one per node of the groups (3)", len(js))
	}
	insts := f.provisionNodes("train")
	if got, want := attempted(be), []string{"gpu-small", "cpu-large", "cpu-large"}; !slices.Equal(got, want) {
		t.Fatalf("creates %v, want %v: an instance of each group's offer", got, want)
	}
	wantOffer := []string{"gpu-small", "cpu-large", "cpu-large"}
	ips := make([]string, 3)
	for num, inst := range insts {
		if o := offerOf(inst); o.Instance != wantOffer[num] {
			t.Errorf("job %d on a %s instance, want %s", num, o.Instance, wantOffer[num])
		}
		ips[num] = inst.InternalIP
	}
	if ips[0] == "" || ips[0] == ips[1] || ips[1] == ips[2] {
		t.Fatalf("instances' internal IPs %q, want three distinct ones", ips)
	}
	wantCommands := [][]string{
		{"echo head $DSTACK_NODE_RANK sees " + ips[1]},
		{"echo worker $DSTACK_NODE_RANK sees " + ips[0], ": keeps $${{ groups[0].nodes[0].IP_ADDRESS }}"},
		{"echo worker $DSTACK_NODE_RANK sees " + ips[0], ": keeps $${{ groups[0].nodes[0].IP_ADDRESS }}"},
	}
	for num, inst := range insts {
		j := f.stepNode("train", num, store.JobRunning)
		ts, _ := be.TaskSpec(inst.ID, j.ID)
		gpus, ports := 0, []int(nil)
		if num == 0 {
			gpus, ports = 1, []int{8000}
		}
		var got []int
		for _, p := range ts.Ports {
			got = append(got, p.Container)
		}
		if ts.GPUCount != gpus || !slices.Equal(got, ports) || ts.NetworkMode != api.NetworkHost {
			t.Errorf("node %d's container: %d GPUs, ports %v, network %q; want %d, %v, host", num, ts.GPUCount, got, ts.NetworkMode, gpus, ports)
		}
		js, _ := be.JobSpec(inst.ID, j.ID)
		if diff := cmp.Diff(wantCommands[num], js.Commands); diff != "" {
			t.Errorf("node %d's commands (-want +got):\n%s", num, diff)
		}
		want := &api.ClusterInfo{NodeRank: num, NodesNum: 3, NodesIPs: ips, MasterIP: ips[0], GPUsPerNode: gpus, GPUsNum: 1, NodesGPUs: []int{1, 0, 0}}
		// The key: TestWorkers_clusterNodesShareOneSSHKeyPerSubmission.
		if diff := cmp.Diff(want, js.Cluster, cmpopts.IgnoreFields(api.ClusterInfo{}, "SSHKey")); diff != "" {
			t.Errorf("node %d's cluster (-want +got):\n%s", num, diff)
		}
	}
	f.reconcileJobs("train")
	for num := range 3 {
		f.waitNode("train", num, store.JobTerminating)
		j := f.stepNode("train", num, store.JobDone)
		want := fmt.Sprintf("worker %d sees %s\n", num, ips[0])
		if num == 0 {
			want = "head 0 sees " + ips[1] + "\n"
		}
		if got := f.output(j.ID); got != want {
			t.Errorf("node %d printed %q, want %q", num, got, want)
		}
	}
	f.reconcileRun("train")
	f.reconcileRun("train")
	if run := f.run("train"); run.Status != store.RunDone {
		t.Fatalf("run = %s (%s), want done", run.Status, run.TerminationReason)
	}

	f.write("task.dstack.yml", `type: task
name: swap
image: busybox
groups:
  - name: wide
    resources:
      cpu: 16..
    commands: [echo wide]
  - name: gpu
    resources:
      gpu: 1
    commands: [echo gpu]
`)
	f.sync()
	f.reconcileMaster("swap")
	js := f.nodes("swap")
	for num, j := range js {
		if j.Status != store.JobProvisioning {
			t.Fatalf("job %d = %s (%q %s %q), want provisioning on a free instance", num, j.Status, j.StatusMessage, j.TerminationReason, j.TerminationMessage)
		}
	}
	if o := offerOf(f.instance(js[0].InstanceID)); o.Instance != "cpu-large" {
		t.Errorf("job 0 (cpu: 16..) on a %s instance, want cpu-large: the GPU instance is the only one job 1 fits", o.Instance)
	}
	if o := offerOf(f.instance(js[1].InstanceID)); o.Instance != "gpu-small" {
		t.Errorf("job 1 (gpu: 1) on a %s instance, want gpu-small", o.Instance)
	}
	if n := len(attempted(be)); n != 3 {
		t.Errorf("%d creates, want still 3: the idle instances fit", n)
	}
}

// TestMatchGang gives each job of a gang an instance that fits it.
func TestMatchGang(t *testing.T) {
	inst := func(ids ...string) []store.Instance {
		var out []store.Instance
		for _, id := range ids {
			out = append(out, store.Instance{ID: id})
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		gang  []store.Job
		insts []store.Instance
		fits  map[string]string // instance id → the jobs (by index digit) it fits
		want  []int
	}{
		{"a job that fits several leaves the scarce one to the job that needs it",
			make([]store.Job, 2), inst("gpu", "cpu"), map[string]string{"gpu": "01", "cpu": "0"}, []int{1, 0}},
		{"jobs take instances in their order when any fits",
			make([]store.Job, 2), inst("a", "b", "c"), map[string]string{"a": "01", "b": "01", "c": "01"}, []int{0, 1}},
		{"a job takes the instance it holds first",
			[]store.Job{{}, {InstanceID: "a"}}, inst("a", "b"), map[string]string{"a": "01", "b": "01"}, []int{1, 0}},
		{"a job nothing fits gets none",
			make([]store.Job, 2), inst("a", "b"), map[string]string{"a": "0", "b": "0"}, []int{0, -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := matchGang(tc.gang, tc.insts, func(k, i int) bool {
				return slices.Contains([]byte(tc.fits[tc.insts[i].ID]), byte('0'+k))
			})
			if !slices.Equal(got, tc.want) {
				t.Errorf("matchGang = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestPickGrowOffers picks, for the groups of a gang that grows a cluster
// fleet, one offer each, all in one backend and region.
func TestPickGrowOffers(t *testing.T) {
	cluster := &schema.Fleet{Placement: "cluster"}
	gpuA := offers.Offer{Backend: "aws", Region: "a", Instance: "gpu", Price: 3}
	gpuB := offers.Offer{Backend: "aws", Region: "b", Instance: "gpu", Price: 2}
	cpuA := offers.Offer{Backend: "aws", Region: "a", Instance: "cpu", Price: 0.1}
	cpuB := offers.Offer{Backend: "aws", Region: "b", Instance: "cpu", Price: 1}
	for _, tc := range []struct {
		name  string
		all   [][]offers.Offer
		asks  []growAsk
		live  []store.Instance
		tried []offers.Offer
		want  []string // region/instance of each ask's offer; nil: an error
	}{
		{"one group takes its cheapest offer", [][]offers.Offer{{cpuA, cpuB}}, []growAsk{{n: 2}}, nil, nil, []string{"a/cpu"}},
		{"the groups share the region where they cost least together",
			[][]offers.Offer{{gpuB, gpuA}, {cpuA, cpuB}}, []growAsk{{n: 1}, {n: 4}}, nil, nil, []string{"a/gpu", "a/cpu"}},
		{"a region one group has no offer in is not taken",
			[][]offers.Offer{{gpuB}, {cpuA, cpuB}}, []growAsk{{n: 1}, {n: 1}}, nil, nil, []string{"b/gpu", "b/cpu"}},
		{"the cluster's region, where it has instances",
			[][]offers.Offer{{gpuB, gpuA}, {cpuA, cpuB}}, []growAsk{{n: 1}, {n: 1}},
			[]store.Instance{{Backend: "aws", Region: "b"}}, nil, []string{"b/gpu", "b/cpu"}},
		{"offers tried are passed over", [][]offers.Offer{{cpuA, cpuB}}, []growAsk{{n: 1}}, nil, []offers.Offer{cpuA}, []string{"b/cpu"}},
		{"no region has an offer for every group", [][]offers.Offer{{gpuB}, {cpuA}}, []growAsk{{n: 1}, {n: 1}}, nil, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tried := map[string]bool{}
			for _, o := range tc.tried {
				tried[offerKey(o)] = true
			}
			got, err := pickGrowOffers(cluster, tc.all, tc.asks, tc.live, tried)
			var names []string
			for _, o := range got {
				names = append(names, o.Region+"/"+o.Instance)
			}
			if (err != nil) != (tc.want == nil) || !slices.Equal(names, tc.want) {
				t.Errorf("pickGrowOffers = %v, %v; want %v", names, err, tc.want)
			}
		})
	}
}
