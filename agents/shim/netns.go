package shim

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"time"

	"github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"golang.org/x/sys/unix"

	"hoist/agents/api"
)

// Host networking when the shim is not in the Engine's network namespace.
//
// A task with NetworkMode host must see the host's interfaces: multi-node
// jobs reach each other at the host addresses. Docker's "host" network is
// the Engine daemon's namespace, which is the host's own on a real machine.
// When the shim runs in another network namespace than the daemon it talks
// to (a host simulated by a namespace on a machine with one Engine, as in
// hoist's multi-node tests), "host" would be the wrong host. Docker cannot
// start a container in a namespace given by path, but it can start one in
// the namespace of another container ("container:<id>", which joins
// /proc/<its main PID>/ns/net). So the shim starts a holder container for
// the task: NetworkMode none, CAP_SYS_ADMIN, the shim's namespace file
// (/proc/<shim PID>/ns/net) bound in, and the runner binary in its
// --hold-netns mode, which joins that namespace. Once the holder's main
// process is in the shim's namespace, the task's container is created with
// NetworkMode "container:<holder>", and the holder is removed as soon as the
// task's container has started: the namespace lives on with the task's
// processes. Holders carry LabelNetnsHolder (not LabelTaskID); one left by
// a shim that died mid-start is removed by Recover.

// LabelNetnsHolder marks a namespace holder container; its value is the id
// of the task it was made for.
const LabelNetnsHolder = "hoist.netns-holder"

// holderNetnsPath is where a holder container finds the shim's network
// namespace file.
const holderNetnsPath = "/hoist/netns"

// holderReadyTimeout bounds how long a holder may take to join.
const holderReadyTimeout = 30 * time.Second

// netnsInfo says whether the shim shares the Docker daemon's network
// namespace.
type netnsInfo struct {
	// foreign is true when the shim's namespace is known to differ from
	// the daemon's: host-network tasks then go through a holder.
	foreign bool
	// shim and daemon name the namespaces ("net:[inode]"), for the log.
	shim, daemon string
}

// hostNetns returns whether host-network tasks need a holder, worked out on
// the first host-network task (see netnsOf).
func (s *Shim) hostNetns() netnsInfo {
	s.netnsOnce.Do(func() {
		n, err := s.netnsOf()
		if err != nil {
			// An Engine behind TCP, or one whose process is not visible
			// or whose namespace is not readable here (a shim that does
			// not run as root): its "host" network is taken as the
			// host's, as it is on a real machine.
			s.log.Info("netns_not_compared", "err", err)
			return
		}
		s.netns = n
		s.log.Info("netns_compared", "shim_netns", n.shim, "daemon_netns", n.daemon, "holder", n.foreign)
	})
	return s.netns
}

// netnsOf compares the shim's network namespace with the Docker daemon's.
// The daemon is the process at the other end of its Unix socket
// (SO_PEERCRED: the process that listens on it; with systemd socket
// activation that is systemd, in the daemon's namespace too).
func (s *Shim) netnsOf() (netnsInfo, error) {
	u, err := url.Parse(s.docker.DaemonHost())
	if err != nil {
		return netnsInfo{}, fmt.Errorf("docker host: %w", err)
	}
	if u.Scheme != "unix" {
		return netnsInfo{}, fmt.Errorf("docker host %s is not a Unix socket", s.docker.DaemonHost())
	}
	c, err := net.DialTimeout("unix", u.Path, 5*time.Second)
	if err != nil {
		return netnsInfo{}, fmt.Errorf("docker socket: %w", err)
	}
	defer c.Close()
	raw, err := c.(*net.UnixConn).SyscallConn()
	if err != nil {
		return netnsInfo{}, fmt.Errorf("docker socket: %w", err)
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return netnsInfo{}, fmt.Errorf("docker socket: %w", err)
	}
	if credErr != nil {
		return netnsInfo{}, fmt.Errorf("docker socket peer: %w", credErr)
	}
	if cred.Pid <= 0 {
		return netnsInfo{}, errors.New("the docker daemon's process is not visible from here")
	}
	daemon, err := os.Readlink("/proc/" + strconv.Itoa(int(cred.Pid)) + "/ns/net")
	if err != nil {
		return netnsInfo{}, fmt.Errorf("the docker daemon's network namespace: %w", err)
	}
	own, err := os.Readlink(s.ownNetns())
	if err != nil {
		return netnsInfo{}, fmt.Errorf("the shim's network namespace: %w", err)
	}
	return netnsInfo{foreign: own != daemon, shim: own, daemon: daemon}, nil
}

