package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckStatic_acceptsOnlyStaticELF checks the test the agent locator
// applies before the running hoist serves as the runner in containers.
func TestCheckStatic_acceptsOnlyStaticELF(t *testing.T) {
	dir := t.TempDir()
	static := filepath.Join(dir, "static")
	cmd := exec.Command("go", "build", "-o", static, "hoist/cmd/hoist-runner")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	text := filepath.Join(dir, "text")
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

// TestAgentByName_runsTheRunnerUnderItsName checks that the hoist binary,
// invoked as hoist-runner (as the shim's containers do), is the runner.
func TestAgentByName_runsTheRunnerUnderItsName(t *testing.T) {
	for _, tc := range []struct {
		argv0 string
		ran   bool
	}{
		{"/hoist/bin/hoist-runner", true},
		{"hoist-shim", true},
		{"/usr/local/bin/hoist", false},
	} {
		t.Run(tc.argv0, func(t *testing.T) {
			ran, err := agentByName([]string{tc.argv0, "--version"})
			if ran != tc.ran || err != nil {
				t.Fatalf("agentByName(%s --version) = %v, %v; want %v, nil", tc.argv0, ran, err, tc.ran)
			}
		})
	}
}
