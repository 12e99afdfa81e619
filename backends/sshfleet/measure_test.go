package sshfleet_test

import (
	"context"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	"hoist/agents/api"
	"hoist/backends"
	"hoist/backends/internal/agentbin"
	"hoist/backends/internal/drivertest"
	"hoist/backends/local"
	"hoist/backends/offers"
)

// TestMeasure_fleetReadyAndTaskDone measures, on this machine and in one run:
// the time from Create of an SSH fleet host to its shim answering (connect,
// probe, upload both agents, start the supervisor); and a one-line task's
// create → done through the shim and runner on an SSH host, on the local
// backend, and a bare `docker run --rm` of the same image. It runs only with
// HOIST_MEASURE=1.
func TestMeasure_fleetReadyAndTaskDone(t *testing.T) {
	if os.Getenv("HOIST_MEASURE") == "" {
		t.Skip("set HOIST_MEASURE=1 to measure")
	}
	const rounds = 5
	f := newFleet(t, 1)
	ctx := t.Context()
	agentbin.Build(t, runtime.GOARCH)

	var ready []time.Duration
	var inst backends.Instance
	for i := range rounds {
		id := "measure-" + strconv.Itoa(i)
		start := time.Now()
		got, err := f.b.Create(ctx, f.spec(0, id))
		if err != nil || got.Status != backends.StatusRunning {
			t.Fatalf("create %s: %+v, %v", id, got, err)
		}
		ready = append(ready, time.Since(start))
		if i < rounds-1 {
			if err := f.b.Terminate(ctx, id); err != nil {
				t.Fatal(err)
			}
		} else {
			inst = got
			t.Cleanup(func() { f.b.Terminate(context.Background(), id) })
		}
	}

	_, runner := agentbin.Build(t, runtime.GOARCH)
	lb, err := local.New(local.Config{RunnerBinary: runner, StateDir: t.TempDir(), Records: drivertest.Records(t), Labels: map[string]string{testLabel: "backends-sshfleet"}})
	if err != nil {
		t.Fatal(err)
	}
	defer lb.Close()
	lo, _ := lb.Offers(ctx, offers.Query{})
	linst, err := lb.Create(ctx, backends.InstanceSpec{ID: "measure-local", Offer: lo[0]})
	if err != nil {
		t.Fatal(err)
	}
	defer lb.Terminate(context.Background(), linst.ID)

	taskDone := func(c backends.Connector, inst backends.Instance, id string) time.Duration {
		conn, err := c.Connect(ctx, inst)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		start := time.Now()
		runJob(t, ctx, c, inst, id, f.image, "echo done")
		d := time.Since(start)
		sc := api.NewShimClient(conn.ShimURL(), conn.HTTPClient())
		_, _ = sc.TerminateTask(ctx, id, api.ReasonDoneByRunner, "", 0)
		_ = sc.RemoveTask(ctx, id)
		return d
	}
	var sshTask, localTask, bare []time.Duration
	for i := range rounds {
		sshTask = append(sshTask, taskDone(f.b, inst, "m-ssh-"+strconv.Itoa(i)))
		localTask = append(localTask, taskDone(lb, linst, "m-local-"+strconv.Itoa(i)))
		start := time.Now()
		if out, err := exec.Command("docker", "run", "--rm", "--label", testLabel+"=backends-sshfleet", f.image, "sh", "-c", "echo done").CombinedOutput(); err != nil {
			t.Fatalf("docker run: %v: %s", err, out)
		}
		bare = append(bare, time.Since(start))
	}
	t.Logf("ssh fleet create → shim ready: median %s (all %v)", median(ready), ready)
	t.Logf("task create → done, ssh host:     median %s (all %v)", median(sshTask), sshTask)
	t.Logf("task create → done, local:        median %s (all %v)", median(localTask), localTask)
	t.Logf("bare docker run --rm echo:        median %s (all %v)", median(bare), bare)
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2].Round(time.Millisecond)
}
