package shim_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"

	"hoist/agents/api"
	"hoist/agents/shim"
	"hoist/e2e/testenv"
)

func TestShim_echoHello(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	info, rc := e.runTask(t, api.TaskSpec{ID: "echo-hello"})
	if _, ok := api.SocketPath(info.RunnerAddr); !ok {
		t.Errorf("RunnerAddr = %q, want the runner's unix socket", info.RunnerAddr)
	}
	st := runJob(t, rc, api.JobSpec{RunName: "hello", JobID: "j1", Commands: []string{"echo hello"}})
	if st.State != api.JobDone || st.ExitCode == nil || *st.ExitCode != 0 {
		t.Fatalf("job state = %+v, want done with exit code 0", st)
	}
	if got := output(t, rc, api.StreamStdout); got != "hello\n" {
		t.Errorf("stdout = %q, want %q", got, "hello\n")
	}
	term, err := e.client.TerminateTask(ctx, info.ID, api.ReasonDoneByRunner, "", 2*time.Second)
	if err != nil {
		t.Fatalf("TerminateTask: %v", err)
	}
	if term.Status != api.TaskTerminated || term.TerminationReason != api.ReasonDoneByRunner {
		t.Errorf("terminated task = %s/%s, want terminated/%s", term.Status, term.TerminationReason, api.ReasonDoneByRunner)
	}
	if term.Job == nil || term.Job.State != api.JobDone {
		t.Errorf("terminated task's job = %+v, want the runner's done state", term.Job)
	}
	logs, err := e.client.TaskLogs(ctx, info.ID, 0, 100)
	if err != nil || len(logs) != 1 || string(logs[0].Data) != "hello\n" || logs[0].Seq != 1 {
		t.Errorf("TaskLogs after the runner exited = %+v, %v; want the one line", logs, err)
	}
	if err := e.client.RemoveTask(ctx, info.ID); err != nil {
		t.Fatalf("RemoveTask: %v", err)
	}
	if _, err := e.docker.ContainerInspect(ctx, info.ContainerID); !errdefs.IsNotFound(err) {
		t.Errorf("container after RemoveTask: err = %v, want not found", err)
	}
	if _, err := e.client.GetTask(ctx, info.ID); !errors.Is(err, api.ErrNotFound) {
		t.Errorf("GetTask after RemoveTask: err = %v, want ErrNotFound", err)
	}
}

func TestShim_jobExitCodes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tests := []struct {
		name    string
		command string
		state   string
		code    int
	}{
		{"exit 0 is done", "true", api.JobDone, 0},
		{"exit 3 fails with code 3", "echo failing >&2; exit 3", api.JobFailed, 3},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, rc := e.runTask(t, api.TaskSpec{ID: fmt.Sprintf("exit-%d", i)})
			st := runJob(t, rc, api.JobSpec{Commands: []string{tt.command}})
			if st.State != tt.state || st.ExitCode == nil || *st.ExitCode != tt.code {
				t.Errorf("job state = %+v, want %s with exit code %d", st, tt.state, tt.code)
			}
		})
	}
}

func TestShim_envWorkingDirAndFilesReachTheJob(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, rc := e.runTask(t, api.TaskSpec{ID: "env", Env: map[string]string{"FROM_TASK": "task-env"}})
	ctx := t.Context()
	job := api.JobSpec{
		RunName:    "envrun",
		Commands:   []string{`echo "$FROM_TASK $FROM_JOB $SECRET $HOIST_RUN_NAME"`, "pwd", "cat conf/app.txt"},
		Env:        map[string]string{"FROM_JOB": "job-env"},
		Secrets:    map[string]string{"SECRET": "hunter2"},
		WorkingDir: "/workflow/src",
		Code:       &api.CodeSpec{Files: []string{"conf/app.txt"}},
	}
	if err := rc.Submit(ctx, job); err != nil {
		t.Fatal(err)
	}
	if err := rc.UploadCode(ctx, bytes.NewReader(targz(t, map[string]string{api.CodeFilePrefix + "0": "uploaded file\n"})), ""); err != nil {
		t.Fatalf("UploadCode: %v", err)
	}
	if _, err := rc.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if st, err := rc.Wait(ctx); err != nil || st.State != api.JobDone {
		t.Fatalf("Wait = %+v, %v", st, err)
	}
	want := "task-env job-env hunter2 envrun\n/workflow/src\nuploaded file\n"
	if got := output(t, rc, api.StreamStdout); got != want {
		t.Errorf("stdout = %q, want %q", got, want)
	}
}

