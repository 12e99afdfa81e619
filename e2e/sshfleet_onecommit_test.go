package e2e

import (
	"testing"
	"time"
)

// TestSSHFleet_twoTasksOfOneCommitPlaceAtOnce commits two long tasks, one
// with `retry: {on_events: [interruption]}` and one without, in one commit
// onto an SSH fleet of three namespace hosts: both run at once, each on
// its own host (it prints commit → both running).
func TestSSHFleet_twoTasksOfOneCommitPlaceAtOnce(t *testing.T) {
	e, _ := newNetnsFleetEnv(t, 3)
	s, r := e.s, e.r
	r.write("fleet.dstack.yml", e.fleetSpec(e.hosts...))
	r.commit("a fleet of three namespace hosts")
	s.waitInstances(2*sshWithin, "the hosts idle and reachable", func(is map[string]apiInstance) bool {
		return len(is) == 3 && allInstances(is, func(i apiInstance) bool { return i.Status == "idle" && i.Reachable })
	})
	r.write("cut.dstack.yml", task("cut", "  - echo start\n  - sleep 600\n")+
		"fleets: ["+sshFleetName+"]\nretry:\n  on_events: [interruption]\n  duration: 10m\n")
	r.write("once.dstack.yml", task("once", "  - echo start\n  - sleep 600\n")+"fleets: ["+sshFleetName+"]\n")
	at := time.Now()
	sha := r.commit("two long tasks, one with retry")
	s.waitRun("cut", sha, "running", sshWithin)
	s.waitRun("once", sha, "running", sshWithin)
	t.Logf("figures: commit → both running in %s", time.Since(at).Round(time.Millisecond))
	if a, b := s.clusterJobs("cut"), s.clusterJobs("once"); len(a) != 1 || len(b) != 1 || a[0].Instance == b[0].Instance {
		t.Errorf("jobs %+v and %+v, want one each on distinct hosts", a, b)
	}
}
