package sim

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/registry"
	"github.com/docker/docker/client"

	"hoist/agents/api"
)

// KindPod is a container cloud's pod (RunPod, Vast.ai): a Docker container
// StartPod runs.
const KindPod = "pod"

// Labels of every pod's container. LabelSim is the simulator's state
// directory, so that a simulator started again over it finds its pods
// (`docker ps --filter label=hoist.cloudsim=DIR` lists them), and LabelPod
// is the pod's provider/id.
const (
	LabelSim = "hoist.cloudsim"
	LabelPod = "hoist.cloudsim.pod"
)

// Time limits of the Docker Engine calls: pulling an image may take long,
// the rest should not.
const (
	pullTimeout   = 10 * time.Minute
	engineTimeout = time.Minute
)

// A PodSpec is what a container-cloud provider package (runpod, vastai)
// starts as a simulated pod: a Docker container of Image on the
// simulator's host network, with Command replacing the image's entrypoint
// and command (the image's own when Command is empty), and Env. The pod
// gets its own address in 127.77.0.0/16 (Resource.Address) and every port
// of Ports is reachable there: the pod shares the host's network, so the
// simulator tells its first port's listener where to listen in the
// environment (HOIST_RUNNER_SSH_LISTEN = address:Ports[0]), the one thing a
// real provider does not need (it gives each pod a network namespace of its
// own). A process of the pod listening on 0.0.0.0 listens on the host's
// every address instead.
type PodSpec struct {
	Image   string
	Command []string
	Env     map[string]string
	Ports   []int
	// RegistryUsername and RegistryPassword authenticate the pull of an
	// image the Docker engine does not have.
	RegistryUsername, RegistryPassword string
	// Mounts bind host directories (keys, absolute) into the container
	// at the paths they map to: a provider's network volume, kept by the
	// provider package under StateDir.
	Mounts map[string]string
}

// A PodState is what the simulator observed of a pod's container.
type PodState struct {
	// Running is true while the container runs.
	Running bool
	// ExitCode is the container's exit code once it ended.
	ExitCode *int
	// Message says why the pod could not start (an image that cannot be
	// pulled) or how it ended ("exited with code 3").
	Message string
}

// podEngine is the Sim's part for pods: the Docker client, made on first use,
// and a lock per pod serializing StartPod and StopPod.
type podEngine struct {
	mu     sync.Mutex
	docker *client.Client
	locks  map[string]*sync.Mutex
}

// engine returns the Docker client (DOCKER_HOST and the like, as the docker
// command reads them), making it on first use: a simulator that runs no pod
// needs no Docker Engine.
func (s *Sim) engine() (*client.Client, error) {
	s.pods.mu.Lock()
	defer s.pods.mu.Unlock()
	if s.pods.docker == nil {
		c, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
		if err != nil {
			return nil, fmt.Errorf("sim: docker client: %w", err)
		}
		// Negotiate now, under the lock: the client negotiates on its
		// first request otherwise, and pods starting together race there.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		c.NegotiateAPIVersion(ctx)
		cancel()
		s.pods.docker = c
	}
	return s.pods.docker, nil
}

// closePods closes the Docker client (a later call makes another: Close
// leaves the pods running, and RemoveAllPods may still follow).
func (s *Sim) closePods() error {
	s.pods.mu.Lock()
	defer s.pods.mu.Unlock()
	if s.pods.docker == nil {
		return nil
	}
	err := s.pods.docker.Close()
	s.pods.docker = nil
	return err
}

// lockPod locks pod k for a StartPod or StopPod and returns its unlock.
func (s *Sim) lockPod(k string) func() {
	s.pods.mu.Lock()
	if s.pods.locks == nil {
		s.pods.locks = map[string]*sync.Mutex{}
	}
	l := s.pods.locks[k]
	if l == nil {
		l = &sync.Mutex{}
		s.pods.locks[k] = l
	}
	s.pods.mu.Unlock()
	l.Lock()
	return l.Unlock
}

// StartPod starts the pod of resource (provider, id), which must exist
// (Create) with Kind "pod" and not be terminated, and returns its address:
// the one it had when that is still free, else a new one, recorded in
// Resource.Address. A container the pod had is removed first (starting a
// pod again starts it afresh). The image is pulled first when the engine
// does not have it, with the spec's registry credentials. StartPod returns
// once the container started; an image that cannot be pulled or a container
// that cannot be created or started is not an error of StartPod but the
// pod's: it is recorded in Resource.Message and PodState reports it, as a
// provider reports a pod that failed to start. The error is for a call
// that cannot be honoured (no such pod, no Docker Engine, no free address).
func (s *Sim) StartPod(provider, id string, spec PodSpec) (addr string, err error) {
	k := key(provider, id)
	defer s.lockPod(k)()
	r, ok := s.Get(provider, id)
	if !ok {
		return "", fmt.Errorf("%w: %s %s", ErrNotFound, provider, id)
	}
	if r.Kind != KindPod {
		return "", fmt.Errorf("sim: start pod %s %s: a %s, not a pod", provider, id, r.Kind)
	}
	if r.State == StateTerminated {
		return "", fmt.Errorf("sim: start pod %s %s: terminated", provider, id)
	}
	dc, err := s.engine()
	if err != nil {
		return "", err
	}
	if err := s.removePod(dc, provider, id); err != nil {
		return "", err
	}
	if addr, err = s.podAddress(r); err != nil {
		return "", err
	}
	if msg := s.runPod(dc, r, addr, spec); msg != "" {
		s.cfg.Logger.Warn("pod_start_failed", "provider", provider, "id", id, "image", spec.Image, "message", msg)
		if _, err := s.Update(provider, id, func(r *Resource) error { r.Message = msg; return nil }); err != nil {
			return "", err
		}
		return addr, nil
	}
	s.cfg.Logger.Info("pod_start", "provider", provider, "id", id, "image", spec.Image, "address", addr)
	return addr, nil
}

