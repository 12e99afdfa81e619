package reconciler

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"hoist/agents/api"
	"hoist/backends/fake"
	"hoist/store"
)

// Multi-node tasks (nodes above 1) against backends/fake: every node waits
// until all nodes of its replica have instances, then starts in the run's
// startup_order with host networking and dstack's cluster environment;
// stop_criteria master-done ends the run when the master is done; a failed
// node fails the run and stops the others, or with retry the whole cluster
// is resubmitted together.

// clusterFleet is a cluster fleet (dstack places multi-node runs on those
// only) that grows an instance per node, up to three.
const clusterFleet = "type: fleet\nname: cloud\nnodes: 0..3\nplacement: cluster\nidle_duration: 1m\n"

// clusterTask is a two-node task named train running commands, with extra
// spec lines.
func clusterTask(commands, extra string) string {
	return "type: task\nname: train\nimage: busybox\nnodes: 2\ncommands: [" + commands + "]\n" + extra
}

// nodes returns the latest submissions of run name's jobs by job number.
func (f *fixture) nodes(name string) []store.Job {
	f.t.Helper()
	js := latestSubmissions(f.jobs(f.run(name).ID))
	slices.SortFunc(js, func(a, b store.Job) int { return a.JobNum - b.JobNum })
	return js
}

// node returns the latest submission of job num of run name.
func (f *fixture) node(name string, num int) store.Job {
	f.t.Helper()
	for _, j := range f.nodes(name) {
		if j.JobNum == num {
			return j
		}
	}
	f.t.Fatalf("run %s has no job %d", name, num)
	return store.Job{}
}

// stepNode runs the job worker on job num of run name until it reaches
// status to (waiting while a pump holds a running job), for at most 5 s.
func (f *fixture) stepNode(name string, num int, to string) store.Job {
	f.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		j := f.node(name, num)
		if j.Status == to {
			return j
		}
		if store.IsJobFinished(j.Status) {
			break
		}
		if j.Status == store.JobRunning && f.c.pumping(j.ID) {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if _, err := f.c.reconcileJob(f.ctx, j.ID); err != nil {
			f.t.Fatalf("reconcile job %s (%s): %v", j.JobName, j.Status, err)
		}
		if f.node(name, num).Status == j.Status {
			time.Sleep(20 * time.Millisecond)
		}
	}
	j := f.node(name, num)
	f.t.Fatalf("job %s is %s (%s %q, %q), want %s", j.JobName, j.Status, j.TerminationReason, j.TerminationMessage, j.StatusMessage, to)
	return j
}

