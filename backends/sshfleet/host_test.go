package sshfleet

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"hoist/backends"
	"hoist/backends/internal/agentbin"
	"hoist/backends/offers"
)

func TestHostFacts_check(t *testing.T) {
	good := hostFacts{OS: "Linux", Arch: "x86_64", Home: "/root", Dir: "/root/.hoist/i", Tar: "/usr/bin/tar", Docker: "24.0.7", CPUs: 8, MemKB: 32 << 20}
	tests := []struct {
		name   string
		change func(*hostFacts)
		ok     bool
	}{
		{"linux amd64 with docker", func(*hostFacts) {}, true},
		{"linux arm64", func(f *hostFacts) { f.Arch = "aarch64" }, true},
		{"not linux", func(f *hostFacts) { f.OS = "Darwin" }, false},
		{"unsupported architecture", func(f *hostFacts) { f.Arch = "riscv64" }, false},
		{"docker not usable", func(f *hostFacts) { f.Docker, f.DockerError = "", "permission denied while trying to connect" }, false},
		{"no home", func(f *hostFacts) { f.Home, f.Dir = "", "" }, false},
		{"no tar", func(f *hostFacts) { f.Tar = "" }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := good
			tt.change(&f)
			err := f.check()
			if tt.ok != (err == nil) {
				t.Fatalf("check = %v, want ok=%v", err, tt.ok)
			}
			if err != nil && (!errors.Is(err, backends.ErrUnsupportedHost) || !backends.IsStalled(err)) {
				t.Errorf("check = %v (kind %s), want stalled ErrUnsupportedHost", err, backends.KindOf(err))
			}
		})
	}
}

func TestParseFacts_offer(t *testing.T) {
	out := []byte("os=Linux\narch=aarch64\nhome=/home/u\ndir=/home/u/.hoist/i\ntar=/bin/tar\nsum:hoist-shim=abc\nsum:hoist-runner=\nhostname=gpu-1\ncpus=64\nmem_kb=263856736\ndisk_kb=1031018508\n" +
		"docker=27.3.1\ngpu=NVIDIA H100 80GB HBM3, 81559\ngpu=NVIDIA H100 80GB HBM3, 81559\n")
	f := parseFacts(out)
	if err := f.check(); err != nil {
		t.Fatal(err)
	}
	if f.Sums["hoist-shim"] != "abc" || f.Sums["hoist-runner"] != "" {
		t.Errorf("sums of the agents on the host = %v", f.Sums)
	}
	o := f.offer("ssh")
	if o.Backend != "ssh" || o.Instance != "gpu-1" || o.Region != Region || o.CPUs != 64 || o.CPUArch != offers.ArchARM {
		t.Errorf("offer = %+v", o)
	}
	if o.GPUCount != 2 || o.GPUName != "H100" || o.GPUVendor != offers.VendorNVIDIA || o.GPUMemoryGB < 79 {
		t.Errorf("gpus = %d × %s %s %.0f GB", o.GPUCount, o.GPUVendor, o.GPUName, o.GPUMemoryGB)
	}
	if o.MemoryGB < 251 || o.MemoryGB > 252 || o.DiskGB < 983 {
		t.Errorf("memory %.1f GB, disk %.1f GB", o.MemoryGB, o.DiskGB)
	}
	if got := offers.Filter([]offers.Offer{o}, offers.Query{GPUNames: []string{"H100"}, GPUCount: offers.AtLeast(2)}); len(got) != 1 {
		t.Errorf("the host's offer does not match a query for 2×H100")
	}
}

// TestCheckStatic_refusesDynamicAgents checks the test deploy applies to
// the agent binaries before uploading them to a host.
func TestCheckStatic_refusesDynamicAgents(t *testing.T) {
	static, _ := agentbin.Build(t, runtime.GOARCH)
	text := filepath.Join(t.TempDir(), "script")
	if err := os.WriteFile(text, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path, want string
	}{
		{"a static binary is accepted", static, ""},
		{"a dynamic binary is refused", "/bin/sh", "dynamically linked"},
		{"a script is refused", text, "not an ELF executable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkStatic(tc.path)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("checkStatic = %v, want nil", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("checkStatic = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
