package api

import (
	"fmt"
	"time"
)

// Job states reported by the runner. A job is submitted in JobPending, moves
// to JobRunning on Run and ends in exactly one of the three final states.
const (
	JobPending    = "pending"
	JobRunning    = "running"
	JobDone       = "done"
	JobFailed     = "failed"
	JobTerminated = "terminated"
)

// MaxJobSpecBytes is the largest JSON job spec the runner accepts. A job
// spec holds one resource's commands and env; the server accepts resources
// of at most 1 MiB of canonical JSON (hoist/schema.MaxResourceBytes), and
// each byte of that encodes in at most six here (`<` as \u003c), so a spec
// the server accepts always reaches the runner.
const MaxJobSpecBytes = 16 << 20

// JobSpec is what the server submits to the runner.
type JobSpec struct {
	// RunName is the run's name (exported as HOIST_RUN_NAME).
	RunName string `json:"run_name"`
	// JobID is the job's id, one submission of it (exported as
	// HOIST_JOB_ID and DSTACK_JOB_ID).
	JobID string `json:"job_id"`
	// RunID is the run's id (exported as DSTACK_RUN_ID).
	RunID string `json:"run_id,omitempty"`
	// Cluster, when set, is where the job's replica runs: the runner
	// exports it as dstack's cluster environment and writes the MPI
	// hostfile (see ClusterInfo).
	Cluster *ClusterInfo `json:"cluster,omitempty"`
	// Commands run one after another in one shell; the first failure ends
	// the job. With Entrypoint set they are its arguments instead. With
	// neither, the job runs the image's entrypoint and cmd.
	Commands []string `json:"commands"`
	// Entrypoint, when set, is run directly (no shell) with Commands as its
	// arguments, like dstack's entrypoint.
	Entrypoint []string `json:"entrypoint,omitempty"`
	// Env is added to the job's environment.
	Env map[string]string `json:"env,omitempty"`
	// Secrets are added to the job's environment like Env, and never logged.
	Secrets map[string]string `json:"secrets,omitempty"`
	// WorkingDir is where the commands run and uploads land ("" = the
	// image's WORKDIR, or / when it has none); a relative one is
	// resolved against that default.
	WorkingDir string `json:"working_dir,omitempty"`
	// Shell runs the commands ("" = /bin/sh).
	Shell string `json:"shell,omitempty"`
	// MaxDuration stops the job with max_duration_exceeded (0: no limit).
	// On the wire it is an integer number of nanoseconds.
	MaxDuration time.Duration `json:"max_duration,omitempty"`
	// LogQuotaBytes bounds the job's log kept on disk (0: no limit). The
	// runner keeps every record until the server acknowledges it
	// (RunnerClient.Ack) and then deletes it; a job whose unacknowledged log
	// grows beyond the quota is stopped with log_quota_exceeded. Without
	// acknowledgements the quota bounds the job's whole output.
	LogQuotaBytes int64 `json:"log_quota_bytes,omitempty"`
	// Code, when set, says where the job's code (RunnerClient.SendCode)
	// goes; the job does not start until that code has been placed.
	Code *CodeSpec `json:"code,omitempty"`
	// AuthorizedKeys are authorized_keys lines (the project's key) that
	// the runner's SSH server accepts on every connection; each connection
	// may add the connecting user's key (AuthorizedKeyHeader).
	AuthorizedKeys []string `json:"authorized_keys,omitempty"`
	// IDE, when set, is the remote server of a dev environment's IDE that
	// the runner installs before the commands run (dstack's `ide` and
	// `version`).
	IDE *IDESpec `json:"ide,omitempty"`
}

