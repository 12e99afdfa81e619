package hostinfo_test

import (
	"os"
	"runtime"
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
