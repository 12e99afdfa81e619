package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// pairCommands is the `commands:` list (indented for a top-level key) of
// the two-node task the multi-node tests run: both nodes print their
// DSTACK_ environment and a summary line, rank 0 listens on port with
// busybox nc and prints what it receives, and rank 1 sends it a line at
// $DSTACK_MASTER_NODE_IP, retrying tries times 0.2 s apart while the
// master is not listening yet. Rank 0's nc reads its stdin from a FIFO the
// shell holds open: busybox nc shuts its sending side as soon as its stdin
// ends, and a client that sees that before it has sent its line exits
// without sending it.
func pairCommands(port string, tries int) string {
	return fmt.Sprintf(`commands:
  - env | grep '^DSTACK_' | sort
  - echo "rank=$DSTACK_NODE_RANK nodes=$DSTACK_NODES_NUM master=$DSTACK_MASTER_NODE_IP ips=$(echo $DSTACK_NODES_IPS)"
  - |
    if [ "$DSTACK_NODE_RANK" = 0 ]; then
      mkfifo /tmp/nc-in; exec 3<>/tmp/nc-in
      nc -l -p %[1]s <&3
    else
      for i in $(seq %[2]d); do
        echo "hello from rank $DSTACK_NODE_RANK" | nc "$DSTACK_MASTER_NODE_IP" %[1]s && exit 0
        sleep 0.2
      done
      exit 1
    fi
`, port, tries)
}

// pairNodes returns the master and the worker of a done two-node run's
// jobs, failing the test unless there are exactly two (no resubmission),
// both done with a start time, on two instances.
func pairNodes(t *testing.T, jobs []clusterJob) (master, worker clusterJob) {
	t.Helper()
	if len(jobs) != 2 {
		t.Fatalf("pair jobs: %+v, want 2 (no resubmission)", jobs)
	}
	byRank := map[string]clusterJob{}
	for _, j := range jobs {
		if j.Status != "done" || j.StartedAt == nil {
			t.Fatalf("pair job %+v, want done with a start time", j)
		}
		// dstack's job name: <run>-<job_num>-<replica_num>.
		parts := strings.Split(j.JobName, "-")
		byRank[parts[len(parts)-2]] = j
	}
	master, worker = byRank["0"], byRank["1"]
	if master.Instance == "" || worker.Instance == "" || master.Instance == worker.Instance {
		t.Fatalf("pair ran on %q (rank 0) and %q (rank 1), want two instances", master.Instance, worker.Instance)
	}
	return master, worker
}

// checkPairLogs checks the logs of the pair run's nodes: each printed
// its summary line and environment with the nodes' IPs, and rank 0
// received rank 1's line (which may reach the store a moment after the
// run is done).
func checkPairLogs(t *testing.T, s *server, master, worker clusterJob, masterIP, workerIP string) {
	t.Helper()
	for rank, j := range map[string]clusterJob{"0": master, "1": worker} {
		logs := s.jobLogs("pair", j.ID)
		want := fmt.Sprintf("rank=%s nodes=2 master=%s ips=%s %s\n", rank, masterIP, masterIP, workerIP)
		if !strings.Contains(logs, want) {
			t.Errorf("rank %s logs %q, want the line %q", rank, logs, want)
		}
		for _, v := range []string{"DSTACK_NODE_RANK=" + rank, "DSTACK_NODES_NUM=2", "DSTACK_MASTER_NODE_IP=" + masterIP, "DSTACK_RUN_NAME=pair"} {
			if !strings.Contains(logs, v+"\n") {
				t.Errorf("rank %s environment lacks %s: %q", rank, v, logs)
			}
		}
	}
	var masterLogs string
	waitFor(t, 10*time.Second, func() string {
		return fmt.Sprintf("rank 1's line in the logs of rank 0 (at %s): %q; rank 1 (at %s) logged %q", masterIP, masterLogs, workerIP, s.jobLogs("pair", worker.ID))
	}, func() bool {
		masterLogs = s.jobLogs("pair", master.ID)
		return strings.Contains(masterLogs, "hello from rank 1\n")
	})
}
