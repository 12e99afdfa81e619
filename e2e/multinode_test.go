package e2e

import (
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"hoist/e2e/testenv"
)

// newNetnsFleetEnv is an sshFleetEnv whose n hosts are simulated hosts in
// network namespaces of their own (testenv.NetHosts: each with its own
// address on a bridge the test makes, reached from the server's namespace
// by a route to those addresses only), each running an sshd on port 22.
// The SSH backend deploys its shim through that sshd, so the shim runs in
// the host's namespace, and its host-network jobs do too (agents/shim,
// netns.go).
func newNetnsFleetEnv(t *testing.T, n int) (*sshFleetEnv, []*testenv.NetHost) {
	t.Helper()
	testenv.Docker(t)
	nets := testenv.NetHosts(t, n)
	client := testenv.NewSSHKey(t, t.TempDir(), "id_ed25519")
	var hosts []*testenv.SSHD
	for _, h := range nets {
		hosts = append(hosts, h.StartSSHD(t, client.Signer.PublicKey()))
	}
	return startSSHFleetServer(t, hosts, client), nets
}

// clusterJob is a job of a multi-node run as GET /api/v1/runs/{name}
// returns it.
type clusterJob struct {
	ID                string     `json:"id"`
	JobName           string     `json:"job_name"`
	SubmissionNum     int        `json:"submission_num"`
	Status            string     `json:"status"`
	TerminationReason string     `json:"termination_reason"`
	Instance          string     `json:"instance"`
	StartedAt         *time.Time `json:"started_at"`
}

// TestMultiNode_twoNodeTaskTalksAcrossNamespaceHosts drives a
// `placement: cluster` SSH fleet of two simulated hosts (network namespaces
// with their own addresses) through `hoist serve` and Git: both hosts
// become ready and a one-node task runs on one of them; then a `nodes: 2`
// task runs one job on each host with host networking, rank 1 connects to
// $DSTACK_MASTER_NODE_IP on the port rank 0 listens on (busybox nc), both
// print their cluster environment, and the run is done (it prints commit →
// all nodes running and the time between the first and the last node's
// start); with `stop_criteria: master-done` the worker is stopped once the
// master is done and the run is done; a `nodes: 3` run on the two hosts
// fails for want of capacity without placing or starting any node.
func TestMultiNode_twoNodeTaskTalksAcrossNamespaceHosts(t *testing.T) {
	e, nets := newNetnsFleetEnv(t, 2)
	s, r := e.s, e.r

	t.Log("phase: a cluster fleet of two namespace hosts becomes ready")
	r.write("fleet.dstack.yml", e.fleetSpec(e.hosts...)+"placement: cluster\n")
	r.commit("cluster fleet of two namespace hosts")
	s.waitInstances(2*sshWithin, "both hosts idle and reachable", func(is map[string]apiInstance) bool {
		return len(is) == 2 && allInstances(is, func(i apiInstance) bool { return i.Status == "idle" && i.Reachable && i.Backend == "ssh" })
	})
	hostIP := map[string]string{} // host address of each instance, by name
	for _, rec := range s.sshRecords() {
		hostIP[rec.Name] = rec.Host.Hostname
	}
	for _, h := range nets {
		if !slices.Contains(slices.Collect(mapValues(hostIP)), h.IP) {
			t.Fatalf("no instance on host %s: %v", h.IP, hostIP)
		}
	}

	t.Log("phase: a one-node task runs on a namespace host")
	r.write("one.dstack.yml", task("one", "  - echo one node\n")+"fleets: ["+sshFleetName+"]\n")
	sha := r.commit("a one-node task")
	s.waitRun("one", sha, "done", sshWithin)
	if got := s.logs("one"); got != "one node\n" {
		t.Fatalf("one: logs %q", got)
	}

	t.Log("phase: a nodes: 2 task runs one job per host; rank 1 reaches rank 0 at the master's address")
	r.write("pair.dstack.yml", fmt.Sprintf(`type: task
name: pair
image: %s
nodes: 2
fleets: [%s]
%s`, testenv.BusyboxImage, sshFleetName, pairCommands("7100", 100)))
	committed := time.Now()
	sha = r.commit("a two-node task")
	s.waitRun("pair", sha, "done", 2*sshWithin)

	var run struct {
		Status string       `json:"status"`
		Jobs   []clusterJob `json:"jobs"`
	}
	if code := s.getJSON("/api/v1/runs/pair", &run); code != 200 {
		t.Fatalf("GET /api/v1/runs/pair: %d", code)
	}
	master, worker := pairNodes(t, run.Jobs)
	masterIP, workerIP := hostIP[master.Instance], hostIP[worker.Instance]
	checkPairLogs(t, s, master, worker, masterIP, workerIP)
	first, last := startSpan([]clusterJob{master, worker})
	t.Logf("figures: 2-node run on namespace hosts: commit → all nodes running %s; first → last node start %s",
		last.Sub(committed).Round(time.Millisecond), last.Sub(first).Round(time.Millisecond))

	bothIdle := func(is map[string]apiInstance) bool {
		return len(is) == 2 && allInstances(is, func(i apiInstance) bool { return i.Status == "idle" && i.Reachable })
	}
	t.Log("phase: stop_criteria master-done stops the worker once the master is done")
	s.waitInstances(sshWithin, "both hosts idle again", bothIdle)
	r.write("lead.dstack.yml", fmt.Sprintf(`type: task
name: lead
image: %s
nodes: 2
stop_criteria: master-done
fleets: [%s]
commands:
  - |
    if [ "$DSTACK_NODE_RANK" = 0 ]; then
      echo master done
    else
      echo worker up
      sleep 600
    fi
`, testenv.BusyboxImage, sshFleetName))
	sha = r.commit("a two-node task that ends with its master")
	s.waitRun("lead", sha, "done", 2*sshWithin)
	lead := s.clusterJobs("lead")
	if len(lead) != 2 || !slices.ContainsFunc(lead, func(j clusterJob) bool { return strings.HasPrefix(j.JobName, "lead-1-") }) {
		t.Fatalf("lead jobs: %+v, want the master and the worker", lead)
	}
	for _, j := range lead {
		if j.Status != "done" {
			t.Errorf("lead job %s: %s, want done (the worker stopped with the master)", j.JobName, j.Status)
		}
	}

	t.Log("phase: a nodes: 3 run on the two hosts fails for want of capacity and never starts a partial cluster")
	s.waitInstances(sshWithin, "both hosts idle again", bothIdle)
	r.write("trio.dstack.yml", task("trio", "  - echo must not run\n")+"nodes: 3\nfleets: ["+sshFleetName+"]\n")
	sha = r.commit("a three-node task on two hosts")
	s.waitRun("trio", sha, "failed", sshWithin)
	trio := s.clusterJobs("trio")
	if len(trio) != 3 {
		t.Fatalf("trio jobs: %+v, want three", trio)
	}
	for _, j := range trio {
		if j.Instance != "" || j.StartedAt != nil {
			t.Errorf("trio job %s placed on %q (started %v): a partial cluster", j.JobName, j.Instance, j.StartedAt)
		}
	}
	if i := slices.IndexFunc(trio, func(j clusterJob) bool { return strings.HasPrefix(j.JobName, "trio-0-") }); i < 0 || trio[i].TerminationReason != "failed_to_start_due_to_no_capacity" {
		t.Errorf("trio master: %+v, want failed_to_start_due_to_no_capacity", trio)
	}
	if got := s.jobLogs("trio", trio[0].ID); got != "" {
		t.Errorf("trio logged %q: a node ran", got)
	}
}

