package shim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	dockerspec "github.com/moby/docker-image-spec/specs-go/v1"

	"hoist/agents/api"
)

// start runs a task from pending to running, or to terminated on failure
// or cancellation.
func (s *Shim) start(ctx context.Context, t *task) {
	s.mu.Lock()
	spec, auth := t.spec, t.auth
	t.auth = nil // credentials are used once and not kept
	s.mu.Unlock()

	fail := func(reason, message string) {
		s.mu.Lock()
		if t.info.Terminated() {
			s.mu.Unlock()
			return
		}
		if ctx.Err() != nil && t.stopReason != "" {
			reason, message = t.stopReason, t.stopMessage
		}
		s.terminateLocked(t, reason, message, nil)
		close(t.exited)
		s.mu.Unlock()
		s.releaseVolumes(t)
	}
	canceled := func() bool {
		if ctx.Err() == nil {
			return false
		}
		fail(api.ReasonTerminatedByServer, "terminated before the container started")
		return true
	}

	if !s.update(t, api.TaskPreparing, nil) {
		return
	}
	if err := s.deniedMount(spec); err != nil {
		fail(api.ReasonCreatingContainerError, err.Error())
		return
	}
	runDir := s.RunnerDir(spec.ID)
	if err := os.MkdirAll(runDir, 0o777); err != nil {
		fail(api.ReasonExecutorError, fmt.Sprintf("create runner dir: %v", err))
		return
	}
	_ = os.Chmod(runDir, 0o777) // the container user may not be root
	if _, err := os.Stat(s.cfg.RunnerBinary); err != nil {
		fail(api.ReasonExecutorError, fmt.Sprintf("runner binary: %v", err))
		return
	}
	launch, err := s.runnerLaunch()
	if err != nil {
		fail(api.ReasonExecutorError, err.Error())
		return
	}
	if canceled() {
		return
	}
	volumeBinds, err := s.mountVolumes(ctx, spec)
	if err != nil {
		if canceled() {
			return
		}
		fail(api.ReasonExecutorError, err.Error())
		return
	}

	need := spec.PullPolicy == api.PullAlways
	var img image.InspectResponse
	if !need {
		var err error
		if img, err = s.docker.ImageInspect(ctx, spec.Image); err != nil {
			if !errdefs.IsNotFound(err) {
				if canceled() {
					return
				}
				fail(api.ReasonExecutorError, fmt.Sprintf("inspect image %s: %v", spec.Image, err))
				return
			}
			need = true
		}
	}
	if need {
		if !s.update(t, api.TaskPulling, nil) {
			return
		}
		if err := s.pull(ctx, t, spec.Image, auth); err != nil {
			if canceled() {
				return
			}
			fail(api.ReasonImagePullError, err.Error())
			return
		}
		var err error
		if img, err = s.docker.ImageInspect(ctx, spec.Image); err != nil {
			if canceled() {
				return
			}
			fail(api.ReasonImagePullError, fmt.Sprintf("inspect pulled image %s: %v", spec.Image, err))
			return
		}
	}
	if canceled() {
		return
	}
	if !s.update(t, api.TaskCreating, nil) {
		return
	}

	s.mu.Lock()
	token := t.info.RunnerToken
	s.mu.Unlock()
	cfg, hcfg := s.containerConfig(spec, img.Config)
	if err := s.exposeGPUs(ctx, spec, cfg, hcfg); err != nil {
		fail(api.ReasonExecutorError, err.Error())
		return
	}
	cfg.Entrypoint = launch.entrypoint
	hcfg.Binds = append(hcfg.Binds, launch.binds...)
	hcfg.Binds = append(hcfg.Binds, volumeBinds...)
	// Readable by the container's user, whoever it is; the task dir above
	// keeps every other local user out.
	// Chmod too: the mode given to WriteFile is narrowed by the umask
	// (hoist serve's, which runs local shims, is 077).
	tokenFile := filepath.Join(runDir, RunnerTokenFile)
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o644); err != nil {
		fail(api.ReasonExecutorError, fmt.Sprintf("write the runner's token: %v", err))
		return
	}
	if err := os.Chmod(tokenFile, 0o644); err != nil {
		fail(api.ReasonExecutorError, fmt.Sprintf("write the runner's token: %v", err))
		return
	}
	cfg.Cmd = append(cfg.Cmd, "--token-file", RunnerHome+"/"+RunnerTokenFile)
	holder := ""
	if spec.NetworkMode == api.NetworkHost && s.hostNetns().foreign {
		// The shim is not in the Engine's namespace: "host" would be the
		// Engine's network, not this host's (see netns.go).
		if holder, err = s.startNetnsHolder(ctx, spec, launch); err != nil {
			if canceled() {
				return
			}
			fail(api.ReasonCreatingContainerError, err.Error())
			return
		}
		hcfg.NetworkMode = container.NetworkMode("container:" + holder)
	}
	created, err := s.docker.ContainerCreate(ctx, cfg, hcfg, nil, nil, spec.Name)
	if err != nil {
		if holder != "" {
			s.removeNetnsHolder(holder)
		}
		if canceled() {
			return
		}
		fail(api.ReasonCreatingContainerError, fmt.Sprintf("create container: %v", err))
		return
	}
	s.update(t, api.TaskCreating, func(i *api.TaskInfo) { i.ContainerID = created.ID })
	err = s.docker.ContainerStart(ctx, created.ID, container.StartOptions{})
	if holder != "" {
		s.removeNetnsHolder(holder)
	}
	if err != nil {
		if canceled() {
			return
		}
		fail(api.ReasonCreatingContainerError, fmt.Sprintf("start container: %v", err))
		return
	}
	// From here on the container's exit ends the task.
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.watch(t, created.ID)
	}()

	addr, ports, err := s.published(ctx, created.ID, spec)
	if err != nil {
		s.log.Warn("task_ports_unknown", "task_id", spec.ID, "err", err)
		s.mu.Lock()
		if t.stopReason == "" {
			t.stopReason, t.stopMessage = api.ReasonExecutorError, fmt.Sprintf("find the runner's socket and the task's ports: %v", err)
		}
		s.mu.Unlock()
		s.stopContainer(created.ID, 0)
		return
	}
	if err := s.waitRunner(ctx, t, addr); err != nil {
		s.log.Warn("task_runner_not_ready", "task_id", spec.ID, "err", err)
		s.mu.Lock()
		if t.stopReason == "" {
			t.stopReason, t.stopMessage = api.ReasonExecutorError, fmt.Sprintf("runner did not answer: %v", err)
		}
		s.mu.Unlock()
		s.stopContainer(created.ID, 0)
		return
	}
	s.mu.Lock()
	if !t.info.Terminated() {
		s.updateLocked(t, api.TaskRunning, func(i *api.TaskInfo) {
			i.RunnerAddr = addr
			i.Ports = ports
		})
	}
	s.mu.Unlock()
}

