package runner_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"hoist/agents/api"
	"hoist/agents/runner"
)

// TestRunner_clusterEnvironmentAndMPIHostfile: a job with a cluster sees
// dstack's cluster environment (DSTACK_NODES_IPS newline-separated, the
// master's IP, its rank, the node and GPU counts, the hostfile's path) and
// the run's and job's ids, and its MPI hostfile has one line per node in
// rank order: "<ip> slots=<gpus>" on GPU nodes, the bare IP on CPU nodes,
// nothing when a node's IP is unknown. The spec's env may override them,
// as in dstack.
func TestRunner_clusterEnvironmentAndMPIHostfile(t *testing.T) {
	show := []string{
		`echo "rank=$DSTACK_NODE_RANK nodes=$DSTACK_NODES_NUM master=$DSTACK_MASTER_NODE_IP"`,
		`echo "gpus=$DSTACK_GPUS_PER_NODE/$DSTACK_GPUS_NUM run=$DSTACK_RUN_ID/$DSTACK_RUN_NAME job=$DSTACK_JOB_ID"`,
		`echo "ips=[$DSTACK_NODES_IPS]"`,
		`echo "hostfile=$DSTACK_MPI_HOSTFILE"`,
		`cat "$DSTACK_MPI_HOSTFILE"`,
	}
	for _, tc := range []struct {
		name    string
		cluster api.ClusterInfo
		env     map[string]string
		want    string
	}{
		{
			name:    "gpu nodes",
			cluster: api.ClusterInfo{NodeRank: 1, NodesNum: 2, NodesIPs: []string{"10.0.0.1", "10.0.0.2"}, MasterIP: "10.0.0.1", GPUsPerNode: 8, GPUsNum: 16},
			want: "rank=1 nodes=2 master=10.0.0.1\ngpus=8/16 run=run-1/train job=job-1\nips=[10.0.0.1\n10.0.0.2]\n" +
				"hostfile=HOSTFILE\n10.0.0.1 slots=8\n10.0.0.2 slots=8\n",
		},
		{
			name:    "nodes of groups with their own gpus",
			cluster: api.ClusterInfo{NodeRank: 0, NodesNum: 3, NodesIPs: []string{"10.0.0.1", "10.0.0.2", "10.0.0.3"}, MasterIP: "10.0.0.1", GPUsPerNode: 1, GPUsNum: 1, NodesGPUs: []int{1, 0, 0}},
			want: "rank=0 nodes=3 master=10.0.0.1\ngpus=1/1 run=run-1/train job=job-1\nips=[10.0.0.1\n10.0.0.2\n10.0.0.3]\n" +
				"hostfile=HOSTFILE\n10.0.0.1 slots=1\n10.0.0.2\n10.0.0.3\n",
		},
		{
			name:    "cpu nodes",
			cluster: api.ClusterInfo{NodeRank: 0, NodesNum: 3, NodesIPs: []string{"10.0.0.1", "10.0.0.2", "10.0.0.3"}, MasterIP: "10.0.0.1"},
			want: "rank=0 nodes=3 master=10.0.0.1\ngpus=0/0 run=run-1/train job=job-1\nips=[10.0.0.1\n10.0.0.2\n10.0.0.3]\n" +
				"hostfile=HOSTFILE\n10.0.0.1\n10.0.0.2\n10.0.0.3\n",
		},
		{
			name:    "a node without an ip",
			cluster: api.ClusterInfo{NodeRank: 0, NodesNum: 1, NodesIPs: []string{""}, GPUsPerNode: 1, GPUsNum: 1},
			want:    "rank=0 nodes=1 master=\ngpus=1/1 run=run-1/train job=job-1\nips=[]\nhostfile=HOSTFILE\n",
		},
		{
			name:    "the spec's env wins",
			cluster: api.ClusterInfo{NodeRank: 0, NodesNum: 1, NodesIPs: []string{"10.0.0.1"}, MasterIP: "10.0.0.1"},
			env:     map[string]string{"DSTACK_MASTER_NODE_IP": "192.168.1.1"},
			want:    "rank=0 nodes=1 master=192.168.1.1\ngpus=0/0 run=run-1/train job=job-1\nips=[10.0.0.1]\nhostfile=HOSTFILE\n10.0.0.1\n",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hf := filepath.Join(t.TempDir(), "mpi", "hostfile")
			c, _, _ := newRunnerWith(t, runner.Config{Home: t.TempDir(), Version: "test", MPIHostfile: hf})
			cl := tc.cluster
			st := run(t, c, api.JobSpec{RunName: "train", RunID: "run-1", JobID: "job-1", Commands: show, Env: tc.env, Cluster: &cl})
			if st.State != api.JobDone {
				t.Fatalf("job = %+v, want done", st)
			}
			got, _ := stdout(t, c)
			want := strings.ReplaceAll(tc.want, "HOSTFILE", hf)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("output (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRunner_noClusterNoClusterEnvironment: a job submitted without a
// cluster gets the run's and job's ids but no cluster variables and no
// hostfile.
func TestRunner_noClusterNoClusterEnvironment(t *testing.T) {
	hf := filepath.Join(t.TempDir(), "mpi", "hostfile")
	c, _, _ := newRunnerWith(t, runner.Config{Home: t.TempDir(), Version: "test", MPIHostfile: hf})
	st := run(t, c, api.JobSpec{RunName: "train", RunID: "run-1", JobID: "job-1", Commands: []string{
		`echo "run=$DSTACK_RUN_ID job=$DSTACK_JOB_ID rank=${DSTACK_NODE_RANK-unset} hostfile=${DSTACK_MPI_HOSTFILE-unset}"`,
		`test ! -e ` + hf,
	}})
	if st.State != api.JobDone {
		t.Fatalf("job = %+v, want done", st)
	}
	if got, _ := stdout(t, c); got != "run=run-1 job=job-1 rank=unset hostfile=unset\n" {
		t.Errorf("output %q", got)
	}
}

// TestRunner_hostfileFallsBackToTheRunnersHome: when the hostfile's place
// cannot be created (an image's user who may not create /dstack), the
// hostfile goes into the runner's home and DSTACK_MPI_HOSTFILE says so.
func TestRunner_hostfileFallsBackToTheRunnersHome(t *testing.T) {
	home := t.TempDir()
	blocked := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(blocked, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	c, _, _ := newRunnerWith(t, runner.Config{Home: home, Version: "test", MPIHostfile: filepath.Join(blocked, "mpi", "hostfile")})
	cl := api.ClusterInfo{NodeRank: 0, NodesNum: 2, NodesIPs: []string{"10.0.0.1", "10.0.0.2"}, MasterIP: "10.0.0.1"}
	st := run(t, c, api.JobSpec{RunName: "train", JobID: "job-1", Cluster: &cl, Commands: []string{`echo "$DSTACK_MPI_HOSTFILE"`, `cat "$DSTACK_MPI_HOSTFILE"`}})
	if st.State != api.JobDone {
		t.Fatalf("job = %+v, want done", st)
	}
	want := filepath.Join(home, "mpi", "hostfile") + "\n10.0.0.1\n10.0.0.2\n"
	if got, _ := stdout(t, c); got != want {
		t.Errorf("output %q, want %q", got, want)
	}
}
