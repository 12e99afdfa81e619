package local_test

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"hoist/agents/api"
	"hoist/backends"
	"hoist/backends/internal/agentbin"
	"hoist/backends/local"
	"hoist/backends/offers"
	"hoist/e2e/testenv"
)

// buildHoist builds the hoist binary (the gateway's) into the test's
// temporary directory.
func buildHoist(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "hoist")
	cmd := exec.Command("go", "build", "-o", out, "./cmd/hoist")
	cmd.Dir = filepath.Join("..", "..")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build hoist: %v: %s", err, b)
	}
	return out
}

// freePort returns a port free on ip now.
func freePort(t *testing.T, ip string) int {
	t.Helper()
	ln, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func gatewayPid(t *testing.T, dir, id string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "instances", id, "gw", "gateway.pid"))
	if err != nil {
		t.Fatalf("pid file: %v", err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

func alive(pid int) bool {
	st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(st), ')')
	return i < 0 || i+2 >= len(st) || st[i+2] != 'Z'
}

func TestGateway_startsOutlivesTheBackendAndStops(t *testing.T) {
	testenv.Docker(t)
	_, runner := agentbin.Build(t, runtime.GOARCH)
	hoist := buildHoist(t)
	const ip = "127.0.78.1"
	dir := t.TempDir()
	cfg := local.Config{RunnerBinary: runner, StateDir: dir, Records: recordsFor(t, dir), GatewayBinary: hoist,
		GatewayAddress: ip, GatewayHTTPPort: freePort(t, ip), GatewayHTTPSPort: freePort(t, ip)}
	b, err := local.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	ctx := t.Context()
	os1, _ := b.Offers(ctx, offers.Query{CPU: offers.AtLeast(1)})
	inst, err := b.Create(ctx, backends.InstanceSpec{ID: "gw-host", Offer: os1[0], Gateway: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Terminate(context.Background(), inst.ID) })

	ep, err := b.StartGateway(ctx, inst, backends.GatewayProcess{Token: "tok-1"})
	if err != nil {
		t.Fatal(err)
	}
	if ep.PublicAddr != ip || ep.HTTPPort != cfg.GatewayHTTPPort || ep.HTTPSPort != cfg.GatewayHTTPSPort {
		t.Fatalf("endpoint %+v", ep)
	}
	pid := gatewayPid(t, dir, inst.ID)

	// The server configures it through the instance's connection.
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("hello")) }))
	defer up.Close()
	conn, err := b.Connect(ctx, inst)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	acme := testenv.StartACME(t, testenv.ACMEOptions{ResolveTo: ip, HTTPPort: ep.HTTPPort, TLSPort: ep.HTTPSPort})
	gc := api.NewGatewayClient(ep.AdminURL, conn.HTTPClient(), "tok-1")
	if _, err := gc.PutConfig(ctx, api.GatewayConfig{Version: 1, Domain: "example.test",
		TLS: &api.GatewayTLS{ACME: &api.GatewayACME{DirectoryURL: acme.DirectoryURL, CAPEM: acme.CAPEM}},
		Services: []api.GatewayServiceConfig{
			{Project: "main", Run: "svc", Host: "svc.example.test", MinReplicas: 1, Replicas: []api.GatewayReplica{{JobID: "j", Addr: up.Listener.Addr().String()}}},
			{Project: "main", Run: "tls", Host: "tls.example.test", HTTPS: true, MinReplicas: 1, Replicas: []api.GatewayReplica{{JobID: "k", Addr: up.Listener.Addr().String()}}},
		}}); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodGet, "http://"+net.JoinHostPort(ip, strconv.Itoa(ep.HTTPPort))+"/", nil)
	req.Host = "svc.example.test"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("service through the gateway: %d", resp.StatusCode)
	}
	t.Run("a service with https gets a certificate from ACME", func(t *testing.T) {
		deadline := time.Now().Add(60 * time.Second)
		for {
			st, err := gc.Status(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(st.Certificates) == 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no certificate: %+v", st)
			}
			time.Sleep(100 * time.Millisecond)
		}
		hc := &http.Client{Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: acme.Roots()},
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "tcp", net.JoinHostPort(ip, strconv.Itoa(ep.HTTPSPort)))
			},
		}}
		resp, err := hc.Get("https://tls.example.test/")
		if err != nil {
			t.Fatalf("https (verified against the ACME server's root): %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
	})

	t.Run("the same token keeps the running gateway", func(t *testing.T) {
		if _, err := b.StartGateway(ctx, inst, backends.GatewayProcess{Token: "tok-1"}); err != nil {
			t.Fatal(err)
		}
		if got := gatewayPid(t, dir, inst.ID); got != pid {
			t.Fatalf("restarted: pid %d, was %d", got, pid)
		}
	})
	t.Run("a restarted backend finds the gateway running", func(t *testing.T) {
		b.Close()
		if b, err = local.New(cfg); err != nil {
			t.Fatal(err)
		}
		if !alive(pid) {
			t.Fatal("the gateway died with the backend")
		}
		if _, err := b.StartGateway(ctx, inst, backends.GatewayProcess{Token: "tok-1"}); err != nil {
			t.Fatal(err)
		}
		if got := gatewayPid(t, dir, inst.ID); got != pid {
			t.Fatalf("restarted: pid %d, was %d", got, pid)
		}
	})
	t.Run("another token restarts it with its saved configuration", func(t *testing.T) {
		if _, err := b.StartGateway(ctx, inst, backends.GatewayProcess{Token: "tok-2"}); err != nil {
			t.Fatal(err)
		}
		if got := gatewayPid(t, dir, inst.ID); got == pid || alive(pid) {
			t.Fatalf("not restarted: pid %d, was %d (alive %v)", got, pid, alive(pid))
		}
		pid = gatewayPid(t, dir, inst.ID)
		st, err := api.NewGatewayClient(ep.AdminURL, nil, "tok-2").Status(ctx)
		if err != nil || st.Version != 1 {
			t.Fatalf("status %+v, %v", st, err)
		}
	})
	t.Run("StopGateway stops it and terminating the instance is still clean", func(t *testing.T) {
		if err := b.StopGateway(ctx, inst); err != nil {
			t.Fatal(err)
		}
		if alive(pid) {
			t.Fatal("the gateway still runs")
		}
		// SIGTERM drained it: it logged its own stop (JSON on stderr).
		logs, _ := os.ReadFile(filepath.Join(dir, "instances", inst.ID, "gw", "gateway.log"))
		if !strings.Contains(string(logs), `"msg":"gateway_stopped"`) {
			t.Fatalf("the gateway did not stop by itself; its log:\n%s", logs)
		}
		if err := b.StopGateway(ctx, inst); err != nil {
			t.Fatalf("stopping a stopped gateway: %v", err)
		}
	})
	t.Run("terminating the instance stops its gateway", func(t *testing.T) {
		if _, err := b.StartGateway(ctx, inst, backends.GatewayProcess{Token: "tok-3"}); err != nil {
			t.Fatal(err)
		}
		pid := gatewayPid(t, dir, inst.ID)
		if err := b.Terminate(ctx, inst.ID); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(5 * time.Second)
		for alive(pid) {
			if time.Now().After(deadline) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
				t.Fatal("the gateway outlived its instance")
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}
