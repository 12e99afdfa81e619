package e2e

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"hoist/e2e/cloudsim/sim"
)

// TestClouds_multiNode runs the two-node task of
// TestMultiNode_twoNodeTaskTalksAcrossNamespaceHosts on the cloud
// simulator, through `hoist serve` and Git, on AWS, GCP and Azure: one commit
// adds a `placement: cluster` fleet of 0..2 nodes and a `nodes: 2` task
// on it; the gang grows the fleet by two VMs (on AWS and GCP in a
// cluster placement group hoist creates), runs one job on each with host
// networking, rank 1 connects with busybox nc to $DSTACK_MASTER_NODE_IP
// (the master VM's private IP) on the port rank 0 listens on, both print
// the cluster environment, and the run is done; removing the specs
// terminates the VMs and deletes the placement group. A simulated VM's
// private IP is its own 127.77.x.y address and its shim runs in the
// machine's network namespace: the nodes share that namespace and are
// told apart by their addresses.
func TestClouds_multiNode(t *testing.T) {
	for _, p := range []string{"aws", "gcp", "azure"} {
		t.Run(p, func(t *testing.T) {
			e := newCloudEnv(t, p, "2s")
			e.twoNodeTask()
		})
	}
}

// twoNodeTask is TestClouds_multiNode on the env's cloud.
func (e *cloudEnv) twoNodeTask() {
	t, s, r := e.t, e.s, e.r
	t.Log("phase: a cluster fleet of 0..2 nodes and a nodes: 2 task on it; the gang grows the fleet")
	r.write("cluster.dstack.yml", e.clusterFleetSpec("cluster", "0..2"))
	// The VMs' shims run in this machine's network namespace, where other
	// tests may listen too: the master listens on a port free here.
	_, port, _ := strings.Cut(freePort(t), ":")
	r.write("pair.dstack.yml", e.taskOn("pair", "cluster", strings.TrimPrefix(pairCommands(port, 100), "commands:\n"))+"nodes: 2\n")
	committed := time.Now()
	sha := r.commit("a cluster fleet and a two-node task on " + e.provider)
	s.waitRun("pair", sha, "done", 2*cloudWithin)

	master, worker := pairNodes(t, s.clusterJobs("pair"))
	vms := e.liveVMs()
	if len(vms) != 2 {
		t.Fatalf("%d live VMs of the installation, want the fleet's 2: %+v", len(vms), vms)
	}
	masterVM, workerVM := e.vmOf(vms, master.Instance), e.vmOf(vms, worker.Instance)
	masterIP, workerIP := masterVM.Address, workerVM.Address
	for _, ip := range []string{masterIP, workerIP} {
		if !strings.HasPrefix(ip, "127.77.") {
			t.Fatalf("VM addresses %s and %s, want two 127.77 addresses", masterIP, workerIP)
		}
	}
	checkPairLogs(t, s, master, worker, masterIP, workerIP)
	first, last := startSpan([]clusterJob{master, worker})
	t.Logf("figures: 2-node run on the %s simulator, fleet grown by the gang: commit → all nodes running %s; first → last node start %s",
		e.provider, last.Sub(committed).Round(time.Millisecond), last.Sub(first).Round(time.Millisecond))

	var groups []sim.Resource
	if e.provider != "azure" && e.provider != "vultr" { // hoist's Azure and Vultr drivers have no placement groups
		t.Log("phase: both VMs are in the fleet's cluster placement group")
		groups = e.placementGroups()
		if len(groups) != 1 || groups[0].Extra["strategy"] != "cluster" && groups[0].Extra["availability"] != "COLLOCATED" {
			t.Fatalf("placement groups of the installation: %+v, want one cluster (EC2) or COLLOCATED (GCE) group", groups)
		}
		for _, vm := range vms {
			if !inGroup(vm, groups[0]) {
				t.Errorf("VM %s (%s) is not in placement group %s: %+v", vm.ID, vm.Name, groups[0].Name, vm.Extra)
			}
		}
	}

	t.Log("phase: removing the specs terminates the VMs (and deletes the placement group)")
	r.remove("pair.dstack.yml")
	r.remove("cluster.dstack.yml")
	e.removeCommit("remove the two-node task and its fleet")
	e.waitNothingLeft()
	for _, vm := range vms {
		if got := e.vm(vm.ID); got.State != sim.StateTerminated {
			t.Errorf("VM %s is %s after the fleet was removed, want %s", vm.ID, got.State, sim.StateTerminated)
		}
	}
	if len(groups) > 0 {
		var left []sim.Resource
		waitFor(t, cloudWithin, func() string { return fmt.Sprintf("placement group deleted (left: %+v)", left) }, func() bool {
			left = e.placementGroups()
			return len(left) == 0
		})
	}
}