// clusterJobs returns the jobs of run name.
func (s *server) clusterJobs(name string) []clusterJob {
	s.t.Helper()
	var run struct {
		Jobs []clusterJob `json:"jobs"`
	}
	if code := s.getJSON("/api/v1/runs/"+name, &run); code != 200 {
		s.t.Fatalf("GET /api/v1/runs/%s: %d", name, code)
	}
	return run.Jobs
}

// jobLogs returns the logs of one job (by id) of run name.
func (s *server) jobLogs(name, job string) string {
	s.t.Helper()
	code, b := s.do("GET", "/api/v1/runs/"+name+"/logs?job="+url.QueryEscape(job), nil)
	if code != 200 {
		s.t.Fatalf("logs of %s job %s: %d %s", name, job, code, b)
	}
	return string(b)
}

// mapValues yields the values of m.
func mapValues[K comparable, V any](m map[K]V) func(func(V) bool) {
	return func(yield func(V) bool) {
		for _, v := range m {
			if !yield(v) {
				return
			}
		}
	}
}

// TestMeasure_multiNode measures, through `hoist serve` and Git, a task of
// 2 and of 8 nodes on a `placement: cluster` SSH fleet of 8 namespace
// hosts: commit → all nodes running, and the time between the first and
// the last node's start. It runs only with HOIST_MEASURE=1.
func TestMeasure_multiNode(t *testing.T) {
	if os.Getenv("HOIST_MEASURE") == "" {
		t.Skip("set HOIST_MEASURE=1 to measure")
	}
	const hosts = 8
	e, _ := newNetnsFleetEnv(t, hosts)
	e.r.write("fleet.dstack.yml", e.fleetSpec(e.hosts...)+"placement: cluster\n")
	e.r.commit("cluster fleet of namespace hosts")
	idle := func(is map[string]apiInstance) bool {
		return len(is) == hosts && allInstances(is, func(i apiInstance) bool { return i.Status == "idle" && i.Reachable })
	}
	e.s.waitInstances(4*sshWithin, "every host idle and reachable", idle)
	for _, nodes := range []int{2, 8} {
		for round := range 3 {
			name := fmt.Sprintf("m%d-%d", nodes, round)
			e.r.write(name+".dstack.yml", task(name, "  - echo rank $DSTACK_NODE_RANK\n")+
				fmt.Sprintf("nodes: %d\nfleets: [%s]\n", nodes, sshFleetName))
			committed := time.Now()
			sha := e.r.commit(name)
			e.s.waitRun(name, sha, "done", 2*sshWithin)
			var first, last time.Time
			for _, j := range e.s.clusterJobs(name) {
				if j.StartedAt == nil {
					t.Fatalf("%s job %s never started", name, j.JobName)
				}
				if first.IsZero() || j.StartedAt.Before(first) {
					first = *j.StartedAt
				}
				if j.StartedAt.After(last) {
					last = *j.StartedAt
				}
			}
			t.Logf("figures: %d-node run %d on namespace hosts: commit → all nodes running %s; first → last node start %s",
				nodes, round, last.Sub(committed).Round(time.Millisecond), last.Sub(first).Round(time.Millisecond))
			e.s.waitInstances(sshWithin, "every host idle again", idle)
		}
	}
}
