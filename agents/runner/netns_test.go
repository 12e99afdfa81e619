package runner_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"hoist/agents/runner"
)

// TestHoldNetns_refusesAFileThatIsNoNamespace checks that --hold-netns
// fails on a path that is no namespace file, rather than waiting.
func TestHoldNetns_refusesAFileThatIsNoNamespace(t *testing.T) {
	p := filepath.Join(t.TempDir(), "plain")
	if err := os.WriteFile(p, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	err := runner.Main(t.Context(), []string{"--hold-netns", p}, "test", io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "no namespace file") {
		t.Fatalf("Main(--hold-netns %s) = %v, want an error saying it is no namespace file", p, err)
	}
}

// TestHoldNetns_inTheNamespaceAlreadyWaitsUntilStopped checks that a
// process already in the namespace holds it (waits, serves nothing) until
// it is stopped, and then ends cleanly. (Joining another namespace, which
// re-executes the process, is tested through the shim: agents/shim,
// netns_test.go.)
func TestHoldNetns_inTheNamespaceAlreadyWaitsUntilStopped(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- runner.Main(ctx, []string{"--hold-netns", "/proc/self/ns/net"}, "test", io.Discard, io.Discard)
	}()
	select {
	case err := <-done:
		t.Fatalf("Main returned %v before it was stopped", err)
	default:
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Main after the stop = %v, want nil", err)
	}
}
