package hostinfo

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"hoist/agents/api"
)

// Probe describes this host: OS and architecture (Go's names), hostname,
// logical CPUs and their model (/proc/cpuinfo), total memory
// (/proc/meminfo), the size and free space of the file system holding
// diskPath, non-loopback addresses and GPUs (nvidia-smi, else amd-smi).
// What cannot be read is left zero; the error reports a GPU tool that is
// installed but failed, in which case the rest of the description is still
// returned. DockerVersion and ShimVersion are left for the caller.
func Probe(ctx context.Context, diskPath string) (api.HostInfo, error) {
	h := api.HostInfo{OS: runtime.GOOS, Arch: runtime.GOARCH, CPUs: runtime.NumCPU()}
	h.Hostname, _ = os.Hostname()
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		h.CPUModel = cpuModel(b)
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		h.MemoryBytes = memTotal(b)
	}
	if diskPath == "" {
		diskPath = "/"
	}
	var st syscall.Statfs_t
	if syscall.Statfs(diskPath, &st) == nil {
		h.DiskBytes = int64(st.Blocks) * st.Bsize
		h.DiskFreeBytes = int64(st.Bavail) * st.Bsize
	}
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && !ipn.IP.IsLoopback() && !ipn.IP.IsLinkLocalUnicast() {
				h.Addresses = append(h.Addresses, ipn.IP.String())
			}
		}
	}
	h.GPUs = []api.GPU{}
	var errs []error
	for _, t := range gpuTools {
		out, err := runTool(ctx, t.name, t.args...)
		if errors.Is(err, exec.ErrNotFound) {
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", t.name, err))
			continue
		}
		if gpus, driver := t.parse(out); len(gpus) > 0 {
			h.GPUs, h.GPUVendor, h.GPUDriverVersion = gpus, t.vendor, driver
		}
		return h, nil
	}
	return h, errors.Join(errs...)
}

// gpuTools are the GPU vendors' tools Probe asks, in order; the first that
// answers describes the GPUs.
var gpuTools = []struct {
	name, vendor string
	args         []string
	parse        func([]byte) ([]api.GPU, string)
}{
	{"nvidia-smi", "nvidia", []string{"--query-gpu=index,name,memory.total,uuid,driver_version", "--format=csv,noheader,nounits"}, parseNvidiaSMI},
	{"amd-smi", "amd", []string{"static", "--asic", "--vram", "--driver", "--json"}, parseAMDSMI},
}

func runTool(ctx context.Context, name string, args ...string) ([]byte, error) {
	path, err := exec.LookPath(name)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return exec.CommandContext(ctx, path, args...).Output()
}

func cpuModel(cpuinfo []byte) string {
	sc := bufio.NewScanner(bytes.NewReader(cpuinfo))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func memTotal(meminfo []byte) int64 {
	sc := bufio.NewScanner(bytes.NewReader(meminfo))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == "MemTotal:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// parseNvidiaSMI reads `nvidia-smi --query-gpu=index,name,memory.total,uuid,driver_version
// --format=csv,noheader,nounits` (memory in MiB).
func parseNvidiaSMI(out []byte) ([]api.GPU, string) {
	var gpus []api.GPU
	driver := ""
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Split(sc.Text(), ",")
		if len(f) < 5 {
			continue
		}
		for i := range f {
			f[i] = strings.TrimSpace(f[i])
		}
		idx, err := strconv.Atoi(f[0])
		if err != nil {
			continue
		}
		mib, _ := strconv.ParseInt(f[2], 10, 64)
		gpus = append(gpus, api.GPU{Vendor: "nvidia", Index: idx, Name: f[1], MemoryBytes: mib << 20, ID: f[3]})
		driver = f[4]
	}
	return gpus, driver
}

// parseAMDSMI reads `amd-smi static --asic --vram --driver --json`: a list
// of {gpu, asic{market_name, asic_serial}, vram{size{value, unit}}, driver{version}}.
func parseAMDSMI(out []byte) ([]api.GPU, string) {
	var entries []struct {
		GPU  int `json:"gpu"`
		ASIC struct {
			MarketName string `json:"market_name"`
			Serial     string `json:"asic_serial"`
		} `json:"asic"`
		VRAM struct {
			Size struct {
				Value json.Number `json:"value"`
				Unit  string      `json:"unit"`
			} `json:"size"`
		} `json:"vram"`
		Driver struct {
			Version string `json:"version"`
		} `json:"driver"`
	}
	if err := json.Unmarshal(out, &entries); err != nil {
		// Some versions wrap the list in {"gpu_data": [...]}.
		var wrapped struct {
			GPUData json.RawMessage `json:"gpu_data"`
		}
		if json.Unmarshal(out, &wrapped) != nil || wrapped.GPUData == nil || json.Unmarshal(wrapped.GPUData, &entries) != nil {
			return nil, ""
		}
	}
	var gpus []api.GPU
	driver := ""
	for _, e := range entries {
		size, _ := e.VRAM.Size.Value.Int64()
		switch strings.ToUpper(e.VRAM.Size.Unit) {
		case "MB", "MIB":
			size <<= 20
		case "GB", "GIB":
			size <<= 30
		}
		gpus = append(gpus, api.GPU{Vendor: "amd", Index: e.GPU, Name: e.ASIC.MarketName, MemoryBytes: size, ID: e.ASIC.Serial})
		driver = e.Driver.Version
	}
	return gpus, driver
}
