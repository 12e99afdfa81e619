package e2e

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"hoist/agents/shim"
	"hoist/e2e/testenv"
)

// fakeNvidiaSMI answers hostinfo's query (nvidia-smi
// --query-gpu=index,name,memory.total,uuid,driver_version
// --format=csv,noheader,nounits) for two NVIDIA A10G.
const fakeNvidiaSMI = `#!/bin/sh
echo "0, NVIDIA A10G, 23028, GPU-00000000-0000-0000-0000-000000000000, 550.54.15"
echo "1, NVIDIA A10G, 23028, GPU-11111111-1111-1111-1111-111111111111, 550.54.15"
`

// simulatedGPUHost makes what an SSH host of two NVIDIA GPUs without the
// NVIDIA container runtime shows its shim: a fake nvidia-smi listing them
// (in bin, to go first on the host's PATH) and their device nodes
// nvidia0, nvidia1 and nvidiactl (in dev, each a character device like
// /dev/null). It returns the environment the host's sshd sets: that PATH,
// and the shim's device directory. The test is skipped where device nodes
// cannot be made.
func simulatedGPUHost(t *testing.T) map[string]string {
	t.Helper()
	dir := t.TempDir()
	bin, dev := filepath.Join(dir, "bin"), filepath.Join(dir, "dev")
	for _, d := range []string{bin, dev} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(bin, "nvidia-smi"), []byte(fakeNvidiaSMI), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"nvidiactl", "nvidia0", "nvidia1"} {
		if err := syscall.Mknod(filepath.Join(dev, name), syscall.S_IFCHR|0o666, 1<<8|3); err != nil {
			t.Skipf("cannot make device nodes: %v", err)
		}
	}
	return map[string]string{"PATH": bin + ":" + os.Getenv("PATH"), shim.DeviceDirEnv: dev}
}

// TestBlocks_gpuJobsShareAnSSHHostEachOnItsOwnGPU: an SSH fleet whose one
// host reports two NVIDIA GPUs (simulated: a fake nvidia-smi and device
// nodes, handed to the real shim through the host's login environment),
// split by `blocks: 2`, runs two one-GPU jobs at once, each seeing its own
// GPU (NVIDIA_VISIBLE_DEVICES and its device node only); a third, retried
// on no capacity, waits until a job ends and then runs on the GPU that
// job held.
func TestBlocks_gpuJobsShareAnSSHHostEachOnItsOwnGPU(t *testing.T) {
	t.Parallel() // mostly waits: runs beside the other slow tests (harness_test.go)
	if n := runtime.NumCPU(); n%2 != 0 {
		t.Skipf("the host's %d CPUs do not split into 2 blocks", n)
	}
	testenv.Docker(t)
	env := simulatedGPUHost(t)
	keys := t.TempDir()
	client := testenv.NewSSHKey(t, keys, "id_ed25519")
	host := testenv.StartSSHDWithEnv(t, "127.0.0.2", env, client.Signer.PublicKey())
	e := startSSHFleetServer(t, []*testenv.SSHD{host}, client)
	s, r := e.s, e.r

	r.write("fleet.dstack.yml", e.fleetSpec(host)+"blocks: 2\n")
	r.commit("an ssh fleet of one two-GPU host in two blocks")
	s.waitInstances(2*sshWithin, "the host idle and reachable", func(is map[string]apiInstance) bool {
		return len(is) == 1 && allInstances(is, func(i apiInstance) bool { return i.Status == "idle" && i.Reachable })
	})

	// Each job prints the GPU it was given and the GPU device nodes it sees.
	const show = "  - echo visible=$NVIDIA_VISIBLE_DEVICES\n  - echo devices=$(ls /dev | grep '^nvidia[0-9]' | tr '\\n' ' ')\n"
	job := func(name, sleep, extra string) string {
		return task(name, show+"  - sleep "+sleep+"\n") + "fleets: [" + sshFleetName + "]\nresources:\n  cpu: 1..\n  memory: 1GB..\n  gpu: 1\n" + extra
	}
	r.write("ga.dstack.yml", job("ga", "15", ""))
	r.write("gb.dstack.yml", job("gb", "90", ""))
	sha := r.commit("two one-GPU jobs")
	s.waitRun("ga", sha, "running", sshWithin)
	s.waitRun("gb", sha, "running", sshWithin)
	s.waitRun("ga", sha, "running", time.Second) // both at once
	ga, gb := sshGPUSeen(t, s, "ga"), sshGPUSeen(t, s, "gb")
	if ga == gb {
		t.Fatalf("ga and gb both see GPU %s", ga)
	}
	if a, b := s.sshRun("ga").Jobs, s.sshRun("gb").Jobs; a[0].Instance != b[0].Instance {
		t.Fatalf("ga on %q, gb on %q: want both on the one host", a[0].Instance, b[0].Instance)
	}

	// Both blocks are taken: gc waits (no capacity, retried).
	r.write("gc.dstack.yml", job("gc", "1", "retry:\n  on_events: [no-capacity]\n  duration: 5m\n"))
	sha2 := r.commit("a third one-GPU job")
	s.waitRunCond("gc", sshWithin, "pending for a retry", func(run apiRunFull) bool { return run.Status == "pending" })
	// ga ends and frees its block and GPU: gc runs on them while gb runs.
	s.waitRun("ga", sha, "done", sshWithin)
	s.waitRun("gc", sha2, "done", 2*sshWithin)
	s.waitRun("gb", sha, "running", time.Second) // still
	if gc := sshGPUSeen(t, s, "gc"); gc != ga {
		t.Errorf("gc sees GPU %s, want %s, the one ga freed (gb holds %s)", gc, ga, gb)
	}
}

// sshGPUSeen waits for run name's output of a job printing its
// NVIDIA_VISIBLE_DEVICES and GPU device nodes, checks that it sees one
// GPU and that GPU's device node only, and returns the GPU's index.
func sshGPUSeen(t *testing.T, s *server, name string) string {
	t.Helper()
	var logs string
	waitFor(t, sshWithin, func() string { return "run " + name + " to print its GPU (logs: " + logs + ")" }, func() bool {
		logs = s.logs(name)
		return strings.Contains(logs, "devices=")
	})
	var gpu, devices string
	for _, line := range strings.Split(logs, "\n") {
		if v, ok := strings.CutPrefix(line, "visible="); ok {
			gpu = v
		}
		if v, ok := strings.CutPrefix(line, "devices="); ok {
			devices = strings.TrimSpace(v)
		}
	}
	if gpu != "0" && gpu != "1" {
		t.Fatalf("run %s sees NVIDIA_VISIBLE_DEVICES=%q, want one GPU (logs %q)", name, gpu, logs)
	}
	if devices != "nvidia"+gpu {
		t.Fatalf("run %s with GPU %s sees GPU devices %q, want nvidia%s only", name, gpu, devices, gpu)
	}
	return gpu
}
