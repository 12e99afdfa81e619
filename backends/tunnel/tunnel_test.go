package tunnel_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"
	"time"

	gliderssh "github.com/gliderlabs/ssh"
	"golang.org/x/crypto/ssh"

	"hoist/backends"
	"hoist/backends/tunnel"
)

func newSigner(t *testing.T) ssh.Signer {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// server is an in-process SSH server that accepts only the test's client
// key, runs session commands with sh -c and allows forwarding to 127.0.0.1.
type server struct {
	addr    string
	hostKey ssh.Signer
}

func startServer(t *testing.T, client ssh.PublicKey) server {
	t.Helper()
	hostKey := newSigner(t)
	srv := &gliderssh.Server{
		HostSigners: []gliderssh.Signer{hostKey},
		PublicKeyHandler: func(_ gliderssh.Context, key gliderssh.PublicKey) bool {
			return gliderssh.KeysEqual(key, client)
		},
		LocalPortForwardingCallback: func(_ gliderssh.Context, host string, _ uint32) bool {
			return host == "127.0.0.1"
		},
		ChannelHandlers: map[string]gliderssh.ChannelHandler{
			"session":      gliderssh.DefaultSessionHandler,
			"direct-tcpip": gliderssh.DirectTCPIPHandler,
		},
		Handler: func(s gliderssh.Session) {
			cmd := exec.Command("sh", "-c", s.RawCommand())
			cmd.Stdin, cmd.Stdout, cmd.Stderr = s, s, s.Stderr()
			err := cmd.Run()
			var ee *exec.ExitError
			switch {
			case errors.As(err, &ee):
				_ = s.Exit(ee.ExitCode())
			case err != nil:
				_ = s.Exit(255)
			default:
				_ = s.Exit(0)
			}
		},
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	return server{addr: ln.Addr().String(), hostKey: hostKey}
}

func TestDial_forwardsHTTPThroughTheConnection(t *testing.T) {
	clientKey := newSigner(t)
	srv := startServer(t, clientKey.PublicKey())
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from %s", r.URL.Path)
	}))
	defer web.Close()

	c, err := tunnel.Dial(t.Context(), tunnel.Config{
		Addr: srv.addr, User: "u", Signers: []ssh.Signer{clientKey},
		HostKeys: []ssh.PublicKey{srv.hostKey.PublicKey()},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	hc := c.HTTPClient()
	for i := range 3 { // connections are reused or redialed through the tunnel
		resp, err := hc.Get(web.URL + "/shim")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(body) != "hello from /shim" {
			t.Fatalf("request %d: body %q", i, body)
		}
	}
	// Forwarding is the server's decision: a refused destination is an error,
	// not a hang.
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if _, err := c.DialContext(ctx, "tcp", "127.0.0.2:1"); err == nil {
		t.Error("forwarding to a refused destination succeeded")
	}
}

func TestDial_hostKeyPolicy(t *testing.T) {
	clientKey := newSigner(t)
	srv := startServer(t, clientKey.PublicKey())
	other := newSigner(t).PublicKey()
	knownHosts := func(k ssh.PublicKey) string {
		return "# pinned\n" + strings.TrimSpace(fmt.Sprintf("%s %s", knownHostsAddr(srv.addr), tunnel.MarshalHostKey(k))) + "\n"
	}
	tests := []struct {
		name      string
		cfg       tunnel.Config
		wantErr   error
		wantStall bool
	}{
		{name: "pinned key accepted", cfg: tunnel.Config{HostKeys: []ssh.PublicKey{srv.hostKey.PublicKey()}}},
		{name: "any of several pinned keys accepted", cfg: tunnel.Config{HostKeys: []ssh.PublicKey{other, srv.hostKey.PublicKey()}}},
		{name: "wrong pinned key refused as stalled", cfg: tunnel.Config{HostKeys: []ssh.PublicKey{other}, TrustOnFirstUse: true}, wantErr: backends.ErrHostKeyMismatch, wantStall: true},
		{name: "known_hosts entry accepted", cfg: tunnel.Config{KnownHosts: knownHosts(srv.hostKey.PublicKey())}},
		{name: "changed key in known_hosts refused", cfg: tunnel.Config{KnownHosts: knownHosts(other), TrustOnFirstUse: true}, wantErr: backends.ErrHostKeyMismatch, wantStall: true},
		{name: "unknown host trusted on first use", cfg: tunnel.Config{TrustOnFirstUse: true}},
		{name: "unknown host refused without trust on first use", cfg: tunnel.Config{}, wantErr: backends.ErrHostKeyMismatch, wantStall: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg
			cfg.Addr, cfg.User, cfg.Signers = srv.addr, "u", []ssh.Signer{clientKey}
			c, err := tunnel.Dial(t.Context(), cfg)
			if tt.wantErr == nil {
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				if got := tunnel.MarshalHostKey(c.HostKey()); got != tunnel.MarshalHostKey(srv.hostKey.PublicKey()) {
					t.Errorf("HostKey = %s, want the server's", got)
				}
				return
			}
			if err == nil {
				c.Close()
				t.Fatal("connected, want an error")
			}
			if !errors.Is(err, tt.wantErr) || backends.IsStalled(err) != tt.wantStall {
				t.Errorf("err = %v (kind %s), want %v stalled=%v", err, backends.KindOf(err), tt.wantErr, tt.wantStall)
			}
		})
	}
}