func TestShim_terminateStopsTheJobAndItsChildrenWithinGrace(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	info, rc := e.runTask(t, api.TaskSpec{ID: "stop"})
	// A child that ignores SIGTERM: only SIGKILL after the grace ends it.
	if err := rc.Submit(ctx, api.JobSpec{Commands: []string{`sh -c 'trap "" TERM; while :; do sleep 1; done' & echo started; wait`}}); err != nil {
		t.Fatal(err)
	}
	if _, err := rc.Run(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, rc, "started\n")
	grace := time.Second
	start := time.Now()
	term, err := e.client.TerminateTask(ctx, info.ID, api.ReasonTerminatedByUser, "stop requested", grace)
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > grace+10*time.Second {
		t.Errorf("TerminateTask took %s with a grace of %s", took, grace)
	}
	if term.Status != api.TaskTerminated || term.TerminationReason != api.ReasonTerminatedByUser || term.TerminationMessage != "stop requested" {
		t.Errorf("task = %s/%s/%q, want terminated by user with the message", term.Status, term.TerminationReason, term.TerminationMessage)
	}
	c, err := e.docker.ContainerInspect(ctx, info.ContainerID)
	if err != nil || c.State.Running {
		t.Errorf("container still running after TerminateTask (err %v)", err)
	}
}

