package testenv

import (
	"os"
	"os/exec"
	"testing"
)

// Tmpfs mounts a tmpfs of size (mount's size= option, e.g. "32m") on a new
// temporary directory and returns it; it is unmounted when the test ends
// (lazily, so a process still holding a file there cannot keep it). It
// needs root and mount: without them the test fails under CI=true and is
// skipped otherwise (Missing).
func Tmpfs(t testing.TB, size string) string {
	t.Helper()
	Require(t, "mount")
	if os.Geteuid() != 0 {
		Missing(t, "mounting a tmpfs needs root")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Fatalf("mount tmpfs on %s: %v: %s", dir, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}
