package shim_test

import (
	"context"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"

	"hoist/agents/api"
	"hoist/agents/shim"
)

func TestShim_recoverAfterRestart(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()

	// alive keeps running across the restart.
	alive, aliveRC := e.runTask(t, api.TaskSpec{ID: "alive"})
	if err := aliveRC.Submit(ctx, api.JobSpec{Commands: []string{"i=0; while :; do i=$((i+1)); echo tick $i; sleep 0.05; done"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := aliveRC.Run(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, aliveRC, "tick 1\n")
	// hostnet runs on the host network, its runner on a port of its own.
	hostnet, _ := e.runTask(t, api.TaskSpec{ID: "hostnet", NetworkMode: api.NetworkHost})
	// killed is killed while the shim is down; lost is removed.
	killed, _ := e.runTask(t, api.TaskSpec{ID: "killed"})
	lost, _ := e.runTask(t, api.TaskSpec{ID: "lost"})
	// ghost carries the shim's labels but no task of it.
	ghost, err := e.docker.ContainerCreate(ctx, &container.Config{
		Image: e.image,
		Cmd:   []string{"sleep", "600"},
		Labels: map[string]string{
			shim.LabelManagedBy: "hoist-shim", shim.LabelShimID: e.shim.ID(), shim.LabelTaskID: "ghost", "hoist.test": "shim",
		},
	}, nil, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.docker.ContainerStart(ctx, ghost.ID, container.StartOptions{}); err != nil {
		t.Fatal(err)
	}

	// The shim goes away; containers change behind its back.
	e.shim.Close()
	if err := e.docker.ContainerKill(ctx, killed.ContainerID, "KILL"); err != nil {
		t.Fatal(err)
	}
	if err := e.docker.ContainerRemove(ctx, lost.ContainerID, container.RemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	waitExited(t, e, killed.ContainerID)

	e.start(t)
	l, err := e.client.TaskList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]api.TaskInfo{}
	for _, ti := range l.Tasks {
		got[ti.ID] = ti
	}
	if a := got["alive"]; a.Status != api.TaskRunning || a.RunnerAddr != alive.RunnerAddr || a.ContainerID != alive.ContainerID {
		t.Errorf("alive after restart = %+v, want running at %s", a, alive.RunnerAddr)
	}
	if h := got["hostnet"]; h.Status != api.TaskRunning || h.RunnerAddr != hostnet.RunnerAddr {
		t.Errorf("hostnet after restart = %+v, want running at %s", h, hostnet.RunnerAddr)
	} else if _, err := api.NewRunnerClient(h.RunnerAddr, nil).WithToken(h.RunnerToken).Health(ctx); err != nil {
		t.Errorf("hostnet's runner after restart: %v", err)
	}
	if k := got["killed"]; k.Status != api.TaskTerminated || k.TerminationReason != api.ReasonContainerExitedWithError || k.ExitCode == nil || *k.ExitCode != 137 {
		t.Errorf("killed after restart = %+v, want terminated with exit code 137", k)
	}
	if k := got["lost"]; k.Status != api.TaskTerminated || k.TerminationReason != api.ReasonContainerLost {
		t.Errorf("lost after restart = %+v, want terminated with %s", k, api.ReasonContainerLost)
	}
	if len(l.Unknown) != 1 || l.Unknown[0].ContainerID != ghost.ID || l.Unknown[0].TaskID != "ghost" {
		t.Errorf("unknown containers = %+v, want the ghost", l.Unknown)
	}
	if c, err := e.docker.ContainerInspect(ctx, ghost.ID); err != nil || !c.State.Running {
		t.Errorf("ghost container was touched: running=%v err=%v", err == nil && c.State.Running, err)
	}

	// The recovered task is served and watched as before.
	waitFor(t, aliveRC, "tick 3\n")
	if err := e.docker.ContainerKill(ctx, alive.ContainerID, "KILL"); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	a, err := e.client.WaitTask(wctx, "alive", api.TaskTerminated)
	if err != nil || a.Status != api.TaskTerminated {
		t.Errorf("alive after kill = %+v, %v; want terminated (the new shim watches it)", a, err)
	}
	if _, err := e.client.TerminateTask(ctx, "hostnet", "", "", 0); err != nil {
		t.Error(err)
	}
	for _, id := range []string{"alive", "hostnet", "killed", "lost"} {
		if err := e.client.RemoveTask(ctx, id); err != nil {
			t.Errorf("RemoveTask(%s): %v", id, err)
		}
	}
}

func waitExited(t *testing.T, e *env, id string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	waitC, errC := e.docker.ContainerWait(ctx, id, container.WaitConditionNotRunning)
	select {
	case <-waitC:
	case err := <-errC:
		t.Fatal(err)
	}
}
