package reconciler

import (
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"hoist/agents/api"
	"hoist/backends/fake"
	"hoist/store"
)

// TestWorkers_clusterNodesShareOneSSHKeyPerSubmission: the nodes of a
// two-node task get one cluster SSH key in their ClusterInfo (an ed25519
// pair whose private half matches its public one), and a resubmission of
// the whole cluster (retry) gets a fresh one, again the same on both
// nodes, as dstack makes one per submission.
func TestWorkers_clusterNodesShareOneSSHKeyPerSubmission(t *testing.T) {
	f := newFixture(t, map[string]string{
		"fleet.dstack.yml": clusterFleet,
		"task.dstack.yml":  clusterTask("sleep 1h", "retry:\n  on_events: [error]\n  duration: 1h\n"),
	})
	be := f.withFakeBackend(fake.Config{})
	if res := f.sync(); res != resultSynced {
		t.Fatalf("sync = %s", res)
	}
	// clusterKey runs both nodes of the latest submission and returns the
	// key they were given, checking that it is one valid pair.
	clusterKey := func() (*api.ClusterSSHKey, []store.Instance) {
		t.Helper()
		insts := f.provisionNodes("train")
		var keys []*api.ClusterSSHKey
		for num, inst := range insts {
			j := f.stepNode("train", num, store.JobRunning)
			js, ok := be.JobSpec(inst.ID, j.ID)
			if !ok || js.Cluster == nil || js.Cluster.SSHKey == nil {
				t.Fatalf("node %d's job spec %+v has no cluster key", num, js.Cluster)
			}
			keys = append(keys, js.Cluster.SSHKey)
		}
		if *keys[0] != *keys[1] {
			t.Fatalf("the nodes got different keys: %+v and %+v", keys[0], keys[1])
		}
		k := keys[0]
		signer, err := ssh.ParsePrivateKey([]byte(k.Private))
		if err != nil {
			t.Fatalf("cluster private key: %v", err)
		}
		pub, _, _, _, err := ssh.ParseAuthorizedKey([]byte(k.Public))
		if err != nil {
			t.Fatalf("cluster public key %q: %v", k.Public, err)
		}
		if pub.Type() != ssh.KeyAlgoED25519 || string(pub.Marshal()) != string(signer.PublicKey().Marshal()) {
			t.Fatalf("cluster key pair: public %q does not match the private key (%s)", k.Public, signer.PublicKey().Type())
		}
		return k, insts
	}
	first, insts := clusterKey()

	f.reconcileJobs("train")
	w := f.node("train", 1)
	if !be.LoseTask(insts[1].ID, w.ID) {
		t.Fatal("the worker's task is unknown")
	}
	f.waitNode("train", 1, store.JobTerminating)
	f.stepNode("train", 1, store.JobFailed)
	f.reconcileRun("train")
	f.stepNode("train", 0, store.JobTerminated)
	f.clock.Advance(time.Hour / 2)
	f.reconcileRun("train")
	for _, j := range f.nodes("train") {
		if j.SubmissionNum != 1 {
			t.Fatalf("job %d is submission %d, want the cluster resubmitted", j.JobNum, j.SubmissionNum)
		}
	}
	second, _ := clusterKey()
	if second.Public == first.Public || strings.Contains(second.Private, first.Private) {
		t.Errorf("the resubmitted cluster kept the key %q", first.Public)
	}
}
