package runner

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"hoist/agents/api"
)

func TestCgroupMetrics(t *testing.T) {
	now := time.Date(2026, 11, 24, 5, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		root string
		want api.Metrics
	}{
		{"cgroup v2 reads cpu.stat, memory.current less inactive_file, and memory.max", "testdata/cgroupv2",
			api.Metrics{Time: now, CPUUsageMicros: 2500000, MemoryUsageBytes: 104857600, MemoryWorkingSetBytes: 73400320, MemoryLimitBytes: 536870912}},
		{"cgroup v1 reads cpuacct in nanoseconds and reports no limit as zero", "testdata/cgroupv1",
			api.Metrics{Time: now, CPUUsageMicros: 3000000, MemoryUsageBytes: 209715200, MemoryWorkingSetBytes: 200000000}},
		{"a missing cgroup reads as zeros", "testdata/none", api.Metrics{Time: now}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := cgroupMetrics(tt.root, now)
			if got.Time != tt.want.Time || got.CPUUsageMicros != tt.want.CPUUsageMicros || got.MemoryUsageBytes != tt.want.MemoryUsageBytes ||
				got.MemoryWorkingSetBytes != tt.want.MemoryWorkingSetBytes || got.MemoryLimitBytes != tt.want.MemoryLimitBytes {
				t.Fatalf("cgroupMetrics(%s) = %+v, want %+v", tt.root, got, tt.want)
			}
		})
	}
}

func TestParseNvidiaSMISkipsUnreadableLines(t *testing.T) {
	out, err := os.ReadFile("testdata/nvidia-smi.csv")
	if err != nil {
		t.Fatal(err)
	}
	got := parseNvidiaSMI(out)
	want := []api.GPUMetrics{{Index: 0, MemoryUsedBytes: 40536 << 20, UtilPercent: 97}, {Index: 1, MemoryUsedBytes: 3 << 20}}
	if len(got) != len(want) {
		t.Fatalf("parseNvidiaSMI = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("gpu %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

// TestGPUMetrics_readsTheVendorToolOnPath puts a fake vendor tool on PATH
// that prints a recorded output when called with the arguments the runner
// must pass, and checks the GPUs read from it.
func TestGPUMetrics_readsTheVendorToolOnPath(t *testing.T) {
	cat, err := exec.LookPath("cat")
	if err != nil {
		t.Skip("no cat to print fixtures with")
	}
	amd := []api.GPUMetrics{{Index: 0, MemoryUsedBytes: 283 << 20, UtilPercent: 10}, {Index: 1, MemoryUsedBytes: 150000 << 20, UtilPercent: 97}}
	for _, tc := range []struct {
		name, tool, args, fixture string
		want                      []api.GPUMetrics
	}{
		{"amd-smi 24.7 columns, an N/A line skipped", "amd-smi", "monitor -vu --csv", "amd-smi-monitor-24.7.csv", amd},
		{"amd-smi 25.3 reordered columns", "amd-smi", "monitor -vu --csv", "amd-smi-monitor-25.3.csv", amd},
		{"rocm-smi JSON by card, in index order", "rocm-smi", "--showuse --showmeminfo vram --json", "rocm-smi.json",
			[]api.GPUMetrics{{Index: 0, MemoryUsedBytes: 296747008, UtilPercent: 10}, {Index: 1, MemoryUsedBytes: 50 << 30, UtilPercent: 97}}},
		{"nvidia-smi", "nvidia-smi", "--query-gpu=index,memory.used,utilization.gpu --format=csv,noheader,nounits", "nvidia-smi.csv",
			[]api.GPUMetrics{{Index: 0, MemoryUsedBytes: 40536 << 20, UtilPercent: 97}, {Index: 1, MemoryUsedBytes: 3 << 20}}},
		{"no tool, no GPUs", "", "", "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bin := t.TempDir()
			if tc.tool != "" {
				fixture, err := filepath.Abs(filepath.Join("testdata", tc.fixture))
				if err != nil {
					t.Fatal(err)
				}
				script := fmt.Sprintf("#!/bin/sh\n[ \"$*\" = %q ] || { echo \"unexpected arguments: $*\" >&2; exit 2; }\nexec %s %s\n", tc.args, cat, fixture)
				if err := os.WriteFile(filepath.Join(bin, tc.tool), []byte(script), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			t.Setenv("PATH", bin)
			r, err := New(Config{Home: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			if got := r.Metrics().GPUs; !slices.Equal(got, tc.want) {
				t.Errorf("GPUs = %+v, want %+v", got, tc.want)
			}
		})
	}
}
