package schema

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode"
)

// This file holds dstack's scalar shorthand grammars as plain functions so
// the offers catalog and the CLI can reuse them.

func f64(v float64) *float64 { return &v }

// Exact reports whether r is a single value (min == max).
func (r Range) Exact() bool {
	return r.Min != nil && r.Max != nil && *r.Min == *r.Max
}

// Contains reports whether v lies within r.
func (r Range) Contains(v float64) bool {
	return (r.Min == nil || v >= *r.Min) && (r.Max == nil || v <= *r.Max)
}

// String formats r in dstack's shorthand: "2", "2..", "..8" or "2..8".
func (r Range) String() string {
	f := func(p *float64) string {
		if p == nil {
			return ""
		}
		return strconv.FormatFloat(*p, 'f', -1, 64)
	}
	if r.Exact() {
		return f(r.Min)
	}
	return f(r.Min) + ".." + f(r.Max)
}

// Intersect returns the intersection of r and o, and false when it is empty.
func (r Range) Intersect(o Range) (Range, bool) {
	out := r
	if o.Min != nil && (out.Min == nil || *o.Min > *out.Min) {
		out.Min = o.Min
	}
	if o.Max != nil && (out.Max == nil || *o.Max < *out.Max) {
		out.Max = o.Max
	}
	if out.Min != nil && out.Max != nil && *out.Min > *out.Max {
		return Range{}, false
	}
	return out, true
}

// splitRange splits "a..b" into its halves; ok is false without "..".
func splitRange(s string) (lo, hi string, ok bool, err error) {
	if !strings.Contains(s, "..") {
		return "", "", false, nil
	}
	s = strings.ReplaceAll(s, " ", "")
	parts := strings.Split(s, "..")
	if len(parts) != 2 {
		return "", "", true, fmt.Errorf("invalid range %q", s)
	}
	return parts[0], parts[1], true, nil
}

func checkRange(r Range) error {
	if r.Min == nil && r.Max == nil {
		return errors.New("invalid empty range: ..")
	}
	if r.Min != nil && r.Max != nil && *r.Min > *r.Max {
		return fmt.Errorf("invalid range order: %s..%s", fmtNum(*r.Min), fmtNum(*r.Max))
	}
	return nil
}

