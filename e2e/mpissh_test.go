package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"hoist/e2e/testenv"
)

// TestMPISSH_nodesSSHIntoEachOtherWithTheClusterKey drives a `nodes: 2`
// task on a `placement: cluster` SSH fleet of two namespace hosts through
// `hoist serve` and Git, as mpirun would use it: while the nodes run, rank
// 1's container holds the cluster key as ~/.ssh/dstack_job and
// ~/.ssh/config entries for both nodes on port 10022; the real OpenSSH
// client, run in rank 1's host namespace with that key (the test image has
// no ssh of its own), reaches the master's runner at
// $DSTACK_MASTER_NODE_IP:10022 and runs a command in the master's job,
// which answers from the master's container; a key that is not the
// cluster's is refused. The command ends the master, and with
// `stop_criteria: master-done` the run is done.
func TestMPISSH_nodesSSHIntoEachOtherWithTheClusterKey(t *testing.T) {
	sshClient, err := exec.LookPath("ssh")
	if err != nil {
		t.Skip("no OpenSSH client (openssh-client) on PATH")
	}
	e, nets := newNetnsFleetEnv(t, 2)
	s, r := e.s, e.r

	t.Log("phase: a cluster fleet of two namespace hosts becomes ready")
	r.write("fleet.dstack.yml", e.fleetSpec(e.hosts...)+"placement: cluster\n")
	r.commit("cluster fleet of two namespace hosts")
	s.waitInstances(2*sshWithin, "both hosts idle and reachable", func(is map[string]apiInstance) bool {
		return len(is) == 2 && allInstances(is, func(i apiInstance) bool { return i.Status == "idle" && i.Reachable })
	})
	hostIP := map[string]string{}
	for _, rec := range s.sshRecords() {
		hostIP[rec.Name] = rec.Host.Hostname
	}

	t.Log("phase: a nodes: 2 task runs; both nodes wait")
	r.write("mpi.dstack.yml", fmt.Sprintf(`type: task
name: mpi
image: %s
nodes: 2
stop_criteria: master-done
fleets: [%s]
commands:
  - echo "rank=$DSTACK_NODE_RANK up"
  - while [ ! -e /tmp/mpissh-done ]; do sleep 0.2; done
  - echo "rank=$DSTACK_NODE_RANK released"
`, testenv.BusyboxImage, sshFleetName))
	sha := r.commit("a two-node task for inter-node SSH")
	var master, worker clusterJob
	var run struct {
		Revision string       `json:"revision"`
		Jobs     []clusterJob `json:"jobs"`
	}
	waitFor(t, 2*sshWithin, func() string { return fmt.Sprintf("both nodes of mpi at %.8s running: %+v", sha, run.Jobs) }, func() bool {
		run.Jobs = nil
		if s.getJSON("/api/v1/runs/mpi", &run) != 200 || run.Revision != sha {
			return false
		}
		running := 0
		for _, j := range run.Jobs {
			if j.Status != "running" {
				continue
			}
			running++
			if strings.HasPrefix(j.JobName, "mpi-0-") {
				master = j
			} else {
				worker = j
			}
		}
		return running == 2
	})
	masterIP, workerIP := hostIP[master.Instance], hostIP[worker.Instance]
	var workerHost *testenv.NetHost
	for _, h := range nets {
		if h.IP == workerIP {
			workerHost = h
		}
	}
	if masterIP == "" || workerHost == nil || masterIP == workerIP {
		t.Fatalf("nodes on %q (rank 0) and %q (rank 1), want the two namespace hosts %v", masterIP, workerIP, hostIP)
	}

	t.Log("phase: rank 1's container holds the cluster key and ~/.ssh/config entries for both nodes")
	workerC, masterC := jobContainer(t, worker.ID), jobContainer(t, master.ID)
	key := dockerExec(t, workerC, "cat", "/root/.ssh/dstack_job")
	if !strings.Contains(key, "OPENSSH PRIVATE KEY") {
		t.Fatalf("rank 1's ~/.ssh/dstack_job = %q, want a private key", key)
	}
	if mode := dockerExec(t, workerC, "stat", "-c", "%a", "/root/.ssh/dstack_job"); mode != "600\n" {
		t.Errorf("rank 1's ~/.ssh/dstack_job has mode %q, want 600", mode)
	}
	config := dockerExec(t, workerC, "cat", "/root/.ssh/config")
	for _, ip := range []string{masterIP, workerIP} {
		want := fmt.Sprintf("Host %s\n    Port 10022\n    StrictHostKeyChecking no\n    UserKnownHostsFile /dev/null\n    IdentityFile /root/.ssh/dstack_job\n", ip)
		if !strings.Contains(config, want) {
			t.Errorf("rank 1's ~/.ssh/config %q lacks %q", config, want)
		}
	}
	dir := t.TempDir()
	keyPath := filepath.Join(dir, "dstack_job")
	if err := os.WriteFile(keyPath, []byte(key), 0o600); err != nil {
		t.Fatal(err)
	}
	sshFrom := func(identity, command string) (string, error) {
		cmd := workerHost.Command(sshClient, "-F", "/dev/null", "-i", identity, "-p", "10022",
			"-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "BatchMode=yes",
			"-o", "IdentitiesOnly=yes", "-o", "ConnectTimeout=10", "-o", "LogLevel=ERROR",
			"root@"+masterIP, command)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}

	t.Log("phase: a key other than the cluster's is refused")
	stranger := testenv.NewSSHKey(t, dir, "stranger")
	if out, err := sshFrom(stranger.Path, "true"); err == nil || !strings.Contains(out, "Permission denied") {
		t.Errorf("ssh with a stranger's key: %v %q, want Permission denied", err, out)
	}

	t.Log("phase: OpenSSH in rank 1's host reaches the master's job with the cluster key")
	// Read before the command releases the master, whose container then ends.
	hostname := dockerExec(t, masterC, "hostname")
	start := time.Now()
	out, err := sshFrom(keyPath, `hostname; echo "rank=$DSTACK_NODE_RANK"; touch /tmp/mpissh-done`)
	if err != nil {
		t.Fatalf("ssh -p 10022 root@%s from %s: %v\n%s", masterIP, workerHost.Name, err, out)
	}
	t.Logf("figures: one ssh command from rank 1 to the master over port 10022: %s", time.Since(start).Round(time.Millisecond))
	if want := hostname + "rank=0\n"; out != want {
		t.Errorf("ssh to the master answered %q, want %q (the master container's hostname and rank)", out, want)
	}

	t.Log("phase: the command ended the master; with master-done the run is done")
	s.waitRun("mpi", sha, "done", 2*sshWithin)
	waitFor(t, 10*time.Second, func() string { return "the master's released line in its logs" }, func() bool {
		return strings.Contains(s.jobLogs("mpi", master.ID), "rank=0 released\n")
	})
}

// jobContainer returns the id of the container of job id (the shim's task
// id is the job's id).
func jobContainer(t *testing.T, id string) string {
	t.Helper()
	out, err := exec.Command("docker", "ps", "-q", "--filter", "label=hoist.task-id="+id).Output()
	if err != nil {
		t.Fatalf("docker ps: %v", err)
	}
	ids := strings.Fields(string(out))
	if len(ids) != 1 {
		t.Fatalf("containers of job %s: %q, want one", id, ids)
	}
	return ids[0]
}

// dockerExec runs argv in container c and returns its output.
func dockerExec(t *testing.T, c string, argv ...string) string {
	t.Helper()
	out, err := exec.Command("docker", append([]string{"exec", c}, argv...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("docker exec %s %v: %v\n%s", c, argv, err, out)
	}
	return string(out)
}