// ClusterInfo describes the nodes of the job's replica (the jobs of one
// multi-node task run together, one per node), as dstack's runner receives
// it and exports it (runner/internal/runner/executor/executor.go, execJob):
// DSTACK_NODE_RANK, DSTACK_NODES_NUM, DSTACK_NODES_IPS (newline-separated),
// DSTACK_MASTER_NODE_IP, DSTACK_GPUS_PER_NODE, DSTACK_GPUS_NUM and
// DSTACK_MPI_HOSTFILE, a file of one line per node: "<ip> slots=<gpus per
// node>", or just "<ip>" on nodes without GPUs (and no line at all when a
// node's IP is unknown). A single-node job is a cluster of one.
type ClusterInfo struct {
	// NodeRank is the job's rank: its job number, 0 for the master.
	NodeRank int `json:"node_rank"`
	// NodesNum is the number of nodes (jobs) of the replica.
	NodesNum int `json:"nodes_num"`
	// NodesIPs are the nodes' internal IPs in rank order: the addresses
	// the nodes reach each other at ("" for a node whose IP is unknown).
	NodesIPs []string `json:"nodes_ips"`
	// MasterIP is the rank 0 node's IP (NodesIPs[0]).
	MasterIP string `json:"master_ip"`
	// GPUsPerNode is the number of GPUs each node's job has.
	GPUsPerNode int `json:"gpus_per_node"`
	// GPUsNum is the number of GPUs of all nodes: NodesNum × GPUsPerNode,
	// or for a task with groups the sum of each node's group's.
	GPUsNum int `json:"gpus_num"`
	// NodesGPUs are the GPUs of each node in rank order when they differ
	// (a task with groups); nil when every node has GPUsPerNode. The MPI
	// hostfile gives each node its own slots from them.
	NodesGPUs []int `json:"nodes_gpus,omitempty"`
	// SSHKey is the key pair the nodes of a cluster of several nodes SSH
	// into each other with (nil for a single node), one per submission of
	// the run, as dstack's JobSpec.ssh_key
	// (server/services/jobs/configurators/base.py, _ssh_key). The runner
	// accepts it on port ClusterSSHPort of its node's IP and gives it to
	// the job's user as ~/.ssh/dstack_job, with ~/.ssh/config entries for
	// the nodes' IPs (runner/internal/runner/executor/executor.go,
	// setupClusterSsh).
	SSHKey *ClusterSSHKey `json:"ssh_key,omitempty"`
}

// ClusterSSHPort is the port the runner of a cluster's node accepts the
// other nodes' SSH connections on, dstack's RunnerSSHPort
// (runner/internal/common/consts/consts.go).
const ClusterSSHPort = 10022

// ClusterSSHKey is a cluster's SSH key pair.
type ClusterSSHKey struct {
	// Private is the private key in OpenSSH's PEM format.
	Private string `json:"private"`
	// Public is the public key as an authorized_keys line.
	Public string `json:"public"`
}

// IDESpec is a dev environment's IDE server, installed by the runner into
// the job user's home before the commands run, as dstack's VS Code, Cursor
// and Windsurf dev environments install theirs.
type IDESpec struct {
	// Name is vscode, cursor or windsurf.
	Name string `json:"name"`
	// Version is the IDE's commit the server is for (dstack's `version`).
	Version string `json:"version"`
	// DownloadURL is the tar.gz of the server; its top directory is
	// stripped and the rest extracted into InstallDir.
	DownloadURL string `json:"download_url"`
	// InstallDir is where the server goes, relative to the job user's
	// home (e.g. .vscode-server/bin/<version>).
	InstallDir string `json:"install_dir"`
}

// SSH into a job. A client opens GET SSHPath on the runner's API with
// "Connection: Upgrade" and "Upgrade: ssh" (SSHUpgrade); the runner answers
// 101 Switching Protocols with its host key in HostKeyHeader and then
// speaks SSH (RFC 4253) on the connection: sessions (shell with a PTY,
// exec, env, window changes, signals) run as the job's user in the job's
// environment and working directory, and direct-tcpip channels dial
// inside the container (port forwarding). Public-key authentication
// accepts JobSpec.AuthorizedKeys and the key of AuthorizedKeyHeader.
const (
	// SSHPath is the runner's SSH upgrade endpoint.
	SSHPath = "/api/v1/ssh"
	// SSHActivityPath answers SSHActivity.
	SSHActivityPath = "/api/v1/ssh/activity"
	// SSHUpgrade is the Upgrade header's protocol name.
	SSHUpgrade = "ssh"
	// AuthorizedKeyHeader carries one authorized_keys line accepted for
	// this connection only: the connecting user's key, set by the server
	// (only the server holds the runner's token).
	AuthorizedKeyHeader = "Hoist-Authorized-Key"
	// HostKeyHeader carries, on the 101 answer, the runner's SSH host key
	// in authorized_keys form.
	HostKeyHeader = "Hoist-Host-Key"
)

