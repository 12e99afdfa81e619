package testenv

import (
	"crypto/x509"
	"encoding/pem"
	"io"
	"log"
	"net"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/letsencrypt/pebble/v2/ca"
	"github.com/letsencrypt/pebble/v2/db"
	"github.com/letsencrypt/pebble/v2/va"
	"github.com/letsencrypt/pebble/v2/wfe"
	"github.com/miekg/dns"
)

// ACMEOptions configure StartACME.
type ACMEOptions struct {
	// ResolveTo is the IPv4 address the ACME server's validation resolves
	// every name to (the gateway's 127.x address); required.
	ResolveTo string
	// HTTPPort and TLSPort are the ports the validation connects to for
	// HTTP-01 and TLS-ALPN-01 challenges (the gateway's --http and
	// --https ports); zero means 80 and 443.
	HTTPPort, TLSPort int
	// EAB, when not empty, requires external account binding: key id →
	// base64url HMAC key (pebble's externalAccountMACKeys).
	EAB map[string]string
}

// ACME is an in-process ACME server (Let's Encrypt's pebble,
// github.com/letsencrypt/pebble/v2) on a loopback address that really
// validates: its DNS lookups go to a loopback DNS server answering every
// name with ResolveTo, and its HTTP-01 and TLS-ALPN-01 checks connect to
// ResolveTo at HTTPPort and TLSPort. Random validation delays are off.
//
// A gateway gets certificates from it with
//
//	api.GatewayACME{DirectoryURL: acme.DirectoryURL, CAPEM: acme.CAPEM}
//
// and a test checks a served certificate with
//
//	x509 leaf.Verify(x509.VerifyOptions{Roots: acme.Roots(), Intermediates: …, DNSName: host})
//
// or an HTTPS client trusting acme.Roots(). Everything stops at the end of
// the test.
type ACME struct {
	// DirectoryURL is the ACME directory (https, on 127.0.0.1).
	DirectoryURL string
	// CAPEM is the PEM certificate of the directory's own HTTPS listener,
	// to trust when talking to the ACME server (GatewayACME.CAPEM).
	CAPEM string
	// RootPEM is the root certificate under which the server issues
	// certificates (pebble's /roots/0).
	RootPEM string

	ca *ca.CAImpl
}

// Roots returns a pool holding the root the server issues certificates
// under: trust it to verify a certificate the gateway serves.
func (a *ACME) Roots() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM([]byte(a.RootPEM))
	return pool
}

// IntermediatePEMs returns the intermediate certificates between the
// root and the certificates it issues (a served chain includes them).
func (a *ACME) IntermediatePEMs() []string {
	var out []string
	root := a.ca.GetRootCert(0)
	for _, chain := range root.IssuerChains {
		for _, c := range chain {
			out = append(out, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.DER})))
		}
	}
	return out
}

// pebbleEnvOnce turns pebble's random validation delay (up to 15 s) off,
// process-wide: pebble reads it from the environment when its validation
// authority starts.
var pebbleEnvOnce sync.Once

// StartACME starts an ACME server for the test; see ACME.
func StartACME(t testing.TB, opts ACMEOptions) *ACME {
	t.Helper()
	if net.ParseIP(opts.ResolveTo).To4() == nil {
		t.Fatalf("testenv: StartACME: ResolveTo %q is not an IPv4 address", opts.ResolveTo)
	}
	if opts.HTTPPort == 0 {
		opts.HTTPPort = 80
	}
	if opts.TLSPort == 0 {
		opts.TLSPort = 443
	}
	pebbleEnvOnce.Do(func() { os.Setenv("PEBBLE_VA_NOSLEEP", "1") })
	logger := log.New(&testLogWriter{t: t}, "pebble ", 0)
	t.Cleanup(func() { logger.SetOutput(io.Discard) })

	dnsAddr := startResolver(t, opts.ResolveTo)
	store := db.NewMemoryStore()
	authority := ca.New(logger, store, "", "ecdsa", 0, 1, map[string]ca.Profile{"default": {Description: "the default profile"}})
	validator := va.New(logger, opts.HTTPPort, opts.TLSPort, false, dnsAddr, store)
	for kid, key := range opts.EAB {
		if err := store.AddExternalAccountKeyByID(kid, key); err != nil {
			t.Fatalf("testenv: pebble eab key: %v", err)
		}
	}
	front := wfe.New(logger, store, validator, authority, []string{"pebble.letsencrypt.org"}, false, len(opts.EAB) > 0, 0, 0)
	srv := httptest.NewUnstartedServer(front.Handler())
	srv.StartTLS()
	t.Cleanup(srv.Close)

	root := authority.GetRootCert(0)
	if root == nil {
		t.Fatal("testenv: pebble has no root certificate")
	}
	return &ACME{
		DirectoryURL: srv.URL + wfe.DirectoryPath,
		CAPEM:        string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})),
		RootPEM:      string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: root.DER})),
		ca:           authority,
	}
}

// startResolver serves DNS over TCP (pebble's validation asks over TCP)
// on a loopback port: every A question is answered with ip, every other
// question with no answer.
func startResolver(t testing.TB, ip string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testenv: dns listener: %v", err)
	}
	a := net.ParseIP(ip).To4()
	srv := &dns.Server{Listener: ln, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, q *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(q)
		for _, question := range q.Question {
			if question.Qtype == dns.TypeA {
				m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: question.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 1}, A: a})
			}
		}
		_ = w.WriteMsg(m)
	})}
	started := make(chan struct{})
	srv.NotifyStartedFunc = func() { close(started) }
	go func() { _ = srv.ActivateAndServe() }()
	<-started
	t.Cleanup(func() { _ = srv.Shutdown() })
	return ln.Addr().String()
}

// testLogWriter sends pebble's log lines to the test's log while the test
// runs.
type testLogWriter struct {
	t  testing.TB
	mu sync.Mutex
}

func (w *testLogWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
