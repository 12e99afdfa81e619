package e2e

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// commitFleetAndTask commits, in one commit, the SSH fleet of e's hosts and
// a one-line task pinned to it, and returns the commit.
func (e *sshFleetEnv) commitFleetAndTask(name string) string {
	e.r.write("fleet.dstack.yml", e.fleetSpec(e.hosts...))
	e.r.write(name+".dstack.yml", task(name, "  - echo hello from a fleet of this commit\n")+"fleets: ["+sshFleetName+"]\n")
	return e.r.commit("a fleet and a task that uses it")
}

// TestSSHFleet_fleetAndTaskInOneCommit: a fleet of two SSH hosts and a task
// pinned to it, committed together, end with the task done on one of the
// hosts: the job waits (submitted, saying for what) while the hosts are
// provisioning instead of failing for want of capacity.
func TestSSHFleet_fleetAndTaskInOneCommit(t *testing.T) {
	e := newSSHFleetEnv(t, 2)
	sha := e.commitFleetAndTask("together")
	e.s.waitRun("together", sha, "done", 2*sshWithin)
	run := e.s.sshRun("together")
	if len(run.Jobs) != 1 || run.Jobs[0].Status != "done" || !strings.HasPrefix(run.Jobs[0].Instance, sshFleetName+"-") {
		t.Fatalf("jobs: %+v, want one done on a host of %s", run.Jobs, sshFleetName)
	}
	if got := e.s.logs("together"); got != "hello from a fleet of this commit\n" {
		t.Fatalf("logs: %q", got)
	}
	// The job said what it waited for.
	var events []apiEvent
	e.s.getJSON("/api/v1/events?kind=job&limit=200", &events)
	waited := false
	for _, ev := range events {
		if ev.Type == "waiting" && strings.Contains(ev.Message, "waiting for fleet "+sshFleetName+": ") &&
			strings.Contains(ev.Message, "provisioning") {
			waited = true
		}
	}
	if !waited {
		t.Fatalf("no job event says it waits for fleet %s: %+v", sshFleetName, events)
	}
}

// TestMeasure_fleetAndTaskInOneCommit measures commit → done of a fleet of
// two SSH hosts and a one-line task pinned to it in one commit, each round
// on fresh hosts and a fresh server. It runs only with HOIST_MEASURE=1.
func TestMeasure_fleetAndTaskInOneCommit(t *testing.T) {
	if os.Getenv("HOIST_MEASURE") == "" {
		t.Skip("set HOIST_MEASURE=1 to measure")
	}
	const rounds = 5
	var took []time.Duration
	for i := range rounds {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			e := newSSHFleetEnv(t, 2)
			start := time.Now()
			sha := e.commitFleetAndTask("measured")
			e.s.waitRun("measured", sha, "done", 2*sshWithin)
			took = append(took, time.Since(start))
		})
	}
	t.Logf("MEASURE fleet (2 SSH hosts) + task in one commit → done: %v (median %s)", rounded(took), median(took).Round(time.Millisecond))
}