func fmtNum(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

var intRE = regexp.MustCompile(`^[+-]?[0-9]+$`)

// parseInt parses a whole number the way pydantic's lax mode does.
func parseInt(s string) (int64, error) {
	t := strings.TrimSpace(s)
	if intRE.MatchString(t) {
		v, err := strconv.ParseInt(t, 10, 64)
		if err == nil {
			return v, nil
		}
	}
	return 0, fmt.Errorf("invalid integer %q", s)
}

// ParseRange parses an integer range shorthand: "2", "2..", "..8", "2..8".
func ParseRange(s string) (Range, error) {
	lo, hi, isRange, err := splitRange(s)
	if err != nil {
		return Range{}, err
	}
	if !isRange {
		v, err := parseInt(s)
		if err != nil {
			return Range{}, err
		}
		return Range{Min: f64(float64(v)), Max: f64(float64(v))}, nil
	}
	var r Range
	if lo != "" {
		v, err := parseInt(lo)
		if err != nil {
			return Range{}, err
		}
		r.Min = f64(float64(v))
	}
	if hi != "" {
		v, err := parseInt(hi)
		if err != nil {
			return Range{}, err
		}
		r.Max = f64(float64(v))
	}
	return r, checkRange(r)
}

var floatRE = regexp.MustCompile(`^[+-]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9][0-9_]*)(?:[eE][+-]?[0-9]+)?$`)

// parsePyFloat parses what Python's float() accepts (minus inf and nan).
func parsePyFloat(s string) (float64, error) {
	t := strings.TrimSpace(s)
	if !floatRE.MatchString(t) || strings.Contains(t, "__") || strings.HasSuffix(t, "_") {
		return 0, fmt.Errorf("invalid number %q", s)
	}
	v, err := strconv.ParseFloat(strings.ReplaceAll(t, "_", ""), 64)
	if err != nil || math.IsInf(v, 0) {
		return 0, fmt.Errorf("invalid number %q", s)
	}
	return v, nil
}

// ParseMemory parses a size into GB: "512MB", "24GB", "1TB", "24" (GB);
// units are case-insensitive and spaces are ignored.
func ParseMemory(s string) (float64, error) {
	v := strings.ToLower(strings.ReplaceAll(s, " ", ""))
	mul := 1.0
	switch {
	case strings.HasSuffix(v, "tb"):
		v, mul = v[:len(v)-2], 1024
	case strings.HasSuffix(v, "gb"):
		v = v[:len(v)-2]
	case strings.HasSuffix(v, "mb"):
		v, mul = v[:len(v)-2], 1.0/1024
	}
	f, err := parsePyFloat(v)
	if err != nil {
		return 0, fmt.Errorf("invalid memory size %q", s)
	}
	return f * mul, nil
}

// ParseMemoryRange parses a memory range shorthand in GB: "24GB",
// "24GB..", "..80GB", "40GB..80GB".
func ParseMemoryRange(s string) (Range, error) {
	lo, hi, isRange, err := splitRange(s)
	if err != nil {
		return Range{}, err
	}
	if !isRange {
		v, err := ParseMemory(s)
		if err != nil {
			return Range{}, err
		}
		return Range{Min: f64(v), Max: f64(v)}, nil
	}
	var r Range
	if lo != "" {
		v, err := ParseMemory(lo)
		if err != nil {
			return Range{}, err
		}
		r.Min = f64(v)
	}
	if hi != "" {
		v, err := ParseMemory(hi)
		if err != nil {
			return Range{}, err
		}
		r.Max = f64(v)
	}
	return r, checkRange(r)
}

var durationRE = regexp.MustCompile(`^([0-9]+) *([smhdw])$`)

// ParseDuration parses a duration into seconds: "90", "30s", "5m", "2h",
// "1d", "1w".
func ParseDuration(s string) (int64, error) {
	if v, err := parseInt(s); err == nil {
		return v, nil
	}
	m := durationRE.FindStringSubmatch(strings.TrimRight(s, "\n"))
	if m == nil {
		return 0, fmt.Errorf("cannot parse the duration %q", s)
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("cannot parse the duration %q", s)
	}
	mul := map[string]int64{"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}[m[2]]
	if n > math.MaxInt64/mul {
		return 0, fmt.Errorf("duration %q is too long", s)
	}
	return n * mul, nil
}

// FormatDuration renders seconds in the largest exact unit ("5m", "3d").
func FormatDuration(sec int64) string {
	if sec == Off {
		return "off"
	}
	for _, u := range []struct {
		s string
		n int64
	}{{"w", 7 * 86400}, {"d", 86400}, {"h", 3600}, {"m", 60}} {
		if sec != 0 && sec%u.n == 0 {
			return strconv.FormatInt(sec/u.n, 10) + u.s
		}
	}
	return strconv.FormatInt(sec, 10) + "s"
}

// GPU vendors.
const (
	VendorNVIDIA      = "nvidia"
	VendorAMD         = "amd"
	VendorGoogle      = "google"
	VendorIntel       = "intel"
	VendorTenstorrent = "tenstorrent"
)

// ParseGPUVendor casts a vendor name (case-insensitive, with the aliases
// `tpu` for google and `tt` for tenstorrent).
func ParseGPUVendor(s string) (string, error) {
	switch v := strings.ToLower(s); v {
	case "tpu":
		return VendorGoogle, nil
	case "tt":
		return VendorTenstorrent, nil
	case VendorNVIDIA, VendorAMD, VendorGoogle, VendorIntel, VendorTenstorrent:
		return v, nil
	}
	return "", fmt.Errorf("invalid GPU vendor %q", s)
}

// ParseCPUArch casts a CPU architecture name ("x86" or "arm",
// case-insensitive).
func ParseCPUArch(s string) (string, error) {
	switch v := strings.ToLower(s); v {
	case "x86", "arm":
		return v, nil
	}
	return "", fmt.Errorf("invalid CPU architecture %q", s)
}

// ParseCPU parses the CPU shorthand: "8", "8..", "arm:8", "x86:4..16".
// Count defaults to 2...
func ParseCPU(s string) (CPU, error) {
	var c CPU
	var haveCount, haveArch bool
	for _, tok := range strings.Split(strings.ReplaceAll(s, " ", ""), ":") {
		switch {
		case tok == "":
			return CPU{}, fmt.Errorf("CPU spec contains empty token: %s", s)
		case strings.Contains(tok, "..") || isDigits(tok):
			if haveCount {
				return CPU{}, fmt.Errorf("CPU spec count conflict: %s", s)
			}
			r, err := ParseRange(tok)
			if err != nil {
				return CPU{}, err
			}
			c.Count, haveCount = r, true
		default:
			arch, err := ParseCPUArch(tok)
			if err != nil {
				return CPU{}, fmt.Errorf("invalid CPU architecture: %s", s)
			}
			if haveArch {
				return CPU{}, fmt.Errorf("CPU spec arch conflict: %s", s)
			}
			c.Arch, haveArch = arch, true
		}
	}
	if !haveCount {
		c.Count = Range{Min: f64(2)}
	}
	return c, nil
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !unicode.IsDigit(r) {
			return false
		}
	}
	return true
}

// ParseGPU parses dstack's GPU shorthand: tokens separated by `:` are a
// vendor (`nvidia`, `amd`, `tpu`, ...), names (`A100,H100`), per-GPU memory
// (`24GB..`) and a count (`2`, `1..8`), each at most once; a bare number is
// a count ("0" = no GPU). Count defaults to 1.. when not given.
func ParseGPU(s string) (GPU, error) {
	var g GPU
	var haveVendor, haveName, haveMem, haveCount bool
	for _, tok := range strings.Split(strings.Join(strings.Fields(s), ""), ":") {
		if tok == "" {
			return GPU{}, fmt.Errorf("GPU spec contains empty token: %s", s)
		}
		if v, err := ParseGPUVendor(tok); err == nil {
			if haveVendor {
				return GPU{}, fmt.Errorf("GPU spec vendor conflict: %s", s)
			}
			g.Vendor, haveVendor = v, true
			continue
		}
		first := []rune(tok)[0]
		switch {
		case unicode.IsLetter(first):
			if haveName {
				return GPU{}, fmt.Errorf("GPU spec name conflict: %s", s)
			}
			names := strings.Split(tok, ",")
			for _, n := range names {
				if n == "" {
					return GPU{}, fmt.Errorf("GPU name can not be empty: %s", s)
				}
			}
			g.Names, haveName = names, true
		case strings.IndexFunc(tok, unicode.IsLetter) >= 0:
			if haveMem {
				return GPU{}, fmt.Errorf("GPU spec memory conflict: %s", s)
			}
			r, err := ParseMemoryRange(tok)
			if err != nil {
				return GPU{}, err
			}
			g.Memory, haveMem = &r, true
		default:
			if haveCount {
				return GPU{}, fmt.Errorf("GPU spec count conflict: %s", s)
			}
			r, err := ParseRange(tok)
			if err != nil {
				return GPU{}, err
			}
			g.Count, haveCount = r, true
		}
	}
	if !haveCount {
		g.Count = Range{Min: f64(1)}
	}
	g.Names = normalizeGPUNames(g.Names)
	return g, nil
}

// normalizeGPUNames strips the deprecated `tpu-` prefix and sorts and
// dedupes the names ("any of" carries no order).
func normalizeGPUNames(names []string) []string {
	if names == nil {
		return nil
	}
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = strings.TrimPrefix(n, "tpu-")
	}
	sort.Strings(out)
	w := 0
	for i, s := range out {
		if i == 0 || s != out[w-1] {
			out[w] = s
			w++
		}
	}
	return out[:w]
}

