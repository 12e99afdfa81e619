package runner

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"hoist/agents/api"
)

// cgroupRoot is where the container's own cgroup is mounted (cgroup
// namespaces make it the root of /sys/fs/cgroup inside the container).
const cgroupRoot = "/sys/fs/cgroup"

// Metrics samples the container's cgroup (v2 or v1) and, when nvidia-smi,
// amd-smi or rocm-smi is present, its GPUs, as dstack's runner does in
// runner/internal/runner/metrics/metrics.go (cgroup CPU usage, memory
// working set, utilization and memory per GPU).
func (r *Runner) Metrics() api.Metrics {
	m := cgroupMetrics(cgroupRoot, r.now())
	m.GPUs = r.gpuMetrics()
	return m
}

// cgroupMetrics reads CPU and memory use from the cgroup mounted at root:
// cgroup v2 when root holds cpu.stat, else the v1 cpuacct and memory
// controllers. The working set is usage minus inactive file cache, as the
// kubelet and dstack compute it.
func cgroupMetrics(root string, now time.Time) api.Metrics {
	m := api.Metrics{Time: now}
	if st, err := os.ReadFile(filepath.Join(root, "cpu.stat")); err == nil {
		m.CPUUsageMicros = statValue(st, "usage_usec")
		m.MemoryUsageBytes = fileInt(filepath.Join(root, "memory.current"))
		mem, _ := os.ReadFile(filepath.Join(root, "memory.stat"))
		m.MemoryWorkingSetBytes = max(0, m.MemoryUsageBytes-statValue(mem, "inactive_file"))
		m.MemoryLimitBytes = fileInt(filepath.Join(root, "memory.max")) // "max" reads as 0
		return m
	}
	m.CPUUsageMicros = fileInt(filepath.Join(root, "cpuacct", "cpuacct.usage")) / 1000
	m.MemoryUsageBytes = fileInt(filepath.Join(root, "memory", "memory.usage_in_bytes"))
	mem, _ := os.ReadFile(filepath.Join(root, "memory", "memory.stat"))
	m.MemoryWorkingSetBytes = max(0, m.MemoryUsageBytes-statValue(mem, "total_inactive_file"))
	// cgroup v1 reports "no limit" as a huge page-rounded number.
	if lim := fileInt(filepath.Join(root, "memory", "memory.limit_in_bytes")); lim < 1<<62 {
		m.MemoryLimitBytes = lim
	}
	return m
}

// gpuMetrics samples the GPUs with the first vendor tool found on PATH:
// nvidia-smi, else amd-smi, else rocm-smi (older ROCm); none without them.
func (r *Runner) gpuMetrics() []api.GPUMetrics {
	for _, tool := range []struct {
		name  string
		args  []string
		parse func([]byte) []api.GPUMetrics
	}{
		{"nvidia-smi", []string{"--query-gpu=index,memory.used,utilization.gpu", "--format=csv,noheader,nounits"}, parseNvidiaSMI},
		// dstack's runner reads AMD GPUs the same way
		// (runner/internal/runner/metrics/metrics.go, GetAMDGPUMetrics).
		{"amd-smi", []string{"monitor", "-vu", "--csv"}, parseAMDSMI},
		{"rocm-smi", []string{"--showuse", "--showmeminfo", "vram", "--json"}, parseROCmSMI},
	} {
		if _, err := lookPath(tool.name); err != nil {
			continue
		}
		out, err := r.reaper.run(tool.name, tool.args...)
		if err != nil {
			r.log.Debug("gpu metrics failed", "tool", tool.name, "error", err)
			return nil
		}
		return tool.parse(out)
	}
	return nil
}

// parseNvidiaSMI reads the output of `nvidia-smi
// --query-gpu=index,memory.used,utilization.gpu --format=csv,noheader,nounits`
// (memory in MiB, utilization in percent; see nvidia-smi(1), "--query-gpu").
// Lines it cannot read, such as "[N/A]" values, are skipped.
func parseNvidiaSMI(out []byte) []api.GPUMetrics {
	var gpus []api.GPUMetrics
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Split(sc.Text(), ",")
		if len(f) != 3 {
			continue
		}
		idx, err1 := strconv.Atoi(strings.TrimSpace(f[0]))
		mib, err2 := strconv.ParseInt(strings.TrimSpace(f[1]), 10, 64)
		util, err3 := strconv.ParseFloat(strings.TrimSpace(f[2]), 64)
		if err1 != nil || err2 != nil || err3 != nil {
			continue
		}
		gpus = append(gpus, api.GPUMetrics{Index: idx, MemoryUsedBytes: mib << 20, UtilPercent: util})
	}
	return gpus
}

// parseAMDSMI reads the output of `amd-smi monitor -vu --csv`: a header
// line naming the columns (their order changed between amd-smi versions),
// then a line per GPU; "gpu" is the index, "gfx" the utilization in percent
// and "vram_used" the memory in use in MB. Lines it cannot read, such as
// "N/A" values, are skipped; without those columns there is nothing.
func parseAMDSMI(out []byte) []api.GPUMetrics {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	col := map[string]int{}
	for i, h := range strings.Split(lines[0], ",") {
		col[strings.TrimSpace(h)] = i
	}
	ui, ok1 := col["gfx"]
	mi, ok2 := col["vram_used"]
	if !ok1 || !ok2 {
		return nil
	}
	gi, hasIndex := col["gpu"]
	var gpus []api.GPUMetrics
	for n, line := range lines[1:] {
		f := strings.Split(line, ",")
		if len(f) <= max(ui, mi, gi) {
			continue
		}
		util, err1 := strconv.ParseFloat(strings.TrimSpace(f[ui]), 64)
		mb, err2 := strconv.ParseFloat(strings.TrimSpace(f[mi]), 64)
		if err1 != nil || err2 != nil {
			continue
		}
		idx := n
		if hasIndex {
			if idx, err1 = strconv.Atoi(strings.TrimSpace(f[gi])); err1 != nil {
				continue
			}
		}
		gpus = append(gpus, api.GPUMetrics{Index: idx, MemoryUsedBytes: int64(mb * (1 << 20)), UtilPercent: util})
	}
	return gpus
}

// parseROCmSMI reads the output of `rocm-smi --showuse --showmeminfo vram
// --json`: an object per card ("card0", …) with "GPU use (%)" and "VRAM
// Total Used Memory (B)" as strings. Cards it cannot read are skipped.
func parseROCmSMI(out []byte) []api.GPUMetrics {
	var cards map[string]map[string]any
	if err := json.Unmarshal(out, &cards); err != nil {
		return nil
	}
	var gpus []api.GPUMetrics
	for name, card := range cards {
		idx, err := strconv.Atoi(strings.TrimPrefix(name, "card"))
		if err != nil || !strings.HasPrefix(name, "card") {
			continue // e.g. "system"
		}
		util, err1 := strconv.ParseFloat(fmt.Sprint(card["GPU use (%)"]), 64)
		used, err2 := strconv.ParseInt(fmt.Sprint(card["VRAM Total Used Memory (B)"]), 10, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		gpus = append(gpus, api.GPUMetrics{Index: idx, MemoryUsedBytes: used, UtilPercent: util})
	}
	slices.SortFunc(gpus, func(a, b api.GPUMetrics) int { return a.Index - b.Index })
	return gpus
}

func fileInt(path string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	v, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return v
}

func statValue(stat []byte, key string) int64 {
	sc := bufio.NewScanner(bytes.NewReader(stat))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if ok && k == key {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}
