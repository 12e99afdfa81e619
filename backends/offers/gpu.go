package offers

import (
	"math"
	"regexp"
	"strconv"
	"strings"
)

// GPUInfo is what hoist knows about one GPU model.
type GPUInfo struct {
	// Vendor is nvidia, amd, google, intel or tenstorrent.
	Vendor string
	// Name is the canonical compact name (A100, RTX6000Ada, MI300X).
	Name string
	// MemoryGB lists the per-GPU memory sizes the model ships with.
	MemoryGB []float64
	// ComputeCapability is the NVIDIA compute capability (8.6); 0 when not NVIDIA or unknown.
	ComputeCapability float64
}

// gpuTable is the knowledge table: gpuhunt's tables (constraints.py) plus
// models providers emit that gpuhunt does not list.
var gpuTable = []GPUInfo{
	// NVIDIA data center.
	{VendorNVIDIA, "A10", []float64{24}, 8.6},
	{VendorNVIDIA, "A10G", []float64{24}, 8.6},
	{VendorNVIDIA, "A16", []float64{16}, 8.6},
	{VendorNVIDIA, "A30", []float64{24}, 8.0},
	{VendorNVIDIA, "A40", []float64{48}, 8.6},
	{VendorNVIDIA, "A100", []float64{40, 80}, 8.0},
	{VendorNVIDIA, "A800", []float64{40, 80}, 8.0},
	{VendorNVIDIA, "H100", []float64{80}, 9.0},
	{VendorNVIDIA, "H100NVL", []float64{94}, 9.0},
	{VendorNVIDIA, "H200", []float64{141}, 9.0},
	{VendorNVIDIA, "H200NVL", []float64{141}, 9.0},
	{VendorNVIDIA, "GH200", []float64{96}, 9.0},
	{VendorNVIDIA, "B200", []float64{180}, 10.0},
	{VendorNVIDIA, "GB200", []float64{186}, 10.0},
	{VendorNVIDIA, "B300", []float64{270, 262}, 10.0},
	{VendorNVIDIA, "L4", []float64{24}, 8.9},
	{VendorNVIDIA, "L40", []float64{48}, 8.9},
	{VendorNVIDIA, "L40S", []float64{48}, 8.9},
	{VendorNVIDIA, "T4", []float64{16}, 7.5},
	{VendorNVIDIA, "T4g", []float64{16}, 7.5},
	{VendorNVIDIA, "V100", []float64{16, 32}, 7.0},
	{VendorNVIDIA, "P100", []float64{16}, 6.0},
	{VendorNVIDIA, "P40", []float64{24}, 6.1},
	{VendorNVIDIA, "P4", []float64{8}, 6.1},
	{VendorNVIDIA, "M60", []float64{8}, 5.2},
	{VendorNVIDIA, "K80", []float64{12}, 3.7},
	{VendorNVIDIA, "K520", []float64{4}, 3.0},
	// NVIDIA workstation.
	{VendorNVIDIA, "A2000", []float64{6, 12}, 8.6},
	{VendorNVIDIA, "A4000", []float64{16}, 8.6},
	{VendorNVIDIA, "A4500", []float64{20}, 8.6},
	{VendorNVIDIA, "A5000", []float64{24}, 8.6},
	{VendorNVIDIA, "A6000", []float64{48}, 8.6},
	{VendorNVIDIA, "RTX6000", []float64{24}, 7.5},
	{VendorNVIDIA, "RTX2000Ada", []float64{16}, 8.9},
	{VendorNVIDIA, "RTX4000Ada", []float64{20}, 8.9},
	{VendorNVIDIA, "RTX6000Ada", []float64{48}, 8.9},
	{VendorNVIDIA, "RTXPRO4500", []float64{32}, 12.0},
	{VendorNVIDIA, "RTXPRO6000", []float64{96}, 12.0},
	// NVIDIA consumer.
	{VendorNVIDIA, "RTX2060", []float64{6, 12}, 7.5},
	{VendorNVIDIA, "RTX2060SUPER", []float64{8}, 7.5},
	{VendorNVIDIA, "RTX2070", []float64{8}, 7.5},
	{VendorNVIDIA, "RTX2070SUPER", []float64{8}, 7.5},
	{VendorNVIDIA, "RTX2080", []float64{8}, 7.5},
	{VendorNVIDIA, "RTX2080SUPER", []float64{8}, 7.5},
	{VendorNVIDIA, "RTX2080Ti", []float64{11}, 7.5},
	{VendorNVIDIA, "RTX3050", []float64{6, 8}, 8.6},
	{VendorNVIDIA, "RTX3060", []float64{8, 12}, 8.6},
	{VendorNVIDIA, "RTX3060Ti", []float64{8}, 8.6},
	{VendorNVIDIA, "RTX3070", []float64{8}, 8.6},
	{VendorNVIDIA, "RTX3070Ti", []float64{8}, 8.6},
	{VendorNVIDIA, "RTX3080", []float64{10}, 8.6},
	{VendorNVIDIA, "RTX3080Ti", []float64{12}, 8.6},
	{VendorNVIDIA, "RTX3090", []float64{24}, 8.6},
	{VendorNVIDIA, "RTX3090Ti", []float64{24}, 8.6},
	{VendorNVIDIA, "RTX4060", []float64{8}, 8.9},
	{VendorNVIDIA, "RTX4060Ti", []float64{8, 16}, 8.9},
	{VendorNVIDIA, "RTX4070", []float64{12}, 8.9},
	{VendorNVIDIA, "RTX4070SUPER", []float64{12}, 8.9},
	{VendorNVIDIA, "RTX4070Ti", []float64{12}, 8.9},
	{VendorNVIDIA, "RTX4070TiSUPER", []float64{16}, 8.9},
	{VendorNVIDIA, "RTX4080", []float64{16}, 8.9},
	{VendorNVIDIA, "RTX4080SUPER", []float64{16}, 8.9},
	{VendorNVIDIA, "RTX4090", []float64{24}, 8.9},
	{VendorNVIDIA, "RTX5060", []float64{8}, 12.0},
	{VendorNVIDIA, "RTX5060Ti", []float64{8, 16}, 12.0},
	{VendorNVIDIA, "RTX5070", []float64{12}, 12.0},
	{VendorNVIDIA, "RTX5070Ti", []float64{16}, 12.0},
	{VendorNVIDIA, "RTX5080", []float64{16}, 12.0},
	{VendorNVIDIA, "RTX5090", []float64{32}, 12.0},
	// AMD.
	{VendorAMD, "MI100", []float64{32}, 0},
	{VendorAMD, "MI210", []float64{64}, 0},
	{VendorAMD, "MI250", []float64{128}, 0},
	{VendorAMD, "MI250X", []float64{128}, 0},
	{VendorAMD, "MI300A", []float64{128}, 0},
	{VendorAMD, "MI300X", []float64{192}, 0},
	{VendorAMD, "MI308X", []float64{128}, 0},
	{VendorAMD, "MI325X", []float64{288}, 0},
	{VendorAMD, "MI350X", []float64{288}, 0},
	{VendorAMD, "MI355X", []float64{288}, 0},
	{VendorAMD, "V520", []float64{8}, 0},
	{VendorAMD, "V620", []float64{32}, 0},
	{VendorAMD, "RX7900XTX", []float64{24}, 0},
	// Google TPU versions (rows carry slice names such as v5litepod-8).
	{VendorGoogle, "v2", nil, 0},
	{VendorGoogle, "v3", nil, 0},
	{VendorGoogle, "v4", nil, 0},
	{VendorGoogle, "v5p", nil, 0},
	{VendorGoogle, "v5litepod", nil, 0},
	{VendorGoogle, "v6e", nil, 0},
	// Intel.
	{VendorIntel, "Gaudi", []float64{32}, 0},
	{VendorIntel, "Gaudi2", []float64{96}, 0},
	{VendorIntel, "Gaudi3", []float64{128}, 0},
	// Tenstorrent.
	{VendorTenstorrent, "n150", []float64{12}, 0},
	{VendorTenstorrent, "n300", []float64{24}, 0},
	{VendorTenstorrent, "tt-galaxy-wh", []float64{12}, 0},
	{VendorTenstorrent, "p100a", []float64{28}, 0},
	{VendorTenstorrent, "p150", []float64{32}, 0},
	{VendorTenstorrent, "p300", []float64{32, 64}, 0},
	{VendorTenstorrent, "tt-galaxy-bh", []float64{32}, 0},
}

