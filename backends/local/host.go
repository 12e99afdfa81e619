package local

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"hoist/backends/offers"
)

// hostResources is what this host has.
type hostResources struct {
	Hostname  string
	CPUs      int
	MemoryGB  float64
	DiskGB    float64
	Arch      string // offers.ArchX86 or offers.ArchARM
	GPUName   string
	GPUCount  int
	GPUMemGB  float64
	GPUVendor string
}

// probeHost reads CPUs, memory, the disk holding dir and NVIDIA GPUs
// (nvidia-smi, when present).
func probeHost(ctx context.Context, dir string) hostResources {
	h := hostResources{CPUs: runtime.NumCPU(), Arch: offers.ArchX86}
	if runtime.GOARCH == "arm64" {
		h.Arch = offers.ArchARM
	}
	h.Hostname, _ = os.Hostname()
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			if f := strings.Fields(sc.Text()); len(f) >= 2 && f[0] == "MemTotal:" {
				kb, _ := strconv.ParseFloat(f[1], 64)
				h.MemoryGB = kb / (1 << 20)
			}
		}
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err == nil {
		h.DiskGB = float64(st.Blocks) * float64(st.Bsize) / (1 << 30)
	}
	if _, err := exec.LookPath("nvidia-smi"); err == nil {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, "nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader,nounits").Output()
		if err == nil {
			for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
				name, mem, ok := strings.Cut(line, ",")
				if !ok {
					continue
				}
				h.GPUCount++
				if h.GPUName == "" {
					n, memGB, _ := offers.NormalizeGPUName(strings.TrimSpace(name))
					if n == "" {
						n = strings.TrimSpace(name)
					}
					if memGB == 0 {
						mb, _ := strconv.ParseFloat(strings.TrimSpace(mem), 64)
						memGB = mb / 1024
					}
					h.GPUName, h.GPUMemGB, h.GPUVendor = n, memGB, offers.VendorNVIDIA
				}
			}
		}
	}
	return h
}