// containerConfig builds the container for spec: the runner as entrypoint,
// its binary and home bind-mounted, the shim's labels.
func (s *Shim) containerConfig(spec api.TaskSpec, imgCfg *dockerspec.DockerOCIImageConfig) (*container.Config, *container.HostConfig) {
	labels := map[string]string{}
	for k, v := range s.cfg.Labels {
		labels[k] = v
	}
	for k, v := range spec.Labels {
		labels[k] = v
	}
	labels[LabelManagedBy] = "hoist-shim"
	labels[LabelShimID] = s.cfg.ID
	labels[LabelTaskID] = spec.ID

	env := make([]string, 0, len(spec.Env))
	for k, v := range spec.Env {
		env = append(env, k+"="+v)
	}
	cfg := &container.Config{
		Image:      spec.Image,
		User:       spec.User,
		Env:        env,
		Labels:     labels,
		Entrypoint: []string{RunnerPath},
		// The runner has no TCP port: its API is a Unix socket in its home,
		// which the host sees inside the shim's 0700 task directory.
		Cmd: []string{"--socket", RunnerHome + "/" + RunnerSocketFile, "--home", RunnerHome},
	}
	var codeBinds []string
	if err := os.MkdirAll(s.CodeCacheDir(), 0o755); err == nil {
		// Sticky and writable by every job user, like /tmp: a job of any
		// user may store code, and none may remove another's.
		if err := os.Chmod(s.CodeCacheDir(), 0o777|os.ModeSticky); err == nil {
			cfg.Cmd = append(cfg.Cmd, "--code-cache", RunnerCodeCache)
			codeBinds = append(codeBinds, s.CodeCacheDir()+":"+RunnerCodeCache)
		}
	}
	if s.cfg.RunnerLinger > 0 {
		cfg.Cmd = append(cfg.Cmd, "--linger", s.cfg.RunnerLinger.String())
	}
	if imgCfg != nil {
		// The runner replaces the image's entrypoint; it runs it for a job
		// without commands.
		if argv := append(append([]string(nil), imgCfg.Entrypoint...), imgCfg.Cmd...); len(argv) > 0 {
			b, _ := json.Marshal(argv)
			cfg.Cmd = append(cfg.Cmd, "--image-command", string(b))
		}
		if imgCfg.WorkingDir != "" {
			cfg.Cmd = append(cfg.Cmd, "--image-workdir", imgCfg.WorkingDir)
		}
	}
	hcfg := &container.HostConfig{
		Privileged: spec.Privileged,
		ShmSize:    spec.ShmSizeBytes,
		Binds: []string{
			s.cfg.RunnerBinary + ":" + RunnerPath + ":ro",
			s.RunnerDir(spec.ID) + ":" + RunnerHome,
		},
	}
	hcfg.Binds = append(hcfg.Binds, codeBinds...)
	for _, m := range spec.InstanceMounts {
		b := m.InstancePath + ":" + m.Path
		if m.ReadOnly {
			b += ":ro"
		}
		hcfg.Binds = append(hcfg.Binds, b)
	}
	for _, m := range spec.VolumeMounts {
		hcfg.Binds = append(hcfg.Binds, m.Name+":"+m.Path)
	}
	if spec.CPUs > 0 {
		hcfg.NanoCPUs = int64(math.Round(spec.CPUs * 1e9))
	}
	hcfg.Memory = spec.MemoryBytes
	hcfg.Resources.DeviceRequests, hcfg.Resources.Devices = gpuRequests(spec)
	if spec.NetworkMode == api.NetworkHost {
		hcfg.NetworkMode = "host"
	} else {
		hcfg.NetworkMode = "bridge"
		cfg.ExposedPorts, hcfg.PortBindings = portBindings(spec.Ports)
	}
	return cfg, hcfg
}

