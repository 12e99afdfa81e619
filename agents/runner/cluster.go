package runner

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"hoist/agents/api"
)

// DefaultMPIHostfile is where the runner writes a job's MPI hostfile, the
// path dstack's runner exports as DSTACK_MPI_HOSTFILE (its dstack dir's
// mpi/hostfile).
const DefaultMPIHostfile = "/dstack/mpi/hostfile"

// mpiHostfile returns the path of the job's MPI hostfile: where it was
// written, else where it goes.
func (r *Runner) mpiHostfile() string {
	if r.hostfile != "" {
		return r.hostfile
	}
	if r.cfg.MPIHostfile != "" {
		return r.cfg.MPIHostfile
	}
	return DefaultMPIHostfile
}

// dstackEnv adds to m the variables dstack's runner sets for every job
// (runner/internal/runner/executor/executor.go, execJob): the run's and the
// job's ids and name, and, for a job with a cluster, where its nodes are.
func (r *Runner) dstackEnv(m map[string]string) {
	spec := r.spec
	m["DSTACK_RUN_ID"] = spec.RunID
	m["DSTACK_JOB_ID"] = spec.JobID
	m["DSTACK_RUN_NAME"] = spec.RunName
	m["DSTACK_WORKING_DIR"] = r.workDir
	if d := r.repoDirLocked(); d != "" {
		m["DSTACK_REPO_DIR"] = d
	}
	if c := spec.Cluster; c != nil {
		m["DSTACK_NODES_IPS"] = strings.Join(c.NodesIPs, "\n")
		m["DSTACK_MASTER_NODE_IP"] = c.MasterIP
		m["DSTACK_NODE_RANK"] = strconv.Itoa(c.NodeRank)
		m["DSTACK_NODES_NUM"] = strconv.Itoa(c.NodesNum)
		m["DSTACK_GPUS_PER_NODE"] = strconv.Itoa(c.GPUsPerNode)
		m["DSTACK_GPUS_NUM"] = strconv.Itoa(c.GPUsNum)
		m["DSTACK_MPI_HOSTFILE"] = r.mpiHostfile()
	}
}

// hostfile returns the MPI hostfile of cluster c as dstack's runner writes
// it: one line per node, "<ip> slots=<gpus per node>" (each node's own
// count when NodesGPUs gives them), or the bare IP on nodes without GPUs
// (Open MPI then counts the host's cores); empty when some node's IP is
// unknown.
func hostfile(c *api.ClusterInfo) []byte {
	var b strings.Builder
	for _, ip := range c.NodesIPs {
		if ip == "" {
			return nil
		}
	}
	for i, ip := range c.NodesIPs {
		b.WriteString(ip)
		gpus := c.GPUsPerNode
		if len(c.NodesGPUs) == len(c.NodesIPs) {
			gpus = c.NodesGPUs[i]
		}
		if gpus > 0 {
			fmt.Fprintf(&b, " slots=%d", gpus)
		}
		b.WriteByte('\n')
	}
	return []byte(b.String())
}

// writeHostfile writes the job's MPI hostfile, when the job has a cluster.
// dstack's runner runs as root; hoist's runs as the image's user, who may
// not create /dstack: the hostfile then goes into the runner's home. A job
// of several nodes fails without one; a single node's job goes on (it has
// no peers to list).
func (r *Runner) writeHostfile() error {
	c := r.spec.Cluster
	if c == nil {
		return nil
	}
	data := hostfile(c)
	var errs []error
	for _, path := range []string{r.mpiHostfile(), filepath.Join(r.cfg.Home, "mpi", "hostfile")} {
		err := os.MkdirAll(filepath.Dir(path), 0o755)
		if err == nil {
			err = os.WriteFile(path, data, 0o644)
		}
		if err == nil {
			r.hostfile = path
			return nil
		}
		errs = append(errs, err)
	}
	err := fmt.Errorf("write MPI hostfile: %w", errors.Join(errs...))
	if c.NodesNum > 1 {
		return err
	}
	r.log.Warn("mpi_hostfile_not_written", "err", err)
	return nil
}
