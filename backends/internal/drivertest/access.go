package drivertest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"hoist/backends"
	"hoist/backends/tunnel"
)

// DialAccess dials the host h describes (as backends.HostAccess returns it)
// strictly: the private key it carries, the host (and jump host) pinned by
// its HostKeys or KnownHosts, no trust on first use. It checks that the
// access is self-contained: no identity file, a key that parses. The client
// closes at the end of the test.
func DialAccess(t *testing.T, h backends.SSHHost) *tunnel.Client {
	t.Helper()
	cfg := accessConfig(t, h)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c, err := tunnel.Dial(ctx, cfg)
	if err != nil {
		t.Fatalf("dial %s with its access: %v", cfg.Addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func accessConfig(t *testing.T, h backends.SSHHost) tunnel.Config {
	t.Helper()
	if h.IdentityFile != "" || len(h.PrivateKey) == 0 {
		t.Fatalf("access to %s: identity file %q, %d bytes of private key; want the key read", h.Hostname, h.IdentityFile, len(h.PrivateKey))
	}
	if len(h.HostKeys) == 0 && h.KnownHosts == "" {
		t.Fatalf("access to %s: the host key is not pinned", h.Hostname)
	}
	signer, err := ssh.ParsePrivateKey(h.PrivateKey)
	if err != nil {
		t.Fatalf("access to %s: private key: %v", h.Hostname, err)
	}
	pinned, err := tunnel.ParseHostKeys(h.HostKeys)
	if err != nil {
		t.Fatalf("access to %s: host keys: %v", h.Hostname, err)
	}
	cfg := tunnel.Config{
		Addr: tunnel.HostPort(h.Hostname, h.Port), User: h.User, Signers: []ssh.Signer{signer},
		HostKeys: pinned, KnownHosts: h.KnownHosts,
	}
	if h.ProxyJump != nil {
		j := accessConfig(t, *h.ProxyJump)
		cfg.Jump = &j
	}
	return cfg
}

// GatewayBinary returns the hoist binary a test runs as `hoist gateway`:
// $HOIST_GATEWAY_BINARY when set and arch is this machine's (the real hoist,
// a static build), else the stand-in of testdata/fakegateway built for
// linux/arch in the test's temp dir. The stand-in takes the gateway's
// command line, answers the admin API's health check on the admin socket
// with the token file's bearer token, and answers any request on its --http
// listener.
func GatewayBinary(t *testing.T, arch string) string {
	t.Helper()
	if p := os.Getenv("HOIST_GATEWAY_BINARY"); p != "" && arch == runtime.GOARCH {
		return p
	}
	_, file, _, _ := runtime.Caller(0)
	out := filepath.Join(t.TempDir(), "hoist")
	cmd := exec.Command("go", "build", "-trimpath", "-o", out, "./testdata/fakegateway")
	cmd.Dir = filepath.Dir(file)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the gateway stand-in for %s: %v: %s", arch, err, b)
	}
	return out
}
