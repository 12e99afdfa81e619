package web_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"hoist/agents/api"
	"hoist/e2e/testenv"
	"hoist/web"
)

// gwHarness is a GatewayServer on its own loopback address: its admin API
// on a Unix socket, its public HTTP and HTTPS listeners on ports of ip.
type gwHarness struct {
	t         *testing.T
	dir       string
	ip        string
	httpLn    net.Listener
	httpsLn   net.Listener
	srv       *web.GatewayServer
	admin     *api.GatewayClient
	servers   []*http.Server
	httpPort  int
	httpsPort int
}

const gwToken = "admin-token"

// listenGateway opens the gateway's public listeners on ip (ports chosen
// now, so that an ACME server can be told them before the gateway runs).
func listenGateway(t *testing.T, ip string) *gwHarness {
	t.Helper()
	h := &gwHarness{t: t, dir: t.TempDir(), ip: ip}
	var err error
	if h.httpLn, err = net.Listen("tcp", ip+":0"); err != nil {
		t.Fatal(err)
	}
	if h.httpsLn, err = net.Listen("tcp", ip+":0"); err != nil {
		t.Fatal(err)
	}
	h.httpPort = h.httpLn.Addr().(*net.TCPAddr).Port
	h.httpsPort = h.httpsLn.Addr().(*net.TCPAddr).Port
	t.Cleanup(func() { h.httpLn.Close(); h.httpsLn.Close() })
	return h
}

// start runs a GatewayServer on the harness's state dir and listeners.
func (h *gwHarness) start() {
	t := h.t
	t.Helper()
	g, err := web.NewGatewayServer(web.GatewayServerOptions{
		StateDir:   h.dir,
		AdminToken: gwToken,
		HTTPSPort:  h.httpsPort,
		Proxy:      web.ProxyLimits{Hold: 20 * time.Second, Poll: 20 * time.Millisecond},
		CertRetry:  time.Second,
		Logger:     testLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	h.srv = g
	sock := filepath.Join(h.dir, fmt.Sprintf("admin-%d.sock", len(h.servers)))
	aln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	admin := &http.Server{Handler: g.AdminHandler()}
	pub := &http.Server{Handler: g.PublicHandler()}
	pubTLS := &http.Server{Handler: g.PublicHandler(), TLSConfig: g.TLSConfig()}
	go admin.Serve(aln)
	go pub.Serve(h.httpLn)
	go pubTLS.Serve(tls.NewListener(h.httpsLn, pubTLS.TLSConfig))
	h.servers = append(h.servers, admin, pub, pubTLS)
	h.admin = api.NewGatewayClient(api.UnixAddr(sock), nil, gwToken)
	t.Cleanup(h.stop)
}

// stop closes the servers and the gateway (keeping the listeners' ports
// for a restart).
func (h *gwHarness) stop() {
	if h.srv == nil {
		return
	}
	for _, s := range h.servers {
		s.Close()
	}
	h.servers = nil
	h.srv.Close()
	h.srv = nil
}

// restart stops the gateway and starts it again on the same state dir and
// ports.
func (h *gwHarness) restart() {
	h.t.Helper()
	h.stop()
	var err error
	if h.httpLn, err = net.Listen("tcp", net.JoinHostPort(h.ip, strconv.Itoa(h.httpPort))); err != nil {
		h.t.Fatal(err)
	}
	if h.httpsLn, err = net.Listen("tcp", net.JoinHostPort(h.ip, strconv.Itoa(h.httpsPort))); err != nil {
		h.t.Fatal(err)
	}
	h.start()
}

// client returns an HTTP client whose every connection goes to the
// gateway's listener for the URL's scheme, trusting roots for HTTPS;
// redirects are not followed.
func (h *gwHarness) client(roots *x509.CertPool) *http.Client {
	return &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
				_, port, _ := net.SplitHostPort(addr)
				target := h.httpLn.Addr().String()
				if port == "443" || port == strconv.Itoa(h.httpsPort) {
					target = h.httpsLn.Addr().String()
				}
				var d net.Dialer
				return d.DialContext(ctx, "tcp", target)
			},
			TLSClientConfig: &tls.Config{RootCAs: roots},
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

func (h *gwHarness) put(cfg api.GatewayConfig) api.GatewayStatus {
	h.t.Helper()
	st, err := h.admin.PutConfig(context.Background(), cfg)
	if err != nil {
		h.t.Fatalf("put config: %v", err)
	}
	return st
}

// gwGet sends a GET to url with the bearer token (when not empty) and
// returns the status and body.
func gwGet(t *testing.T, c *http.Client, url, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// echoUpstream is a replica answering with what it received.
func echoUpstream(t *testing.T) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]string{
			"path": r.URL.RequestURI(), "authorization": r.Header.Get("Authorization"), "prefix": r.Header.Get("X-Forwarded-Prefix"),
		})
	}))
	t.Cleanup(s.Close)
	return s
}

