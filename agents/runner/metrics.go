package runner

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"hoist/agents/api"
)

// cgroupRoot is where the container's own cgroup is mounted (cgroup
// namespaces make it the root of /sys/fs/cgroup inside the container).
const cgroupRoot = "/sys/fs/cgroup"

// Metrics samples the container's cgroup (v2 or v1) and, when nvidia-smi is
// present, its GPUs, as dstack's runner does in
// runner/internal/metrics/metrics.go (cgroup CPU usage, memory working set,
// nvidia-smi utilization and memory per GPU).
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

func (r *Runner) gpuMetrics() []api.GPUMetrics {
	if _, err := lookPath("nvidia-smi"); err != nil {
		return nil
	}
	out, err := r.reaper.run("nvidia-smi", "--query-gpu=index,memory.used,utilization.gpu", "--format=csv,noheader,nounits")
	if err != nil {
		return nil
	}
	return parseNvidiaSMI(out)
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