// SSHActivity is whether anybody is attached to the job over SSH, for
// dstack's inactivity_duration.
type SSHActivity struct {
	// Connections is the number of SSH connections open now.
	Connections int `json:"connections"`
	// IdleSince is when the last SSH connection closed, or when the job
	// started running if none was ever opened; zero while Connections > 0.
	IdleSince time.Time `json:"idle_since"`
}

// CodeSpec places the parts of a job's code in the container, like
// dstack's repo_dir, repo_exists_action and file_archives
// (dstack: runner/internal/runner/schemas/schemas.go). The code's
// CodeManifest holds the repository directory under CodeRepoPrefix and the
// i-th file mapping under CodeFilePrefix + i (a file, or a directory with
// its tree).
type CodeSpec struct {
	// Repo is where the repository directory goes, absolute or relative to
	// the working directory ("" = the code brings no repository).
	Repo string `json:"repo,omitempty"`
	// RepoIfExists is dstack's if_exists: RepoIfExistsError fails the job
	// when Repo is a non-empty directory, RepoIfExistsSkip leaves it as it is.
	RepoIfExists string `json:"repo_if_exists,omitempty"`
	// Files are the file mappings' container paths, absolute or relative to
	// the working directory.
	Files []string `json:"files,omitempty"`
}

// Values of CodeSpec.RepoIfExists (dstack's RepoExistsAction).
const (
	RepoIfExistsError = "error"
	RepoIfExistsSkip  = "skip"
)

// Prefixes of the paths of a CodeManifest's entries.
const (
	CodeRepoPrefix = "repo"
	CodeFilePrefix = "files/"
)

// Code travels content-addressed: the server sends the job's CodeManifest
// (POST CodePath, after submit and before run); the runner answers a
// CodeStatus naming the blobs (file contents, by SHA-256) that its
// instance's blob cache lacks; the server sends those (POST CodeBlobsPath,
// a gzip-compressed tar whose entries are named by their SHA-256, in as
// many requests of at most MaxCodeArchiveBytes as it needs) and each answer
// names what is still missing. Once nothing is missing, the runner checks
// every blob's hash, places the code as CodeSpec says and answers Placed.
// After a one-file commit only that file's blob travels.
const (
	// CodePath takes a CodeManifest.
	CodePath = "/api/v1/code"
	// CodeBlobsPath takes blobs the runner said were missing.
	CodeBlobsPath = "/api/v1/code/blobs"
)

// CodeManifest lists a job's code: directories and files, each file by the
// SHA-256 of its content.
type CodeManifest struct {
	// Entries are in placement order: a directory before what it holds.
	Entries []CodeEntry `json:"entries"`
}

// Types of a CodeEntry.
const (
	CodeEntryDir  = "dir"
	CodeEntryFile = "file"
)

// CodeEntry is one directory or file of the code.
type CodeEntry struct {
	// Path is slash-separated: CodeRepoPrefix, or CodeRepoPrefix + "/" and
	// a path in the repository, or CodeFilePrefix + i, optionally followed
	// by "/" and a path in that mapping's directory.
	Path string `json:"path"`
	// Type is CodeEntryDir or CodeEntryFile.
	Type string `json:"type"`
	// Mode holds the permission bits (0o644, or 0o755 for executables and
	// directories).
	Mode uint32 `json:"mode"`
	// Size is a file's length in bytes.
	Size int64 `json:"size,omitempty"`
	// SHA256 is a file's content hash in lowercase hex: the blob's name.
	SHA256 string `json:"sha256,omitempty"`
}

// CodeStatus is the runner's answer to a manifest or to blobs.
type CodeStatus struct {
	// Missing are the SHA-256 of the blobs the runner still needs.
	Missing []string `json:"missing,omitempty"`
	// Placed is set once the code is in place; the job may run.
	Placed bool `json:"placed"`
}

// MaxCodeArchiveBytes bounds one request of blobs as it travels (gzip),
// MaxCodeExtractedBytes the size of the files a job's code places, and
// MaxCodeManifestBytes a manifest's JSON.
const (
	MaxCodeArchiveBytes   = 64 << 20
	MaxCodeExtractedBytes = 1 << 30
	MaxCodeManifestBytes  = 64 << 20
)

