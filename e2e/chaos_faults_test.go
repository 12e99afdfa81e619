package e2e

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"hoist/backends"
	"hoist/e2e/cloudsim/sim"
)

// allFaults weighs every kind of injected fault alike.
var allFaults = map[sim.Fault]float64{
	sim.FaultTransient: 1, sim.FaultThrottle: 1, sim.FaultCapacity: 1, sim.FaultTimeout: 1, sim.FaultLost: 1,
}

// TestChaos_faults runs `hoist serve` on the simulated AWS while 30 % of
// the EC2 calls fail in every way EC2 fails (server errors, throttling,
// capacity on RunInstances, timeouts, and answers lost after the call was
// carried out), with latency on every call: a fleet of small instances
// comes up and a task prints numbered lines, all of them once and in
// order; removing them under the same faults leaves nothing. Throughout,
// no VM of the installation is unknown to hoist, no hoist instance got two
// VMs (a RunInstances retried after a lost answer returns the instance its
// client token made) and no instance hoist counts on is missing (auditFaults);
// the retries show in /metrics (back-off by queue, failed backend calls by
// kind). The default run has 2 nodes and 20 lines; HOIST_CHAOS=full has 6
// nodes, 200 lines and two rounds, and prints a summary line.
func TestChaos_faults(t *testing.T) {
	t.Parallel() // mostly waits: runs beside the other slow tests (harness_test.go)
	nodes, lines, rounds := 2, 20, 1
	if chaosFull() {
		nodes, lines, rounds = 6, 200, 2
	}
	e := newCloudEnv(t, "aws", "2s", "--leak-audit-interval", "2s")
	start := time.Now()
	before := e.sim.Stats()

	// A burst first, every call failing (no capacity errors: they would
	// use the offers up), so that retries and back-off surely happen and
	// show in /metrics; then 30 %.
	e.sim.Faults(sim.Faults{ErrorRate: 1, LatencyMS: 20, HoldMS: 1000,
		ErrorKinds: map[sim.Fault]float64{sim.FaultTransient: 1, sim.FaultThrottle: 1, sim.FaultTimeout: 1, sim.FaultLost: 1}})
	defer e.sim.Faults(sim.Faults{})
	for round := range rounds {
		fleet, name := fmt.Sprintf("chaos%d", round), fmt.Sprintf("numbered%d", round)
		e.r.write(fleet+".dstack.yml", strings.Replace(e.fleetSpec(fleet, "on-demand"), "nodes: 1", fmt.Sprintf("nodes: %d", nodes), 1))
		e.r.write(name+".dstack.yml", e.taskOn(name, fleet, fmt.Sprintf("  - i=1; while [ $i -le %d ]; do echo line $i; i=$((i+1)); done\n", lines)))
		sha := e.r.commit("a fleet and a numbered task under faults")
		if round == 0 {
			e.waitMetrics(t, `hoist_reconcile_backoff_seconds_count{kind="instances"}`, `hoist_backend_errors_total{backend="aws",kind="transient"}`)
		}
		e.sim.Faults(sim.Faults{ErrorRate: 0.3, LatencyMS: 20, HoldMS: 1000, ErrorKinds: allFaults})
		e.s.waitRun(name, sha, "done", 3*cloudWithin)
		var want strings.Builder
		for i := 1; i <= lines; i++ {
			fmt.Fprintf(&want, "line %d\n", i)
		}
		if got := e.s.logs(name); got != want.String() {
			t.Errorf("%s logs: %d bytes, want %d lines once each and in order:\n%s", name, len(got), lines, got)
		}
		e.waitFleetNodes(fleet, nodes)
		e.checkFaults(t)
	}
	converged := time.Since(start)

	// The leak audit runs every 2 s: two rounds of it change nothing.
	time.Sleep(5 * time.Second)
	e.checkFaults(t)
	for round := range rounds {
		e.r.remove(fmt.Sprintf("numbered%d.dstack.yml", round))
		e.r.remove(fmt.Sprintf("chaos%d.dstack.yml", round))
	}
	e.removeCommit("remove the fleets while calls still fail")
	e.waitNothingLeft()
	e.sim.Faults(sim.Faults{})
	leaked, lost, duplicated := e.auditFaults()
	after := e.sim.Stats()
	calls := sumCalls(after.Calls, "aws") - sumCalls(before.Calls, "aws")
	failed := map[string]int{}
	for k, n := range after.FailedByKind["aws"] {
		failed[k] = n - before.FailedByKind["aws"][k]
	}
	t.Logf("CHAOS faults: %d EC2 calls, failed by kind %v; %d nodes × %d rounds converged in %s; leaked %d, lost %d, duplicated %d",
		calls, failed, nodes, rounds, converged.Round(time.Second), len(leaked), len(lost), len(duplicated))
	for _, k := range []sim.Fault{sim.FaultTransient, sim.FaultThrottle, sim.FaultTimeout, sim.FaultLost} {
		if failed[string(k)] == 0 {
			t.Errorf("no EC2 call failed with %s: the fault was not exercised", k)
		}
	}
}

