// Package runner is hoist's in-container agent: it receives one job over its
// HTTP API, runs the job's commands in a shell as their own process group,
// captures stdout and stderr into a sequence-numbered log on disk, and serves
// the job's state, logs and resource metrics until the server has read them.
//
// The runner is the container's entrypoint (the shim bind-mounts the static
// hoist-runner binary into the container), so it may be PID 1: it reaps every
// orphaned child. It needs nothing from the image but the job's shell.
//
// The runner is also the job's SSH server (ssh.go, sshsession.go), reached
// through its own API by an HTTP Upgrade (api.SSHPath); on a cluster of
// several nodes also by the other nodes on api.ClusterSSHPort of its node's
// IP, with the cluster's key, which the job's user gets as dstack's
// ~/.ssh/dstack_job with ~/.ssh/config entries for the nodes
// (clusterssh.go), so that mpirun reaches them. Sessions run as the job's
// user, in its environment and working directory, with or without a
// terminal, and direct-tcpip channels dial from the container's network
// namespace. Connections, listeners and the sessions' processes end with
// the job.
//
// The job's environment carries dstack's variables (cluster.go): the run's
// and job's ids and name, and from the job's api.ClusterInfo the cluster's
// (DSTACK_NODE_RANK, DSTACK_NODES_IPS, DSTACK_MASTER_NODE_IP, the GPU
// counts) with an MPI hostfile at DSTACK_MPI_HOSTFILE; the job's env and
// secrets may override them, as in dstack's runner.
//
// In a container cloud's pod (RunPod, Vast.ai) the runner runs alone,
// fetched by the pod's start command (api.StandaloneCommand): with
// --standalone (standalone.go) it takes its token, SSH host key,
// authorized keys and SSH address from the environment (the api.RunnerEnv*
// variables, which it removes before anything else, also from what
// /proc/1/environ shows), and serves SSH on that address besides its API
// on --socket. The server holds a connection there for as long as the
// runner runs: on it a direct-streamlocal channel to the API socket (or
// api.StandaloneSocket) opens whatever the job's state, and the connection
// outlives the job, while the runner lingers; sessions and port forwarding
// keep the rules of every connection.
//
// A job's code arrives content-addressed (api.CodePath): a manifest of its
// directories and files, then only the blobs (file contents by SHA-256)
// missing from the instance's blob cache, a directory the shim shares
// between the instance's jobs (--code-cache; bounded, least recently used
// blobs evicted). Every blob is checked against its hash before the code is
// placed; the job does not start until it is.
//
// A job's artifacts (api.ArtifactsPath, artifacts.go) are streamed as a
// tar of the paths the server asks for once the job has ended, relative to
// the working dir or absolute, walked without following symlinks and read
// with the runner's own permissions, the job's user's.
//
// cmd/hoist-runner and `hoist agent runner` (cmd/hoist) run it through Main;
// tests import it too. It imports agents/api and agents/internal/agenthttp,
// and nothing else of hoist.
package runner
