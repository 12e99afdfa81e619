package conformance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"hoist/agents/api"
	"hoist/backends"
)

// runnerTask checks a Connector of a RuntimeRunner driver end to end: a
// task of Options.TaskImage through the connection's shim API → running,
// with a runner address → a job through the runner (its output and exit
// code, read through the same connection) → terminate (the exit code and
// the runner's job state kept) → remove → the task is gone from the shim,
// and, with Options.TaskLeftovers, nothing of it is left at the provider.
func (k *kit) runnerTask(t *testing.T, inst backends.Instance) {
	ctx, cancel := context.WithTimeout(t.Context(), k.opts.Timeout)
	defer cancel()
	conn, err := k.b.(backends.Connector).Connect(ctx, inst)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	defer conn.Close()
	sc := api.NewShimClient(conn.ShimURL(), conn.HTTPClient())
	id := "conf-task-" + k.run
	created, err := sc.CreateTask(ctx, api.TaskSpec{ID: id, Image: k.opts.TaskImage})
	if err != nil {
		t.Fatalf("CreateTask(%s): %v", k.opts.TaskImage, err)
	}
	removed := false
	defer func() {
		if !removed {
			rctx, cancel := context.WithTimeout(context.Background(), k.opts.Timeout)
			defer cancel()
			_, _ = sc.TerminateTask(rctx, id, api.ReasonTerminatedByServer, "conformance cleanup", 0)
			_ = sc.RemoveTask(rctx, id)
		}
	}()
	if created.ID != id || created.Terminated() {
		t.Errorf("CreateTask = %+v, want task %s not terminated", created, id)
	}
	if _, err := sc.CreateTask(ctx, api.TaskSpec{ID: id, Image: k.opts.TaskImage}); !errors.Is(err, api.ErrConflict) {
		t.Errorf("CreateTask with an existing id = %v, want a conflict", err)
	}
	info, err := sc.WaitTask(ctx, id, api.TaskRunning)
	if err != nil {
		t.Fatalf("WaitTask(running): %v", err)
	}
	if info.Status != api.TaskRunning || info.RunnerAddr == "" {
		t.Fatalf("task %+v, want running with a runner address", info)
	}

	marker := "conformance-" + k.run
	st, out := k.job(ctx, t, conn, info, "echo "+marker, "echo "+marker+"-err >&2", "exit 7")
	if st.State != api.JobFailed || st.ExitCode == nil || *st.ExitCode != 7 {
		t.Errorf("job state %+v, want failed with exit code 7", st)
	}
	if !strings.Contains(out, marker+"\n") || !strings.Contains(out, marker+"-err\n") {
		t.Errorf("job output %q, want its stdout and stderr lines", out)
	}
	if l, err := sc.ListTasks(ctx); err != nil || !slices.ContainsFunc(l, func(ti api.TaskInfo) bool { return ti.ID == id }) {
		t.Errorf("ListTasks = %v, %v; want task %s", l, err, id)
	}
	if err := sc.RemoveTask(ctx, id); !errors.Is(err, api.ErrConflict) {
		t.Errorf("RemoveTask of a running task = %v, want a conflict", err)
	}

	term, err := sc.TerminateTask(ctx, id, api.ReasonContainerExitedWithError, "exit status 7", 0)
	if err != nil {
		t.Fatalf("TerminateTask: %v", err)
	}
	if !term.Terminated() || term.TerminationReason != api.ReasonContainerExitedWithError || term.ExitCode == nil {
		t.Errorf("TerminateTask = %+v, want terminated with its reason and the container's exit code", term)
	}
	if term.Job != nil && (term.Job.State != api.JobFailed || term.Job.ExitCode == nil || *term.Job.ExitCode != 7) {
		t.Errorf("terminated task's job %+v, want the runner's failed state with exit code 7", term.Job)
	}
	if err := sc.RemoveTask(ctx, id); err != nil {
		t.Fatalf("RemoveTask: %v", err)
	}
	removed = true
	if _, err := sc.GetTask(ctx, id); !errors.Is(err, api.ErrNotFound) {
		t.Errorf("GetTask after RemoveTask = %v, want not found", err)
	}
	if k.opts.TaskLeftovers == nil {
		return
	}
	for {
		left := k.opts.TaskLeftovers(t, inst)
		if len(left) == 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("left at the provider after RemoveTask: %v", left)
		case <-time.After(k.opts.Poll):
		}
	}
}

// job runs commands through the runner of a running task, reached with the
// connection's HTTP client, and returns its final state and output.
func (k *kit) job(ctx context.Context, t *testing.T, conn backends.Conn, info api.TaskInfo, commands ...string) (api.JobState, string) {
	t.Helper()
	rc := api.NewRunnerClient(info.RunnerAddr, conn.HTTPClient())
	// The runner may take a moment to listen once its container runs.
	var err error
	for {
		if _, err = rc.State(ctx); err == nil || ctx.Err() != nil {
			break
		}
		time.Sleep(k.opts.Poll)
	}
	if err != nil {
		t.Fatalf("the runner at %s never answered: %v", info.RunnerAddr, err)
	}
	if err := rc.Submit(ctx, api.JobSpec{RunName: "conformance", JobID: info.ID, Commands: commands}); err != nil {
		t.Fatalf("Submit: %v", err)
	}
	if _, err := rc.Run(ctx); err != nil {
		t.Fatalf("Run: %v", err)
	}
	var out strings.Builder
	if err := rc.Follow(ctx, 0, func(l api.LogLine) error {
		out.Write(l.Data)
		return nil
	}); err != nil {
		t.Fatalf("Follow: %v", err)
	}
	st, err := rc.Wait(ctx)
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	return st, out.String()
}

// checkRunnerOptions says why the runner-runtime checks cannot run, "" when
// they can.
func (k *kit) checkRunnerOptions() string {
	switch {
	case k.b.Traits().Runtime != backends.RuntimeRunner:
		return "not a runner-runtime driver"
	case k.opts.TaskImage == "":
		return "no Options.TaskImage"
	}
	if _, ok := k.b.(backends.Connector); !ok {
		return fmt.Sprintf("%s does not implement backends.Connector", k.b.Name())
	}
	return ""
}
