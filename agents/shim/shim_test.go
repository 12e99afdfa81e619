package shim_test

import (
	"errors"
	"testing"
	"time"

	"github.com/containerd/errdefs"

	"hoist/agents/api"
)

func TestShim_echoHello(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	info, rc := e.runTask(t, api.TaskSpec{ID: "echo-hello"})
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
