package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"hoist/agents/api"
	"hoist/backends/tunnel"
	"hoist/e2e/testenv"
	"hoist/web"
)

// TestGateway_reachesReplicasOverSSH serves a replica on this host's
// loopback and has the gateway reach it through sshd on another loopback
// address, its host key pinned, the connection pooled.
func TestGateway_reachesReplicasOverSSH(t *testing.T) {
	key := testenv.NewSSHKey(t, t.TempDir(), "id")
	sshd := testenv.StartSSHD(t, "127.0.79.1", key.Signer.PublicKey())
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "via ssh") }))
	defer up.Close()

	pool := &sshPool{log: slog.New(slog.DiscardHandler), m: map[string]*tunnel.Client{}}
	defer pool.close()
	g, err := web.NewGatewayServer(web.GatewayServerOptions{StateDir: t.TempDir(), AdminToken: "t", DialSSH: pool.dial})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	pub := httptest.NewServer(g.PublicHandler())
	defer pub.Close()

	login := api.GatewaySSH{Hostname: sshd.IP, Port: sshd.Port, User: testenv.LoginUser(t), PrivateKey: string(key.PEM),
		HostKeys: []string{tunnel.MarshalHostKey(sshd.HostKey())}}
	wrongPin := login
	wrongPin.HostKeys = []string{tunnel.MarshalHostKey(key.Signer.PublicKey())}
	if err := g.Apply(api.GatewayConfig{Version: 1, Domain: "example.test", Services: []api.GatewayServiceConfig{
		{Project: "main", Run: "svc", Host: "svc.example.test", MinReplicas: 1,
			Replicas: []api.GatewayReplica{{JobID: "j", Addr: up.Listener.Addr().String(), SSH: &login}}},
		{Project: "main", Run: "pinned", Host: "pinned.example.test", MinReplicas: 1,
			Replicas: []api.GatewayReplica{{JobID: "k", Addr: up.Listener.Addr().String(), SSH: &wrongPin}}},
	}}); err != nil {
		t.Fatal(err)
	}
	get := func(host string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, pub.URL+"/", nil)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for range 3 {
		if code, body := get("svc.example.test"); code != 200 || body != "via ssh" {
			t.Fatalf("through ssh: %d %q", code, body)
		}
	}
	if n := len(pool.m); n != 1 {
		t.Fatalf("%d ssh connections, want one pooled", n)
	}
	if code, _ := get("pinned.example.test"); code != http.StatusBadGateway {
		t.Fatalf("a host with another key than pinned: %d, want 502", code)
	}
	if st := g.Status(); len(st.Errors) != 1 || st.Errors[0].Host != sshd.IP {
		t.Fatalf("status errors %+v, want the mispinned host's", st.Errors)
	}
}

// TestGateway_commandServesAndStopsWhenCancelled runs `hoist gateway`'s
// body: the admin socket (0600) answers with the token of the token file,
// and the command returns once its context ends (SIGTERM in main).
func TestGateway_commandServesAndStopsWhenCancelled(t *testing.T) {
	dir := t.TempDir()
	tok := filepath.Join(dir, "token")
	if err := os.WriteFile(tok, []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "admin.sock")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- runGateway(ctx, gatewayOptions{stateDir: filepath.Join(dir, "state"), adminSocket: sock, tokenFile: tok,
			http: "127.0.79.2:0", https: "127.0.79.2:0"}, io.Discard)
	}()
	c := api.NewGatewayClient(api.UnixAddr(sock), nil, "secret")
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := c.Health(ctx); err == nil {
			break
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatal("the gateway's admin socket does not answer")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if fi, err := os.Stat(sock); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("admin socket: %v %v", fi, err)
	}
	if _, err := c.PutConfig(ctx, api.GatewayConfig{Version: 3, Domain: "example.test"}); err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the gateway did not stop")
	}
}