// gpuAliases maps compact upper-case spellings that are not the canonical
// name plus separators to the canonical name.
var gpuAliases = map[string]string{
	"RTXPRO6000S":          "RTXPRO6000",
	"RTXPRO6000SE":         "RTXPRO6000",
	"RTXPRO6000BLACKWELL":  "RTXPRO6000",
	"RTXPROSERVER6000":     "RTXPRO6000",
	"RTX6000ADAGENERATION": "RTX6000Ada",
	"QUADRORTX6000":        "RTX6000",
	"RADEONPROV520":        "V520",
	"RADEONPROV620":        "V620",
	"H100NVLINK":           "H100",
	"GB200NVL":             "GB200",
	"V5E":                  "v5litepod",
}

// gpuByKey indexes gpuTable by upper-case canonical name.
var gpuByKey = func() map[string]*GPUInfo {
	m := make(map[string]*GPUInfo, len(gpuTable))
	for i := range gpuTable {
		m[strings.ToUpper(gpuTable[i].Name)] = &gpuTable[i]
	}
	return m
}()

var (
	// memSuffix matches a memory size inside a GPU name: "-80GB", " 80 GB", "_48G".
	memSuffix = regexp.MustCompile(`(?i)[-_ ]?(\d+(?:\.\d+)?)\s*G(?:B|IB)?(?:[-_ ]|$)`)
	// formFactor matches interconnect or packaging words that do not change the model.
	formFactor = regexp.MustCompile(`(?i)[-_ ]?\b(PCIE|PCI-E|SXM[2-6]?|NVLINK|HBM[23]E?|MIG|OAM)\b`)
	// separators removes spaces, dashes, underscores and dots.
	separators = strings.NewReplacer(" ", "", "-", "", "_", "", ".", "")
	// tpuSlice matches TPU slice names (v5litepod-8, v6e-16, v4-32).
	tpuSlice = regexp.MustCompile(`^(v\d+[a-z]*)-\d+$`)
)