// clusterFleetSpec is a `placement: cluster` fleet of nodes (a count or a
// range) on the env's cloud with small CPU resources.
func (e *cloudEnv) clusterFleetSpec(name, nodes string) string {
	return strings.Replace(e.fleetSpec(name, "on-demand"), "nodes: 1\n", "nodes: "+nodes+"\nplacement: cluster\n", 1)
}

// liveVMs returns the VMs of the installation that are not gone.
func (e *cloudEnv) liveVMs() []sim.Resource {
	var live []sim.Resource
	for _, r := range e.sim.Instances() {
		if r.Kind == sim.KindInstance && e.ours(r) && !gone(r) {
			live = append(live, r)
		}
	}
	return live
}

// vmOf returns the VM among vms of hoist instance name: the VM drivers
// name it hoist-<instance>-<8 hex> (backends/vm.ResourceName).
func (e *cloudEnv) vmOf(vms []sim.Resource, name string) sim.Resource {
	e.t.Helper()
	prefix := "hoist-" + name + "-"
	i := slices.IndexFunc(vms, func(r sim.Resource) bool { return strings.HasPrefix(r.Name, prefix) })
	if i < 0 {
		e.t.Fatalf("no VM named %s… among %+v", prefix, vms)
	}
	return vms[i]
}

// placementGroups returns the installation's placement groups in the
// simulator that are not deleted: EC2 placement groups (tagged) and GCE
// group placement resource policies (which have no labels: hoist writes
// its tags into the description).
func (e *cloudEnv) placementGroups() []sim.Resource {
	var out []sim.Resource
	for _, r := range e.sim.Instances() {
		if gone(r) || r.Extra["deleted"] == "true" {
			continue
		}
		if r.Kind == "placement_group" && e.ours(r) ||
			r.Kind == "resource_policy" && strings.Contains(r.Extra["description"], `"`+e.s.install+`"`) {
			out = append(out, r)
		}
	}
	return out
}

// inGroup reports whether vm was launched in placement group g (an EC2
// placement group by name, a GCE resource policy by link).
func inGroup(vm, g sim.Resource) bool {
	if g.Kind == "resource_policy" {
		return slices.ContainsFunc(strings.Fields(vm.Extra["policies"]), func(l string) bool {
			return strings.HasSuffix(l, "/resourcePolicies/"+g.Name)
		})
	}
	return vm.Extra["placement_group"] == g.Name
}

// startSpan returns the earliest and the latest start of jobs, which all
// started.
func startSpan(jobs []clusterJob) (first, last time.Time) {
	for _, j := range jobs {
		if first.IsZero() || j.StartedAt.Before(first) {
			first = *j.StartedAt
		}
		if j.StartedAt.After(last) {
			last = *j.StartedAt
		}
	}
	return first, last
}

