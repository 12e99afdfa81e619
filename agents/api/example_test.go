package api_test

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"time"

	"hoist/agents/api"
)

// Example shows the whole path of one job: the shim starts a container
// whose entrypoint is the runner; the job is submitted to the runner, run,
// followed and waited for; then the task is terminated and removed.
func Example() {
	ctx := context.Background()
	hc := &http.Client{} // or one that dials through an SSH tunnel
	shim := api.NewShimClient("127.0.0.1:10998", hc)
	if _, err := shim.CreateTask(ctx, api.TaskSpec{ID: "job-1", Image: "hoist-e2e/busybox:latest"}); err != nil {
		return
	}
	task, err := shim.WaitTask(ctx, "job-1", api.TaskRunning) // long-polls
	if err != nil || task.Status != api.TaskRunning {
		return // task.TerminationReason says why
	}
	runner := api.NewRunnerClient(task.RunnerAddr, hc)
	_ = runner.Submit(ctx, api.JobSpec{RunName: "hello", JobID: "job-1", Commands: []string{"echo hello"}})
	_, _ = runner.Run(ctx)
	var last int64 // persist it: a later Follow resumes after it
	_ = runner.Follow(ctx, last, func(l api.LogLine) error {
		fmt.Printf("%s", l.Data)
		last = l.Seq
		return nil
	})
	state, _ := runner.Wait(ctx) // done, failed or terminated
	_, _ = shim.TerminateTask(ctx, "job-1", state.TerminationReason, "", 10*time.Second)
	_ = shim.RemoveTask(ctx, "job-1")
}

// ExampleRunnerClient_Artifacts keeps a finished job's artifacts: the
// folders its spec names, relative to its working directory.
func ExampleRunnerClient_Artifacts() {
	ctx := context.Background()
	runner := api.NewRunnerClient("unix:///var/lib/hoist/tasks/job-1/runner.sock", nil)
	body, missing, err := runner.Artifacts(ctx, []string{"checkpoints", "samples"})
	if err != nil {
		return
	}
	defer body.Close()
	for _, m := range missing {
		fmt.Printf("artifact %s not found\n", m)
	}
	_ = api.EachArtifact(body, func(name string, size int64, mode fs.FileMode, content io.Reader) error {
		_, err := io.Copy(io.Discard, content) // or into the artifact store
		return err
	})
}
