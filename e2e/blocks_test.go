package e2e

import (
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestBlocks_twoJobsShareAnInstanceAndAThirdWaits: a fleet of one local
// instance of 2 CPUs split by `blocks: 2` runs two one-CPU jobs at once,
// each in a container limited to its block's CPU; a third job, retried on
// no capacity, waits until a block is free and then runs in it. (GPUs of
// a share are handed out by the shim, agents/shim.TestShim_tasksGetDistinctGPUs.)
func TestBlocks_twoJobsShareAnInstanceAndAThirdWaits(t *testing.T) {
	t.Parallel() // mostly waits: runs beside the other slow tests (harness_test.go)
	if runtime.NumCPU() < 2 {
		t.Skip("the host has fewer than 2 CPUs")
	}
	r := newRepo(t)
	r.write("shared.dstack.yml", "type: fleet\nname: shared\nnodes: 1\nbackends: [local]\nblocks: 2\nresources:\n  cpu: 2\n  memory: 2GB\n")
	r.commit("a fleet of one instance in two blocks")
	s := startServer(t, r.dir, "--resync-interval", "1s", "--no-local-fleet")
	waitFor(t, 60*time.Second, func() string { return "fleet shared to be synced with its instance" }, func() bool {
		insts := s.fleetInstances("shared")
		return s.sync().Status == "synced" && len(insts) == 1 && insts[0].Status == "idle"
	})

	// The quota of the container's CPU cgroup: "100000" (v1) or
	// "100000 100000" (v2) for one CPU.
	const quota = "echo quota=$(cat /sys/fs/cgroup/cpu.max 2>/dev/null || cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us)"
	job := func(name, sleep, extra string) string {
		return task(name, "  - "+quota+"\n  - sleep "+sleep+"\n") + "fleets: [shared]\nresources:\n  cpu: 1..\n  memory: 1GB..\n" + extra
	}
	r.write("ja.dstack.yml", job("ja", "15", ""))
	r.write("jb.dstack.yml", job("jb", "90", ""))
	sha := r.commit("two one-block jobs")
	s.waitRun("ja", sha, "running", 90*time.Second)
	s.waitRun("jb", sha, "running", 90*time.Second)
	s.waitRun("ja", sha, "running", time.Second) // both at once
	if got := s.fleetInstances("shared"); len(got) != 1 {
		t.Fatalf("instances of shared = %+v, want the one", got)
	}

	// Both blocks are taken: jc waits (no capacity, retried).
	r.write("jc.dstack.yml", job("jc", "1", "retry:\n  on_events: [no-capacity]\n  duration: 5m\n"))
	sha2 := r.commit("a third job")
	s.waitRunCond("jc", 60*time.Second, "pending for a retry", func(run apiRunFull) bool { return run.Status == "pending" })
	// ja ends and frees its block: jc runs in it while jb still runs.
	s.waitRun("ja", sha, "done", 60*time.Second)
	s.waitRun("jc", sha2, "done", 120*time.Second)
	s.waitRun("jb", sha, "running", time.Second) // still
	for _, name := range []string{"ja", "jb", "jc"} {
		if logs := s.logs(name); !strings.Contains(logs, "quota=100000") {
			t.Errorf("job %s's container CPU quota: %q, want one CPU (quota=100000)", name, logs)
		}
	}
}
