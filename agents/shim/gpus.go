package shim

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/docker/docker/api/types/container"

	"hoist/agents/api"
	"hoist/agents/hostinfo"
)

// GPUs: the shim hands each task that asks for a number of NVIDIA GPUs
// (TaskSpec.GPUCount without GPUIDs) GPUs that no other unterminated task
// holds, and records them as the task's GPUIDs, so that tasks sharing a
// host (a fleet's blocks, the server's own host) never share a GPU
// (dstack's runner/internal/shim/resources.go GpuLock). The allocated ids
// are persisted with the task, so a restarted shim keeps them held.
//
// A host whose Docker has the NVIDIA runtime gets them through a device
// request; a host without it gets the GPUs' device nodes mapped into the
// container (dstack's TaskConfig.gpu_devices): /dev/nvidia<index> for each
// GPU, with /dev/nvidiactl and the UVM devices where they exist.
// NVIDIA_VISIBLE_DEVICES names the task's GPUs either way.

// gpuPool returns the GPU ids the shim hands out: Config.GPUs when set
// (known is then true, even when it is empty), else the indexes of the
// host's NVIDIA GPUs (nvidia-smi), probed once (known when there are
// some).
func (s *Shim) gpuPool(ctx context.Context) (pool []string, known bool) {
	if s.cfg.GPUs != nil {
		return s.cfg.GPUs, true
	}
	s.gpuOnce.Do(func() {
		h, err := hostinfo.Probe(ctx, s.cfg.StateDir)
		if err != nil {
			s.log.Warn("gpu_probe_failed", "error", err)
		}
		if h.GPUVendor != "nvidia" {
			return
		}
		for _, g := range h.GPUs {
			s.gpus = append(s.gpus, strconv.Itoa(g.Index))
		}
	})
	return s.gpus, len(s.gpus) > 0
}

// heldGPUsLocked returns the GPU ids that the unterminated tasks hold;
// s.mu must be held.
func (s *Shim) heldGPUsLocked() map[string]bool {
	held := map[string]bool{}
	for _, t := range s.tasks {
		if t.info.Status == api.TaskTerminated {
			continue
		}
		for _, id := range t.spec.GPUIDs {
			held[id] = true
		}
	}
	return held
}

// errGPUsBusy says fewer GPUs are free than a task asks for; the server
// tries again (the other tasks may be ending).
var errGPUsBusy = errors.New("not enough free GPUs")

// pickGPUs returns count of the ids in pool that are not held, in pool
// order (count -1: every free one, possibly none).
func pickGPUs(pool []string, held map[string]bool, count int) ([]string, error) {
	var free []string
	for _, id := range pool {
		if !held[id] {
			free = append(free, id)
		}
	}
	if count < 0 {
		return free, nil
	}
	if len(pool) < count {
		return nil, fmt.Errorf("%d asked, the host has %d: %w", count, len(pool), errInvalid)
	}
	if len(free) < count {
		return nil, fmt.Errorf("%d asked, %d of %d free: %w", count, len(free), len(pool), errGPUsBusy)
	}
	return free[:count], nil
}

// wantsGPUAllocation reports whether the shim picks the task's GPUs: it
// asks for a number of NVIDIA GPUs and names none.
func wantsGPUAllocation(spec api.TaskSpec) bool {
	return spec.GPUCount != 0 && len(spec.GPUIDs) == 0 && (spec.GPUVendor == "" || spec.GPUVendor == "nvidia")
}

// nvidiaRuntime reports whether Docker on this host can hand NVIDIA GPUs
// to containers itself: the NVIDIA Container Toolkit's hook is installed
// (what Docker's built-in "nvidia" device driver runs) or Docker knows an
// "nvidia" runtime. Probed once.
func (s *Shim) nvidiaRuntime(ctx context.Context) bool {
	s.runtimeOnce.Do(func() {
		if _, err := exec.LookPath("nvidia-container-runtime-hook"); err == nil {
			s.hasNVIDIARuntime = true
			return
		}
		if info, err := s.docker.Info(ctx); err == nil {
			_, s.hasNVIDIARuntime = info.Runtimes["nvidia"]
		}
	})
	return s.hasNVIDIARuntime
}

// nvidiaDevices maps the device nodes of the NVIDIA GPUs ids (indexes)
// and the driver's control devices into a container, for a host whose
// Docker has no NVIDIA runtime. A GPU without its device node is an error.
func nvidiaDevices(dir string, ids []string) ([]container.DeviceMapping, error) {
	var devs []container.DeviceMapping
	add := func(name string) {
		devs = append(devs, container.DeviceMapping{PathOnHost: filepath.Join(dir, name), PathInContainer: "/dev/" + name, CgroupPermissions: "rwm"})
	}
	for _, name := range []string{"nvidiactl", "nvidia-uvm", "nvidia-uvm-tools"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			add(name)
		}
	}
	for _, id := range ids {
		if _, err := strconv.Atoi(id); err != nil {
			return nil, fmt.Errorf("gpu %q: not an index, and Docker has no NVIDIA runtime to find it", id)
		}
		name := "nvidia" + id
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			return nil, fmt.Errorf("gpu %s: %w", id, err)
		}
		add(name)
	}
	return devs, nil
}

// nvidiaVisible is the NVIDIA_VISIBLE_DEVICES value of a task's GPUs.
func nvidiaVisible(ids []string) string { return strings.Join(slices.Clone(ids), ",") }

// exposeGPUs names a task's NVIDIA GPUs in the container's
// NVIDIA_VISIBLE_DEVICES and, when Docker has no NVIDIA runtime to honour
// the device request containerConfig made, maps their device nodes
// instead.
func (s *Shim) exposeGPUs(ctx context.Context, spec api.TaskSpec, cfg *container.Config, hcfg *container.HostConfig) error {
	if len(spec.GPUIDs) == 0 || (spec.GPUVendor != "" && spec.GPUVendor != "nvidia") {
		return nil
	}
	cfg.Env = append(cfg.Env, "NVIDIA_VISIBLE_DEVICES="+nvidiaVisible(spec.GPUIDs))
	if s.nvidiaRuntime(ctx) {
		return nil
	}
	dir := s.cfg.DeviceDir
	if dir == "" {
		dir = "/dev"
	}
	devs, err := nvidiaDevices(dir, spec.GPUIDs)
	if err != nil {
		return fmt.Errorf("gpus without an NVIDIA runtime: %w", err)
	}
	hcfg.Resources.DeviceRequests = nil
	hcfg.Resources.Devices = append(hcfg.Resources.Devices, devs...)
	return nil
}