func sha(tok string) string {
	s := sha256.Sum256([]byte(tok))
	return hex.EncodeToString(s[:])
}

// testLogger logs to the test's log until the test ends.
func testLogger(t *testing.T) *slog.Logger {
	w := &testWriter{t: t}
	t.Cleanup(func() { w.mu.Lock(); w.done = true; w.mu.Unlock() })
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct {
	t    *testing.T
	mu   sync.Mutex
	done bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func TestGatewayServer_routesByHost(t *testing.T) {
	up := echoUpstream(t)
	h := listenGateway(t, "127.0.77.1")
	h.start()
	expired := time.Now().Add(-time.Hour)
	h.put(api.GatewayConfig{
		Version: 1, Domain: "example.test",
		Tokens: []api.GatewayToken{{SHA256: sha("good")}, {SHA256: sha("old"), ExpiresAt: expired}},
		Services: []api.GatewayServiceConfig{
			{Project: "main", Run: "svc", Host: "svc.example.test", Auth: true, MinReplicas: 1,
				Replicas: []api.GatewayReplica{{JobID: "j1", Addr: up.Listener.Addr().String()}}},
			{Project: "main", Run: "open", Host: "open.example.test", MinReplicas: 1,
				Model:    &api.GatewayModel{Name: "m1", Format: "openai"},
				Replicas: []api.GatewayReplica{{JobID: "j2", Addr: up.Listener.Addr().String()}}},
		},
	})
	c := h.client(nil)
	base := func(host string) string { return "http://" + host + ":" + strconv.Itoa(h.httpPort) }

	tests := []struct {
		name, url, token string
		want             int
	}{
		{"a service with auth refuses a request without a token", base("svc.example.test") + "/a", "", 401},
		{"a service with auth refuses an unknown token", base("svc.example.test") + "/a", "bad", 401},
		{"a service with auth refuses an expired token", base("svc.example.test") + "/a", "old", 401},
		{"a service with auth accepts a listed token", base("svc.example.test") + "/a", "good", 200},
		{"a service without auth needs no token", base("open.example.test") + "/", "", 200},
		{"an unknown host is not found", base("other.example.test") + "/", "good", 404},
		{"the models host needs a token", base("gateway.example.test") + "/v1/models", "", 401},
		{"the models host lists the models", base("gateway.example.test") + "/v1/models", "good", 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := gwGet(t, c, tt.url, tt.token)
			if code != tt.want {
				t.Fatalf("status %d, want %d: %s", code, tt.want, body)
			}
		})
	}

	t.Run("the path is forwarded whole and the token is not", func(t *testing.T) {
		_, body := gwGet(t, c, base("svc.example.test")+"/a/b?x=1", "good")
		var got map[string]string
		if err := json.Unmarshal([]byte(body), &got); err != nil {
			t.Fatalf("%v: %s", err, body)
		}
		if got["path"] != "/a/b?x=1" || got["authorization"] != "" || got["prefix"] != "" {
			t.Fatalf("upstream saw %v", got)
		}
	})
	t.Run("the models list names the model", func(t *testing.T) {
		_, body := gwGet(t, c, base("gateway.example.test")+"/models", "good")
		var list struct{ Data []struct{ ID string } }
		if err := json.Unmarshal([]byte(body), &list); err != nil || len(list.Data) != 1 || list.Data[0].ID != "m1" {
			t.Fatalf("models: %s (%v)", body, err)
		}
	})
}

func TestGatewayServer_versions(t *testing.T) {
	h := listenGateway(t, "127.0.77.2")
	h.start()
	h.put(api.GatewayConfig{Version: 2, Domain: "example.test"})

	t.Run("an older version is refused with 409", func(t *testing.T) {
		_, err := h.admin.PutConfig(context.Background(), api.GatewayConfig{Version: 1, Domain: "other.test"})
		var ae *api.Error
		if !errors.As(err, &ae) || ae.Status != http.StatusConflict {
			t.Fatalf("err = %v, want a 409", err)
		}
	})
	t.Run("an equal version changes nothing", func(t *testing.T) {
		st := h.put(api.GatewayConfig{Version: 2, Domain: "other.test", Services: []api.GatewayServiceConfig{{Project: "main", Run: "x", Host: "x.other.test"}}})
		if st.Version != 2 {
			t.Fatalf("version %d", st.Version)
		}
		if code, _ := gwGet(t, h.client(nil), "http://x.other.test:"+strconv.Itoa(h.httpPort)+"/", ""); code != 404 {
			t.Fatalf("the ignored configuration is served: %d", code)
		}
	})
	t.Run("the admin API refuses a wrong token", func(t *testing.T) {
		bad := api.NewGatewayClient(api.UnixAddr(filepath.Join(h.dir, "admin-0.sock")), nil, "wrong")
		if _, err := bad.Status(context.Background()); err == nil {
			t.Fatal("status with a wrong token succeeded")
		}
		if hl, err := h.admin.Health(context.Background()); err != nil || hl.Service != api.GatewayService {
			t.Fatalf("health = %+v, %v", hl, err)
		}
	})
}

func TestGatewayServer_servesItsSavedConfigAfterARestart(t *testing.T) {
	up := echoUpstream(t)
	h := listenGateway(t, "127.0.77.3")
	h.start()
	h.put(api.GatewayConfig{Version: 5, Domain: "example.test", Services: []api.GatewayServiceConfig{
		{Project: "main", Run: "svc", Host: "svc.example.test", MinReplicas: 1,
			Replicas: []api.GatewayReplica{{JobID: "j1", Addr: up.Listener.Addr().String()}}},
	}})
	fi, err := os.Stat(filepath.Join(h.dir, "gateway.json"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("saved config: %v, %v", fi, err)
	}
	h.restart() // no server puts anything
	st, err := h.admin.Status(context.Background())
	if err != nil || st.Version != 5 {
		t.Fatalf("status after restart = %+v, %v", st, err)
	}
	if code, body := gwGet(t, h.client(nil), "http://svc.example.test:"+strconv.Itoa(h.httpPort)+"/x", ""); code != 200 {
		t.Fatalf("after restart: %d %s", code, body)
	}
}

func TestGatewayServer_statsAndHeldRequests(t *testing.T) {
	up := echoUpstream(t)
	h := listenGateway(t, "127.0.77.4")
	h.start()
	svc := api.GatewayServiceConfig{Project: "main", Run: "svc", Host: "svc.example.test", MinReplicas: 1,
		Replicas: []api.GatewayReplica{{JobID: "j1", Addr: up.Listener.Addr().String()}}}
	zero := api.GatewayServiceConfig{Project: "main", Run: "zero", Host: "zero.example.test"}
	h.put(api.GatewayConfig{Version: 1, Domain: "example.test", Services: []api.GatewayServiceConfig{svc, zero}})
	c := h.client(nil)
	for range 7 {
		if code, _ := gwGet(t, c, "http://svc.example.test:"+strconv.Itoa(h.httpPort)+"/", ""); code != 200 {
			t.Fatalf("status %d", code)
		}
	}
	stats := statsOf(t, h, "svc")
	var n int64
	for _, f := range stats.Frames {
		n += f.Requests
	}
	if n != 7 || stats.LastRequest.IsZero() {
		t.Fatalf("stats = %+v, want 7 requests", stats)
	}

	t.Run("a request to a service without replicas is held until one is listed", func(t *testing.T) {
		var wg sync.WaitGroup
		var code int
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, _ = gwGet(t, c, "http://zero.example.test:"+strconv.Itoa(h.httpPort)+"/", "")
		}()
		deadline := time.Now().Add(10 * time.Second)
		for statsOf(t, h, "zero").Waiting != 1 {
			if time.Now().After(deadline) {
				t.Fatal("the held request is not in the stats")
			}
			time.Sleep(20 * time.Millisecond)
		}
		zero.Replicas = []api.GatewayReplica{{JobID: "z1", Addr: up.Listener.Addr().String()}}
		h.put(api.GatewayConfig{Version: 2, Domain: "example.test", Services: []api.GatewayServiceConfig{svc, zero}})
		wg.Wait()
		if code != 200 {
			t.Fatalf("held request got %d", code)
		}
		if w := statsOf(t, h, "zero").Waiting; w != 0 {
			t.Fatalf("waiting = %d after the replica came", w)
		}
	})
}

func statsOf(t *testing.T, h *gwHarness, run string) api.GatewayServiceStats {
	t.Helper()
	st, err := h.admin.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range st.Services {
		if s.Run == run {
			return s
		}
	}
	t.Fatalf("no stats of %s in %+v", run, st)
	return api.GatewayServiceStats{}
}

func TestGatewayServer_httpsByACME(t *testing.T) {
	up := echoUpstream(t)
	h := listenGateway(t, "127.0.77.5")
	acme := testenv.StartACME(t, testenv.ACMEOptions{ResolveTo: h.ip, HTTPPort: h.httpPort, TLSPort: h.httpsPort})
	h.start()
	h.put(api.GatewayConfig{Version: 1, Domain: "example.test",
		TLS: &api.GatewayTLS{ACME: &api.GatewayACME{DirectoryURL: acme.DirectoryURL, CAPEM: acme.CAPEM}},
		Services: []api.GatewayServiceConfig{
			{Project: "main", Run: "svc", Host: "svc.example.test", HTTPS: true, MinReplicas: 1,
				Replicas: []api.GatewayReplica{{JobID: "j1", Addr: up.Listener.Addr().String()}}},
		}})
	waitCertificate(t, h, "svc.example.test")

	c := h.client(acme.Roots())
	url := "https://svc.example.test:" + strconv.Itoa(h.httpsPort) + "/hello"
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s (verifying against pebble's root): %v", url, err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	chain := resp.TLS.PeerCertificates
	inter := x509.NewCertPool()
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	if _, err := chain[0].Verify(x509.VerifyOptions{Roots: acme.Roots(), Intermediates: inter, DNSName: "svc.example.test"}); err != nil {
		t.Fatalf("the served certificate does not chain to pebble's root: %v", err)
	}

	t.Run("plain HTTP is redirected to HTTPS", func(t *testing.T) {
		resp, err := c.Get("http://svc.example.test:" + strconv.Itoa(h.httpPort) + "/p?q=1")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		want := "https://svc.example.test:" + strconv.Itoa(h.httpsPort) + "/p?q=1"
		if resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != want {
			t.Fatalf("got %d %q, want 301 %q", resp.StatusCode, resp.Header.Get("Location"), want)
		}
	})
	t.Run("the certificate is kept across a restart", func(t *testing.T) {
		h.restart()
		resp, err := h.client(acme.Roots()).Get(url)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	})
}

func TestGatewayServer_httpsByACMEOverHTTP01(t *testing.T) {
	h := listenGateway(t, "127.0.77.7")
	// The validation's TLS-ALPN-01 port has nothing listening: the
	// gateway falls back to HTTP-01 on its HTTP listener.
	closed, err := net.Listen("tcp", h.ip+":0")
	if err != nil {
		t.Fatal(err)
	}
	closedPort := closed.Addr().(*net.TCPAddr).Port
	closed.Close()
	acme := testenv.StartACME(t, testenv.ACMEOptions{ResolveTo: h.ip, HTTPPort: h.httpPort, TLSPort: closedPort})
	h.start()
	h.put(api.GatewayConfig{Version: 1, Domain: "example.test",
		TLS:      &api.GatewayTLS{ACME: &api.GatewayACME{DirectoryURL: acme.DirectoryURL, CAPEM: acme.CAPEM}},
		Services: []api.GatewayServiceConfig{{Project: "main", Run: "svc", Host: "svc.example.test", HTTPS: true}}})
	waitCertificate(t, h, "svc.example.test")
}

func TestGatewayServer_givenCertificate(t *testing.T) {
	up := echoUpstream(t)
	h := listenGateway(t, "127.0.77.6")
	h.start()
	certPEM, keyPEM, pool := selfSigned(t, "*.example.test")
	h.put(api.GatewayConfig{Version: 1, Domain: "example.test",
		TLS: &api.GatewayTLS{CertPEM: certPEM, KeyPEM: keyPEM},
		Services: []api.GatewayServiceConfig{
			{Project: "main", Run: "svc", Host: "svc.example.test", HTTPS: true, MinReplicas: 1,
				Replicas: []api.GatewayReplica{{JobID: "j1", Addr: up.Listener.Addr().String()}}},
			{Project: "main", Run: "bad", Host: "bad.other.test", HTTPS: true},
		}})
	st := waitCertificate(t, h, "svc.example.test")
	if len(st.Errors) != 1 || st.Errors[0].Host != "bad.other.test" {
		t.Fatalf("errors = %+v, want one of bad.other.test", st.Errors)
	}
	if code, body := gwGet(t, h.client(pool), "https://svc.example.test:"+strconv.Itoa(h.httpsPort)+"/", ""); code != 200 {
		t.Fatalf("status %d: %s", code, body)
	}
}

func waitCertificate(t *testing.T, h *gwHarness, host string) api.GatewayStatus {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		st, err := h.admin.Status(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range st.Certificates {
			if c.Host == host {
				return st
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no certificate for %s: %+v", host, st)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// selfSigned returns a self-signed certificate for name, its key, and a
// pool trusting it.
func selfSigned(t *testing.T, name string) (string, string, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name}, DNSNames: []string{name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kd, _ := x509.MarshalECPrivateKey(key)
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd})), pool
}

func TestGatewayServer_reportsACMEFailures(t *testing.T) {
	h := listenGateway(t, "127.0.77.8")
	h.start()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dir := "https://" + closed.Addr().String() + "/dir"
	closed.Close()
	h.put(api.GatewayConfig{Version: 1, Domain: "example.test",
		TLS:      &api.GatewayTLS{ACME: &api.GatewayACME{DirectoryURL: dir}},
		Services: []api.GatewayServiceConfig{{Project: "main", Run: "svc", Host: "svc.example.test", HTTPS: true}}})
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := h.admin.Status(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(st.Errors) == 1 && st.Errors[0].Host == "svc.example.test" && strings.HasPrefix(st.Errors[0].Message, "acme: ") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("status %+v, want the host's acme error", st)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestGatewayServer_streamsAnswers(t *testing.T) {
	release := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: first\n\n")
		w.(http.Flusher).Flush()
		<-release
		io.WriteString(w, "data: second\n\n")
	}))
	t.Cleanup(up.Close)
	defer close(release)
	h := listenGateway(t, "127.0.77.9")
	h.start()
	h.put(api.GatewayConfig{Version: 1, Domain: "example.test", Services: []api.GatewayServiceConfig{
		{Project: "main", Run: "svc", Host: "svc.example.test", MinReplicas: 1,
			Replicas: []api.GatewayReplica{{JobID: "j1", Addr: up.Listener.Addr().String()}}}}})
	resp, err := h.client(nil).Get("http://svc.example.test:" + strconv.Itoa(h.httpPort) + "/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	buf := make([]byte, len("data: first\n\n"))
	// The first event arrives while the replica still holds the answer.
	if _, err := io.ReadFull(resp.Body, buf); err != nil || string(buf) != "data: first\n\n" {
		t.Fatalf("first event %q, %v", buf, err)
	}
}
