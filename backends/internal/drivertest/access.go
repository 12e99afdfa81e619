package drivertest

import (
	"context"
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