// NormalizeGPUName maps a provider's spelling of a GPU model to hoist's
// canonical compact name ("A100-80GB" → "A100" with memory 80, "RTX-A6000"
// → "A6000", "Tesla V100" → "V100", "H100 NVL" → "H100NVL"). memGB is a
// memory size the spelling carried (0 if none). known is false when the
// model is not in the knowledge table; name is then the input compacted
// (separators removed), which callers keep and report.
func NormalizeGPUName(raw string) (name string, memGB float64, known bool) {
	s := strings.TrimSpace(raw)
	if s == "" {
		return "", 0, false
	}
	s = strings.TrimPrefix(s, "tpu-")
	if m := tpuSlice.FindStringSubmatch(s); m != nil {
		if _, ok := gpuByKey[strings.ToUpper(m[1])]; ok {
			return s, 0, true // TPU slice names stay whole
		}
	}
	if info, ok := gpuByKey[strings.ToUpper(s)]; ok {
		return info.Name, 0, true
	}
	for _, p := range []string{"NVIDIA ", "NVIDIA-", "NVIDIA_", "Tesla ", "Tesla-", "AMD ", "AMD-", "Instinct ", "Intel "} {
		if len(s) > len(p) && strings.EqualFold(s[:len(p)], p) {
			s = s[len(p):]
		}
	}
	if m := memSuffix.FindStringSubmatchIndex(s); m != nil && m[0] > 0 {
		memGB, _ = strconv.ParseFloat(s[m[2]:m[3]], 64)
		s = s[:m[0]] + " " + s[m[1]:]
	}
	s = formFactor.ReplaceAllString(s, "")
	compact := separators.Replace(s)
	key := strings.ToUpper(compact)
	if a, ok := gpuAliases[key]; ok {
		key = strings.ToUpper(a)
	}
	if strings.HasPrefix(key, "RTXA") && len(key) > 4 && key[4] >= '0' && key[4] <= '9' {
		key = key[3:] // RTX A6000 → A6000
	}
	if info, ok := gpuByKey[key]; ok {
		return info.Name, memGB, true
	}
	return compact, memGB, false
}

// computeCapability returns the compute capability of a known NVIDIA GPU.
func computeCapability(name string) (float64, bool) {
	info, ok := gpuByKey[strings.ToUpper(name)]
	if !ok || info.Vendor != VendorNVIDIA || info.ComputeCapability == 0 {
		return 0, false
	}
	return info.ComputeCapability, true
}

// snapMemory returns the table memory of a known GPU closest to mem when it
// is within 7% (gpuhunt's correct_gpu_memory_gib), else mem unchanged.
func snapMemory(info *GPUInfo, mem float64) float64 {
	best, bestDiff := mem, math.Inf(1)
	for _, m := range info.MemoryGB {
		if d := math.Abs(m - mem); d < bestDiff {
			best, bestDiff = m, d
		}
	}
	if bestDiff <= 0.07*best {
		return best
	}
	return mem
}