func TestShim_runnerStopKillsTheWholeProcessGroup(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	info, rc := e.runTask(t, api.TaskSpec{ID: "rstop"})
	if err := rc.Submit(ctx, api.JobSpec{Commands: []string{`sh -c 'trap "" TERM; while :; do sleep 1; done' & sh -c 'trap "" TERM; while :; do sleep 1; done' & echo started; wait`}}); err != nil {
		t.Fatal(err)
	}
	if _, err := rc.Run(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, rc, "started\n")
	st, err := rc.Stop(ctx, 500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != api.JobTerminated || st.TerminationReason != api.ReasonTerminatedByServer {
		t.Errorf("job = %+v, want terminated by server", st)
	}
	top, err := e.docker.ContainerTop(ctx, info.ContainerID, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range top.Processes {
		if cmd := p[len(p)-1]; !strings.Contains(cmd, "hoist-runner") {
			t.Errorf("process left in the container after Stop: %q", cmd)
		}
	}
}

func TestShim_maxDurationIsEnforced(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, rc := e.runTask(t, api.TaskSpec{ID: "maxdur"})
	st := runJob(t, rc, api.JobSpec{Commands: []string{"sleep 60"}, MaxDuration: 300 * time.Millisecond})
	if st.State != api.JobTerminated || st.TerminationReason != api.ReasonMaxDurationExceeded {
		t.Errorf("job = %+v, want terminated with %s", st, api.ReasonMaxDurationExceeded)
	}
}

func TestShim_containerKilledFromOutsideIsReported(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	info, rc := e.runTask(t, api.TaskSpec{ID: "killed-from-outside"})
	if err := rc.Submit(ctx, api.JobSpec{Commands: []string{"sleep 60"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := rc.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.docker.ContainerKill(ctx, info.ContainerID, "KILL"); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	got, err := e.client.WaitTask(wctx, info.ID, api.TaskTerminated)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != api.TaskTerminated || got.TerminationReason != api.ReasonContainerExitedWithError ||
		!strings.Contains(got.TerminationMessage, "killed") || got.ExitCode == nil || *got.ExitCode != 137 {
		t.Errorf("task = %+v, want terminated with %s, a message saying killed, exit code 137", got, api.ReasonContainerExitedWithError)
	}
}

func TestShim_hostNetwork(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	info, rc := e.runTask(t, api.TaskSpec{ID: "hostnet", NetworkMode: api.NetworkHost})
	if _, ok := api.SocketPath(info.RunnerAddr); !ok {
		t.Errorf("RunnerAddr = %q, want the runner's unix socket", info.RunnerAddr)
	}
	if st := runJob(t, rc, api.JobSpec{Commands: []string{"echo on host network"}}); st.State != api.JobDone {
		t.Errorf("job = %+v, want done", st)
	}
}

func TestShim_portMappingsArePublishedOnLoopback(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	info, rc := e.runTask(t, api.TaskSpec{ID: "ports", Ports: []api.PortMapping{{Container: 8080}}})
	if len(info.Ports) != 1 || info.Ports[0].Container != 8080 || info.Ports[0].Host == 0 {
		t.Fatalf("Ports = %+v, want 8080 on an ephemeral host port", info.Ports)
	}
	if err := rc.Submit(ctx, api.JobSpec{Commands: []string{"mkdir -p www && echo served > www/index.html && echo ready && httpd -f -p 8080 -h www"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := rc.Run(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, rc, "ready\n")
	url := fmt.Sprintf("http://127.0.0.1:%d/index.html", info.Ports[0].Host)
	var body []byte
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			body, err = io.ReadAll(resp.Body)
			resp.Body.Close()
			if err == nil && resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s: %v", url, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if string(body) != "served\n" {
		t.Errorf("GET %s = %q", url, body)
	}
}

// Privileged is not checked: this machine's Engine cannot start privileged
// containers (runc: unable to apply caps).
func TestShim_containerSettings(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	info, _ := e.runTask(t, api.TaskSpec{
		ID:             "settings",
		Name:           "hoist-settings-" + e.shim.ID(),
		User:           "root",
		CPUs:           1.5,
		MemoryBytes:    256 << 20,
		ShmSizeBytes:   64 << 20,
		Labels:         map[string]string{"hoist.run": "r1"},
		InstanceMounts: []api.InstanceMount{{InstancePath: t.TempDir(), Path: "/data", ReadOnly: true}},
	})
	c, err := e.docker.ContainerInspect(ctx, info.ContainerID)
	if err != nil {
		t.Fatal(err)
	}
	hc := c.HostConfig
	checks := []struct {
		what string
		ok   bool
	}{
		{"name", c.Name == "/hoist-settings-"+e.shim.ID()},
		{"cpus", hc.NanoCPUs == 1_500_000_000},
		{"memory", hc.Memory == 256<<20},
		{"shm size", hc.ShmSize == 64<<20},
		{"user", c.Config.User == "root"},
		{"task label", c.Config.Labels["hoist.task-id"] == "settings"},
		{"spec label", c.Config.Labels["hoist.run"] == "r1"},
		{"config label", c.Config.Labels["hoist.test"] == "shim"},
		{"read-only instance mount", hasMount(c.Mounts, "/data", false)},
		{"runner binary mounted read-only", hasMount(c.Mounts, "/hoist/bin/hoist-runner", false)},
		{"no port published (the runner has none)", len(hc.PortBindings) == 0 && len(c.Config.ExposedPorts) == 0 && len(c.NetworkSettings.Ports) == 0},
		{"runner on its socket", socketIn(info.RunnerAddr) == filepath.Join(e.state, "tasks", "settings", "run", shim.RunnerSocketFile)},
	}
	for _, ch := range checks {
		if !ch.ok {
			t.Errorf("container %s is not as specified", ch.what)
		}
	}
}

func TestShim_gpuRequestWithoutGPUDriverFailsToCreate(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	if _, err := e.client.CreateTask(ctx, api.TaskSpec{ID: "gpu", Image: e.image, GPUCount: 1}); err != nil {
		t.Fatal(err)
	}
	info, err := e.client.WaitTask(ctx, "gpu", api.TaskTerminated)
	if err != nil {
		t.Fatal(err)
	}
	if info.TerminationReason != api.ReasonCreatingContainerError || !strings.Contains(info.TerminationMessage, "device driver") {
		t.Errorf("task = %s: %s, want %s about the device driver", info.TerminationReason, info.TerminationMessage, api.ReasonCreatingContainerError)
	}
}

func TestShim_requestErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	if _, err := e.client.CreateTask(ctx, api.TaskSpec{ID: "../bad", Image: e.image}); !isStatus(err, http.StatusBadRequest) {
		t.Errorf("CreateTask with a bad id: err = %v, want http 400", err)
	}
	if _, err := e.client.CreateTask(ctx, api.TaskSpec{ID: "nonet", Image: e.image, NetworkMode: "overlay"}); !isStatus(err, http.StatusBadRequest) {
		t.Errorf("CreateTask with a bad network mode: err = %v, want http 400", err)
	}
	e.runTask(t, api.TaskSpec{ID: "dup"})
	if _, err := e.client.CreateTask(ctx, api.TaskSpec{ID: "dup", Image: e.image}); !errors.Is(err, api.ErrConflict) {
		t.Errorf("CreateTask with an existing id: err = %v, want ErrConflict", err)
	}
	if err := e.client.RemoveTask(ctx, "dup"); !errors.Is(err, api.ErrConflict) {
		t.Errorf("RemoveTask of a running task: err = %v, want ErrConflict", err)
	}
	if _, err := e.client.TerminateTask(ctx, "nope", "", "", 0); !errors.Is(err, api.ErrNotFound) {
		t.Errorf("TerminateTask of an unknown task: err = %v, want ErrNotFound", err)
	}
	tasks, err := e.client.ListTasks(ctx)
	if err != nil || len(tasks) != 1 || tasks[0].ID != "dup" {
		t.Errorf("ListTasks = %+v, %v; want the one task", tasks, err)
	}
}

func TestShim_health(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	h, err := e.client.Health(t.Context())
	if err != nil || h.Service != api.ShimService || h.APIVersion != api.ShimAPIVersion || h.Version != "test" {
		t.Errorf("Health = %+v, %v", h, err)
	}
}

func TestShim_hostInfo(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	h, err := e.client.HostInfo(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if h.CPUs < 1 || h.MemoryBytes <= 0 || h.DiskBytes <= 0 || h.DiskFreeBytes <= 0 || h.DockerVersion == "" || h.OS != "linux" {
		t.Errorf("HostInfo = %+v, want CPUs, memory, disk and Docker version", h)
	}
	if h.GPUs == nil {
		t.Errorf("HostInfo.GPUs is nil, want a list")
	}
}

func isStatus(err error, status int) bool {
	var ae *api.Error
	return errors.As(err, &ae) && ae.Status == status
}

func TestShim_terminateWhilePulling(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	// A "registry" that accepts connections and never answers keeps the
	// pull hanging.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	ref := ln.Addr().String() + "/hoist-test/hangs:1"
	if _, err := e.client.CreateTask(ctx, api.TaskSpec{ID: "hang", Image: ref}); err != nil {
		t.Fatal(err)
	}
	info, err := e.client.WaitTask(ctx, "hang", api.TaskPulling)
	if err != nil || info.Status != api.TaskPulling {
		t.Fatalf("WaitTask(pulling) = %+v, %v", info, err)
	}
	info, err = e.client.TerminateTask(ctx, "hang", api.ReasonTerminatedByUser, "no longer wanted", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if info.Status != api.TaskTerminated || info.TerminationReason != api.ReasonTerminatedByUser || info.ContainerID != "" {
		t.Errorf("task = %+v, want terminated by user before any container", info)
	}
	if err := e.client.RemoveTask(ctx, "hang"); err != nil {
		t.Errorf("RemoveTask: %v", err)
	}
}

func TestShim_runnerMetrics(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, rc := e.runTask(t, api.TaskSpec{ID: "metrics"})
	runJob(t, rc, api.JobSpec{Commands: []string{"i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done"}})
	m, err := rc.Metrics(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if m.CPUUsageMicros <= 0 || m.MemoryUsageBytes <= 0 || m.MemoryWorkingSetBytes <= 0 || m.MemoryWorkingSetBytes > m.MemoryUsageBytes {
		t.Errorf("Metrics = %+v, want the container's CPU time and memory", m)
	}
}

func TestShim_volumeMountsPersistAcrossTasks(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	vol := "hoist-test-vol-" + e.shim.ID()
	t.Cleanup(func() {
		removeShimContainers(t, e.docker, e.shim.ID())
		if err := e.docker.VolumeRemove(context.Background(), vol, true); err != nil {
			t.Errorf("remove volume %s: %v", vol, err)
		}
	})
	_, rc := e.runTask(t, api.TaskSpec{ID: "writer", VolumeMounts: []api.VolumeMount{{Name: vol, Path: "/vol"}}})
	if st := runJob(t, rc, api.JobSpec{Commands: []string{"echo kept > /vol/file"}}); st.State != api.JobDone {
		t.Fatalf("writer = %+v", st)
	}
	if _, err := e.client.TerminateTask(ctx, "writer", "", "", 0); err != nil {
		t.Fatal(err)
	}
	_, rc = e.runTask(t, api.TaskSpec{ID: "reader", VolumeMounts: []api.VolumeMount{{Name: vol, Path: "/data"}}})
	if st := runJob(t, rc, api.JobSpec{Commands: []string{"cat /data/file"}}); st.State != api.JobDone {
		t.Fatalf("reader = %+v", st)
	}
	if got := output(t, rc, api.StreamStdout); got != "kept\n" {
		t.Errorf("reader's output = %q, want the writer's file", got)
	}
}

func TestShim_jobWithoutCommandsRunsTheImagesEntrypoint(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	ref := fmt.Sprintf("hoist-test/entrypoint:%s", e.shim.ID())
	c, err := e.docker.ContainerCreate(ctx, &container.Config{Image: e.image, Cmd: []string{"mkdir", "-p", "/app"}, Labels: map[string]string{"hoist.test": "shim"}}, nil, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	defer e.docker.ContainerRemove(context.Background(), c.ID, container.RemoveOptions{Force: true})
	if err := e.docker.ContainerStart(ctx, c.ID, container.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	waitExited(t, e, c.ID)
	if _, err := e.docker.ContainerCommit(ctx, c.ID, container.CommitOptions{
		Reference: ref,
		Changes:   []string{`ENTRYPOINT ["sh", "-c", "echo entry $0 in $(pwd)"]`, `CMD ["arg"]`, `WORKDIR /app`},
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		removeShimContainers(t, e.docker, e.shim.ID())
		_, _ = e.docker.ImageRemove(context.Background(), ref, image.RemoveOptions{Force: true, PruneChildren: true})
	})
	_, rc := e.runTask(t, api.TaskSpec{ID: "entry", Image: ref})
	if st := runJob(t, rc, api.JobSpec{}); st.State != api.JobDone {
		t.Fatalf("job = %+v, want done", st)
	}
	if got := output(t, rc, api.StreamStdout); got != "entry arg in /app\n" {
		t.Errorf("stdout = %q, want the image's entrypoint and cmd run in its WORKDIR", got)
	}
}

// shimEndpoints and runnerEndpoints are every route of the agents' APIs.
var (
	shimEndpoints = []string{
		"GET /api/healthcheck", "GET /api/v1/host", "GET /api/v1/tasks", "POST /api/v1/tasks",
		"GET /api/v1/tasks/auth", "POST /api/v1/tasks/auth/terminate", "POST /api/v1/tasks/auth/remove",
		"GET /api/v1/tasks/auth/logs",
	}
	runnerEndpoints = []string{
		"GET /api/healthcheck", "POST /api/v1/submit", "POST /api/v1/upload", "POST /api/v1/run",
		"GET /api/v1/state", "GET /api/v1/wait", "POST /api/v1/stop", "GET /api/v1/logs",
		"POST /api/v1/logs/ack", "GET /api/v1/logs/stream", "GET /api/v1/metrics",
		"GET /api/v1/ssh", "GET /api/v1/ssh/activity",
	}
)

// unauthorized sends every endpoint at base with the Authorization header
// auth ("" = none) and returns those that did not answer 401.
// socketIn returns where the runner address's socket really is.
func socketIn(addr string) string {
	p, _ := api.SocketPath(addr)
	dir, err := filepath.EvalSymlinks(filepath.Dir(p))
	if err != nil {
		return err.Error()
	}
	return filepath.Join(dir, filepath.Base(p))
}

// localAgents reaches agents on this machine, by TCP or Unix socket.
var localAgents = &http.Client{Transport: api.NewLocalTransport()}

func unauthorized(t *testing.T, base, auth string, endpoints []string) []string {
	t.Helper()
	var bad []string
	for _, ep := range endpoints {
		method, path, _ := strings.Cut(ep, " ")
		req, err := http.NewRequestWithContext(t.Context(), method, api.BaseURL(base)+path, strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := localAgents.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", ep, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			bad = append(bad, fmt.Sprintf("%s: http %d", ep, resp.StatusCode))
		}
	}
	return bad
}

func TestShim_agentsAnswer401WithoutTheirTokens(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	info, rc := e.runTask(t, api.TaskSpec{ID: "auth"})
	if len(info.RunnerToken) != 64 {
		t.Fatalf("RunnerToken = %q, want 32 random bytes in hex", info.RunnerToken)
	}
	for name, auth := range map[string]string{"no token": "", "wrong token": "Bearer x", "the runner's token": "Bearer " + info.RunnerToken} {
		if bad := unauthorized(t, e.url, auth, shimEndpoints); len(bad) > 0 {
			t.Errorf("shim with %s: want 401 from all %d endpoints, got %v", name, len(shimEndpoints), bad)
		}
	}
	for name, auth := range map[string]string{"no token": "", "wrong token": "Bearer x", "the shim's token": "Bearer " + testToken} {
		if bad := unauthorized(t, info.RunnerAddr, auth, runnerEndpoints); len(bad) > 0 {
			t.Errorf("runner with %s: want 401 from all %d endpoints, got %v", name, len(runnerEndpoints), bad)
		}
	}
	t.Logf("endpoints answering 401 without credentials: shim %d, runner %d", len(shimEndpoints), len(runnerEndpoints))
	// The token is in neither the container's configuration nor anything
	// the job can read.
	c, err := e.docker.ContainerInspect(t.Context(), info.ContainerID)
	if err != nil {
		t.Fatal(err)
	}
	if cfg := fmt.Sprint(c.Config.Env, c.Config.Cmd, c.Config.Entrypoint, c.Args); strings.Contains(cfg, info.RunnerToken) {
		t.Errorf("the container's configuration holds the runner's token: %s", cfg)
	}
	st := runJob(t, rc, api.JobSpec{Commands: []string{"cat /proc/1/environ /hoist/run/.runner-token 2>/dev/null | grep -c " + info.RunnerToken + " || true"}})
	if st.State != api.JobDone {
		t.Fatalf("job = %+v", st)
	}
	if got := output(t, rc, api.StreamStdout); got != "0\n" {
		t.Errorf("the job finds the runner's token %s times, want never", strings.TrimSpace(got))
	}
}

// TestShim_otherContainersCannotReachTheRunner runs a second container on
// the bridge network and has it call the task's container at the runner's
// former port: nothing answers there, and the runner's container listens on
// no TCP port at all, while its socket (the server's way in) works.
func TestShim_otherContainersCannotReachTheRunner(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	info, rc := e.runTask(t, api.TaskSpec{ID: "target"})
	c, err := e.docker.ContainerInspect(ctx, info.ContainerID)
	if err != nil {
		t.Fatal(err)
	}
	ip := ""
	for _, n := range c.NetworkSettings.Networks {
		ip = n.IPAddress
	}
	if ip == "" {
		t.Fatalf("the task's container has no bridge address: %+v", c.NetworkSettings.Networks)
	}
	// The prober speaks HTTP with nc: an answer of any status would show as
	// an HTTP status line. 10999 was the runner's port before it had a socket.
	addr := net.JoinHostPort(ip, "10999")
	_, prc := e.runTask(t, api.TaskSpec{ID: "prober"})
	st := runJob(t, prc, api.JobSpec{Commands: []string{
		`printf 'GET ` + api.HealthPath + ` HTTP/1.0\r\n\r\n' | nc -w 5 ` + ip + ` 10999 2>&1; echo exit=$?`,
	}})
	if st.State != api.JobDone {
		t.Fatalf("prober job = %+v", st)
	}
	got := output(t, prc, api.StreamStdout)
	if strings.Contains(got, "HTTP/1.") || !strings.Contains(got, "exit=") {
		t.Errorf("another container reached the runner at %s: %q", addr, got)
	}
	t.Logf("another container calling the runner at %s: %q", addr, strings.TrimSpace(got))
	// State 0A is LISTEN in /proc/net/tcp{,6} (see proc(5)): the runner's
	// network namespace has no listening TCP socket.
	st = runJob(t, rc, api.JobSpec{Commands: []string{`awk '$4 == "0A"' /proc/net/tcp /proc/net/tcp6; echo listed`}})
	if st.State != api.JobDone {
		t.Fatalf("listing job = %+v", st)
	}
	if got := output(t, rc, api.StreamStdout); got != "listed\n" {
		t.Errorf("the runner's container listens on TCP: %q", got)
	}
}

// TestShim_otherLocalUsersCannotOpenTheRunnersSocket runs a job as a
// non-root user and calls its runner's socket from the host as another
// non-root user (uid 65534, like nobody): the shim's task directory keeps it
// out, while root (the shim, the server) gets the runner's 401.
func TestShim_otherLocalUsersCannotOpenTheRunnersSocket(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Fatal("this test runs curl as uid 65534 and needs root")
	}
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Fatalf("curl: %v", err)
	}
	image := testenv.Docker(t)
	dc := dockerClient(t)
	// The state dir's parents are open to everyone: only the shim's own
	// directories stand between other users and the socket.
	state := filepath.Join(t.TempDir(), "s")
	if err := os.Mkdir(state, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Dir(state), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Dir(filepath.Dir(state)), 0o755); err != nil {
		t.Fatal(err)
	}
	e := &env{docker: dc, image: image, state: state}
	e.start(t)
	t.Cleanup(func() { removeShimContainers(t, dc, e.shim.ID()) })
	info, rc := e.runTask(t, api.TaskSpec{ID: "nobody", User: "65534:65534"})
	st := runJob(t, rc, api.JobSpec{Commands: []string{"id -u; ls -ln /hoist/run/" + shim.RunnerSocketFile}})
	if st.State != api.JobDone {
		t.Fatalf("job = %+v", st)
	}
	t.Logf("the job as a non-root user: %q", output(t, rc, api.StreamStdout))
	sock, ok := api.SocketPath(info.RunnerAddr)
	if !ok {
		t.Fatalf("RunnerAddr = %q, want a unix socket", info.RunnerAddr)
	}
	call := func(sock string, cred *syscall.Credential) (string, error) {
		cmd := exec.CommandContext(t.Context(), curl, "-sS", "-o", "/dev/null", "-w", "%{http_code}", "--unix-socket", sock, "http://runner"+api.HealthPath)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	// The address goes through the shim's short link; the socket itself is
	// in the runner's directory.
	for _, p := range []string{sock, filepath.Join(state, "tasks", "nobody", "run", shim.RunnerSocketFile)} {
		if out, err := call(p, nil); err != nil || out != "401" {
			t.Fatalf("root calling the runner's socket %s without a token: %q, %v; want http 401", p, out, err)
		}
		out, err := call(p, &syscall.Credential{Uid: 65534, Gid: 65534})
		if err == nil || strings.Contains(out, "401") || strings.Contains(out, "200") {
			t.Errorf("uid 65534 reached the runner's socket %s: %q, %v", p, out, err)
		}
		t.Logf("uid 65534 calling the runner's socket %s: %q, %v", p, strings.TrimSpace(out), err)
	}
	c, err := dc.ContainerInspect(t.Context(), info.ContainerID)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.HostConfig.PortBindings) > 0 || len(c.NetworkSettings.Ports) > 0 {
		t.Errorf("the runner's container publishes ports: %v %v", c.HostConfig.PortBindings, c.NetworkSettings.Ports)
	}
}

func TestShim_terminateLetsTheJobCleanUp(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	info, rc := e.runTask(t, api.TaskSpec{ID: "graceful"})
	if err := rc.Submit(ctx, api.JobSpec{Commands: []string{`trap 'sleep 0.3; echo cleaned up; exit 0' TERM; echo started; while :; do sleep 0.05; done`}}); err != nil {
		t.Fatal(err)
	}
	if _, err := rc.Run(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, rc, "started\n")
	term, err := e.client.TerminateTask(ctx, info.ID, api.ReasonTerminatedByUser, "bye", 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if term.Job == nil || term.Job.State != api.JobTerminated || term.Job.TerminationReason != api.ReasonTerminatedByUser {
		t.Errorf("job after TerminateTask = %+v, want terminated by user", term.Job)
	}
	logs, err := e.client.TaskLogs(ctx, info.ID, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var out string
	for _, l := range logs {
		if l.Stream == api.StreamStdout { // the shell may report "Terminated" on stderr
			out += string(l.Data)
		}
	}
	if out != "started\ncleaned up\n" {
		t.Errorf("job stdout = %q, want its clean-up line", out)
	}
}

func TestShim_finishedJobEndsItsTaskAfterTheLinger(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		command string
		reason  string
		code    int
	}{
		{"done", "echo ok", api.ReasonDoneByRunner, 0},
		{"failed", "exit 7", api.ReasonContainerExitedWithError, 1},
	}
	image := testenv.Docker(t)
	dc := dockerClient(t)
	e := &env{docker: dc, image: image, state: t.TempDir(), linger: 300 * time.Millisecond}
	e.start(t)
	t.Cleanup(func() { removeShimContainers(t, dc, e.shim.ID()) })
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			info, rc := e.runTask(t, api.TaskSpec{ID: "linger-" + tt.name})
			runJob(t, rc, api.JobSpec{Commands: []string{tt.command}})
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			got, err := e.client.WaitTask(ctx, info.ID, api.TaskTerminated)
			if err != nil {
				t.Fatal(err)
			}
			if got.Status != api.TaskTerminated || got.TerminationReason != tt.reason || got.ExitCode == nil || *got.ExitCode != tt.code {
				t.Errorf("task = %s/%s exit %v, want terminated/%s exit %d", got.Status, got.TerminationReason, got.ExitCode, tt.reason, tt.code)
			}
		})
	}
}