// waitNode waits (real time) for job num of run name to reach status.
func (f *fixture) waitNode(name string, num int, status string) store.Job {
	f.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		j := f.node(name, num)
		if j.Status == status {
			return j
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("job %s is %s (%s %q), want %s", j.JobName, j.Status, j.TerminationReason, j.TerminationMessage, status)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// provisionNodes places the jobs of run name on fleet cloud: the job
// worker runs on every submitted job and the instance worker on every
// instance coming up until all jobs are provisioning. It returns their
// instances by job number.
func (f *fixture) provisionNodes(name string) []store.Instance {
	f.t.Helper()
	for range 50 {
		waiting := 0
		for _, j := range f.nodes(name) {
			j = f.node(name, j.JobNum) // a gang's master places the others too
			switch j.Status {
			case store.JobSubmitted:
				waiting++
				if _, err := f.c.reconcileJob(f.ctx, j.ID); err != nil {
					f.t.Fatal(err)
				}
			case store.JobProvisioning:
			default:
				f.t.Fatalf("job %d = %s (%s %q), want it provisioned", j.JobNum, j.Status, j.TerminationReason, j.TerminationMessage)
			}
		}
		if waiting == 0 {
			var out []store.Instance
			for _, j := range f.nodes(name) {
				out = append(out, f.instance(j.InstanceID))
			}
			return out
		}
		for _, i := range f.fleetInstances("cloud") {
			if i.Status == store.InstancePending || i.Status == store.InstanceProvisioning {
				f.reconcileInstance(i.ID)
			}
		}
	}
	f.t.Fatalf("run %s's jobs are not all provisioning: %+v", name, f.nodes(name))
	return nil
}

// assertWaits runs the job worker on job num of run name and checks that
// it stays provisioning, saying why, with no container on its instance.
func (f *fixture) assertWaits(be *fake.Backend, name string, num int, want string) {
	f.t.Helper()
	j := f.node(name, num)
	if _, err := f.c.reconcileJob(f.ctx, j.ID); err != nil {
		f.t.Fatal(err)
	}
	j = f.node(name, num)
	if j.Status != store.JobProvisioning || !strings.Contains(j.StatusMessage, want) {
		f.t.Fatalf("job %d = %s %q, want provisioning waiting %q", num, j.Status, j.StatusMessage, want)
	}
	if tasks := be.Tasks(j.InstanceID); len(tasks) != 0 {
		f.t.Fatalf("job %d waits, yet its instance has tasks %v", num, tasks)
	}
}

// TestWorkers_clusterNodesStartTogetherWithTheClusterEnvironment: the
// master of a two-node task waits, its container not created, until the
// worker has an instance too; then both run with host networking and a
// ClusterInfo of their ranks, the instances' internal IPs in rank order
// and the master's IP, see DSTACK_NODE_RANK and DSTACK_MASTER_NODE_IP, and
// the run is done once both are.
func TestWorkers_clusterNodesStartTogetherWithTheClusterEnvironment(t *testing.T) {
	f := newFixture(t, map[string]string{
		"fleet.dstack.yml": clusterFleet,
		"task.dstack.yml":  clusterTask("echo rank $DSTACK_NODE_RANK of $DSTACK_NODES_NUM master $DSTACK_MASTER_NODE_IP", ""),
	})
	be := f.withFakeBackend(fake.Config{})
	if res := f.sync(); res != resultSynced {
		t.Fatalf("sync = %s", res)
	}
	insts := f.provisionNodes("train")
	i0, i1 := insts[0], insts[1]
	// A node without its instance (as before a gang is placed, or once a
	// node lost it) holds the others back.
	w := f.node("train", 1)
	w.Status, w.InstanceID = store.JobSubmitted, ""
	if err := f.st.UpdateJob(f.ctx, &w); err != nil {
		t.Fatal(err)
	}
	f.assertWaits(be, "train", 0, "waiting for 1 of 2 nodes to get an instance")
	f.reconcileRun("train")
	if run := f.run("train"); !strings.Contains(run.StatusMessage, "nodes to get an instance") {
		t.Errorf("run = %s %q, want it to say what its master waits for", run.Status, run.StatusMessage)
	}
	w = f.node("train", 1)
	w.Status, w.InstanceID = store.JobProvisioning, i1.ID
	if err := f.st.UpdateJob(f.ctx, &w); err != nil {
		t.Fatal(err)
	}
	if i0.InternalIP == "" || i1.InternalIP == "" || i0.InternalIP == i1.InternalIP {
		t.Fatalf("instances' internal IPs %q and %q, want two known ones", i0.InternalIP, i1.InternalIP)
	}
	run := f.run("train")
	for num, inst := range []store.Instance{i0, i1} {
		j := f.stepNode("train", num, store.JobRunning)
		ts, _ := be.TaskSpec(inst.ID, j.ID)
		if ts.NetworkMode != api.NetworkHost {
			t.Errorf("node %d's container network = %q, want host", num, ts.NetworkMode)
		}
		js, _ := be.JobSpec(inst.ID, j.ID)
		want := &api.ClusterInfo{NodeRank: num, NodesNum: 2, NodesIPs: []string{i0.InternalIP, i1.InternalIP}, MasterIP: i0.InternalIP}
		// The key: TestWorkers_clusterNodesShareOneSSHKeyPerSubmission.
		if diff := cmp.Diff(want, js.Cluster, cmpopts.IgnoreFields(api.ClusterInfo{}, "SSHKey")); diff != "" {
			t.Errorf("node %d's cluster (-want +got):\n%s", num, diff)
		}
		if js.RunID != run.ID || js.JobID != j.ID {
			t.Errorf("node %d's job spec names run %q job %q, want %q %q", num, js.RunID, js.JobID, run.ID, j.ID)
		}
	}
	f.reconcileJobs("train") // hands the jobs to their pumps
	for num := range 2 {
		f.waitNode("train", num, store.JobTerminating)
		j := f.stepNode("train", num, store.JobDone)
		if want := fmt.Sprintf("rank %d of 2 master %s\n", num, i0.InternalIP); f.output(j.ID) != want {
			t.Errorf("node %d printed %q, want %q", num, f.output(j.ID), want)
		}
	}
	f.reconcileRun("train")
	f.reconcileRun("train")
	if run := f.run("train"); run.Status != store.RunDone {
		t.Errorf("run = %s (%s), want done", run.Status, run.TerminationReason)
	}
}

// TestWorkers_clusterStartupOrder: with startup_order master-first a
// worker's container waits until the master runs; with workers-first the
// master's waits until every worker runs; with any neither waits.
func TestWorkers_clusterStartupOrder(t *testing.T) {
	for _, tc := range []struct {
		order         string
		first, second int    // which node may start first, and which waits for it
		wait          string // what the second one waits for ("" = it does not)
	}{
		{"master-first", 0, 1, "waiting for the master node to run"},
		{"workers-first", 1, 0, "waiting for 1 of 1 worker nodes to run"},
		{"any", 1, 0, ""},
	} {
		t.Run(tc.order, func(t *testing.T) {
			f := newFixture(t, map[string]string{
				"fleet.dstack.yml": clusterFleet,
				"task.dstack.yml":  clusterTask("sleep 1h", "startup_order: "+tc.order+"\n"),
			})
			be := f.withFakeBackend(fake.Config{})
			if res := f.sync(); res != resultSynced {
				t.Fatalf("sync = %s", res)
			}
			f.provisionNodes("train")
			if tc.wait != "" {
				f.assertWaits(be, "train", tc.second, tc.wait)
			} else {
				f.stepNode("train", tc.second, store.JobRunning)
			}
			f.stepNode("train", tc.first, store.JobRunning)
			f.stepNode("train", tc.second, store.JobRunning)
		})
	}
}

// TestWorkers_clusterMasterDoneStopsTheWorkers: with stop_criteria
// master-done the run ends done as soon as the master is done: the worker,
// still running, is stopped and ends done too.
func TestWorkers_clusterMasterDoneStopsTheWorkers(t *testing.T) {
	f := newFixture(t, map[string]string{
		"fleet.dstack.yml": clusterFleet,
		// The master sleeps 0h, the worker 1h.
		"task.dstack.yml": clusterTask(`"sleep ${DSTACK_NODE_RANK}h"`, "stop_criteria: master-done\n"),
	})
	f.withFakeBackend(fake.Config{})
	if res := f.sync(); res != resultSynced {
		t.Fatalf("sync = %s", res)
	}
	f.provisionNodes("train")
	f.stepNode("train", 0, store.JobRunning)
	f.stepNode("train", 1, store.JobRunning)
	f.reconcileJobs("train")
	f.waitNode("train", 0, store.JobTerminating)
	f.stepNode("train", 0, store.JobDone)
	if w := f.node("train", 1); w.Status != store.JobRunning {
		t.Fatalf("worker = %s, want still running", w.Status)
	}
	f.reconcileRun("train")
	if run := f.run("train"); run.Status != store.RunTerminating || run.TerminationReason != runReasonAllJobsDone {
		t.Fatalf("run = %s (%s), want terminating all_jobs_done", run.Status, run.TerminationReason)
	}
	f.reconcileRun("train") // stops the worker
	w := f.stepNode("train", 1, store.JobDone)
	if w.TerminationReason != reasonDoneByRunner {
		t.Errorf("worker ended %s, want done_by_runner", w.TerminationReason)
	}
	f.reconcileRun("train")
	if run := f.run("train"); run.Status != store.RunDone {
		t.Errorf("run = %s (%s), want done", run.Status, run.TerminationReason)
	}
}

// TestWorkers_clusterFailedNodeFailsTheRunOrRetriesTheWholeCluster: a
// worker whose container is lost fails the run and the master is stopped;
// with retry on error both nodes are stopped and, after the back-off,
// resubmitted together.
func TestWorkers_clusterFailedNodeFailsTheRunOrRetriesTheWholeCluster(t *testing.T) {
	for _, tc := range []struct {
		name, extra string
		retry       bool
	}{
		{"no retry", "", false},
		{"retry", "retry:\n  on_events: [error]\n  duration: 1h\n", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, map[string]string{
				"fleet.dstack.yml": clusterFleet,
				"task.dstack.yml":  clusterTask("sleep 1h", tc.extra),
			})
			be := f.withFakeBackend(fake.Config{})
			if res := f.sync(); res != resultSynced {
				t.Fatalf("sync = %s", res)
			}
			i1 := f.provisionNodes("train")[1]
			f.stepNode("train", 0, store.JobRunning)
			w := f.stepNode("train", 1, store.JobRunning)
			f.reconcileJobs("train")
			if !be.LoseTask(i1.ID, w.ID) {
				t.Fatal("the worker's task is unknown")
			}
			f.waitNode("train", 1, store.JobTerminating)
			f.stepNode("train", 1, store.JobFailed)
			f.reconcileRun("train")
			if tc.retry {
				if run := f.run("train"); run.Status != store.RunPending {
					t.Fatalf("run = %s (%s), want pending (retrying)", run.Status, run.TerminationReason)
				}
			} else {
				if run := f.run("train"); run.Status != store.RunTerminating || run.TerminationReason != runReasonJobFailed {
					t.Fatalf("run = %s (%s), want terminating job_failed", run.Status, run.TerminationReason)
				}
				f.reconcileRun("train") // stops the master
			}
			if m := f.stepNode("train", 0, store.JobTerminated); m.TerminationReason != reasonTerminatedByServer {
				t.Errorf("master ended %s, want terminated_by_server", m.TerminationReason)
			}
			if !tc.retry {
				f.reconcileRun("train")
				if run := f.run("train"); run.Status != store.RunFailed {
					t.Errorf("run = %s, want failed", run.Status)
				}
				return
			}
			f.clock.Advance(time.Hour / 2)
			f.reconcileRun("train")
			nodes := f.nodes("train")
			if len(nodes) != 2 {
				t.Fatalf("after the back-off the run has %d latest jobs, want 2", len(nodes))
			}
			for _, j := range nodes {
				if j.SubmissionNum != 1 || j.Status != store.JobSubmitted {
					t.Errorf("job %d = submission %d %s, want submission 1 submitted", j.JobNum, j.SubmissionNum, j.Status)
				}
			}
		})
	}
}

