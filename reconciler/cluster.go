package reconciler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"hoist/agents/api"
	"hoist/backends"
	"hoist/schema"
	"hoist/store"
)

// The values of a run's startup_order and stop_criteria other than the
// defaults (any, all-done), dstack's StartupOrder and StopCriteria.
const (
	startupMasterFirst  = "master-first"
	startupWorkersFirst = "workers-first"
	stopMasterDone      = "master-done"
)

// clusterWaitPoll is how often a node waiting for the other nodes of its
// replica looks again; a node that starts running wakes the others at once.
const clusterWaitPoll = time.Second

// taskGPUs is the number of GPUs a job's container gets on a whole
// instance: the low end of its resources' GPU count (on some of an
// instance's blocks, its share's: jobPart).
func taskGPUs(spec runSpec) int {
	if g := spec.Resources.GPU; g.Count.Min != nil && *g.Count.Min > 0 {
		return int(*g.Count.Min)
	}
	return 0
}

// clusterGate is what the nodes of a job's replica say about starting it.
type clusterGate struct {
	// Info is the job's cluster, set once every node of the replica has
	// its instance.
	Info *api.ClusterInfo
	// Wait says what the job waits for; "" when it may start.
	Wait string
	// Fail says why the job can never start; "" when it can.
	Fail string
	// Hold is set with Wait when the job waits with its container
	// created: for the addresses of the other nodes' containers, or for
	// its startup_order (see clusterFor).
	Hold bool
}

// clusterFor returns the cluster of job: the latest submissions of the
// jobs of its replica, one node each in job number order, with the
// internal IPs of their instances (dstack's _get_cluster_info in
// server/background/pipeline_tasks/jobs_running.py). Like dstack, a job
// waits until every node of its replica has an instance; creating, it
// also waits as the run's startup_order says (_should_wait_for_other_nodes):
// master-first keeps the workers until the master (job 0) runs,
// workers-first keeps the master until every worker runs. A multi-node
// job on an instance without an internal IP fails: its nodes could not
// find each other. The nodes of a cluster of several get the key their
// master keeps (clusterSSHKey) to SSH into each other.
//
// On a backend whose jobs run in containers of their own (RuntimeRunner:
// Kubernetes pods) a node's address is its container's, known once the
// container exists (dstack sets a Kubernetes job's internal_ip to its
// pod's IP once the pod runs, update_provisioning_data in
// core/backends/kubernetes/compute.py): before the containers are created
// (creating) the nodes only wait for their instances; after, each waits
// (Hold) until every node's container has reported its address
// (JobRuntime.InternalIP) and then for its startup_order, as dstack's
// container backends wait before the job is submitted to the runner.
func (c *Controller) clusterFor(ctx context.Context, job *store.Job, run *store.Run, spec runSpec, creating bool) (clusterGate, error) {
	jobs, err := c.st.ListJobs(ctx, run.ID)
	if err != nil {
		return clusterGate{}, err
	}
	var nodes []store.Job
	for _, j := range latestSubmissions(jobs) {
		if j.ReplicaNum == job.ReplicaNum {
			nodes = append(nodes, j)
		}
	}
	slices.SortFunc(nodes, func(a, b store.Job) int { return a.JobNum - b.JobNum })
	if len(nodes) == 0 || !slices.ContainsFunc(nodes, func(j store.Job) bool { return j.ID == job.ID }) ||
		schema.Kind(spec.Type) == schema.KindWorkflow {
		// An older submission, or a workflow's job (which reaches others
		// through its `master`): it is its own cluster.
		nodes = []store.Job{*job}
	}
	n := len(nodes)
	if n > 1 && c.traitsOf(job.Backend).Isolated {
		return clusterGate{Fail: fmt.Sprintf("backend %s runs each job in a container of its own with no network between them: "+
			"a run of %d nodes cannot run there", job.Backend, n)}, nil
	}
	missing := 0
	for _, j := range nodes {
		if j.InstanceID == "" || j.Status == store.JobSubmitted {
			missing++
		}
	}
	if missing > 0 {
		return clusterGate{Wait: fmt.Sprintf("waiting for %d of %d nodes to get an instance", missing, n)}, nil
	}
	if failed, ok := firstFailed(nodes); ok && failed.ID != job.ID {
		// The run worker stops the cluster or resubmits it whole.
		return clusterGate{Wait: fmt.Sprintf("node %d ended %s; waiting for the run to stop or retry", failed.JobNum, failed.TerminationReason)}, nil
	}
	containers := c.traitsOf(job.Backend).Runtime == backends.RuntimeRunner
	if containers && creating {
		return clusterGate{}, nil
	}
	ips := make([]string, n)
	noAddress := 0
	for i, j := range nodes {
		if containers {
			if ips[i] = j.Runtime().InternalIP; ips[i] != "" {
				continue
			}
			if n > 1 {
				noAddress++
				continue
			}
		}
		inst, err := c.st.GetInstance(ctx, j.InstanceID)
		if errors.Is(err, store.ErrNotFound) {
			inst = store.Instance{Name: j.InstanceID, Backend: j.Backend} // gone: no IP
		} else if err != nil {
			return clusterGate{}, err
		}
		if n > 1 && inst.InternalIP == "" {
			return clusterGate{Fail: fmt.Sprintf("instance %s of node %d has no internal IP for the other nodes to reach it at "+
				"(an SSH fleet's host needs an address or internal_ip; backend %s reports none)", inst.Name, j.JobNum, inst.Backend)}, nil
		}
		ips[i] = inst.InternalIP
	}
	if noAddress > 0 {
		return clusterGate{Wait: fmt.Sprintf("waiting for %d of %d nodes' containers to get an address", noAddress, n), Hold: true}, nil
	}
	if creating || containers {
		if wait := startupWait(nodes, job, spec.StartupOrder); wait != "" {
			return clusterGate{Wait: wait, Hold: containers}, nil
		}
	}
	gpus := taskGPUs(spec)
	if part, shared, err := c.jobPart(ctx, *job); err != nil {
		return clusterGate{}, err
	} else if shared {
		gpus = part.GPUCount // its share's, as createTask gives its container
	}
	all, perNode := n*gpus, []int(nil)
	if len(spec.Groups) > 0 {
		// The nodes of a task with groups have their groups' GPUs.
		all, perNode = 0, make([]int, n)
		for i, j := range nodes {
			perNode[i] = taskGPUs(spec.forJob(j.JobNum))
			all += perNode[i]
		}
	}
	info := &api.ClusterInfo{NodeRank: job.JobNum, NodesNum: n, NodesIPs: ips, MasterIP: ips[0], GPUsPerNode: gpus, GPUsNum: all, NodesGPUs: perNode}
	if n > 1 {
		info.SSHKey = clusterSSHKey(nodes[0])
	}
	return clusterGate{Info: info}, nil
}

