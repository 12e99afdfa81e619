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
)

func TestHostFacts_check(t *testing.T) {
	good := hostFacts{OS: "Linux", Arch: "x86_64", Home: "/root", Dir: "/root/.hoist/i", Tar: "/usr/bin/tar", Docker: "24.0.7"}
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

func TestParseFacts(t *testing.T) {
	out := []byte("os=Linux\narch=aarch64\nhome=/home/u\ndir=/home/u/.hoist/i\ntar=/bin/tar\nsum:hoist-shim=abc\nsum:hoist-runner=\n" +
		"docker=27.3.1\n")
	f := parseFacts(out)
	if err := f.check(); err != nil {
		t.Fatal(err)
	}
	if f.Sums["hoist-shim"] != "abc" || f.Sums["hoist-runner"] != "" {
		t.Errorf("sums of the agents on the host = %v", f.Sums)
	}
	if goArch(f.Arch) != "arm64" || f.Docker != "27.3.1" || f.Dir != "/home/u/.hoist/i" {
		t.Errorf("facts = %+v", f)
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