// ownNetns is the file of the shim's network namespace as the daemon sees
// it (the same PID namespace: /proc/<pid> names the shim's main thread).
func (s *Shim) ownNetns() string { return "/proc/" + strconv.Itoa(os.Getpid()) + "/ns/net" }

// startNetnsHolder starts the holder container of task spec (see above)
// and waits until its main process is in the shim's network namespace. The
// caller removes it (removeNetnsHolder) once the task's container has
// started, or failed to.
func (s *Shim) startNetnsHolder(ctx context.Context, spec api.TaskSpec, launch runnerLaunch) (string, error) {
	labels := map[string]string{}
	for k, v := range s.cfg.Labels {
		labels[k] = v
	}
	labels[LabelManagedBy] = "hoist-shim"
	labels[LabelShimID] = s.cfg.ID
	labels[LabelNetnsHolder] = spec.ID
	own := s.ownNetns()
	cfg := &container.Config{
		Image:      spec.Image,
		User:       "0:0",
		Labels:     labels,
		Entrypoint: launch.entrypoint,
		Cmd:        []string{"--hold-netns", holderNetnsPath},
	}
	hcfg := &container.HostConfig{
		NetworkMode: "none",
		CapAdd:      []string{"SYS_ADMIN"},
		Binds: append([]string{
			s.cfg.RunnerBinary + ":" + RunnerPath + ":ro",
			own + ":" + holderNetnsPath + ":ro",
		}, launch.binds...),
	}
	name := ""
	if spec.Name != "" {
		name = spec.Name + "-netns"
	}
	created, err := s.docker.ContainerCreate(ctx, cfg, hcfg, nil, nil, name)
	if err != nil {
		return "", fmt.Errorf("create the network namespace holder: %w", err)
	}
	if err := s.docker.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
		s.removeNetnsHolder(created.ID)
		return "", fmt.Errorf("start the network namespace holder: %w", err)
	}
	var want unix.Stat_t
	if err := unix.Stat(own, &want); err != nil {
		s.removeNetnsHolder(created.ID)
		return "", fmt.Errorf("the shim's network namespace: %w", err)
	}
	deadline := time.Now().Add(holderReadyTimeout)
	delay := time.Millisecond
	for {
		c, err := s.docker.ContainerInspect(ctx, created.ID)
		if err != nil {
			s.removeNetnsHolder(created.ID)
			return "", fmt.Errorf("inspect the network namespace holder: %w", err)
		}
		if c.State == nil || !c.State.Running {
			s.removeNetnsHolder(created.ID)
			return "", fmt.Errorf("the network namespace holder exited (code %d) before joining the shim's namespace", exitCodeOf(c))
		}
		var got unix.Stat_t
		if err := unix.Stat("/proc/"+strconv.Itoa(c.State.Pid)+"/ns/net", &got); err == nil && got.Dev == want.Dev && got.Ino == want.Ino {
			return created.ID, nil
		}
		if time.Now().After(deadline) {
			s.removeNetnsHolder(created.ID)
			return "", fmt.Errorf("the network namespace holder did not join the shim's namespace within %s", holderReadyTimeout)
		}
		select {
		case <-ctx.Done():
			s.removeNetnsHolder(created.ID)
			return "", ctx.Err()
		case <-time.After(delay):
		}
		delay = min(delay*2, 20*time.Millisecond)
	}
}

func exitCodeOf(c container.InspectResponse) int {
	if c.State == nil {
		return -1
	}
	return c.State.ExitCode
}

// removeNetnsHolder removes a holder container; the task's container, once
// started, keeps the namespace.
func (s *Shim) removeNetnsHolder(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.docker.ContainerRemove(ctx, id, container.RemoveOptions{Force: true}); err != nil && !errdefs.IsNotFound(err) {
		s.log.Warn("netns_holder_remove_failed", "container_id", id, "err", err)
	}
}
