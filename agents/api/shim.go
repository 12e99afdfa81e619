package api

import "time"

// Task statuses, in the order a task passes through them. A task may jump to
// TaskTerminated from any other status.
const (
	TaskPending    = "pending"
	TaskPreparing  = "preparing"
	TaskPulling    = "pulling"
	TaskCreating   = "creating"
	TaskRunning    = "running"
	TaskTerminated = "terminated"
)

// TaskStatuses lists every task status in lifecycle order.
var TaskStatuses = []string{TaskPending, TaskPreparing, TaskPulling, TaskCreating, TaskRunning, TaskTerminated}

// TaskStatusRank returns the position of status in TaskStatuses, or -1 for
// an unknown status. A later status has a higher rank.
func TaskStatusRank(status string) int {
	for i, s := range TaskStatuses {
		if s == status {
			return i
		}
	}
	return -1
}

// Termination reasons of tasks (set by the shim) and jobs (set by the runner).
const (
	// ReasonExecutorError: the agent itself failed (state dir, runner binary, ...).
	ReasonExecutorError = "executor_error"
	// ReasonImagePullError: the image could not be pulled (unauthorized, not
	// found, registry unreachable); the message says which.
	ReasonImagePullError = "image_pull_error"
	// ReasonCreatingContainerError: Docker refused to create or start the container.
	ReasonCreatingContainerError = "creating_container_error"
	// ReasonContainerExitedWithError: the container exited non-zero or was
	// killed from outside; for a job, the commands exited non-zero.
	ReasonContainerExitedWithError = "container_exited_with_error"
	// ReasonDoneByRunner: the job finished successfully.
	ReasonDoneByRunner = "done_by_runner"
	// ReasonTerminatedByUser: a user asked to stop.
	ReasonTerminatedByUser = "terminated_by_user"
	// ReasonTerminatedByServer: the server stopped it.
	ReasonTerminatedByServer = "terminated_by_server"
	// ReasonMaxDurationExceeded: the job ran longer than its max duration.
	ReasonMaxDurationExceeded = "max_duration_exceeded"
	// ReasonLogQuotaExceeded: the job wrote more log bytes than its quota.
	ReasonLogQuotaExceeded = "log_quota_exceeded"
	// ReasonContainerLost: the shim found no container for a task it knew.
	ReasonContainerLost = "container_lost"
	// ReasonNoCapacity: the task could not be placed; the Kubernetes pod
	// shim reports it for a pod that stayed unschedulable longer than its
	// limit (dstack's job termination reason
	// failed_to_start_due_to_no_capacity). A run retrying on no-capacity
	// is resubmitted.
	ReasonNoCapacity = "failed_to_start_due_to_no_capacity"
)

// RegistryAuth holds credentials for pulling a task's image. The shim never
// writes them to disk.
type RegistryAuth struct {
	// Username for the registry.
	Username string `json:"username"`
	// Password or token for the registry.
	Password string `json:"password"`
	// ServerAddress is the registry host[:port]; empty means the image's registry.
	ServerAddress string `json:"server_address,omitempty"`
}

// PortMapping maps a container port to a port on the shim's host. In requests,
// Host 0 asks for an ephemeral port; TaskInfo reports the port actually bound.
type PortMapping struct {
	// Host is the port on the shim's host (0: ephemeral).
	Host int `json:"host"`
	// Container is the port inside the container.
	Container int `json:"container"`
	// Addr, in TaskInfo, is host:port at which the port answers through
	// the instance's Conn when that is not the shim host's loopback: the
	// Kubernetes pod shim's tasks publish nothing, and their ports are
	// reached by a port-forward to the pod (Host is 0 then).
	Addr string `json:"addr,omitempty"`
}

// InstanceMount bind-mounts a directory of the shim's host into the container.
type InstanceMount struct {
	// InstancePath is the absolute path on the shim's host.
	InstancePath string `json:"instance_path"`
	// Path is the absolute path inside the container.
	Path string `json:"path"`
	// ReadOnly mounts it read-only.
	ReadOnly bool `json:"read_only,omitempty"`
}

// VolumeMount mounts a named Docker volume into the container; Docker creates
// the volume when it does not exist.
type VolumeMount struct {
	// Name is the Docker volume name.
	Name string `json:"name"`
	// Path is the absolute path inside the container.
	Path string `json:"path"`
}

