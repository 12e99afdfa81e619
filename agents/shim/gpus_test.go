package shim_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"hoist/agents/api"
)

// fakeGPUDevices makes device nodes nvidia0..nvidia<n-1> and nvidiactl in
// a directory of the test's (each a character device like /dev/null), as
// a GPU host without the NVIDIA runtime has them under /dev; the test is
// skipped where device nodes cannot be made.
func fakeGPUDevices(t *testing.T, n int) string {
	t.Helper()
	dir := t.TempDir()
	names := []string{"nvidiactl"}
	for i := range n {
		names = append(names, "nvidia"+string(rune('0'+i)))
	}
	for _, name := range names {
		if err := syscall.Mknod(filepath.Join(dir, name), syscall.S_IFCHR|0o666, 1<<8|3); err != nil {
			t.Skipf("cannot make device nodes: %v", err)
		}
	}
	return dir
}

// TestShim_tasksGetDistinctGPUs: on a host of two GPUs, two tasks asking
// for one GPU each get different ones and see only their own device node
// and index; a third finds none free, and gets one once a task has ended.
func TestShim_tasksGetDistinctGPUs(t *testing.T) {
	t.Parallel()
	dir := fakeGPUDevices(t, 2)
	e := newEnv(t, func(e *env) { e.gpus, e.devDir = []string{"0", "1"}, dir })
	ctx := t.Context()
	seen := map[string]bool{}
	var first api.TaskInfo
	for i, id := range []string{"gpu-a", "gpu-b"} {
		info, rc := e.runTask(t, api.TaskSpec{ID: id, GPUCount: 1})
		if i == 0 {
			first = info
		}
		st := runJob(t, rc, api.JobSpec{Commands: []string{"echo visible=$NVIDIA_VISIBLE_DEVICES", "ls /dev | grep '^nvidia' | tr '\\n' ' '"}})
		if st.State != api.JobDone {
			t.Fatalf("task %s: job = %+v", id, st)
		}
		out := output(t, rc, api.StreamStdout)
		var gpu string
		for _, line := range strings.Split(out, "\n") {
			if v, ok := strings.CutPrefix(line, "visible="); ok {
				gpu = v
			}
		}
		if gpu != "0" && gpu != "1" {
			t.Fatalf("task %s sees NVIDIA_VISIBLE_DEVICES=%q, want one GPU (output %q)", id, gpu, out)
		}
		if seen[gpu] {
			t.Fatalf("task %s got GPU %s, which the other task holds", id, gpu)
		}
		seen[gpu] = true
		if !strings.Contains(out, "nvidia"+gpu+" ") || strings.Contains(out, "nvidia"+otherGPU(gpu)+" ") || !strings.Contains(out, "nvidiactl") {
			t.Errorf("task %s with GPU %s sees devices %q, want nvidiactl and nvidia%s only", id, gpu, out, gpu)
		}
	}
	if _, err := e.client.CreateTask(ctx, api.TaskSpec{ID: "gpu-c", Image: e.image, GPUCount: 1}); err == nil || !strings.Contains(err.Error(), "free") {
		t.Fatalf("third task on two busy GPUs: %v, want refused for want of free GPUs", err)
	}
	if _, err := e.client.TerminateTask(ctx, first.ID, api.ReasonTerminatedByServer, "", 0); err != nil {
		t.Fatal(err)
	}
	_, rc := e.runTask(t, api.TaskSpec{ID: "gpu-c", GPUCount: 1})
	if st := runJob(t, rc, api.JobSpec{Commands: []string{"echo visible=$NVIDIA_VISIBLE_DEVICES"}}); st.State != api.JobDone {
		t.Fatalf("third task: job = %+v", st)
	}
	if out := output(t, rc, api.StreamStdout); out != "visible=0\n" && out != "visible=1\n" {
		t.Errorf("third task output %q, want the freed GPU", out)
	}

	// A restarted shim keeps the GPUs of its running tasks held.
	e.start(t)
	if _, err := e.client.CreateTask(ctx, api.TaskSpec{ID: "gpu-d", Image: e.image, GPUCount: 1}); err == nil {
		t.Errorf("a task after a restart got a GPU that running tasks hold")
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatal(err)
	}
}

func otherGPU(g string) string {
	if g == "0" {
		return "1"
	}
	return "0"
}