// startupWait says what job waits for under startup_order (nodes are its
// replica's, master first), "" when nothing. dstack's
// _should_wait_for_other_nodes waits for the other node's RUNNING status;
// a node also counts here once it has run and ended, so that a master done
// before a worker looked does not keep that worker waiting (a node that
// failed before running makes the run worker stop or retry the cluster).
func startupWait(nodes []store.Job, job *store.Job, order string) string {
	switch order {
	case startupMasterFirst:
		if job.JobNum != 0 && !hasRun(nodes[0]) {
			return "waiting for the master node to run (startup_order: master-first)"
		}
	case startupWorkersFirst:
		if job.JobNum != 0 {
			return ""
		}
		waiting := 0
		for _, j := range nodes[1:] {
			if !hasRun(j) {
				waiting++
			}
		}
		if waiting > 0 {
			return fmt.Sprintf("waiting for %d of %d worker nodes to run (startup_order: workers-first)", waiting, len(nodes)-1)
		}
	}
	return ""
}

// hasRun reports whether a job has started running (and may have ended
// since).
func hasRun(j store.Job) bool {
	return j.Status == store.JobRunning || !j.StartedAt.IsZero()
}

// wakeNodes wakes the other nodes of a job's replica that wait for the
// cluster: this job just got its instance, its container's address, or
// runs.
func (c *Controller) wakeNodes(ctx context.Context, job *store.Job) {
	jobs, err := c.st.ListJobs(ctx, job.RunID)
	if err != nil {
		return
	}
	for _, j := range latestSubmissions(jobs) {
		if j.ReplicaNum == job.ReplicaNum && j.ID != job.ID && (j.Status == store.JobProvisioning || j.Status == store.JobPulling) {
			c.jobs.Add(j.ID)
		}
	}
}

// masterDone reports whether the run stops because its master is done:
// stop_criteria master-done and a job 0 done (dstack's
// _should_stop_on_master_done in server/background/pipeline_tasks/runs/active.py).
func masterDone(spec runSpec, latest []store.Job) bool {
	if spec.StopCriteria != stopMasterDone {
		return false
	}
	return slices.ContainsFunc(latest, func(j store.Job) bool { return j.JobNum == 0 && j.Status == store.JobDone })
}