// published returns the runner's address (its socket on the host) and the
// task's ports as bound on the host, reading them from Docker in bridge mode.
func (s *Shim) published(ctx context.Context, id string, spec api.TaskSpec) (string, []api.PortMapping, error) {
	sock, err := s.runnerSocket(spec.ID)
	if err != nil {
		return "", nil, err
	}
	addr := api.UnixAddr(sock)
	if spec.NetworkMode == api.NetworkHost {
		ports := make([]api.PortMapping, 0, len(spec.Ports))
		for _, p := range spec.Ports {
			ports = append(ports, api.PortMapping{Host: p.Container, Container: p.Container})
		}
		return addr, ports, nil
	}
	c, err := s.docker.ContainerInspect(ctx, id)
	if err != nil {
		return "", nil, fmt.Errorf("inspect container: %w", err)
	}
	if c.NetworkSettings == nil {
		return "", nil, errors.New("container has no network settings")
	}
	hostPort := func(p int) int {
		for _, b := range c.NetworkSettings.Ports[containerPort(p)] {
			if n, err := strconv.Atoi(b.HostPort); err == nil && n > 0 {
				return n
			}
		}
		return 0
	}
	var ports []api.PortMapping
	for _, p := range spec.Ports {
		ports = append(ports, api.PortMapping{Host: hostPort(p.Container), Container: p.Container})
	}
	return addr, ports, nil
}