// ParseComputeCapability parses "7.5" into [7, 5].
func ParseComputeCapability(s string) ([]int, error) {
	parts := strings.Split(strings.TrimSpace(s), ".")
	if len(parts) != 2 {
		return nil, fmt.Errorf("invalid compute capability: %s", s)
	}
	out := make([]int, 2)
	for i, p := range parts {
		v, err := parseInt(p)
		if err != nil {
			return nil, fmt.Errorf("invalid compute capability: %s", s)
		}
		out[i] = int(v)
	}
	return out, nil
}

var portRE = regexp.MustCompile(`^(?:([0-9]+|\*):)?([0-9]+)?$`)

// ParsePort parses a port mapping: "8080" (same port locally), "80:8080"
// (local:container) or "*:8080" (any local port).
func ParsePort(s string) (PortMapping, error) {
	m := portRE.FindStringSubmatch(s)
	if m == nil || m[2] == "" {
		return PortMapping{}, fmt.Errorf("invalid port mapping %q", s)
	}
	cp, err := strconv.Atoi(m[2])
	if err != nil || cp < 1 || cp > 65535 {
		return PortMapping{}, fmt.Errorf("invalid port %s: must be between 1 and 65535", m[2])
	}
	pm := PortMapping{ContainerPort: cp}
	switch m[1] {
	case "":
		pm.LocalPort = &cp
	case "*":
	default:
		lp, err := strconv.Atoi(m[1])
		if err != nil || lp < 1 || lp > 65535 {
			return PortMapping{}, fmt.Errorf("invalid port %s: must be between 1 and 65535", m[1])
		}
		pm.LocalPort = &lp
	}
	return pm, nil
}

