package podcloud

import (
	"context"
	"time"

	"hoist/backends/offers"
)

// A Provider is what a container cloud's driver implements for the engine.
// Every method must be safe for concurrent use and respect ctx. Errors are
// classified as the engine's callers expect: capacity errors (no machine
// of the type is free) wrap backends.ErrNoCapacity, a pod the provider no
// longer knows wraps backends.ErrNotFound, throttling and 5xx answers are
// backends.Transient, refused credentials and invalid requests are
// backends.Stalled.
type Provider interface {
	// Offers returns what the provider can run now for q (live: RunPod's
	// GPU types with their stock, Vast.ai's asks), in the engine's
	// backend; Offer.Instance is what CreatePod takes back.
	Offers(ctx context.Context, q offers.Query) ([]offers.Offer, error)
	// CreatePod asks for one pod and returns once the provider accepted
	// it (usually still starting). The engine looks a pod up by name
	// (ListPods) before it creates one, so a provider without
	// idempotency tokens creates no second pod for the same task.
	CreatePod(ctx context.Context, spec PodSpec) (Pod, error)
	// GetPod observes a pod by its provider id. It returns an error
	// wrapping backends.ErrNotFound when the provider no longer knows it.
	GetPod(ctx context.Context, id string) (Pod, error)
	// TerminatePod deletes the pod; a pod already gone is success.
	TerminatePod(ctx context.Context, id string) error
	// ListPods returns the pods of the account whose tags carry all of
	// tags (every pod with ownership tags for empty tags): the leak
	// audit and the lookup by name.
	ListPods(ctx context.Context, tags map[string]string) ([]Pod, error)
}

// A PodSpec asks a Provider for one pod.
type PodSpec struct {
	// Name is the provider-visible unique name of the pod
	// (hoist-<task id>, cut to the provider's limit).
	Name string
	// Offer is what to run on: Instance (a RunPod GPU type id, a Vast.ai
	// ask id), Region, GPUCount, Spot (RunPod's interruptible pods,
	// Vast.ai's bids) and DiskGB (the container disk; 0 for the
	// provider's default).
	Offer offers.Offer
	// Image is the job's image reference.
	Image string
	// RegistryUsername and RegistryPassword authenticate the image pull
	// (RunPod's container registry auth, Vast.ai's image_login); empty
	// for a public image.
	RegistryUsername, RegistryPassword string
	// Command replaces the image's entrypoint and command: the engine's
	// start command (StartCommand), ["/bin/sh", "-c", script].
	Command []string
	// Env is the pod's environment: the job's variables and the runner's
	// (api.RunnerEnv*).
	Env map[string]string
	// Ports are the container's TCP ports to expose; the first is always
	// api.PodSSHPort. The provider maps each to an address the server
	// reaches (Pod.Ports).
	Ports []int
	// Volumes are the provider's network volumes the pod mounts (a
	// VolumeProvider's, at most VolumeLimits.MaxPerPod); the pod must run
	// where they are (the engine's AttachVolume checked it).
	Volumes []PodVolume
	// Tags are the ownership tags (backends.Tag*) and the task's
	// (TagTask), kept by the provider's own mechanism (Vast.ai's label,
	// RunPod's pod environment) so that ListPods returns them.
	Tags map[string]string
}

// Pod statuses as the engine sees them.
const (
	// PodStarting: accepted, pulling or starting; not yet running.
	PodStarting = "starting"
	// PodRunning: the container runs.
	PodRunning = "running"
	// PodExited: the container ended (Message says how, ExitCode when
	// the provider tells it) or the provider failed to start it.
	PodExited = "exited"
)

// A Pod is what a Provider observed of one pod.
type Pod struct {
	// ID is the provider's id of the pod.
	ID string
	// Name is PodSpec.Name as the provider keeps it.
	Name string
	// Status is one of the Pod* statuses.
	Status string
	// Message explains the status in the provider's words (an image that
	// cannot be pulled, an exit, a start failure).
	Message string
	// ExitCode is the container's exit code when the provider reports it.
	ExitCode *int
	// Interrupted is set when the provider reclaimed the pod (an
	// interruptible RunPod pod, an outbid Vast.ai instance); Status is
	// then PodExited, or the pod is gone.
	Interrupted bool
	// Ports maps each exposed container port to host:port, where the
	// server reaches it (RunPod's runtime.ports public IP and port,
	// Vast.ai's public_ipaddr and ports mapping); a port not mapped yet
	// is absent.
	Ports map[int]string
	// Tags are the tags the pod carries (PodSpec.Tags, as read back).
	Tags map[string]string
	// Price is USD per hour.
	Price float64
	// Region is where the pod runs, when the provider says.
	Region string
	// CreatedAt is when the provider created the pod; zero when unknown.
	CreatedAt time.Time
}

// TagTask is the tag naming the task (the job submission) a pod runs.
const TagTask = "hoist.task"
