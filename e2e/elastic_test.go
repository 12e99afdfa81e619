package e2e

import (
	"strings"
	"testing"
	"time"
)

// fleetInstances returns the instances of fleet.
func (s *server) fleetInstances(fleet string) []apiInstance {
	s.t.Helper()
	var out []apiInstance
	if code := s.getJSON("/api/v1/instances?fleet="+fleet, &out); code != 200 {
		s.t.Fatalf("GET /api/v1/instances: %d", code)
	}
	return out
}

// TestElasticFleet_jobGetsNewInstanceThenIdleOneIsReaped: a backend fleet
// with nodes 0..1 has no instance until a job needs one; the job gets a new
// instance from the fleet's offers (here this host, through the local
// backend), a second job finds the fleet at nodes.max and fails for want of
// capacity instead of exceeding it, and the instance is reaped once idle
// longer than idle_duration.
func TestElasticFleet_jobGetsNewInstanceThenIdleOneIsReaped(t *testing.T) {
	r := newRepo(t)
	r.write("elastic.dstack.yml", `type: fleet
name: elastic
nodes: 0..1
backends: [local]
idle_duration: 3s
resources:
  cpu: 1..
  memory: 1GB..
`)
	r.commit("add elastic fleet")
	s := startServer(t, r.dir, "--resync-interval", "1s", "--no-local-fleet")
	waitFor(t, 30*time.Second, func() string { return "fleet elastic to be synced" }, func() bool { return s.sync().Status == "synced" })
	if got := s.fleetInstances("elastic"); len(got) != 0 {
		t.Fatalf("nodes 0..1 provisioned %d instances before any job", len(got))
	}

	job := func(name, cmd string) string {
		return task(name, "  - "+cmd+"\n") + "fleets: [elastic]\nresources:\n  cpu: 1\n  memory: 1GB\n"
	}
	r.write("one.dstack.yml", job("one", "sleep 3"))
	sha := r.commit("a job for the elastic fleet")
	s.waitRun("one", sha, "running", 90*time.Second)
	insts := s.fleetInstances("elastic")
	if len(insts) != 1 || insts[0].Backend != "local" {
		t.Fatalf("instances of elastic = %+v, want one new instance on the local backend", insts)
	}
	var events []apiEvent
	s.getJSON("/api/v1/events?limit=200", &events)
	waited := false
	for _, e := range events {
		if e.Type == "waiting" && strings.Contains(e.Message, "elastic-0") {
			waited = true
		}
	}
	if !waited {
		t.Errorf("the job did not wait for the new instance elastic-0: %+v", events)
	}
	// While it is busy, a second job finds the fleet at nodes.max: no
	// capacity (dstack's answer without a no-capacity retry), no second
	// instance.
	r.write("two.dstack.yml", job("two", "echo second"))
	sha2 := r.commit("a second job while the fleet is full")
	run := s.waitRun("two", sha2, "failed", 60*time.Second)
	if len(run.Jobs) == 0 || run.Jobs[0].TerminationReason != "failed_to_start_due_to_no_capacity" {
		t.Fatalf("run two = %+v, want failed_to_start_due_to_no_capacity", run)
	}
	if got := s.fleetInstances("elastic"); len(got) != 1 {
		t.Fatalf("instances of elastic = %+v: nodes.max 1 exceeded", got)
	}
	s.waitRun("one", sha, "done", 60*time.Second)

	// Idle longer than idle_duration above nodes.min (0): reaped.
	waitFor(t, 60*time.Second, func() string { return "elastic-0 to be reaped" }, func() bool {
		got := s.fleetInstances("elastic")
		return len(got) == 1 && got[0].Status == "terminated"
	})
}

// TestElasticFleet_offerWithoutCapacityFailsTheJob: when the instance made
// from an offer cannot be had (here the host is already all the default
// fleet's), the instance ends, the job tries the next fitting offer, and
// with none left it fails for want of capacity, as dstack's runs do.
func TestElasticFleet_offerWithoutCapacityFailsTheJob(t *testing.T) {
	r := newRepo(t)
	r.write("elastic.dstack.yml", "type: fleet\nname: elastic\nnodes: 0..1\nbackends: [local]\nresources:\n  cpu: 1..\n  memory: 1GB..\n")
	r.write("job.dstack.yml", task("job", "  - echo never\n")+"fleets: [elastic]\nresources:\n  cpu: 1\n  memory: 1GB\n")
	sha := r.commit("a job for a fleet without room")
	s := startServer(t, r.dir, "--resync-interval", "1s")
	run := s.waitRun("job", sha, "failed", 90*time.Second)
	if len(run.Jobs) == 0 || run.Jobs[0].TerminationReason != "failed_to_start_due_to_no_capacity" {
		t.Fatalf("run = %+v, want failed_to_start_due_to_no_capacity", run)
	}
	got := s.fleetInstances("elastic")
	if len(got) != 1 || got[0].Status != "terminated" {
		t.Fatalf("instances of elastic = %+v, want the one tried, terminated", got)
	}
}
