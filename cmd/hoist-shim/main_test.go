package main_test

import (
	"context"
	"errors"
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
	"hoist/e2e/testenv"
)

// TestBinaries_runAJobEndToEnd builds both static binaries side by side,
// starts hoist-shim (which finds hoist-runner next to itself) and runs a job
// through the shim and runner APIs.
func TestBinaries_runAJobEndToEnd(t *testing.T) {
	image := testenv.Docker(t)
	dir := t.TempDir()
	for _, b := range []string{"hoist-shim", "hoist-runner"} {
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, b), "hoist/cmd/"+b)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v\n%s", b, err, out)
		}
	}
	shimID := "cmdtest-" + filepath.Base(dir)
	const token = "cmd-test-token-0123456789abcdef0123456789"
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	shim := exec.Command(filepath.Join(dir, "hoist-shim"), "--listen", "127.0.0.1:0", "--addr-file", filepath.Join(dir, "shim.addr"), "--state-dir", filepath.Join(dir, "state"), "--id", shimID, "--label", "hoist.test=cmd-shim", "--token-file", filepath.Join(dir, "token"))
	logf, err := os.Create(filepath.Join(dir, "shim.log"))
	if err != nil {
		t.Fatal(err)
	}
	shim.Stdout, shim.Stderr = logf, logf
	if err := shim.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = shim.Process.Signal(os.Interrupt)
		_ = shim.Wait()
		logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("shim log:\n%s", b)
		}
		removeContainers(t, shimID)
	})

	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	var sc *api.ShimClient
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "shim.addr")); err == nil {
			sc = api.NewShimClient(strings.TrimSpace(string(b)), nil).WithToken(token)
			if _, err := sc.Health(ctx); err == nil {
				break
			}
		}
		select {
		case <-ctx.Done():
			t.Fatal("shim did not answer")
		case <-time.After(10 * time.Millisecond):
		}
	}
	if _, err := sc.CreateTask(ctx, api.TaskSpec{ID: "t1", Image: image}); err != nil {
		t.Fatal(err)
	}
	info, err := sc.WaitTask(ctx, "t1", api.TaskRunning)
	if err != nil || info.Status != api.TaskRunning {
		t.Fatalf("WaitTask = %+v, %v", info, err)
	}
	// Without their tokens, both agents answer 401.
	shimAddr, _ := os.ReadFile(filepath.Join(dir, "shim.addr"))
	if _, err := api.NewShimClient(strings.TrimSpace(string(shimAddr)), nil).TaskList(ctx); !errors.Is(err, api.ErrUnauthorized) {
		t.Errorf("shim TaskList without token: %v, want 401", err)
	}
	if _, err := api.NewRunnerClient(info.RunnerAddr, nil).Health(ctx); !errors.Is(err, api.ErrUnauthorized) {
		t.Errorf("runner Health without token: %v, want 401", err)
	}
	if _, err := api.NewRunnerClient(info.RunnerAddr, nil).State(ctx); !errors.Is(err, api.ErrUnauthorized) {
		t.Errorf("runner State without token: %v, want 401", err)
	}
	// The refusal is logged, with a constant message and never a token.
	if b, _ := os.ReadFile(logf.Name()); !strings.Contains(string(b), "msg=shim_request_unauthorized") ||
		strings.Contains(string(b), token) || strings.Contains(string(b), info.RunnerToken) {
		t.Errorf("shim log = %s, want shim_request_unauthorized and no token", b)
	}
	rc := api.NewRunnerClient(info.RunnerAddr, nil).WithToken(info.RunnerToken)
	h, err := rc.Health(ctx)
	if err != nil || h.Service != api.RunnerService {
		t.Fatalf("runner Health = %+v, %v", h, err)
	}
	if err := rc.Submit(ctx, api.JobSpec{Commands: []string{"echo hello"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := rc.Run(ctx); err != nil {
		t.Fatal(err)
	}
	st, err := rc.Wait(ctx)
	if err != nil || st.State != api.JobDone {
		t.Fatalf("Wait = %+v, %v", st, err)
	}
	lines, err := rc.Logs(ctx, 0, 0)
	if err != nil || len(lines) != 1 || string(lines[0].Data) != "hello\n" {
		t.Errorf("Logs = %+v, %v", lines, err)
	}
	if _, err := sc.TerminateTask(ctx, "t1", api.ReasonDoneByRunner, "", time.Second); err != nil {
		t.Fatal(err)
	}
	if err := sc.RemoveTask(ctx, "t1"); err != nil {
		t.Fatal(err)
	}
}

func removeContainers(t *testing.T, shimID string) {
	dc, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		t.Errorf("docker client: %v", err)
		return
	}
	defer dc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	list, err := dc.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", "hoist.shim-id="+shimID))})
	if err != nil {
		t.Errorf("list containers: %v", err)
		return
	}
	for _, c := range list {
		_ = dc.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true})
	}
}