func knownHostsAddr(addr string) string {
	host, port, _ := net.SplitHostPort(addr)
	return fmt.Sprintf("[%s]:%s", host, port)
}

func TestDial_deadlines(t *testing.T) {
	// A listener that accepts and never speaks SSH: the handshake must give
	// up at its deadline even though ctx has none.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	start := time.Now()
	_, err = tunnel.Dial(context.Background(), tunnel.Config{
		Addr: ln.Addr().String(), User: "u", Signers: []ssh.Signer{newSigner(t)},
		TrustOnFirstUse: true, HandshakeTimeout: 300 * time.Millisecond,
	})
	if !errors.Is(err, backends.ErrUnreachable) || backends.KindOf(err) != backends.KindTransient {
		t.Fatalf("silent server: err = %v, want transient unreachable", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("handshake deadline not applied: took %s", d)
	}

	// Nothing listening: unreachable, transient.
	dead, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := dead.Addr().String()
	dead.Close()
	_, err = tunnel.Dial(t.Context(), tunnel.Config{Addr: addr, User: "u", Signers: []ssh.Signer{newSigner(t)}, TrustOnFirstUse: true})
	if !errors.Is(err, backends.ErrUnreachable) || backends.KindOf(err) != backends.KindTransient {
		t.Errorf("closed port: err = %v, want transient unreachable", err)
	}
}

func TestDial_refusedKeyIsStalled(t *testing.T) {
	srv := startServer(t, newSigner(t).PublicKey())
	_, err := tunnel.Dial(t.Context(), tunnel.Config{Addr: srv.addr, User: "u", Signers: []ssh.Signer{newSigner(t)}, TrustOnFirstUse: true})
	if !backends.IsStalled(err) || errors.Is(err, backends.ErrUnreachable) {
		t.Errorf("err = %v (kind %s), want stalled authentication error", err, backends.KindOf(err))
	}
}

func TestDial_proxyJump(t *testing.T) {
	clientKey := newSigner(t)
	jump := startServer(t, clientKey.PublicKey())
	target := startServer(t, clientKey.PublicKey())
	c, err := tunnel.Dial(t.Context(), tunnel.Config{
		Addr: target.addr, User: "u", Signers: []ssh.Signer{clientKey},
		HostKeys: []ssh.PublicKey{target.hostKey.PublicKey()},
		Jump: &tunnel.Config{Addr: jump.addr, User: "j", Signers: []ssh.Signer{clientKey},
			HostKeys: []ssh.PublicKey{jump.hostKey.PublicKey()}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := tunnel.MarshalHostKey(c.HostKey()); got != tunnel.MarshalHostKey(target.hostKey.PublicKey()) {
		t.Errorf("connected to the wrong host: key %s", got)
	}
	out, err := c.Run(t.Context(), "echo via-jump", nil)
	if err != nil || strings.TrimSpace(string(out)) != "via-jump" {
		t.Errorf("Run = %q, %v", out, err)
	}

	// A wrong key on the jump host stops there, as stalled.
	_, err = tunnel.Dial(t.Context(), tunnel.Config{
		Addr: target.addr, User: "u", Signers: []ssh.Signer{clientKey}, TrustOnFirstUse: true,
		Jump: &tunnel.Config{Addr: jump.addr, User: "j", Signers: []ssh.Signer{clientKey},
			HostKeys: []ssh.PublicKey{target.hostKey.PublicKey()}},
	})
	if !errors.Is(err, backends.ErrHostKeyMismatch) {
		t.Errorf("wrong jump host key: err = %v", err)
	}
}

func TestClient_RunAndUpload(t *testing.T) {
	clientKey := newSigner(t)
	srv := startServer(t, clientKey.PublicKey())
	c, err := tunnel.Dial(t.Context(), tunnel.Config{Addr: srv.addr, User: "u", Signers: []ssh.Signer{clientKey}, TrustOnFirstUse: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	path := t.TempDir() + "/sub dir/it's.sh"
	if err := c.Upload(t.Context(), path, 0o755, strings.NewReader("#!/bin/sh\necho uploaded\n")); err != nil {
		t.Fatal(err)
	}
	out, err := c.Run(t.Context(), tunnel.Quote(path), nil)
	if err != nil || string(out) != "uploaded\n" {
		t.Errorf("run uploaded script: %q, %v", out, err)
	}
	_, err = c.Run(t.Context(), "echo oops >&2; exit 3", nil)
	var ee *tunnel.ExitError
	if !errors.As(err, &ee) || ee.Status != 3 || ee.Stderr != "oops" {
		t.Errorf("failing command: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := c.Run(ctx, "sleep 5", nil); err == nil || time.Since(start) > 10*time.Second {
		t.Errorf("cancelled command: err %v after %s", err, time.Since(start))
	}
}