// ParseMountPoint parses "name:/path" (network volume) or
// "/host/path:/path" (instance volume; any source containing "/").
func ParseMountPoint(s string) (MountPoint, error) {
	parts := strings.Split(s, ":")
	if len(parts) != 2 {
		return MountPoint{}, fmt.Errorf("invalid mount point format: %s", s)
	}
	src, dst := parts[0], parts[1]
	p, err := CleanMountPath(dst)
	if err != nil {
		return MountPoint{}, err
	}
	if strings.Contains(src, "/") {
		ip, err := CleanMountPath(src)
		if err != nil {
			return MountPoint{}, err
		}
		return MountPoint{InstancePath: ip, Path: p}, nil
	}
	return MountPoint{Name: []string{src}, Path: p}, nil
}

// CleanMountPath checks that p is absolute without ".." and cleans it the
// way Python's PurePosixPath does.
func CleanMountPath(p string) (string, error) {
	if p == "" {
		return "", errors.New("empty path")
	}
	if !strings.HasPrefix(p, "/") {
		return "", fmt.Errorf("path must be absolute: %s", p)
	}
	for _, part := range strings.Split(p, "/") {
		if part == ".." {
			return "", fmt.Errorf(".. are not allowed: %s", p)
		}
	}
	lead := "/"
	if strings.HasPrefix(p, "//") && !strings.HasPrefix(p, "///") {
		lead = "//"
	}
	var kept []string
	for _, part := range strings.Split(p, "/") {
		if part != "" && part != "." {
			kept = append(kept, part)
		}
	}
	return lead + strings.Join(kept, "/"), nil
}

// ParseEntityRef parses "name" or "project/name".
func ParseEntityRef(s string) (EntityRef, error) {
	parts := strings.Split(s, "/")
	for _, p := range parts {
		if p == "" {
			return EntityRef{}, errors.New("invalid entity reference: only `<name>` or `<project>/<name>` formats are allowed")
		}
	}
	switch len(parts) {
	case 1:
		return EntityRef{Name: parts[0]}, nil
	case 2:
		return EntityRef{Project: parts[0], Name: parts[1]}, nil
	}
	return EntityRef{}, errors.New("invalid entity reference: only `<name>` or `<project>/<name>` formats are allowed")
}

func isWinDrive(parts []string) bool {
	return len(parts) > 1 && len(parts[0]) == 1 &&
		((parts[0][0] >= 'a' && parts[0][0] <= 'z') || (parts[0][0] >= 'A' && parts[0][0] <= 'Z')) &&
		(strings.HasPrefix(parts[1], "\\") || strings.HasPrefix(parts[1], "/"))
}

// ParseFileMapping parses "local[:container]"; a Windows drive letter in
// the local path is kept.
func ParseFileMapping(s string) (FileMapping, error) {
	parts := strings.Split(s, ":")
	if isWinDrive(parts) {
		parts = append([]string{parts[0] + ":" + parts[1]}, parts[2:]...)
	}
	var fm FileMapping
	switch len(parts) {
	case 1:
		fm = FileMapping{LocalPath: parts[0], Path: parts[0]}
	case 2:
		fm = FileMapping{LocalPath: parts[0], Path: parts[1]}
	default:
		return FileMapping{}, fmt.Errorf("invalid file path mapping: %s", s)
	}
	if isWindowsAbs(fm.Path) {
		return FileMapping{}, fmt.Errorf("path must be a Unix file path: %s", fm.Path)
	}
	return fm, nil
}

func isWindowsAbs(p string) bool {
	if len(p) >= 3 && p[1] == ':' && (p[2] == '/' || p[2] == '\\') {
		c := p[0]
		return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
	}
	return strings.HasPrefix(p, `\\`) || strings.HasPrefix(p, "//") && false
}