// TestWorkers_clusterNodeWithoutInternalIPFails: the nodes of a cluster on
// instances that report no internal IP cannot find each other: they fail
// saying so, and so does the run.
func TestWorkers_clusterNodeWithoutInternalIPFails(t *testing.T) {
	f := newFixture(t, map[string]string{
		"fleet.dstack.yml": clusterFleet,
		"task.dstack.yml":  clusterTask("sleep 1h", ""),
	})
	be := f.withFakeBackend(fake.Config{NoInternalIPs: true})
	if res := f.sync(); res != resultSynced {
		t.Fatalf("sync = %s", res)
	}
	i1 := f.provisionNodes("train")[1]
	j := f.stepNode("train", 1, store.JobTerminated)
	if !strings.Contains(j.TerminationMessage, "no internal IP") {
		t.Errorf("node 1 ended %s %q, want a message about the internal IP", j.TerminationReason, j.TerminationMessage)
	}
	if tasks := be.Tasks(i1.ID); len(tasks) != 0 {
		t.Errorf("instance has tasks %v, want none", tasks)
	}
	f.reconcileRun("train")
	f.reconcileRun("train")
	f.stepNode("train", 0, store.JobTerminated)
	f.reconcileRun("train")
	if run := f.run("train"); run.Status != store.RunFailed {
		t.Errorf("run = %s (%s), want failed", run.Status, run.TerminationReason)
	}
}

