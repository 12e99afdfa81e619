package sshfleet

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"

	"golang.org/x/crypto/ssh"

	"hoist/backends"
)

// Compile-time guard.
var _ backends.HostAccess = (*Backend)(nil)

// SSHAccess returns the login to inst's host as the backend itself uses it:
// port defaulted, the private key read (the host's PrivateKey, else its
// IdentityFile, else the backend's DefaultKey), the host pinned (the keys its
// spec gives, else the key recorded at first contact, plus the backend's
// KnownHosts), and its ProxyJump resolved the same way. A host that was never
// reached and names no key of its own cannot be pinned yet: that is a
// transient error wrapping backends.ErrUnreachable.
func (b *Backend) SSHAccess(ctx context.Context, inst backends.Instance) (backends.SSHHost, error) {
	r, ok := b.record(inst.ID)
	if !ok {
		return backends.SSHHost{}, fmt.Errorf("sshfleet: instance %s: %w", inst.ID, backends.ErrNotFound)
	}
	h, err := b.access(r.Host, r.HostKey, r.JumpKey)
	if err != nil {
		return backends.SSHHost{}, fmt.Errorf("sshfleet: instance %s: %w", inst.ID, err)
	}
	return h, nil
}

// access resolves h as tunnelConfig does, into a self-contained SSHHost:
// recorded and recordedJump are the host keys seen at first contact of the
// host and of its jump host.
func (b *Backend) access(h backends.SSHHost, recorded, recordedJump string) (backends.SSHHost, error) {
	if len(h.PrivateKey) == 0 && h.IdentityFile == "" {
		h.PrivateKey = b.cfg.DefaultKey
	}
	key, err := privateKey(h)
	if err != nil {
		return backends.SSHHost{}, err
	}
	out := backends.SSHHost{Hostname: h.Hostname, Port: h.Port, User: h.User, PrivateKey: key, KnownHosts: h.KnownHosts}
	if out.Port == 0 {
		out.Port = 22
	}
	if b.cfg.KnownHosts != "" {
		out.KnownHosts = strings.TrimLeft(strings.TrimRight(out.KnownHosts, "\n")+"\n"+b.cfg.KnownHosts, "\n")
	}
	switch {
	case len(h.HostKeys) > 0:
		out.HostKeys = slices.Clone(h.HostKeys)
	case recorded != "":
		out.HostKeys = []string{recorded}
	case out.KnownHosts == "":
		return backends.SSHHost{}, backends.Transient(fmt.Errorf("host %s: %w: its host key is not known yet (never reached)", h.Hostname, backends.ErrUnreachable))
	}
	if h.ProxyJump != nil {
		j, err := b.access(*h.ProxyJump, recordedJump, "")
		if err != nil {
			return backends.SSHHost{}, fmt.Errorf("proxy jump: %w", err)
		}
		out.ProxyJump = &j
	}
	return out, nil
}

// privateKey returns h's private key, read from its IdentityFile when
// PrivateKey is empty, checked to parse.
func privateKey(h backends.SSHHost) ([]byte, error) {
	key := h.PrivateKey
	if len(key) == 0 {
		if h.IdentityFile == "" {
			return nil, backends.Stalled(fmt.Errorf("ssh host %s: no identity file or private key", h.Hostname))
		}
		b, err := os.ReadFile(h.IdentityFile)
		if err != nil {
			return nil, backends.Stalled(fmt.Errorf("ssh host %s: identity file: %w", h.Hostname, err))
		}
		key = b
	}
	if _, err := ssh.ParsePrivateKey(key); err != nil {
		return nil, backends.Stalled(fmt.Errorf("ssh host %s: private key: %w", h.Hostname, err))
	}
	return slices.Clone(key), nil
}