// waitRunner polls the runner's health check until it answers, the
// container exits, or runnerReadyTimeout passes.
func (s *Shim) waitRunner(ctx context.Context, t *task, addr string) error {
	deadline := time.Now().Add(runnerReadyTimeout)
	delay := time.Millisecond
	s.mu.Lock()
	token := t.info.RunnerToken
	s.mu.Unlock()
	c := api.NewRunnerClient(addr, s.hc).WithToken(token)
	for {
		hctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := c.Health(hctx)
		cancel()
		if err == nil {
			return nil
		}
		if errors.Is(err, api.ErrIncompatibleAgent) || errors.Is(err, api.ErrUnauthorized) {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after %s: %w", runnerReadyTimeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.exited:
			return errors.New("container exited")
		case <-time.After(delay):
		}
		delay = min(delay*2, 20*time.Millisecond)
	}
}

// watch waits for the container to exit and records how it ended.
func (s *Shim) watch(t *task, id string) {
	waitC, errC := s.docker.ContainerWait(s.ctx, id, container.WaitConditionNotRunning)
	select {
	case <-waitC:
	case err := <-errC:
		if s.ctx.Err() != nil {
			return // the shim is closing; a new one recovers the task
		}
		if !errdefs.IsNotFound(err) {
			s.log.Warn("container_wait_failed", "task_id", t.info.ID, "err", err)
		}
	}
	if s.ctx.Err() != nil {
		return
	}
	s.recordExit(t, id)
}

// recordExit reads the container's exit and the runner's last job state and
// terminates the task accordingly.
func (s *Shim) recordExit(t *task, id string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var code *int
	oom, neverStarted := false, false
	c, err := s.docker.ContainerInspect(ctx, id)
	switch {
	case err == nil && c.State != nil:
		ec := c.State.ExitCode
		code = &ec
		oom = c.State.OOMKilled
		neverStarted = c.State.Status == "created"
	case errdefs.IsNotFound(err):
	default:
		s.log.Warn("container_inspect_failed", "task_id", t.info.ID, "err", err)
	}
	job := readJobState(filepath.Join(s.RunnerDir(t.info.ID), api.RunnerStateFile))
	reason, message := exitReason(code, oom, job, err != nil && errdefs.IsNotFound(err))
	if neverStarted {
		code = nil
		reason, message = api.ReasonExecutorError, "the container was created but never started (the shim restarted meanwhile)"
	}
	s.mu.Lock()
	if !t.info.Terminated() {
		s.terminateLocked(t, reason, message, func(i *api.TaskInfo) {
			i.ExitCode = code
			i.Job = job
		})
	}
	select {
	case <-t.exited:
	default:
		close(t.exited)
	}
	s.mu.Unlock()
	s.releaseVolumes(t)
}

// releaseVolumes unmounts a terminated task's network volumes, so that the
// server can detach them; a failure is logged, and RemoveTask tries again.
func (s *Shim) releaseVolumes(t *task) {
	if len(t.spec.NetworkVolumes) == 0 {
		return
	}
	if err := s.unmountVolumes(t, false); err != nil {
		s.log.Warn("volume_unmount_failed", "task_id", t.info.ID, "err", err)
	}
}

// exitReason explains a container's end from its exit code, OOM flag and
// the runner's last job state (api.TaskEnd), or from its removal.
func exitReason(code *int, oom bool, job *api.JobState, gone bool) (string, string) {
	if gone {
		return api.ReasonContainerLost, "the container was removed from outside"
	}
	return api.TaskEnd(code, oom, job)
}

func readJobState(path string) *api.JobState {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var st api.JobState
	if json.Unmarshal(b, &st) != nil || st.State == "" {
		return nil
	}
	return &st
}

