package runner

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/crypto/ssh"

	"hoist/agents/api"
)

// clusterKeyFile is the name of the cluster's private key in the job
// user's ~/.ssh, as dstack's runner writes it
// (runner/internal/runner/executor/executor.go, setupClusterSsh); the public
// key goes beside it with ".pub".
const clusterKeyFile = "dstack_job"

// clusterSSHConfig returns the ~/.ssh/config entries dstack's runner appends
// for a cluster: one Host block per node IP, on ClusterSSHPort, with the
// cluster's key and no host key checking (the nodes' host keys are not
// known ahead).
func clusterSSHConfig(ips []string, keyPath string) []byte {
	var b strings.Builder
	for _, ip := range ips {
		if ip == "" {
			continue
		}
		fmt.Fprintf(&b, "\nHost %s\n", ip)
		fmt.Fprintf(&b, "    Port %d\n", api.ClusterSSHPort)
		b.WriteString("    StrictHostKeyChecking no\n")
		b.WriteString("    UserKnownHostsFile /dev/null\n")
		fmt.Fprintf(&b, "    IdentityFile %s\n", keyPath)
	}
	return []byte(b.String())
}

// setupClusterSSHLocked readies SSH between the nodes of a job's cluster of
// several nodes, before its commands start: the runner's SSH server accepts
// the cluster's key and listens on ClusterSSHPort of this node's IP (not
// every address: nodes that share a network namespace, as in tests, each
// take their own), and the job's user gets the key as ~/.ssh/dstack_job
// (0600) and dstack_job.pub, and ~/.ssh/config entries for every node's IP.
// A job without a cluster key, or on one node, needs none of it. Callers
// hold mu.
func (r *Runner) setupClusterSSHLocked() error {
	c := r.spec.Cluster
	if c == nil || c.NodesNum < 2 || c.SSHKey == nil {
		return nil
	}
	pub, err := parseAuthorizedKey(strings.TrimSpace(c.SSHKey.Public))
	if err != nil {
		return fmt.Errorf("cluster ssh key: %w", err)
	}
	if c.NodeRank < 0 || c.NodeRank >= len(c.NodesIPs) || c.NodesIPs[c.NodeRank] == "" {
		return fmt.Errorf("cluster ssh: node %d has no IP to listen on", c.NodeRank)
	}
	dir := filepath.Join(r.jobHomeLocked(), ".ssh")
	if err := writeClusterSSHFiles(dir, c); err != nil {
		return fmt.Errorf("cluster ssh: %w", err)
	}
	addr := net.JoinHostPort(c.NodesIPs[c.NodeRank], strconv.Itoa(api.ClusterSSHPort))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("cluster ssh: listen for the other nodes: %w", err)
	}
	if !r.ssh.listen(ln, pub) {
		ln.Close()
		return errors.New("cluster ssh: the job has ended")
	}
	r.log.Info("cluster_ssh_listening", "addr", addr, "key", ssh.FingerprintSHA256(pub))
	return nil
}

// writeClusterSSHFiles writes the cluster's key pair into dir (the job
// user's ~/.ssh) and appends the nodes' Host entries to its config, as
// dstack's runner does (it keeps what the image's config holds).
func writeClusterSSHFiles(dir string, c *api.ClusterInfo) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	priv := filepath.Join(dir, clusterKeyFile)
	if err := writeFileMode(priv, []byte(c.SSHKey.Private), 0o600); err != nil {
		return err
	}
	if err := writeFileMode(priv+".pub", []byte(strings.TrimSpace(c.SSHKey.Public)+"\n"), 0o644); err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(dir, "config"), os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(clusterSSHConfig(c.NodesIPs, priv))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// writeFileMode writes data to path and gives it mode perm, also when the
// file existed with another mode.
func writeFileMode(path string, data []byte, perm os.FileMode) error {
	if err := os.WriteFile(path, data, perm); err != nil {
		return err
	}
	return os.Chmod(path, perm)
}

// listen serves SSH connections accepted on ln, the cluster's port, until
// the job ends; they authenticate with key (the cluster's) or the job's
// authorized keys. False once the job has ended.
func (s *sshServer) listen(ln net.Listener, key ssh.PublicKey) bool {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return false
	}
	s.listeners = append(s.listeners, ln)
	s.mu.Unlock()
	go s.accept(ln, []ssh.PublicKey{key}, false)
	return true
}

// accept serves the SSH connections accepted on ln until it is closed;
// they authenticate with keys or the job's authorized keys. control marks
// a standalone runner's port (see serve).
func (s *sshServer) accept(ln net.Listener, keys []ssh.PublicKey, control bool) {
	for {
		nc, err := ln.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				s.r.log.Warn("ssh_accept_failed", "addr", ln.Addr().String(), "err", err)
			}
			return
		}
		go s.serve(nc, keys, control)
	}
}