// NetworkVolume is a network volume (EBS volume, persistent disk, managed
// disk) the server attached to the shim's host as a block device. The shim
// waits for the device, makes an ext4 file system on it when it has none and
// InitFS is set, mounts it on the host and binds that into the container at
// Path; it unmounts it once the container has exited.
type NetworkVolume struct {
	// Name is the volume's name; it names the host mount point, so it is
	// one path component ([a-z0-9][a-z0-9-]*).
	Name string `json:"name"`
	// DevicePath is the block device, or a symbolic link to it, below /dev
	// (e.g. /dev/disk/by-id/google-<device name>).
	DevicePath string `json:"device_path"`
	// Path is the absolute path inside the container.
	Path string `json:"path"`
	// InitFS formats a device that has no file system (a volume hoist
	// created); a registered volume without one is an error instead.
	InitFS bool `json:"init_fs,omitempty"`
	// Claim is, instead of DevicePath, what a pod-based backend's pod
	// mounts (nothing is formatted): the PersistentVolumeClaim of a task
	// of the Kubernetes backend, or the provider's network volume id of
	// a container cloud's (RunPod's networkVolumeId). The docker shim
	// refuses it.
	Claim string `json:"claim,omitempty"`
	// ReadOnly mounts the volume read-only in the container.
	ReadOnly bool `json:"read_only,omitempty"`
}

// TaskSpec is what the server asks the shim to run: one container whose
// entrypoint is the runner.
type TaskSpec struct {
	// ID identifies the task on this shim (the server's job submission id).
	ID string `json:"id"`
	// Name is the container name; empty means "hoist-<id>".
	Name string `json:"name,omitempty"`
	// Image is the image reference.
	Image string `json:"image"`
	// RegistryAuth, when set, is used to pull Image.
	RegistryAuth *RegistryAuth `json:"registry_auth,omitempty"`
	// User is the container user ("" = the image's).
	User string `json:"user,omitempty"`
	// Privileged runs the container privileged.
	Privileged bool `json:"privileged,omitempty"`
	// GPUCount asks for that many GPUs through a Docker device request
	// (-1: all, 0: none). GPUIDs, when set, takes precedence.
	GPUCount int `json:"gpu_count,omitempty"`
	// GPUIDs asks for these GPUs (indexes or UUIDs) through a device request.
	GPUIDs []string `json:"gpu_ids,omitempty"`
	// GPUVendor is "nvidia" (default) or "amd"; it selects the device driver.
	GPUVendor string `json:"gpu_vendor,omitempty"`
	// CPUs limits the container's CPUs (0: no limit).
	CPUs float64 `json:"cpus,omitempty"`
	// MemoryBytes limits the container's memory (0: no limit).
	MemoryBytes int64 `json:"memory_bytes,omitempty"`
	// ShmSizeBytes sets /dev/shm's size (0: Docker's default).
	ShmSizeBytes int64 `json:"shm_size_bytes,omitempty"`
	// NetworkMode is "host" or "bridge" ("" = bridge).
	NetworkMode string `json:"network_mode,omitempty"`
	// Ports are published on the shim's host (bridge mode only).
	Ports []PortMapping `json:"ports,omitempty"`
	// Env is added to the container's environment.
	Env map[string]string `json:"env,omitempty"`
	// InstanceMounts are host directories bind-mounted into the container.
	InstanceMounts []InstanceMount `json:"instance_mounts,omitempty"`
	// VolumeMounts are named Docker volumes mounted into the container.
	VolumeMounts []VolumeMount `json:"volume_mounts,omitempty"`
	// NetworkVolumes are network volumes attached to the host, mounted into
	// the container.
	NetworkVolumes []NetworkVolume `json:"network_volumes,omitempty"`
	// Labels are added to the container's labels (on top of the shim's own).
	Labels map[string]string `json:"labels,omitempty"`
	// PullPolicy is "missing" (default: pull only when the image is not
	// present) or "always".
	PullPolicy string `json:"pull_policy,omitempty"`
}

// Pull policies of TaskSpec.PullPolicy.
const (
	PullMissing = "missing"
	PullAlways  = "always"
)

// Network modes of TaskSpec.NetworkMode.
const (
	NetworkHost   = "host"
	NetworkBridge = "bridge"
)

// PullProgress reports an image pull in bytes, summed over layers.
type PullProgress struct {
	// DownloadedBytes have been downloaded so far.
	DownloadedBytes int64 `json:"downloaded_bytes"`
	// ExtractedBytes have been extracted so far.
	ExtractedBytes int64 `json:"extracted_bytes"`
	// TotalBytes is the sum of the sizes of the layers seen so far.
	TotalBytes int64 `json:"total_bytes"`
	// TotalFinal is true once every layer's size is known.
	TotalFinal bool `json:"total_final"`
}