// stopContainer stops a container: SIGTERM, SIGKILL after grace.
func (s *Shim) stopContainer(id string, grace time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), grace+30*time.Second)
	defer cancel()
	var err error
	if grace <= 0 {
		err = s.docker.ContainerKill(ctx, id, "KILL")
	} else {
		secs := int(math.Ceil(grace.Seconds()))
		err = s.docker.ContainerStop(ctx, id, container.StopOptions{Timeout: &secs})
	}
	if err != nil && !errdefs.IsNotFound(err) && !errdefs.IsConflict(err) {
		s.log.Warn("container_stop_failed", "container_id", id, "err", err)
	}
}

// TerminateTask stops the task (SIGTERM, SIGKILL after grace) and returns
// once it is terminated. The first termination reason given is kept.
func (s *Shim) TerminateTask(ctx context.Context, id, reason, message string, grace time.Duration) (api.TaskInfo, error) {
	if reason == "" {
		reason = api.ReasonTerminatedByServer
	}
	s.mu.Lock()
	t, ok := s.tasks[id]
	if !ok {
		s.mu.Unlock()
		return api.TaskInfo{}, fmt.Errorf("task %s: %w", id, errNotFound)
	}
	if t.info.Terminated() {
		info := t.info
		s.mu.Unlock()
		return info, nil
	}
	if t.stopReason == "" {
		t.stopReason, t.stopMessage = reason, message
	}
	t.cancel()
	settled, exited := t.settled, t.exited
	s.mu.Unlock()
	s.log.Info("task_terminating", "task_id", id, "reason", reason, "grace", grace)

	select {
	case <-settled:
	case <-ctx.Done():
		return s.GetTask(id)
	}
	s.mu.Lock()
	cid, done := t.info.ContainerID, t.info.Terminated()
	addr, token := t.info.RunnerAddr, t.info.RunnerToken
	s.mu.Unlock()
	if !done && cid != "" {
		if addr != "" && grace > 0 {
			// The runner stops the job's process group with the full grace
			// and records why; Docker's own SIGTERM would give it the
			// runner's default grace only.
			start := time.Now()
			s.stopJob(ctx, addr, token, grace, reason, message)
			grace = max(time.Second, grace-time.Since(start))
		}
		s.stopContainer(cid, grace)
		select {
		case <-exited:
		case <-ctx.Done():
		}
	}
	return s.GetTask(id)
}

// stopJob asks the task's runner to stop the job with grace; a runner that
// does not answer is left to Docker's stop.
func (s *Shim) stopJob(ctx context.Context, addr, token string, grace time.Duration, reason, message string) {
	ctx, cancel := context.WithTimeout(ctx, grace+5*time.Second)
	defer cancel()
	rc := api.NewRunnerClient(addr, nil).WithToken(token)
	if _, err := rc.StopWithReason(ctx, grace, reason, message); err != nil {
		s.log.Warn("runner_stop_failed", "runner_addr", addr, "err", err)
	}
}

// RemoveTask removes a terminated task's container and files.
func (s *Shim) RemoveTask(ctx context.Context, id string) error {
	s.mu.Lock()
	t, ok := s.tasks[id]
	if !ok {
		s.mu.Unlock()
		return fmt.Errorf("task %s: %w", id, errNotFound)
	}
	if !t.info.Terminated() {
		st := t.info.Status
		s.mu.Unlock()
		return fmt.Errorf("task %s is %s, remove only terminated tasks: %w", id, st, errConflict)
	}
	cid := t.info.ContainerID
	s.mu.Unlock()
	if cid != "" {
		err := s.docker.ContainerRemove(ctx, cid, container.RemoveOptions{Force: true})
		if err != nil && !errdefs.IsNotFound(err) {
			return fmt.Errorf("remove container: %w", err)
		}
	}
	if err := s.unmountVolumes(t, true); err != nil {
		return fmt.Errorf("unmount network volumes: %w", err)
	}
	s.removeSocketLink(id)
	if err := os.RemoveAll(s.taskDir(id)); err != nil {
		return fmt.Errorf("remove task dir: %w", err)
	}
	s.mu.Lock()
	delete(s.tasks, id)
	s.mu.Unlock()
	s.log.Info("task_removed", "task_id", id)
	return nil
}
