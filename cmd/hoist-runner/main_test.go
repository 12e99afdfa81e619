package main_test

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestBinaries_buildStaticForAmd64AndArm64 cross-builds both agents with
// CGO_ENABLED=0 for linux/amd64 and linux/arm64 and checks that each is a
// static executable (no ELF interpreter) of the right machine.
func TestBinaries_buildStaticForAmd64AndArm64(t *testing.T) {
	if testing.Short() {
		t.Skip("SKIP: cross-builds both agents (-short)")
	}
	machines := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}
	for _, arch := range []string{"amd64", "arm64"} {
		for _, bin := range []string{"hoist-shim", "hoist-runner"} {
			t.Run(arch+"/"+bin, func(t *testing.T) {
				out := filepath.Join(t.TempDir(), bin)
				cmd := exec.Command("go", "build", "-trimpath", "-o", out, "hoist/cmd/"+bin)
				cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
				if b, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("go build: %v\n%s", err, b)
				}
				f, err := elf.Open(out)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				if f.Machine != machines[arch] {
					t.Errorf("machine = %v, want %v", f.Machine, machines[arch])
				}
				for _, p := range f.Progs {
					if p.Type == elf.PT_INTERP {
						t.Errorf("%s for %s has an ELF interpreter: not static", bin, arch)
					}
				}
			})
		}
	}
}
