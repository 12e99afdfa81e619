package runner_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"hoist/agents/api"
	"hoist/agents/runner"
)

// clusterKey returns a fresh cluster key pair as the server sends it, and
// its signer.
func clusterKey(t testing.TB) (*api.ClusterSSHKey, ssh.Signer) {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "dstack_job")
	if err != nil {
		t.Fatal(err)
	}
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return &api.ClusterSSHKey{
		Private: string(pem.EncodeToMemory(block)),
		Public:  strings.TrimSpace(string(ssh.MarshalAuthorizedKey(s.PublicKey()))),
	}, s
}

// loopbackIP returns a random address of 127.0.0.0/8 other than 127.0.0.1,
// so that the fixed cluster port does not clash with other tests'.
func loopbackIP(t testing.TB) string {
	t.Helper()
	n, err := rand.Int(rand.Reader, big.NewInt(250*250))
	if err != nil {
		t.Fatal(err)
	}
	v := int(n.Int64())
	return fmt.Sprintf("127.%d.%d.%d", 1+v/250, 1+v%250, 1+v%200)
}

// dialCluster opens an SSH connection to addr as another node's ssh does
// (StrictHostKeyChecking no).
func dialCluster(addr string, key ssh.Signer) (*ssh.Client, error) {
	return ssh.Dial("tcp", addr, &ssh.ClientConfig{
		User:            "root",
		Auth:            []ssh.AuthMethod{ssh.PublicKeys(key)},
		HostKeyCallback: ssh.InsecureIgnoreHostKey(),
		Timeout:         10 * time.Second,
	})
}

// TestClusterSSH_otherNodesConnectWithTheClusterKey: the runner of a node
// of a two-node cluster accepts SSH on port 10022 of its own node IP with
// the cluster's key (and the job's authorized keys), runs commands there in
// the job's environment, refuses any other key, and stops listening when
// the job ends.
func TestClusterSSH_otherNodesConnectWithTheClusterKey(t *testing.T) {
	key, signer := clusterKey(t)
	project, projectLine := userKey(t)
	stranger, _ := userKey(t)
	master, self := loopbackIP(t), loopbackIP(t)
	c, r := sshRunner(t, runner.Config{MPIHostfile: filepath.Join(t.TempDir(), "hostfile")})
	startJob(t, c, api.JobSpec{
		RunName: "mpi", JobID: "job-1",
		Env:            map[string]string{"HOME": t.TempDir()},
		AuthorizedKeys: []string{projectLine},
		Cluster:        &api.ClusterInfo{NodeRank: 1, NodesNum: 2, NodesIPs: []string{master, self}, MasterIP: master, SSHKey: key},
	})
	addr := net.JoinHostPort(self, strconv.Itoa(api.ClusterSSHPort))

	client, err := dialCluster(addr, signer)
	if err != nil {
		t.Fatalf("SSH to %s with the cluster key: %v", addr, err)
	}
	defer client.Close()
	out, errs, err := output(t, client, `echo "rank=$DSTACK_NODE_RANK master=$DSTACK_MASTER_NODE_IP"`, nil)
	if want := fmt.Sprintf("rank=1 master=%s\n", master); err != nil || out != want {
		t.Fatalf("exec over the cluster port: %q %q %v, want %q", out, errs, err, want)
	}

	if pc, err := dialCluster(addr, project); err != nil {
		t.Errorf("SSH with the job's authorized key: %v", err)
	} else {
		pc.Close()
	}
	if sc, err := dialCluster(addr, stranger); err == nil {
		sc.Close()
		t.Fatal("SSH with a key neither the cluster's nor authorized succeeded")
	} else if !strings.Contains(err.Error(), "unable to authenticate") {
		t.Fatalf("SSH with a wrong key: %v, want an authentication failure", err)
	}
	if nc, err := net.DialTimeout("tcp", net.JoinHostPort(master, strconv.Itoa(api.ClusterSSHPort)), time.Second); err == nil {
		nc.Close()
		t.Errorf("the runner also listens on the master's IP %s", master)
	}

	<-r.Stop(0, "", "test ended")
	if nc, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		nc.Close()
		t.Errorf("%s still accepts connections after the job ended", addr)
	}
}

// TestClusterSSH_filesForTheJobsUser: before its commands start, a node's
// job user has the cluster's key as ~/.ssh/dstack_job (0600) and
// dstack_job.pub, and ~/.ssh/config keeps what it held and gains, as
// dstack's runner writes them, one Host block per node on port 10022 with
// that key and no host key checking. A single node's job gets none of it.
func TestClusterSSH_filesForTheJobsUser(t *testing.T) {
	key, _ := clusterKey(t)
	master, self := loopbackIP(t), loopbackIP(t)
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, ".ssh"), 0o700); err != nil {
		t.Fatal(err)
	}
	const kept = "Host git.example.com\n    User git\n"
	if err := os.WriteFile(filepath.Join(home, ".ssh", "config"), []byte(kept), 0o644); err != nil {
		t.Fatal(err)
	}
	c, _, _ := newRunnerWith(t, runner.Config{Home: t.TempDir(), MPIHostfile: filepath.Join(t.TempDir(), "hostfile")})
	st := run(t, c, api.JobSpec{
		RunName: "mpi", JobID: "job-1",
		Env:      map[string]string{"HOME": home},
		Commands: []string{"stat -c '%a %n' ~/.ssh/dstack_job"},
		Cluster:  &api.ClusterInfo{NodeRank: 0, NodesNum: 2, NodesIPs: []string{master, self}, MasterIP: master, SSHKey: key},
	})
	if st.State != api.JobDone {
		t.Fatalf("job = %+v, want done", st)
	}
	keyPath := filepath.Join(home, ".ssh", "dstack_job")
	if out, _ := stdout(t, c); out != "600 "+keyPath+"\n" {
		t.Errorf("the job saw %q, want its key there with mode 600", out)
	}
	for path, want := range map[string]string{
		keyPath:          key.Private,
		keyPath + ".pub": key.Public + "\n",
		filepath.Join(home, ".ssh", "config"): kept + fmt.Sprintf(
			"\nHost %[1]s\n    Port 10022\n    StrictHostKeyChecking no\n    UserKnownHostsFile /dev/null\n    IdentityFile %[3]s\n"+
				"\nHost %[2]s\n    Port 10022\n    StrictHostKeyChecking no\n    UserKnownHostsFile /dev/null\n    IdentityFile %[3]s\n",
			master, self, keyPath),
	} {
		got, err := os.ReadFile(path)
		if err != nil || string(got) != want {
			t.Errorf("%s = %q, %v; want %q", path, got, err, want)
		}
	}

	one := t.TempDir()
	c, _, _ = newRunnerWith(t, runner.Config{Home: t.TempDir(), MPIHostfile: filepath.Join(t.TempDir(), "hostfile")})
	st = run(t, c, api.JobSpec{
		RunName: "one", JobID: "job-2", Env: map[string]string{"HOME": one}, Commands: []string{"true"},
		Cluster: &api.ClusterInfo{NodeRank: 0, NodesNum: 1, NodesIPs: []string{master}, MasterIP: master},
	})
	if st.State != api.JobDone {
		t.Fatalf("single node job = %+v, want done", st)
	}
	if _, err := os.Stat(filepath.Join(one, ".ssh")); !os.IsNotExist(err) {
		t.Errorf("a single node's job got ~/.ssh: %v", err)
	}
}
