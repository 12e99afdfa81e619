package reconciler

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"strings"

	"golang.org/x/crypto/ssh"

	"hoist/agents/api"
	"hoist/store"
)

// newClusterSSHKey returns a fresh key pair for the nodes of one submission
// of a multi-node run to SSH into each other with (mpirun's remote ranks),
// as dstack's job configurator makes one per submission
// (server/services/jobs/configurators/base.py, _ssh_key; hoist's is
// ed25519).
func newClusterSSHKey() (*api.ClusterSSHKey, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("cluster ssh key: %w", err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "dstack_job")
	if err != nil {
		return nil, fmt.Errorf("cluster ssh key: %w", err)
	}
	sp, err := ssh.NewPublicKey(pub)
	if err != nil {
		return nil, fmt.Errorf("cluster ssh key: %w", err)
	}
	return &api.ClusterSSHKey{
		Private: string(pem.EncodeToMemory(block)),
		Public:  strings.TrimSpace(string(ssh.MarshalAuthorizedKey(sp))) + " dstack_job",
	}, nil
}

// giveClusterSSHKey gives the master j of a new submission of a multi-node
// run a fresh cluster key, in its provisioning data.
func giveClusterSSHKey(j *store.Job) error {
	key, err := newClusterSSHKey()
	if err != nil {
		return err
	}
	j.ProvisioningData, err = json.Marshal(provisioningData{ClusterSSHKey: key})
	return err
}

// clusterSSHKey returns the cluster key the master of a submission keeps
// in its provisioning data (newJobs put it there), nil when it has none (a
// submission made before hoist made cluster keys).
func clusterSSHKey(master store.Job) *api.ClusterSSHKey {
	var pd provisioningData
	if len(master.ProvisioningData) == 0 || json.Unmarshal(master.ProvisioningData, &pd) != nil {
		return nil
	}
	return pd.ClusterSSHKey
}
