package shim_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"

	"hoist/agents/api"
	"hoist/agents/shim"
	"hoist/e2e/testenv"
)

// runnerBinary is the hoist-runner binary built once for this test binary.
var runnerBinary string

// shimProcessEnv makes the test binary run shim.Main with its arguments
// instead of the tests: a shim in a process of its own, for tests that
// start it in another network namespace (netns_test.go).
const shimProcessEnv = "HOIST_SHIM_TEST_PROCESS"

func TestMain(m *testing.M) {
	if os.Getenv(shimProcessEnv) != "" {
		if err := shim.Main(context.Background(), os.Args[1:], "test", "", os.Stdout, os.Stderr); err != nil {
			fmt.Fprintln(os.Stderr, "shim:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	dir, err := os.MkdirTemp("", "hoist-shim-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	runnerBinary = filepath.Join(dir, "hoist-runner")
	build := exec.Command("go", "build", "-o", runnerBinary, "hoist/cmd/hoist-runner")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build hoist-runner: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// env is one shim under test, served over HTTP, and its clients.
// testToken is the shim token of the tests' shims.
const testToken = "test-shim-token-0123456789abcdef0123456789"

type env struct {
	shim   *shim.Shim
	client *api.ShimClient
	docker *client.Client
	image  string
	state  string
	url    string
	// linger is the shim's Config.RunnerLinger.
	linger time.Duration
	// gpus and devDir are the shim's Config.GPUs and DeviceDir.
	gpus   []string
	devDir string
}

func dockerClient(t testing.TB) *client.Client {
	t.Helper()
	dc, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatalf("docker client: %v", err)
	}
	t.Cleanup(func() { dc.Close() })
	return dc
}

// newEnv starts a shim on a fresh state dir; every container it creates is
// removed when the test ends, also on failure.
func newEnv(t testing.TB, tune ...func(*env)) *env {
	t.Helper()
	image := testenv.Docker(t)
	dc := dockerClient(t)
	e := &env{docker: dc, image: image, state: t.TempDir()}
	for _, fn := range tune {
		fn(e)
	}
	e.start(t)
	id := e.shim.ID()
	t.Cleanup(func() { removeShimContainers(t, dc, id) })
	return e
}

// start (re)starts the shim on e's state dir.
func (e *env) start(t testing.TB) {
	t.Helper()
	s, err := shim.New(shim.Config{
		Docker:       e.docker,
		RunnerBinary: runnerBinary,
		StateDir:     e.state,
		Labels:       map[string]string{"hoist.test": "shim"},
		Version:      "test",
		Token:        testToken,
		RunnerLinger: e.linger,
		GPUs:         e.gpus,
		DeviceDir:    e.devDir,
	})
	if err != nil {
		t.Fatalf("shim.New: %v", err)
	}
	if err := s.Recover(t.Context()); err != nil {
		t.Fatalf("Recover: %v", err)
	}
	srv := httptest.NewServer(s.Handler())
	e.shim, e.url = s, srv.URL
	e.client = api.NewShimClient(srv.URL, nil).WithToken(testToken)
	t.Cleanup(func() {
		srv.Close()
		s.Close()
		if dir, err := s.SocketLinkDir(); err == nil {
			os.RemoveAll(dir)
		}
	})
}

func removeShimContainers(t testing.TB, dc *client.Client, shimID string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	list, err := dc.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", shim.LabelShimID+"="+shimID))})
	if err != nil {
		t.Errorf("list containers: %v", err)
		return
	}
	for _, c := range list {
		if err := dc.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true}); err != nil {
			t.Errorf("remove container %s: %v", c.ID, err)
		}
	}
}

// runTask creates a task and waits until its runner answers.
func (e *env) runTask(t testing.TB, spec api.TaskSpec) (api.TaskInfo, *api.RunnerClient) {
	t.Helper()
	ctx := t.Context()
	if spec.Image == "" {
		spec.Image = e.image
	}
	if _, err := e.client.CreateTask(ctx, spec); err != nil {
		t.Fatalf("CreateTask: %v", err)
	}
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	info, err := e.client.WaitTask(wctx, spec.ID, api.TaskRunning)
	if err != nil {
		t.Fatalf("WaitTask: %v", err)
	}
	if info.Status != api.TaskRunning {
		t.Fatalf("task %s: status %s (%s: %s), want running", spec.ID, info.Status, info.TerminationReason, info.TerminationMessage)
	}
	return info, api.NewRunnerClient(info.RunnerAddr, nil).WithToken(info.RunnerToken)
}

// runJob submits and runs a job and waits until it has finished.
func runJob(t testing.TB, rc *api.RunnerClient, job api.JobSpec) api.JobState {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	if err := rc.Submit(ctx, job); err != nil {
		t.Fatalf("Submit: %v", err)
	}
	if _, err := rc.Run(ctx); err != nil {
		t.Fatalf("Run: %v", err)
	}
	st, err := rc.Wait(ctx)
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	return st
}

// output returns everything the job wrote to stream.
func output(t testing.TB, rc *api.RunnerClient, stream string) string {
	t.Helper()
	var b []byte
	err := rc.Follow(t.Context(), 0, func(l api.LogLine) error {
		if l.Stream == stream {
			b = append(b, l.Data...)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Follow: %v", err)
	}
	return string(b)
}

// waitFor follows the job's output until it contains want.
func waitFor(t testing.TB, rc *api.RunnerClient, want string) {
	t.Helper()
	var got []byte
	errSeen := errors.New("seen")
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	err := rc.Follow(ctx, 0, func(l api.LogLine) error {
		got = append(got, l.Data...)
		if strings.Contains(string(got), want) {
			return errSeen
		}
		return nil
	})
	if !errors.Is(err, errSeen) {
		t.Fatalf("waiting for %q in the output: %v (got %q)", want, err, got)
	}
}

func hasMount(ms []container.MountPoint, dest string, rw bool) bool {
	for _, m := range ms {
		if m.Destination == dest {
			return m.RW == rw
		}
	}
	return false
}
