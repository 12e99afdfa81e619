package e2e

import (
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"hoist/e2e/testenv"
)

// TestChaos_network cuts simulated SSH hosts (network namespaces, their
// link set down) off while jobs run on them, then brings them back, as a
// network partition does (dstack's instance_unreachable). Of three hosts,
// one runs a task with `retry: {on_events: [interruption]}`, another a
// task without retry (committed after the first runs), the third is free; both busy hosts are cut at once.
// After the unreachable grace both jobs fail with instance_unreachable;
// the first is resubmitted onto the free host, the second run fails. When
// the hosts are back, the old submissions' containers, which kept running
// behind the cut, are stopped (the shim's dangling task sweep), so no job
// runs twice at once for long and no old one keeps running.
// HOIST_CHAOS=full then cuts the retried job's host twice more.
func TestChaos_network(t *testing.T) {
	t.Parallel() // mostly waits: runs beside the other slow tests (harness_test.go)
	e, nets := newNetnsFleetEnv(t, 3)
	s, r := e.s, e.r
	r.write("fleet.dstack.yml", e.fleetSpec(e.hosts...))
	r.commit("a fleet of three namespace hosts")
	s.waitInstances(2*sshWithin, "the hosts idle and reachable", func(is map[string]apiInstance) bool {
		return len(is) == 3 && allInstances(is, func(i apiInstance) bool { return i.Status == "idle" && i.Reachable })
	})
	hostOf := map[string]*testenv.NetHost{} // by instance name
	for _, rec := range s.sshRecords() {
		for _, h := range nets {
			if h.IP == rec.Host.Hostname {
				hostOf[rec.Name] = h
			}
		}
	}
	link := func(h *testenv.NetHost, state string) {
		t.Helper()
		if out, err := h.Command("ip", "link", "set", "eth0", state).CombinedOutput(); err != nil {
			t.Fatalf("ip link set eth0 %s in %s: %v: %s", state, h.Name, err, out)
		}
	}
	running := func(name string) clusterJob {
		t.Helper()
		jobs := s.clusterJobs(name)
		i := slices.IndexFunc(jobs, func(j clusterJob) bool { return j.Status == "running" })
		if i < 0 {
			t.Fatalf("%s has no running job: %+v", name, jobs)
		}
		if hostOf[jobs[i].Instance] == nil {
			t.Fatalf("job %+v runs on no known host (%v)", jobs[i], hostOf)
		}
		return jobs[i]
	}
	stopped := func(job clusterJob) {
		t.Helper()
		var left []string
		waitFor(t, sshWithin, func() string { return fmt.Sprintf("the cut job %s's container stopped (running: %v)", job.ID, left) }, func() bool {
			left = runningContainers("hoist.task-id=" + job.ID)
			return len(left) == 0
		})
	}

	r.write("cut.dstack.yml", task("cut", "  - echo start\n  - sleep 600\n")+
		"fleets: ["+sshFleetName+"]\nretry:\n  on_events: [interruption]\n  duration: 10m\n")
	sha := r.commit("a long task with retry")
	s.waitRun("cut", sha, "running", sshWithin)
	r.write("once.dstack.yml", task("once", "  - echo start\n  - sleep 600\n")+"fleets: ["+sshFleetName+"]\n")
	sha = r.commit("a long task without retry")
	s.waitRun("once", sha, "running", sshWithin)
	once := running("once")
	cuts := 1
	if chaosFull() {
		cuts = 3
	}
	for n := range cuts {
		cur := running("cut")
		cutAt := time.Now()
		t.Logf("cut %d: %s (%s) off while submission %d runs there", n, cur.Instance, hostOf[cur.Instance].IP, cur.SubmissionNum)
		link(hostOf[cur.Instance], "down")
		if n == 0 {
			link(hostOf[once.Instance], "down")
		}
		var jobs []clusterJob
		var next clusterJob
		var unreachable time.Duration // cut → the cut submission failed
		waitFor(t, 2*sshWithin, func() string {
			return fmt.Sprintf("cut: submission %d resubmitted and running elsewhere (jobs %+v)", cur.SubmissionNum, jobs)
		}, func() bool {
			jobs = s.clusterJobs("cut")
			if unreachable == 0 && slices.ContainsFunc(jobs, func(j clusterJob) bool { return j.ID == cur.ID && j.Status != "running" }) {
				unreachable = time.Since(cutAt)
			}
			i := slices.IndexFunc(jobs, func(j clusterJob) bool {
				return j.SubmissionNum > cur.SubmissionNum && j.Status == "running" && j.Instance != cur.Instance
			})
			if i >= 0 {
				next = jobs[i]
			}
			return i >= 0
		})
		retried := time.Since(cutAt)
		var old clusterJob
		waitFor(t, sshWithin, func() string { return fmt.Sprintf("the cut submission failed (%+v)", old) }, func() bool {
			i := slices.IndexFunc(s.clusterJobs("cut"), func(j clusterJob) bool { return j.ID == cur.ID })
			if i >= 0 {
				old = s.clusterJobs("cut")[i]
			}
			return old.Status == "failed"
		})
		if old.TerminationReason != "instance_unreachable" {
			t.Errorf("cut submission %+v, want failed with instance_unreachable", old)
		}
		if n == 0 {
			s.waitRun("once", sha, "failed", sshWithin)
			if jobs := s.clusterJobs("once"); len(jobs) != 1 || jobs[0].TerminationReason != "instance_unreachable" {
				t.Errorf("once jobs %+v, want one, failed with instance_unreachable (no retry)", jobs)
			}
		}
		// Behind the cut the old containers still run (their shim cannot
		// be told); once the hosts are back, the sweep stops them.
		link(hostOf[cur.Instance], "up")
		if n == 0 {
			link(hostOf[once.Instance], "up")
		}
		backAt := time.Now()
		stopped(cur)
		if n == 0 {
			stopped(once)
		}
		t.Logf("figures: cut %d: cut → instance_unreachable in %s, resubmitted and running on %s in %s; hosts back → old containers stopped in %s",
			n, unreachable.Round(time.Millisecond), next.Instance, retried.Round(time.Millisecond), time.Since(backAt).Round(time.Millisecond))
		if running := runningContainers("hoist.task-id=" + next.ID); len(running) != 1 {
			t.Errorf("containers of the running submission: %v, want 1", running)
		}
		s.waitInstances(sshWithin, "the hosts reachable again", func(is map[string]apiInstance) bool {
			return allInstances(is, func(i apiInstance) bool { return i.Reachable })
		})
	}
	if got := s.logs("cut"); !strings.HasPrefix(got, "start\n") {
		t.Errorf("cut logs %q", got)
	}
}

// runningContainers returns the running containers with label.
func runningContainers(label string) []string {
	out, _ := exec.Command("docker", "ps", "-q", "--filter", "label="+label).Output()
	return strings.Fields(string(out))
}