// ParseRepo parses the repo shorthand "<local path or URL>[:<container path>]".
func ParseRepo(s string) (Repo, error) {
	parts := strings.Split(s, ":")
	isURL := false
	if len(parts) > 1 {
		if strings.Contains(parts[0], "@") || strings.HasPrefix(parts[1], "//") {
			parts = append([]string{parts[0] + ":" + parts[1]}, parts[2:]...)
			isURL = true
		} else if isWinDrive(parts) {
			parts = append([]string{parts[0] + ":" + parts[1]}, parts[2:]...)
		}
	}
	r := Repo{Path: ".", IfExists: "error"}
	switch len(parts) {
	case 1, 2:
		if isURL {
			r.URL = parts[0]
		} else {
			r.LocalPath = parts[0]
		}
		if len(parts) == 2 {
			r.Path = parts[1]
		}
	default:
		return Repo{}, fmt.Errorf("invalid repo: %s", s)
	}
	return r, nil
}

var secretRefRE = regexp.MustCompile(`\$\{\{\s*secrets\.([A-Za-z0-9_-]+)\s*\}\}`)

// SecretRefs returns the secret names referenced by `${{ secrets.NAME }}`
// in s, in order of first appearance.
func SecretRefs(s string) []string {
	var out []string
	seen := map[string]bool{}
	for _, m := range secretRefRE.FindAllStringSubmatch(s, -1) {
		if !seen[m[1]] {
			seen[m[1]] = true
			out = append(out, m[1])
		}
	}
	return out
}

var resourceNameRE = regexp.MustCompile(`^[a-z][a-z0-9-]{1,40}$`)

// ValidName reports whether s is a valid resource name
// (`^[a-z][a-z0-9-]{1,40}$`).
func ValidName(s string) bool { return resourceNameRE.MatchString(s) }

var groupNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,39}$`)

// GPUVendorsByName returns the vendors a GPU name is known to belong to
// (case-insensitive), from gpuhunt's table of known accelerators; nil for
// unknown names. TPUs are "<version>-<cores>", e.g. v5litepod-8.
func GPUVendorsByName(name string) []string {
	n := strings.ToLower(name)
	var out []string
	for _, v := range []struct {
		vendor string
		names  map[string]bool
	}{{VendorNVIDIA, knownNVIDIA}, {VendorAMD, knownAMD}, {VendorIntel, knownIntel}, {VendorTenstorrent, knownTenstorrent}} {
		if v.names[n] {
			out = append(out, v.vendor)
		}
	}
	if version, cores, ok := strings.Cut(n, "-"); ok && isDigits(cores) && knownTPU[version] {
		out = append(out, VendorGoogle)
	}
	return out
}

func lowerSet(names string) map[string]bool {
	m := map[string]bool{}
	for _, n := range strings.Fields(names) {
		m[strings.ToLower(n)] = true
	}
	return m
}

// Known accelerator names (gpuhunt 3584151).
var (
	knownNVIDIA = lowerSet(`A10 A100 A10G A16 A40 A4000 A4500 A5000 A6000 B200 B300 GB200 GH200 H100 H100NVL
		H200 H200NVL L4 L40 L40S P100 RTX2000Ada RTX2060 RTX2060SUPER RTX2070 RTX2070SUPER RTX2080
		RTX2080SUPER RTX2080Ti RTX3050 RTX3060 RTX3060Ti RTX3070 RTX3070Ti RTX3080 RTX3080Ti RTX3090
		RTX3090Ti RTX4000Ada RTX4060 RTX4060Ti RTX4070 RTX4070SUPER RTX4070Ti RTX4070TiSUPER RTX4080
		RTX4080SUPER RTX4090 RTX5060 RTX5060Ti RTX5070 RTX5070Ti RTX5080 RTX5090 RTX6000 RTX6000Ada
		RTXPRO4500 RTXPRO6000 T4 V100`)
	knownAMD         = lowerSet(`MI100 MI210 MI250 MI250X MI300A MI300X MI308X MI325X MI350X MI355X`)
	knownIntel       = lowerSet(`Gaudi Gaudi2 Gaudi3`)
	knownTenstorrent = lowerSet(`n150 n300 p100a p150 p300 tt-galaxy-bh tt-galaxy-wh`)
	knownTPU         = lowerSet(`v2 v3 v4 v5litepod v5p v6e`)
)
