package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// InCI reports whether the tests run under CI, where a missing dependency is a
// failure rather than a skip.
func InCI() bool { return os.Getenv("CI") == "true" }

// Missing ends the test for want of a dependency: it is skipped with a loud
// "SKIP:" message on a developer's machine and fails under CI=true, where
// every dependency must be there. Every test that needs something outside Go
// ends through here (or Require), so that no skip ignores CI.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if InCI() {
		t.Fatalf("missing dependency under CI=true: %s", msg)
	}
	t.Skip("SKIP: " + msg)
}

// deps are the programs tests run, with the Debian package that has each.
var deps = map[string]string{
	"blkid":           "util-linux",
	"busybox":         "busybox-static",
	"chromium":        "chromium",
	"docker":          "docker.io",
	"docker-registry": "docker-registry",
	"git":             "git",
	"ip":              "iproute2",
	"losetup":         "mount",
	"mkfs.ext4":       "e2fsprogs",
	"mount":           "mount",
	"nsenter":         "util-linux",
	"sshd":            "openssh-server",
	"wrk":             "wrk",
}

// Require returns the path of the program what (a name from the table above,
// or an absolute path), ending the test through Missing when it is absent.
func Require(t testing.TB, what string) string {
	t.Helper()
	p, err := exec.LookPath(what)
	if err == nil {
		return p
	}
	if pkg, ok := deps[what]; ok {
		Missing(t, "%s not found (apt-get install %s): %v", what, pkg, err)
	} else {
		Missing(t, "%s not found: %v", what, err)
	}
	return ""
}
