package e2e

import (
	"testing"
	"time"
)

// TestCluster_taskSeesDstacksClusterEnvironment proves the runner in a real
// container exports dstack's cluster environment for a task (a cluster of
// one node on the local host, whose internal IP is its loopback) and
// writes the MPI hostfile where DSTACK_MPI_HOSTFILE says, with the run's
// and job's ids.
func TestCluster_taskSeesDstacksClusterEnvironment(t *testing.T) {
	r := newRepo(t)
	r.write("specs/env.dstack.yml", task("env",
		`  - echo "rank=$DSTACK_NODE_RANK nodes=$DSTACK_NODES_NUM master=$DSTACK_MASTER_NODE_IP ips=$DSTACK_NODES_IPS"`+"\n"+
			`  - echo "gpus=$DSTACK_GPUS_PER_NODE/$DSTACK_GPUS_NUM hostfile=$DSTACK_MPI_HOSTFILE"`+"\n"+
			`  - cat "$DSTACK_MPI_HOSTFILE"`+"\n"+
			`  - test -n "$DSTACK_RUN_ID" && test -n "$DSTACK_JOB_ID" && test "$DSTACK_RUN_NAME" = env && echo ids`+"\n"))
	sha := r.commit("a task printing the cluster environment")
	s := startServer(t, r.dir)
	s.waitRun("env", sha, "done", 60*time.Second)
	want := "rank=0 nodes=1 master=127.0.0.1 ips=127.0.0.1\ngpus=0/0 hostfile=/dstack/mpi/hostfile\n127.0.0.1\nids\n"
	if got := s.logs("env"); got != want {
		t.Fatalf("logs = %q, want %q", got, want)
	}
}