// checkFaults fails the test with what auditFaults finds.
func (e *cloudEnv) checkFaults(t *testing.T) {
	t.Helper()
	leaked, lost, duplicated := e.auditFaults()
	if len(leaked)+len(lost)+len(duplicated) > 0 {
		t.Errorf("audit: leaked %v, lost %v, duplicated %v", leaked, lost, duplicated)
	}
	if f := auditAPI(e.s, false); !f.empty() {
		t.Errorf("audit: %s", f)
	}
}

// auditFaults compares the simulator's VMs of the installation with hoist's
// instances (GET /api/v1/instances): leaked are live VMs no live hoist
// instance owns; duplicated are hoist instances (their hoist.instance tag)
// that got more than one VM, live or not; lost are live hoist instances
// (idle or busy) without a live VM. VMs are matched to instances by the
// name the drivers give them (backends.ResourceName: hoist-<name>-<8 hex
// digits of the id>).
func (e *cloudEnv) auditFaults() (leaked, lost, duplicated []string) {
	var is []cloudInstance
	e.s.getJSON("/api/v1/instances", &is)
	perTag := map[string][]string{}
	liveByName := map[string][]string{}
	for _, r := range e.sim.Instances() {
		if r.Kind != sim.KindInstance || !e.ours(r) {
			continue
		}
		perTag[r.Tags[backends.TagInstance]] = append(perTag[r.Tags[backends.TagInstance]], r.ID)
		if !gone(r) {
			liveByName[vmInstanceName(r.Name)] = append(liveByName[vmInstanceName(r.Name)], r.ID)
		}
	}
	for tag, ids := range perTag {
		if len(ids) > 1 {
			duplicated = append(duplicated, fmt.Sprintf("%s: %v", tag, ids))
		}
	}
	live := map[string]bool{}
	for _, i := range is {
		if i.Status == "terminated" || i.Backend != e.provider {
			continue
		}
		n := sanitizedName(i.Name)
		live[n] = true
		if (i.Status == "idle" || i.Status == "busy") && len(liveByName[n]) == 0 {
			lost = append(lost, i.Name+" "+i.Status)
		}
	}
	for n, ids := range liveByName {
		if !live[n] {
			leaked = append(leaked, fmt.Sprintf("%s %v", n, ids))
		}
	}
	slices.Sort(leaked)
	slices.Sort(duplicated)
	return leaked, lost, duplicated
}

var (
	vmNameSuffix = regexp.MustCompile(`^hoist-(.*)-[0-9a-f]{8}$`)
	nonAlnum     = regexp.MustCompile(`[^a-z0-9]+`)
)

// vmInstanceName is the instance name part of a VM's name.
func vmInstanceName(vm string) string {
	if m := vmNameSuffix.FindStringSubmatch(vm); m != nil {
		return m[1]
	}
	return vm
}

// sanitizedName is an instance name as the drivers put it in a VM's name.
func sanitizedName(name string) string {
	return strings.Trim(nonAlnum.ReplaceAllString(strings.ToLower(name), "-"), "-")
}

// waitFleetNodes waits until fleet has n idle or busy, reachable instances.
func (e *cloudEnv) waitFleetNodes(fleet string, n int) {
	e.t.Helper()
	var is []cloudInstance
	waitFor(e.t, 2*cloudWithin, func() string { return fmt.Sprintf("fleet %s with %d nodes ready (last: %+v)", fleet, n, is) }, func() bool {
		is = nil
		e.s.getJSON("/api/v1/instances?fleet="+fleet, &is)
		ready := 0
		for _, i := range is {
			if (i.Status == "idle" || i.Status == "busy") && i.Reachable {
				ready++
			}
		}
		return ready == n
	})
}

// waitMetrics waits until /metrics has a series starting with each of
// prefixes.
func (e *cloudEnv) waitMetrics(t *testing.T, prefixes ...string) {
	t.Helper()
	var missing []string
	waitFor(t, 2*cloudWithin, func() string { return fmt.Sprintf("GET /metrics with %q", missing) }, func() bool {
		_, body := e.s.do("GET", "/metrics", nil)
		missing = nil
		for _, p := range prefixes {
			if !strings.Contains(string(body), p) {
				missing = append(missing, p)
			}
		}
		return len(missing) == 0
	})
}
