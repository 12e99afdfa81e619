package runner

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"

	"hoist/agents/api"
)

// Metrics samples the container's cgroup (v2 or v1) and, when nvidia-smi is
// present, its GPUs.
func (r *Runner) Metrics() api.Metrics {
	m := api.Metrics{Time: r.now()}
	if st, err := os.ReadFile("/sys/fs/cgroup/cpu.stat"); err == nil {
		m.CPUUsageMicros = statValue(st, "usage_usec")
		m.MemoryUsageBytes = fileInt("/sys/fs/cgroup/memory.current")
		mem, _ := os.ReadFile("/sys/fs/cgroup/memory.stat")
		m.MemoryWorkingSetBytes = max(0, m.MemoryUsageBytes-statValue(mem, "inactive_file"))
	} else {
		m.CPUUsageMicros = fileInt("/sys/fs/cgroup/cpuacct/cpuacct.usage") / 1000
		m.MemoryUsageBytes = fileInt("/sys/fs/cgroup/memory/memory.usage_in_bytes")
		mem, _ := os.ReadFile("/sys/fs/cgroup/memory/memory.stat")
		m.MemoryWorkingSetBytes = max(0, m.MemoryUsageBytes-statValue(mem, "total_inactive_file"))
	}
	m.GPUs = r.gpuMetrics()
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
	var gpus []api.GPUMetrics
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Split(sc.Text(), ",")
		if len(f) != 3 {
			continue
		}
		idx, _ := strconv.Atoi(strings.TrimSpace(f[0]))
		mib, _ := strconv.ParseInt(strings.TrimSpace(f[1]), 10, 64)
		util, _ := strconv.ParseFloat(strings.TrimSpace(f[2]), 64)
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