// TestMeasure_cloudMultiNode measures, through `hoist serve` and Git on
// the AWS simulator, tasks of 2 and of 8 nodes on a `placement: cluster`
// fleet: commit → all nodes running and the time between the first and
// the last node's start, cold (the fleet has no instance: the commit adds
// the fleet and the task, and the gang grows the fleet by its VMs) and
// warm (the fleet's instances are up and idle). It runs only with
// HOIST_MEASURE=1 (task measure:multinode).
func TestMeasure_cloudMultiNode(t *testing.T) {
	if os.Getenv("HOIST_MEASURE") == "" {
		t.Skip("set HOIST_MEASURE=1 to measure")
	}
	e := newCloudEnv(t, "aws", "2s")
	measure := func(name, fleet string, nodes int, cold bool, how string) {
		t.Helper()
		committed := time.Now()
		sha := e.r.commit(name)
		// While the run goes, note when the fleet's `nodes` instances were
		// all up (reachable, idle or already given to the gang).
		var up time.Time
		var run apiRun
		waitFor(t, 4*cloudWithin, func() string { return fmt.Sprintf("run %s done (last: %s)", name, run.Status) }, func() bool {
			if up.IsZero() {
				var is []cloudInstance
				e.s.getJSON("/api/v1/instances?fleet="+fleet, &is)
				if upCount(is) == nodes {
					up = time.Now()
				}
			}
			run = apiRun{}
			return e.s.getJSON("/api/v1/runs/"+name, &run) == 200 && run.Revision == sha && run.Status == "done"
		})
		jobs := e.s.clusterJobs(name)
		if len(jobs) != nodes {
			t.Fatalf("%s jobs: %+v, want %d", name, jobs, nodes)
		}
		for _, j := range jobs {
			if j.StartedAt == nil || j.Status != "done" {
				t.Fatalf("%s job %+v, want done with a start time", name, j)
			}
		}
		first, last := startSpan(jobs)
		t.Logf("figures: %d-node run %s on the aws simulator (%s): commit → all nodes running %s; first → last node start %s",
			nodes, name, how, last.Sub(committed).Round(time.Millisecond), last.Sub(first).Round(time.Millisecond))
		if cold {
			t.Logf("figures: %s: commit → the %d instances up %s, then → all nodes running %s",
				name, nodes, up.Sub(committed).Round(time.Millisecond), last.Sub(up).Round(time.Millisecond))
			log := e.s.logText()
			t.Logf("figures: %s: per VM, launch → take-over begins (vm_ready boot: the VM running and seen so by hoist) %s, then the take-over: SSH, agents' upload, shim answering (shim_ready elapsed) %s",
				name, lastDurations(log, "vm_ready", "boot", nodes), lastDurations(log, "shim_ready", "elapsed", nodes))
		}
		t.Logf("figures: %s: job events after the commit (count, type, first … last): %s", name, e.s.statusSpans(name, committed))
	}
	taskSpec := func(name, fleet string, nodes int) string {
		return e.taskOn(name, fleet, "  - echo rank $DSTACK_NODE_RANK\n") + fmt.Sprintf("nodes: %d\n", nodes)
	}
	allIdle := func(fleet string, n int) {
		t.Helper()
		var is []cloudInstance
		waitFor(t, 2*cloudWithin, func() string { return fmt.Sprintf("%d instances of %s idle (have %d)", n, fleet, readyCount(is)) }, func() bool {
			is = nil
			e.s.getJSON("/api/v1/instances?fleet="+fleet, &is)
			return readyCount(is) == n
		})
	}
	for _, nodes := range []int{2, 8} {
		fleet := fmt.Sprintf("c%d", nodes)
		e.r.write(fleet+".dstack.yml", e.clusterFleetSpec(fleet, fmt.Sprintf("0..%d", nodes)))
		name := fmt.Sprintf("cold%d", nodes)
		e.r.write(name+".dstack.yml", taskSpec(name, fleet, nodes))
		measure(name, fleet, nodes, true, "cold: the gang grows an empty fleet")
		allIdle(fleet, nodes)
		for round := range 3 {
			name := fmt.Sprintf("warm%d-%d", nodes, round)
			e.r.write(name+".dstack.yml", taskSpec(name, fleet, nodes))
			measure(name, fleet, nodes, false, "warm: the fleet's instances idle")
			allIdle(fleet, nodes)
		}
		entries, err := os.ReadDir(e.r.dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, de := range entries {
			if strings.HasSuffix(de.Name(), ".dstack.yml") {
				e.r.remove(de.Name())
			}
		}
		e.removeCommit(fmt.Sprintf("remove the %d-node fleet and its runs", nodes))
		e.waitNothingLeft()
	}
}

// upCount counts the reachable instances that are idle or busy.
func upCount(is []cloudInstance) int {
	n := 0
	for _, i := range is {
		if (i.Status == "idle" || i.Status == "busy") && i.Reachable {
			n++
		}
	}
	return n
}

// timedEvent is an event as GET /api/v1/events returns it, with its time.
type timedEvent struct {
	Time time.Time `json:"time"`
	Name string    `json:"name"`
	Type string    `json:"type"`
}

// statusSpans says, for each type of job event of run name (waiting,
// provisioning, pulling, running, ...), when the first and the last of
// them came, after since.
func (s *server) statusSpans(name string, since time.Time) string {
	s.t.Helper()
	var events []timedEvent
	if code := s.getJSON("/api/v1/events?kind=job&limit=1000", &events); code != 200 {
		s.t.Fatalf("GET /api/v1/events: %d", code)
	}
	slices.SortFunc(events, func(a, b timedEvent) int { return a.Time.Compare(b.Time) })
	var order []string
	first, last, count := map[string]time.Time{}, map[string]time.Time{}, map[string]int{}
	for _, ev := range events {
		if !strings.HasPrefix(ev.Name, name+"-") {
			continue
		}
		if _, ok := first[ev.Type]; !ok {
			order = append(order, ev.Type)
			first[ev.Type] = ev.Time
		}
		last[ev.Type] = ev.Time
		count[ev.Type]++
	}
	var out []string
	for _, ty := range order {
		out = append(out, fmt.Sprintf("%d %s %s … %s", count[ty], ty, first[ty].Sub(since).Round(time.Millisecond), last[ty].Sub(since).Round(time.Millisecond)))
	}
	return strings.Join(out, ", ")
}

// lastDurations returns the smallest and the largest of the duration
// field key of the last n lines of hoist log text with message msg.
func lastDurations(text, msg, key string, n int) string {
	var ds []time.Duration
	for _, l := range strings.Split(text, "\n") {
		if !strings.Contains(l, " msg="+msg+" ") {
			continue
		}
		for _, f := range strings.Fields(l) {
			if v, ok := strings.CutPrefix(f, key+"="); ok {
				if d, err := time.ParseDuration(v); err == nil {
					ds = append(ds, d)
				}
			}
		}
	}
	ds = ds[max(len(ds)-n, 0):]
	if len(ds) == 0 {
		return "(not logged)"
	}
	return fmt.Sprintf("%s … %s", slices.Min(ds).Round(time.Millisecond), slices.Max(ds).Round(time.Millisecond))
}
