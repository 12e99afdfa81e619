package sim

// A PodSpec is what a container-cloud provider package (runpod, vastai)
// starts as a simulated pod: a Docker container of Image on the
// simulator's host network, with Command replacing the image's entrypoint
// and command, and Env. The pod gets its own address in 127.77.0.0/16
// (Resource.Address) and every port of Ports is reachable there: the pod
// shares the host's network, so the simulator tells its first port's
// listener where to listen in the environment (HOIST_RUNNER_SSH_LISTEN =
// address:Ports[0]), the one thing a real provider does not need (it gives
// each pod a network namespace of its own).
type PodSpec struct {
	Image   string
	Command []string
	Env     map[string]string
	Ports   []int
	// RegistryUsername and RegistryPassword authenticate the pull of an
	// image the Docker engine does not have.
	RegistryUsername, RegistryPassword string
}

// A PodState is what the simulator observed of a pod's container.
type PodState struct {
	// Running is true while the container runs.
	Running bool
	// ExitCode is the container's exit code once it ended.
	ExitCode *int
	// Message says why the pod could not start (an image that cannot be
	// pulled) or how it ended.
	Message string
}

// StartPod starts the pod of resource (provider, id), which must exist
// (Create) with Kind "pod", and returns its address. The container's
// image is pulled first when the engine does not have it.
func (s *Sim) StartPod(provider, id string, spec PodSpec) (addr string, err error) {
	panic("sim: StartPod is not implemented yet")
}

// PodState observes the container of pod (provider, id); ErrNotFound
// when it has none.
func (s *Sim) PodState(provider, id string) (PodState, error) {
	panic("sim: PodState is not implemented yet")
}

// StopPod removes the container of pod (provider, id); none is success.
func (s *Sim) StopPod(provider, id string) error {
	panic("sim: StopPod is not implemented yet")
}