// JobState is the runner's view of the job.
type JobState struct {
	// State is one of the Job* states.
	State string `json:"state"`
	// ExitCode is the shell's exit code once it exited (128+n when killed by signal n).
	ExitCode *int `json:"exit_code,omitempty"`
	// TerminationReason is one of the Reason* constants once finished.
	TerminationReason string `json:"termination_reason,omitempty"`
	// TerminationMessage explains the termination in words.
	TerminationMessage string `json:"termination_message,omitempty"`
	// Time is when the job entered State.
	Time time.Time `json:"time"`
}

// Finished reports whether the job has reached a final state.
func (s JobState) Finished() bool {
	return s.State == JobDone || s.State == JobFailed || s.State == JobTerminated
}

// Log streams.
const (
	StreamStdout = "stdout"
	StreamStderr = "stderr"
)

// LogLine is one record of a job's output: one or more whole lines written to
// one stream. Data ends with a newline unless the job paused in the middle of
// a line, the line was longer than 256 KiB, or it is the job's last output.
// Seq numbers start at 1 and increase by one per record, so a reader that
// resumes with afterSeq neither loses nor duplicates output.
type LogLine struct {
	// Seq is the record's sequence number.
	Seq int64 `json:"seq"`
	// Time is when the runner read the data.
	Time time.Time `json:"time"`
	// Stream is StreamStdout or StreamStderr.
	Stream string `json:"stream"`
	// Data is the bytes written (base64 in JSON).
	Data []byte `json:"data"`
}

// RunResponse is the answer of POST /api/v1/run.
type RunResponse struct {
	// WorkingDir is the absolute directory the job runs in.
	WorkingDir string `json:"working_dir"`
	// State is the job state right after starting.
	State JobState `json:"state"`
}

// StopRequest is the body of POST /api/v1/stop.
type StopRequest struct {
	// GraceMillis is how long the job's process group may take to exit after
	// SIGTERM before it is sent SIGKILL.
	GraceMillis int64 `json:"grace_ms"`
	// Reason is the termination reason ("" = terminated_by_server).
	Reason string `json:"reason,omitempty"`
	// Message explains the stop.
	Message string `json:"message,omitempty"`
}

// GPUMetrics is one GPU's utilization.
type GPUMetrics struct {
	// Index is the device index.
	Index int `json:"index"`
	// MemoryUsedBytes is the device memory in use.
	MemoryUsedBytes int64 `json:"memory_used_bytes"`
	// UtilPercent is the GPU utilization in percent.
	UtilPercent float64 `json:"util_percent"`
}

// Metrics is a sample of the container's resource use, read from its cgroup.
type Metrics struct {
	// Time is when the sample was taken.
	Time time.Time `json:"time"`
	// CPUUsageMicros is the CPU time consumed so far.
	CPUUsageMicros int64 `json:"cpu_usage_micros"`
	// MemoryUsageBytes is the memory in use, page cache included.
	MemoryUsageBytes int64 `json:"memory_usage_bytes"`
	// MemoryWorkingSetBytes is the memory in use minus inactive file cache.
	MemoryWorkingSetBytes int64 `json:"memory_working_set_bytes"`
	// MemoryLimitBytes is the cgroup's memory limit; 0 when it has none.
	MemoryLimitBytes int64 `json:"memory_limit_bytes,omitempty"`
	// GPUs is per-GPU utilization when nvidia-smi, amd-smi or rocm-smi is
	// present.
	GPUs []GPUMetrics `json:"gpus,omitempty"`
}

// AckRequest is the body of POST /api/v1/logs/ack.
type AckRequest struct {
	// Seq is the last record the server has stored durably; the runner may
	// delete it and every record before it.
	Seq int64 `json:"seq"`
}

// AckResponse is the answer of POST /api/v1/logs/ack.
type AckResponse struct {
	// FirstSeq is the oldest record the runner still keeps.
	FirstSeq int64 `json:"first_seq"`
	// KeptBytes is the size of the log the runner keeps on disk.
	KeptBytes int64 `json:"kept_bytes"`
}

// Files in the runner's home directory (the per-task runner directory on
// the shim's host), shared by runner and shim.
const (
	// RunnerStateFile holds the job's latest JobState as JSON.
	RunnerStateFile = "state.json"
	// RunnerLogDir holds the job log's segment files (see LogSegmentName).
	RunnerLogDir = "logs"
)

// LogSegmentName is the file name of the log segment whose first record is
// first: segments sort by name in log order, and each holds log frames.
func LogSegmentName(first int64) string { return fmt.Sprintf("%020d.frames", first) }
