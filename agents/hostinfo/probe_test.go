package hostinfo_test

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"hoist/agents/hostinfo"
)

func TestProbe_describesThisMachine(t *testing.T) {
	dir := t.TempDir()
	h, err := hostinfo.Probe(t.Context(), dir)
	if err != nil {
		t.Logf("probe incomplete: %v", err) // a GPU tool installed but failing
	}
	host, _ := os.Hostname()
	if h.OS != runtime.GOOS || h.Arch != runtime.GOARCH || h.CPUs != runtime.NumCPU() || h.Hostname != host {
		t.Errorf("Probe = %+v, want this machine's OS, arch, CPUs and hostname", h)
	}
	if h.MemoryBytes <= 0 || h.DiskBytes <= 0 || h.DiskFreeBytes <= 0 || h.DiskFreeBytes > h.DiskBytes {
		t.Errorf("memory %d, disk %d (free %d): want the host's memory and the size of %s's file system", h.MemoryBytes, h.DiskBytes, h.DiskFreeBytes, dir)
	}
	if h.GPUs == nil {
		t.Errorf("GPUs is nil, want a list")
	}
}

// TestProbe_gpuTools puts scripted GPU tools on PATH: the first tool that
// answers describes the GPUs, one that is installed but fails is reported.
func TestProbe_gpuTools(t *testing.T) {
	const nvidia = `echo "0, NVIDIA H100 80GB HBM3, 81559, GPU-5f3a, 550.54.15"`
	const amd = `echo '[{"gpu": 0, "asic": {"market_name": "AMD Instinct MI300X", "asic_serial": "0x1234"}, "vram": {"size": {"value": 196592, "unit": "MB"}}, "driver": {"version": "6.7.0"}}]'`
	tests := []struct {
		name        string
		tools       map[string]string
		vendor      string
		gpus        int
		wantErrWith string
	}{
		{"no GPU tool: no GPUs, no error", nil, "", 0, ""},
		{"nvidia-smi answers", map[string]string{"nvidia-smi": nvidia, "amd-smi": amd}, "nvidia", 1, ""},
		{"amd-smi answers", map[string]string{"amd-smi": amd}, "amd", 1, ""},
		{"a failing nvidia-smi gives way to amd-smi", map[string]string{"nvidia-smi": "exit 9", "amd-smi": amd}, "amd", 1, ""},
		{"a failing nvidia-smi alone is reported", map[string]string{"nvidia-smi": "exit 9"}, "", 0, "nvidia-smi"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, body := range tt.tools {
				if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			t.Setenv("PATH", dir)
			h, err := hostinfo.Probe(t.Context(), "")
			if tt.wantErrWith == "" && err != nil || tt.wantErrWith != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErrWith)) {
				t.Errorf("err = %v, want one naming %q", err, tt.wantErrWith)
			}
			if h.GPUVendor != tt.vendor || len(h.GPUs) != tt.gpus || h.CPUs != runtime.NumCPU() {
				t.Errorf("Probe = vendor %q, %d GPUs, %d CPUs; want %q, %d", h.GPUVendor, len(h.GPUs), h.CPUs, tt.vendor, tt.gpus)
			}
		})
	}
}