// TestWorkers_clusterNodeWaitingForTheMasterDoesNotTimeOut: a worker that
// waits for its master (startup_order master-first) longer than the
// provisioning timeout keeps waiting, and starts once the master runs.
func TestWorkers_clusterNodeWaitingForTheMasterDoesNotTimeOut(t *testing.T) {
	f := newFixture(t, map[string]string{
		"fleet.dstack.yml": clusterFleet,
		"task.dstack.yml":  clusterTask("sleep 1h", "startup_order: master-first\n"),
	})
	be := f.withFakeBackend(fake.Config{})
	if res := f.sync(); res != resultSynced {
		t.Fatalf("sync = %s", res)
	}
	f.provisionNodes("train")
	f.stepNode("train", 0, store.JobPulling)
	f.assertWaits(be, "train", 1, "waiting for the master node to run")
	f.clock.Advance(provisioningTimeout + time.Minute)
	f.assertWaits(be, "train", 1, "waiting for the master node to run")
	f.stepNode("train", 0, store.JobRunning)
	f.stepNode("train", 1, store.JobRunning)
}

// TestWorkers_clusterOfEightNodesRunsUnderTheRunningController: the
// controller's own workers (not stepped by the test) take an eight-node
// task from its sync to all nodes running on a fleet of eight, every
// node with the same eight IPs in rank order. It logs how long that took
// and the time between the first and the last node running, and the same
// for a single-node task to compare.
func TestWorkers_clusterOfEightNodesRunsUnderTheRunningController(t *testing.T) {
	for _, n := range []int{1, 8} {
		t.Run(fmt.Sprintf("%d nodes", n), func(t *testing.T) { testClusterRunsUnderTheRunningController(t, n) })
	}
}

