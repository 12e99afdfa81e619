package runner

import (
	"os"
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
