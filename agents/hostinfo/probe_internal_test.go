package hostinfo

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"hoist/agents/api"
)

func TestParseNvidiaSMI(t *testing.T) {
	out := "0, NVIDIA H100 80GB HBM3, 81559, GPU-5f3a, 550.54.15\n1, NVIDIA H100 80GB HBM3, 81559, GPU-77b1, 550.54.15\n"
	gpus, driver := parseNvidiaSMI([]byte(out))
	want := []api.GPU{
		{Vendor: "nvidia", Index: 0, Name: "NVIDIA H100 80GB HBM3", MemoryBytes: 81559 << 20, ID: "GPU-5f3a"},
		{Vendor: "nvidia", Index: 1, Name: "NVIDIA H100 80GB HBM3", MemoryBytes: 81559 << 20, ID: "GPU-77b1"},
	}
	if diff := cmp.Diff(want, gpus); diff != "" || driver != "550.54.15" {
		t.Errorf("parseNvidiaSMI (-want +got):\n%s driver %q", diff, driver)
	}
}

func TestParseAMDSMI(t *testing.T) {
	out := `[{"gpu": 0, "asic": {"market_name": "AMD Instinct MI300X", "asic_serial": "0x1234"}, "vram": {"size": {"value": 196592, "unit": "MB"}}, "driver": {"version": "6.7.0"}}]`
	gpus, driver := parseAMDSMI([]byte(out))
	want := []api.GPU{{Vendor: "amd", Index: 0, Name: "AMD Instinct MI300X", MemoryBytes: 196592 << 20, ID: "0x1234"}}
	if diff := cmp.Diff(want, gpus); diff != "" || driver != "6.7.0" {
		t.Errorf("parseAMDSMI (-want +got):\n%s driver %q", diff, driver)
	}
	if gpus, _ := parseAMDSMI([]byte("not json")); gpus != nil {
		t.Errorf("parseAMDSMI(garbage) = %+v, want none", gpus)
	}
}

func TestMemTotal_andCPUModel(t *testing.T) {
	meminfo := "MemTotal:       32768000 kB\nMemFree:         1000 kB\n"
	if got, want := memTotal([]byte(meminfo)), int64(32768000)<<10; got != want {
		t.Errorf("memTotal = %d, want %d", got, want)
	}
	if got := memTotal([]byte("garbage")); got != 0 {
		t.Errorf("memTotal(garbage) = %d, want 0", got)
	}
	cpuinfo := "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) CPU @ 2.20GHz\n"
	if got, want := cpuModel([]byte(cpuinfo)), "Intel(R) Xeon(R) CPU @ 2.20GHz"; got != want {
		t.Errorf("cpuModel = %q, want %q", got, want)
	}
}