func testClusterRunsUnderTheRunningController(t *testing.T, n int) {
	f := newFixture(t, map[string]string{
		"fleet.dstack.yml": fmt.Sprintf("type: fleet\nname: cloud\nnodes: %d\nplacement: cluster\n", n),
		"task.dstack.yml":  fmt.Sprintf("type: task\nname: train\nimage: busybox\nnodes: %d\ncommands: [sleep 1h]\n", n),
	})
	be := f.withFakeBackend(fake.Config{})
	start := time.Now()
	if res := f.sync(); res != resultSynced {
		t.Fatalf("sync = %s", res)
	}
	ctx, cancel := context.WithCancel(f.ctx)
	done := make(chan error, 1)
	go func() { done <- f.c.Run(ctx) }()
	go func() { // the fixture's clock follows real time: the queues' delays run on it
		for last := time.Now(); ctx.Err() == nil; {
			time.Sleep(time.Millisecond)
			now := time.Now()
			f.clock.Advance(now.Sub(last))
			last = now
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	running := map[int]time.Duration{}
	deadline := time.Now().Add(60 * time.Second)
	for len(running) < n {
		if time.Now().After(deadline) {
			var st []string
			for _, j := range f.nodes("train") {
				st = append(st, j.Status+" "+j.StatusMessage)
			}
			t.Fatalf("after 60 s %d of %d nodes run: %q", len(running), n, st)
		}
		for _, j := range f.nodes("train") {
			if _, ok := running[j.JobNum]; !ok && j.Status == store.JobRunning {
				running[j.JobNum] = time.Since(start)
			}
			if store.IsJobFinished(j.Status) {
				t.Fatalf("node %d ended %s (%s %q)", j.JobNum, j.Status, j.TerminationReason, j.TerminationMessage)
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
	first, last := time.Duration(1<<62), time.Duration(0)
	for _, d := range running {
		first, last = min(first, d), max(last, d)
	}
	t.Logf("%d nodes: sync to all running %s; first node running after %s, last after %s (spread %s)",
		n, last.Round(time.Millisecond), first.Round(time.Millisecond), last.Round(time.Millisecond), (last - first).Round(time.Millisecond))
	var want []string
	for _, j := range f.nodes("train") {
		want = append(want, f.instance(j.InstanceID).InternalIP)
	}
	for _, j := range f.nodes("train") {
		js, _ := be.JobSpec(j.InstanceID, j.ID)
		if js.Cluster == nil || !slices.Equal(js.Cluster.NodesIPs, want) || js.Cluster.NodeRank != j.JobNum {
			t.Errorf("node %d's cluster = %+v, want rank %d of IPs %v", j.JobNum, js.Cluster, j.JobNum, want)
		}
	}
}