// podAddress gives pod r its address (the one it had when still free) and
// records it, clearing the message of an earlier start.
func (s *Sim) podAddress(r Resource) (string, error) {
	k := key(r.Provider, r.ID)
	// s.vmu (then s.mu, as boot takes them) until the address is recorded:
	// no VM or other pod may be given it meanwhile.
	s.vmu.Lock()
	defer s.vmu.Unlock()
	addr := r.Address
	if addr == "" || !s.addrFreeLocked(addr, k) {
		var err error
		if addr, err = s.allocLocked(k); err != nil {
			return "", err
		}
	}
	if _, err := s.Update(r.Provider, r.ID, func(r *Resource) error {
		r.Address, r.Message = addr, ""
		return nil
	}); err != nil {
		return "", err
	}
	return addr, nil
}

// runPod pulls the image when needed, creates the container and starts it;
// it returns what went wrong, for PodState, or "".
func (s *Sim) runPod(dc *client.Client, r Resource, addr string, spec PodSpec) string {
	if err := pullImage(dc, spec); err != nil {
		return fmt.Sprintf("image %s could not be pulled: %v", spec.Image, err)
	}
	env := maps.Clone(spec.Env)
	if len(spec.Ports) > 0 {
		if env == nil {
			env = map[string]string{}
		}
		env[api.RunnerEnvSSHListen] = fmt.Sprintf("%s:%d", addr, spec.Ports[0])
	}
	var envList []string
	for _, name := range slices.Sorted(maps.Keys(env)) {
		envList = append(envList, name+"="+env[name])
	}
	cfg := &container.Config{
		Image:      spec.Image,
		Entrypoint: spec.Command,
		Env:        envList,
		Labels:     map[string]string{LabelSim: s.cfg.StateDir, LabelPod: key(r.Provider, r.ID)},
	}
	if len(spec.Command) > 0 {
		// An entrypoint given at create drops the image's command too;
		// an empty one is said so that no engine version merges it.
		cfg.Cmd = []string{}
	}
	hcfg := &container.HostConfig{NetworkMode: network.NetworkHost}
	for _, host := range slices.Sorted(maps.Keys(spec.Mounts)) {
		hcfg.Binds = append(hcfg.Binds, host+":"+spec.Mounts[host])
	}
	ctx, cancel := context.WithTimeout(context.Background(), engineTimeout)
	defer cancel()
	created, err := dc.ContainerCreate(ctx, cfg, hcfg, nil, nil, s.podName(r.Provider, r.ID))
	if err != nil {
		return fmt.Sprintf("container could not be created: %v", err)
	}
	if err := dc.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
		_ = dc.ContainerRemove(ctx, created.ID, container.RemoveOptions{Force: true})
		return fmt.Sprintf("container could not be started: %v", err)
	}
	return ""
}

// pullImage pulls spec.Image when the engine does not have it, with the
// spec's credentials as the registry auth (base64 JSON,
// https://docs.docker.com/reference/api/engine/version/v1.47/#section/Authentication).
func pullImage(dc *client.Client, spec PodSpec) error {
	ctx, cancel := context.WithTimeout(context.Background(), pullTimeout)
	defer cancel()
	if _, err := dc.ImageInspect(ctx, spec.Image); err == nil {
		return nil
	} else if !errdefs.IsNotFound(err) {
		return err
	}
	var opts image.PullOptions
	if spec.RegistryUsername != "" || spec.RegistryPassword != "" {
		enc, err := registry.EncodeAuthConfig(registry.AuthConfig{Username: spec.RegistryUsername, Password: spec.RegistryPassword})
		if err != nil {
			return fmt.Errorf("encode credentials: %w", err)
		}
		opts.RegistryAuth = enc
	}
	rc, err := dc.ImagePull(ctx, spec.Image, opts)
	if err != nil {
		return err
	}
	defer rc.Close()
	// The engine says what failed in the progress stream (JSON objects,
	// one with "error" on failure), not in its status.
	dec := json.NewDecoder(rc)
	for {
		var m struct {
			Error string `json:"error"`
		}
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return fmt.Errorf("read pull progress: %w", err)
		}
		if m.Error != "" {
			return errors.New(m.Error)
		}
	}
}