// TaskInfo is the shim's view of one task.
type TaskInfo struct {
	// ID is the task id.
	ID string `json:"id"`
	// Status is one of the Task* statuses.
	Status string `json:"status"`
	// TerminationReason is one of the Reason* constants once terminated.
	TerminationReason string `json:"termination_reason,omitempty"`
	// TerminationMessage explains the termination in words.
	TerminationMessage string `json:"termination_message,omitempty"`
	// ContainerID is the Docker container id once created.
	ContainerID string `json:"container_id,omitempty"`
	// ContainerName is the Docker container name.
	ContainerName string `json:"container_name,omitempty"`
	// RunnerAddr is "unix://" and the path on the shim's host of the Unix
	// socket the runner's API listens on (see UnixAddr, BaseURL); only the
	// shim's user and root can open it. The Kubernetes pod shim's is an
	// http URL whose host names the pod, which only its Conn's transport
	// dials (a port-forward to the runner on the pod's loopback). Set once
	// running.
	RunnerAddr string `json:"runner_addr,omitempty"`
	// RunnerToken is the bearer token the runner's API demands (see
	// RunnerClient.WithToken), random for each task. Only the shim's
	// authenticated API reports it.
	RunnerToken string `json:"runner_token,omitempty"`
	// InternalIP is the address the other nodes of a cluster reach the
	// task's container at when the container has one of its own (a
	// Kubernetes pod's IP on the pod network, dstack's internal_ip of a
	// container backend's job); "" when it shares its instance's. Set
	// from the moment the container has it until the task ends.
	InternalIP string `json:"internal_ip,omitempty"`
	// Ports are the published ports as bound on the shim's host.
	Ports []PortMapping `json:"ports,omitempty"`
	// Pull is the image pull progress.
	Pull PullProgress `json:"pull"`
	// ExitCode is the container's exit code once it exited.
	ExitCode *int `json:"exit_code,omitempty"`
	// Job is the runner's last recorded job state, when the runner wrote one.
	Job *JobState `json:"job,omitempty"`
	// Updated is when the task last changed.
	Updated time.Time `json:"updated"`
}

// Terminated reports whether the task has reached its final status.
func (t TaskInfo) Terminated() bool { return t.Status == TaskTerminated }

// TerminateRequest is the body of POST /api/v1/tasks/{id}/terminate.
type TerminateRequest struct {
	// Reason is a Reason* constant.
	Reason string `json:"reason"`
	// Message explains the termination.
	Message string `json:"message,omitempty"`
	// GraceMillis is how long the container may take to exit after SIGTERM
	// before it is killed (0: kill now).
	GraceMillis int64 `json:"grace_ms"`
}

// UnknownContainer is a container labelled as hoist's that the shim found but
// has no task for; the shim reports it and never kills it.
type UnknownContainer struct {
	// ContainerID is the Docker container id.
	ContainerID string `json:"container_id"`
	// Name is the container name.
	Name string `json:"name"`
	// TaskID is the task id found in its labels.
	TaskID string `json:"task_id"`
	// State is Docker's state of the container (running, exited, ...).
	State string `json:"state"`
}

// TaskList is the answer of GET /api/v1/tasks.
type TaskList struct {
	// Tasks lists every task the shim knows, terminated ones included.
	Tasks []TaskInfo `json:"tasks"`
	// Unknown lists hoist-labelled containers that belong to no task.
	Unknown []UnknownContainer `json:"unknown,omitempty"`
}

// GPU describes one GPU of the shim's host.
type GPU struct {
	// Vendor is "nvidia" or "amd".
	Vendor string `json:"vendor"`
	// Index is the device index.
	Index int `json:"index"`
	// Name is the model name.
	Name string `json:"name"`
	// MemoryBytes is the device memory.
	MemoryBytes int64 `json:"memory_bytes"`
	// ID is the UUID (or the bus id when there is no UUID).
	ID string `json:"id,omitempty"`
}

// HostInfo describes the shim's host.
type HostInfo struct {
	// Hostname of the host.
	Hostname string `json:"hostname"`
	// OS and Arch as Go names them (linux, amd64).
	OS   string `json:"os"`
	Arch string `json:"arch"`
	// CPUs is the number of logical CPUs.
	CPUs int `json:"cpus"`
	// CPUModel is the CPU model name when known.
	CPUModel string `json:"cpu_model,omitempty"`
	// MemoryBytes is the total memory.
	MemoryBytes int64 `json:"memory_bytes"`
	// DiskBytes is the size of the filesystem holding Docker's data root.
	DiskBytes int64 `json:"disk_bytes"`
	// DiskFreeBytes is what is available of it.
	DiskFreeBytes int64 `json:"disk_free_bytes"`
	// GPUs lists the host's GPUs (none when neither nvidia-smi nor amd-smi answers).
	GPUs []GPU `json:"gpus"`
	// GPUVendor is "nvidia", "amd" or "".
	GPUVendor string `json:"gpu_vendor,omitempty"`
	// GPUDriverVersion is the driver version when GPUs are present.
	GPUDriverVersion string `json:"gpu_driver_version,omitempty"`
	// Addresses are the host's non-loopback IP addresses.
	Addresses []string `json:"addresses,omitempty"`
	// DockerVersion is the Docker Engine version.
	DockerVersion string `json:"docker_version,omitempty"`
	// ShimVersion is the shim binary's version.
	ShimVersion string `json:"shim_version"`
}
