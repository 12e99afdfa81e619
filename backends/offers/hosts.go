package offers

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// A HostPool is a Provider of hosts hoist already manages: backends that
// own machines (the SSH fleet backend, the local backend) feed it with Set
// whenever their hosts or their idle/busy state change, and the Market
// offers them alongside cloud offers. Host offers normally cost 0 and so
// come first. A HostPool is safe for concurrent use.
type HostPool struct {
	name  string
	mu    sync.RWMutex
	hosts map[string][]Offer // by feeding backend
}

// NewHostPool returns an empty pool reported under name (e.g. "hosts").
func NewHostPool(name string) *HostPool {
	return &HostPool{name: name, hosts: map[string][]Offer{}}
}

// Name implements Provider.
func (p *HostPool) Name() string { return p.name }

// Set replaces the hosts fed by backend. Each offer should carry Backend,
// Instance (host name), Region (fleet or "local"), resources, and
// Availability idle or busy; a missing Backend is set to backend and a
// missing Availability to idle.
func (p *HostPool) Set(backend string, hosts []Offer) {
	cp := slices.Clone(hosts)
	for i := range cp {
		if cp[i].Backend == "" {
			cp[i].Backend = backend
		}
		if cp[i].Availability == "" {
			cp[i].Availability = AvailabilityIdle
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(cp) == 0 {
		delete(p.hosts, backend)
		return
	}
	p.hosts[backend] = cp
}

// Offers implements Provider: every host, unfiltered (the Market filters).
func (p *HostPool) Offers(ctx context.Context, q Query) ([]Offer, error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	var out []Offer
	for _, hs := range p.hosts {
		out = append(out, hs...)
	}
	return out, nil
}

// LocalHost describes this machine as an offer of the "local" backend:
// vCPUs, architecture, memory (/proc/meminfo), the free-plus-used size of
// the file system holding dir (or / when dir is empty), and NVIDIA GPUs
// when nvidia-smi is on PATH. Price is 0 and availability idle.
func LocalHost(ctx context.Context, dir string) (Offer, error) {
	host, _ := os.Hostname()
	o := Offer{
		Backend:      "local",
		Instance:     host,
		Region:       "local",
		CPUs:         runtime.NumCPU(),
		CPUArch:      ArchX86,
		Availability: AvailabilityIdle,
	}
	if runtime.GOARCH == "arm64" || runtime.GOARCH == "arm" {
		o.CPUArch = ArchARM
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		o.MemoryGB = math.Round(parseMemTotal(b)*10) / 10
	}
	if dir == "" {
		dir = "/"
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err == nil {
		o.DiskGB = math.Round(float64(st.Blocks)*float64(st.Bsize)/(1<<30)*10) / 10
	}
	if smi, err := exec.LookPath("nvidia-smi"); err == nil {
		out, err := exec.CommandContext(ctx, smi, "--query-gpu=name,memory.total", "--format=csv,noheader,nounits").Output()
		if err != nil {
			return o, fmt.Errorf("nvidia-smi: %w", err)
		}
		name, mem, n := parseNvidiaSMI(out)
		if n > 0 {
			o.GPUVendor, o.GPUName, o.GPUMemoryGB, o.GPUCount = VendorNVIDIA, name, mem, n
			NormalizeOffer(&o)
		}
	}
	return o, nil
}

// parseMemTotal returns MemTotal from /proc/meminfo in GiB.
func parseMemTotal(b []byte) float64 {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == "MemTotal:" {
			kb, err := strconv.ParseFloat(f[1], 64)
			if err == nil {
				return kb / (1 << 20)
			}
		}
	}
	return 0
}

// parseNvidiaSMI reads "name, MiB" lines and returns the first GPU's name,
// its memory in GiB and the number of GPUs of that model.
func parseNvidiaSMI(out []byte) (name string, memGB float64, count int) {
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		n, mib, ok := strings.Cut(line, ",")
		if !ok {
			continue
		}
		n = strings.TrimSpace(n)
		m, err := strconv.ParseFloat(strings.TrimSpace(mib), 64)
		if err != nil {
			continue
		}
		if count == 0 {
			name, memGB = n, m/1024
		}
		if n == name {
			count++
		}
	}
	return name, memGB, count
}