// podName is the name of pod (provider, id)'s container: unique among
// simulators (a hash of the state directory and the pod's key) and
// readable (the provider and id, made fit for a container name).
func (s *Sim) podName(provider, id string) string {
	h := sha256.Sum256([]byte(s.cfg.StateDir + "\x00" + key(provider, id)))
	fit := func(x string, n int) string {
		x = strings.Map(func(r rune) rune {
			if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '.' || r == '-' {
				return r
			}
			return '_'
		}, x)
		if len(x) > n {
			x = x[:n]
		}
		return x
	}
	return "cloudsim-" + hex.EncodeToString(h[:6]) + "-" + fit(provider, 32) + "-" + fit(id, 64)
}

// podContainers lists the containers of pod (provider, id), or of every
// pod of the simulator for provider "".
func (s *Sim) podContainers(dc *client.Client, provider, id string) ([]container.Summary, error) {
	f := filters.NewArgs(filters.Arg("label", LabelSim+"="+s.cfg.StateDir))
	if provider != "" {
		f.Add("label", LabelPod+"="+key(provider, id))
	}
	ctx, cancel := context.WithTimeout(context.Background(), engineTimeout)
	defer cancel()
	cs, err := dc.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	if err != nil {
		return nil, fmt.Errorf("sim: list pod containers: %w", err)
	}
	return cs, nil
}

// removePod removes the containers of pod (provider, id), or of every pod
// for provider "".
func (s *Sim) removePod(dc *client.Client, provider, id string) error {
	cs, err := s.podContainers(dc, provider, id)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), engineTimeout)
	defer cancel()
	var errs []error
	for _, c := range cs {
		if err := dc.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true}); err != nil && !errdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("sim: remove pod container %s (%s): %w", c.ID, c.Labels[LabelPod], err))
		}
	}
	return errors.Join(errs...)
}

// PodState observes the container of pod (provider, id): running, or ended
// with its exit code; a pod that could not start has no container and
// reports what StartPod recorded. ErrNotFound when there is no such pod, or
// it has neither a container nor a failure (never started, or stopped).
// Pods outlive the Sim: one started before a restart over the same state
// directory is found again.
func (s *Sim) PodState(provider, id string) (PodState, error) {
	r, ok := s.Get(provider, id)
	if !ok {
		return PodState{}, fmt.Errorf("%w: %s %s", ErrNotFound, provider, id)
	}
	dc, err := s.engine()
	if err != nil {
		return PodState{}, err
	}
	cs, err := s.podContainers(dc, provider, id)
	if err != nil {
		return PodState{}, err
	}
	if len(cs) == 0 {
		if r.Message != "" {
			return PodState{Message: r.Message}, nil
		}
		return PodState{}, fmt.Errorf("%w: pod %s %s has no container", ErrNotFound, provider, id)
	}
	ctx, cancel := context.WithTimeout(context.Background(), engineTimeout)
	defer cancel()
	c, err := dc.ContainerInspect(ctx, cs[0].ID)
	if errdefs.IsNotFound(err) { // removed meanwhile
		return PodState{}, fmt.Errorf("%w: pod %s %s has no container", ErrNotFound, provider, id)
	}
	if err != nil {
		return PodState{}, fmt.Errorf("sim: inspect pod %s %s: %w", provider, id, err)
	}
	st := c.State
	switch {
	case st == nil || st.Status == container.StateCreated:
		return PodState{}, nil // not started yet
	case st.Running:
		return PodState{Running: true}, nil
	}
	code := st.ExitCode
	msg := fmt.Sprintf("exited with code %d", code)
	if st.OOMKilled {
		msg += " (out of memory)"
	}
	if st.Error != "" {
		msg += ": " + st.Error
	}
	return PodState{ExitCode: &code, Message: msg}, nil
}

// StopPod removes the container of pod (provider, id), running or not;
// none is success. The message of a failed start goes too: PodState then
// says ErrNotFound.
func (s *Sim) StopPod(provider, id string) error {
	k := key(provider, id)
	defer s.lockPod(k)()
	dc, err := s.engine()
	if err != nil {
		return err
	}
	if err := s.removePod(dc, provider, id); err != nil {
		return err
	}
	s.cfg.Logger.Info("pod_stop", "provider", provider, "id", id)
	_, err = s.Update(provider, id, func(r *Resource) error { r.Message = ""; return nil })
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	return err
}

// RemoveAllPods removes the container of every pod of the simulator (every
// container labeled with its state directory, those of earlier runs
// included). Close leaves pods running, as a provider's pods outlive a
// restart of its API; a test's simulator (testenv.StartCloudSim) calls this
// when the test ends. A simulator that never had a pod does not ask the
// Docker Engine.
func (s *Sim) RemoveAllPods() error {
	if len(s.List("", KindPod)) == 0 {
		return nil
	}
	dc, err := s.engine()
	if err != nil {
		return err
	}
	return s.removePod(dc, "", "")
}
