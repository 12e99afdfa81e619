package testenv

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
)

// BusyboxImage is the local image that tests and the quickstart run.
const BusyboxImage = "hoist-e2e/busybox:latest"

var (
	imageOnce sync.Once
	imageErr  error
	imageOut  []byte
)

// Docker makes sure the Docker Engine answers and the busybox test image
// exists, building it once per test binary with busybox-image.sh. Outside CI a
// missing engine skips the test; in CI it fails it.
func Docker(t testing.TB) string {
	t.Helper()
	if out, err := exec.Command("docker", "version", "--format", "{{.Server.Version}}").CombinedOutput(); err != nil {
		Missing(t, "docker engine not reachable: %v: %s", err, out)
	}
	imageOnce.Do(func() {
		_, file, _, _ := runtime.Caller(0)
		script := filepath.Join(filepath.Dir(file), "busybox-image.sh")
		imageOut, imageErr = exec.Command("bash", script, BusyboxImage).CombinedOutput()
	})
	if imageErr != nil {
		t.Fatalf("build %s: %v: %s", BusyboxImage, imageErr, imageOut)
	}
	return BusyboxImage
}
