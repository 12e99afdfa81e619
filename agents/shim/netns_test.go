package shim_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"golang.org/x/sys/unix"

	"hoist/agents/api"
	"hoist/agents/shim"
	"hoist/e2e/testenv"
)

// TestShim_hostNetworkInAnotherNamespaceIsTheShimsHost runs a shim in a
// simulated host (a network namespace of testenv.NetHosts, not the Docker
// daemon's) and a host-network task on it: the job is in the shim's
// namespace (it has the host's address and reaches a port on the other
// host at its address), its container joined the namespace through a
// holder container, and no holder is left once the task runs.
func TestShim_hostNetworkInAnotherNamespaceIsTheShimsHost(t *testing.T) {
	image := testenv.Docker(t)
	busybox := testenv.Require(t, "busybox")
	dc := dockerClient(t)
	hosts := testenv.NetHosts(t, 2)
	e := &env{docker: dc, image: image, state: t.TempDir()}
	id := "netns-test-" + strconv.Itoa(os.Getpid())
	t.Cleanup(func() { removeShimContainers(t, dc, id) })
	e.client = startShimProcess(t, hosts[0], e.state, id)

	// Host 1 listens; the job on host 0 sends it a line. The listener's
	// stdin stays open: busybox nc shuts its sending side as soon as its
	// stdin ends, and a client that sees that before it has sent its line
	// exits without sending it.
	ln := hosts[1].Command(busybox, "nc", "-l", "-p", "7002")
	var got syncBuffer
	ln.Stdout = &got
	stdin, hold, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hold.Close() })
	ln.Stdin = stdin
	if err := ln.Start(); err != nil {
		t.Fatal(err)
	}
	stdin.Close()
	t.Cleanup(func() { _ = ln.Process.Kill(); _ = ln.Wait() })

	info, rc := e.runTask(t, api.TaskSpec{ID: "hostnet", Name: id + "-hostnet", NetworkMode: api.NetworkHost})
	st := runJob(t, rc, api.JobSpec{Commands: []string{
		"ip -4 -o addr show dev eth0",
		"for i in $(seq 50); do echo from the job | nc " + hosts[1].IP + " 7002 && exit 0; sleep 0.1; done; exit 1",
	}})
	out := output(t, rc, "stdout")
	if st.State != api.JobDone {
		t.Fatalf("job = %+v, want done; stdout %q stderr %q", st, out, output(t, rc, "stderr"))
	}
	if !strings.Contains(out, " "+hosts[0].IP+"/24") {
		t.Errorf("the job's eth0: %q, want host 0's address %s", out, hosts[0].IP)
	}
	if err := ln.Wait(); err != nil || got.String() != "from the job\n" {
		t.Errorf("host 1 received %q (%v), want the job's line", got.String(), err)
	}

	c, err := dc.ContainerInspect(t.Context(), info.ContainerID)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(c.HostConfig.NetworkMode), "container:") {
		t.Errorf("NetworkMode = %q, want container:<holder>", c.HostConfig.NetworkMode)
	}
	if !sameNamespace(t, "/proc/"+strconv.Itoa(c.State.Pid)+"/ns/net", hosts[0].NetnsPath()) {
		t.Errorf("the task's container is not in host 0's network namespace")
	}
	holders, err := dc.ContainerList(t.Context(), container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", shim.LabelNetnsHolder))})
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range holders {
		if h.Labels[shim.LabelShimID] == id {
			t.Errorf("holder container %s (%s) left after the task started", h.ID, h.State)
		}
	}
}

// TestShim_hostNetworkInTheDaemonsNamespaceIsDockersHost checks that a
// shim in the Docker daemon's own namespace (a real host) runs host-network
// tasks with Docker's plain host network, without a holder.
func TestShim_hostNetworkInTheDaemonsNamespaceIsDockersHost(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	info, rc := e.runTask(t, api.TaskSpec{ID: "hostnet-plain", NetworkMode: api.NetworkHost})
	if st := runJob(t, rc, api.JobSpec{Commands: []string{"true"}}); st.State != api.JobDone {
		t.Fatalf("job = %+v, want done", st)
	}
	c, err := e.docker.ContainerInspect(t.Context(), info.ContainerID)
	if err != nil {
		t.Fatal(err)
	}
	if c.HostConfig.NetworkMode != "host" {
		t.Errorf("NetworkMode = %q, want host", c.HostConfig.NetworkMode)
	}
	if !sameNamespace(t, "/proc/"+strconv.Itoa(c.State.Pid)+"/ns/net", "/proc/self/ns/net") {
		t.Errorf("the task's container is not in the test's (the daemon's) network namespace")
	}
}

// startShimProcess runs this test binary as a shim (shimProcessEnv) in
// host's network namespace, listening on host's address, and returns its
// client once it answers. The shim is stopped when the test ends.
func startShimProcess(t *testing.T, host *testenv.NetHost, state, id string) *api.ShimClient {
	t.Helper()
	tok := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tok, []byte(testToken), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := host.IP + ":10998"
	cmd := host.Command(os.Args[0], "--listen", addr, "--state-dir", state, "--runner-binary", runnerBinary,
		"--token-file", tok, "--id", id, "--label", "hoist.test=shim-netns")
	cmd.Env = append(os.Environ(), shimProcessEnv+"=1")
	var log syncBuffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("shim log:\n%s", log.String())
		}
	})
	c := api.NewShimClient("http://"+addr, nil).WithToken(testToken)
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		_, err := c.Health(ctx)
		cancel()
		if err == nil {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("the shim in %s did not answer: %v\n%s", host.Name, err, log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// sameNamespace reports whether two namespace files are the same namespace.
func sameNamespace(t *testing.T, a, b string) bool {
	t.Helper()
	var sa, sb unix.Stat_t
	if err := unix.Stat(a, &sa); err != nil {
		t.Fatal(err)
	}
	if err := unix.Stat(b, &sb); err != nil {
		t.Fatal(err)
	}
	return sa.Dev == sb.Dev && sa.Ino == sb.Ino
}

// syncBuffer is a bytes.Buffer safe for a process's writes and the test's
// reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestShim_recoverRemovesALeftNamespaceHolder checks that a namespace
// holder container left by a shim that died while starting a task is
// removed by the next shim's Recover, not reported as unknown.
func TestShim_recoverRemovesALeftNamespaceHolder(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	left, err := e.docker.ContainerCreate(ctx, &container.Config{
		Image: e.image,
		Cmd:   []string{"sleep", "600"},
		Labels: map[string]string{
			shim.LabelManagedBy:   "hoist-shim",
			shim.LabelShimID:      e.shim.ID(),
			shim.LabelNetnsHolder: "interrupted",
		},
	}, &container.HostConfig{NetworkMode: "none"}, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.docker.ContainerStart(ctx, left.ID, container.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	e.shim.Close()
	e.start(t)
	if _, err := e.docker.ContainerInspect(ctx, left.ID); err == nil {
		t.Errorf("holder %s still there after Recover", left.ID)
	}
	l, err := e.client.TaskList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Unknown) != 0 {
		t.Errorf("unknown containers = %+v, want none (the holder is the shim's own)", l.Unknown)
	}
}
