package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"hoist/e2e/testenv"
)

// gatewayClient calls addr (the gateway's listener) whatever the URL's
// host, as a client whose DNS points every service name at the gateway
// would; roots verify the gateway's certificates.
func gatewayClient(addr string, roots *x509.CertPool) *http.Client {
	d := &net.Dialer{Timeout: 5 * time.Second}
	return &http.Client{Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, network, a string) (net.Conn, error) {
				_, port, _ := net.SplitHostPort(a)
				return d.DialContext(ctx, network, net.JoinHostPort(addr, port))
			},
			TLSClientConfig: &tls.Config{RootCAs: roots},
		}}
}

func gatewayGet(c *http.Client, url, tok string) (int, string, *tls.ConnectionState) {
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		return 0, err.Error(), nil
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err.Error(), nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.TLS
}

// TestGateway_localServesServicesOverHTTPSWithACME: a gateway on the local
// backend, with an ACME server (pebble) on loopback, serves a busybox
// httpd service at https://<run>.<domain>/ with a certificate pebble
// issued; plain HTTP answers 301; the token is required; while the server
// is stopped the gateway keeps serving; removing the gateway from the
// repository stops it, and hoist's own proxy serves the service again.
func TestGateway_localServesServicesOverHTTPSWithACME(t *testing.T) {
	const gwIP = "127.0.61.1"
	httpPort, httpsPort := freePortOn(t, gwIP), freePortOn(t, gwIP)
	acme := testenv.StartACME(t, testenv.ACMEOptions{ResolveTo: gwIP, HTTPPort: httpPort, TLSPort: httpsPort})
	caFile := filepath.Join(t.TempDir(), "acme-ca.pem")
	writeTestFile(t, caFile, acme.CAPEM)
	cfg := filepath.Join(t.TempDir(), "server.yml")
	writeTestFile(t, cfg, fmt.Sprintf("backends:\n  - type: local\n    gateway_address: %s\n    gateway_http_port: %d\n    gateway_https_port: %d\n"+
		"gateways:\n  acme:\n    directory: %s\n    ca_file: %s\n", gwIP, httpPort, httpsPort, acme.DirectoryURL, caFile))

	r := newRepo(t)
	r.write("gw.dstack.yml", "type: gateway\nname: gw\nbackend: local\nregion: local\ndomain: '*.hoist.test'\ndefault: true\nhoist:\n  prune: true\n")
	r.write("web.dstack.yml", fmt.Sprintf("type: service\nname: web\nimage: %s\nport: 8000\ncommands:\n"+
		"  - mkdir -p /www && echo hello through the gateway > /www/index.html\n  - busybox httpd -f -p 8000 -h /www\n", testenv.BusyboxImage))
	rev := r.commit("a gateway and a service behind it")
	s := startServer(t, r.dir, "--config", cfg, "--resync-interval", "2s")
	// The gateway is a process of its own that outlives the server; stop
	// it (by the pid the local backend keeps) whatever the test's end.
	t.Cleanup(func() { stopLocalGateways(t, s.dataDir) })
	s.waitRun("web", rev, "running", 90*time.Second)

	waitFor(t, 60*time.Second, func() string { return "the gateway to run" }, func() bool {
		var gws []struct {
			Name, Status string
		}
		s.getJSON("/api/v1/gateways", &gws)
		return len(gws) == 1 && gws[0].Status == "running"
	})
	var run struct {
		ServiceURL string `json:"service_url"`
	}
	s.getJSON("/api/v1/runs/web", &run)
	base := fmt.Sprintf("https://web.hoist.test:%d/", httpsPort)
	if run.ServiceURL != base {
		t.Fatalf("service_url = %q, want %s", run.ServiceURL, base)
	}

	c := gatewayClient(gwIP, acme.Roots())
	var state *tls.ConnectionState
	var last string
	waitFor(t, 90*time.Second, func() string { return "the service to answer over HTTPS at the gateway (last: " + last + ")" }, func() bool {
		code, body, st := gatewayGet(c, base, s.token)
		state, last = st, fmt.Sprintf("%d %q", code, body)
		return code == 200 && strings.Contains(body, "hello through the gateway")
	})
	leaf := state.PeerCertificates[0]
	if err := leaf.VerifyHostname("web.hoist.test"); err != nil {
		t.Fatalf("certificate: %v", err)
	}
	t.Logf("certificate for %v issued by %q", leaf.DNSNames, leaf.Issuer.CommonName)
	if code, _, _ := gatewayGet(c, base, ""); code != http.StatusUnauthorized {
		t.Fatalf("without a token: %d, want 401", code)
	}
	if code, _, _ := gatewayGet(c, fmt.Sprintf("http://web.hoist.test:%d/", httpPort), s.token); code != http.StatusMovedPermanently {
		t.Fatalf("plain HTTP: %d, want 301", code)
	}

	// The server goes away; the gateway serves from what it knows.
	s.stop()
	if code, body, _ := gatewayGet(c, base+"index.html", s.token); code != 200 {
		t.Fatalf("with the server stopped: %d %q, want 200", code, body)
	}
	s.start()

	// The gateway's spec leaves the repository (it opted in to pruning):
	// the gateway stops and the service is served by hoist's own proxy.
	r.remove("gw.dstack.yml")
	r.commit("no gateway")
	waitFor(t, 60*time.Second, func() string { return "the gateway to stop listening and exit" }, func() bool {
		conn, err := net.DialTimeout("tcp", net.JoinHostPort(gwIP, strconv.Itoa(httpsPort)), time.Second)
		if err != nil {
			return len(localGateways(s.dataDir)) == 0
		}
		conn.Close()
		return false
	})
	s.getJSON("/api/v1/runs/web", &run)
	if run.ServiceURL != "/proxy/services/main/web/" {
		t.Errorf("service_url without the gateway = %q, want /proxy/services/main/web/", run.ServiceURL)
	}
}

// freePortOn returns a port free on ip.
func freePortOn(t testing.TB, ip string) int {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// localGateways returns the pids of the live gateways the local backend
// of the server with data directory dataDir started (by the pid files it
// keeps).
func localGateways(dataDir string) []int {
	var pids []int
	_ = filepath.WalkDir(dataDir, func(f string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "gateway.pid" {
			return nil
		}
		b, err := os.ReadFile(f)
		if err != nil {
			return nil
		}
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 1 && syscall.Kill(pid, 0) == nil {
			pids = append(pids, pid)
		}
		return nil
	})
	return pids
}

// stopLocalGateways stops the gateways the local backend of the server
// with data directory dataDir started.
func stopLocalGateways(t testing.TB, dataDir string) {
	for _, pid := range localGateways(dataDir) {
		if syscall.Kill(pid, syscall.SIGTERM) == nil {
			t.Logf("stopped gateway pid %d", pid)
		}
	}
}
