package web

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/acme"
	"golang.org/x/crypto/acme/autocert"

	"hoist/agents/api"
)

// TLSConfig returns the configuration of the public HTTPS listener:
// certificates from the configuration's given certificate for the hosts it
// covers and from ACME for the other HTTPS hosts, and ACME's TLS-ALPN-01
// challenges answered (RFC 8737).
func (g *GatewayServer) TLSConfig() *tls.Config {
	return &tls.Config{
		MinVersion:     tls.VersionTLS12,
		NextProtos:     []string{"h2", "http/1.1", acme.ALPNProto},
		GetCertificate: g.certs.getCertificate,
	}
}

// gatewayCerts gets and holds the certificates of the hosts served over
// TLS, as dstack's gateway runs certbot for each service domain.
type gatewayCerts struct {
	g *GatewayServer

	mu       sync.Mutex
	acmeKey  string // the GatewayACME the manager was built for
	manager  *autocert.Manager
	http01   http.Handler     // the manager's HTTP-01 handler
	given    *tls.Certificate // the configuration's certificate, parsed
	givenErr error
	hosts    []string                          // the HTTPS hosts
	held     map[string]api.GatewayCertificate // host → certificate got
	errs     map[string]string                 // host → why it has none
	inflight map[string]bool
}

func newGatewayCerts(g *GatewayServer) *gatewayCerts {
	return &gatewayCerts{g: g, held: map[string]api.GatewayCertificate{}, errs: map[string]string{}, inflight: map[string]bool{}}
}

// apply takes a new configuration: it rebuilds the ACME manager when the
// ACME settings changed, parses the given certificate and asks for the
// certificates of new hosts.
func (c *gatewayCerts) apply(cfg api.GatewayConfig) {
	c.mu.Lock()
	c.hosts = c.g.state.Load().httpsHosts()
	c.given, c.givenErr = nil, nil
	var ac *api.GatewayACME
	if cfg.TLS != nil {
		ac = cfg.TLS.ACME
		if cfg.TLS.CertPEM != "" {
			cert, err := tls.X509KeyPair([]byte(cfg.TLS.CertPEM), []byte(cfg.TLS.KeyPEM))
			if err != nil {
				c.givenErr = fmt.Errorf("the given certificate: %w", err)
			} else {
				c.given = &cert
			}
		}
	}
	key := ""
	if ac != nil {
		key = strings.Join([]string{ac.DirectoryURL, ac.CAPEM, ac.Email, ac.EABKeyID, ac.EABHMACKey}, "\x00")
	}
	if key != c.acmeKey || (ac == nil) != (c.manager == nil) {
		c.acmeKey, c.manager, c.http01 = key, nil, nil
		clear(c.held)
		clear(c.errs)
		if ac != nil {
			m, err := c.newManager(*ac)
			if err != nil {
				for _, h := range c.hosts {
					c.errs[h] = err.Error()
				}
			}
			c.manager, c.http01 = m, nil
			if m != nil {
				// Also turns HTTP-01 on: autocert tries it once TLS-ALPN-01
				// failed (a TLS terminator in front, port 443 closed).
				c.http01 = m.HTTPHandler(nil)
			}
		}
	}
	for h := range c.held {
		if !slices.Contains(c.hosts, h) {
			delete(c.held, h)
		}
	}
	for h := range c.errs {
		if !slices.Contains(c.hosts, h) {
			delete(c.errs, h)
		}
	}
	c.mu.Unlock()
	c.ensure()
}

// newManager builds the ACME client of ac, its state under the gateway's
// state dir.
func (c *gatewayCerts) newManager(ac api.GatewayACME) (*autocert.Manager, error) {
	hc := &http.Client{Timeout: time.Minute}
	if ac.CAPEM != "" {
		pool, err := x509.SystemCertPool()
		if err != nil || pool == nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM([]byte(ac.CAPEM)) {
			return nil, errors.New("acme: ca_pem holds no certificate")
		}
		hc.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	}
	dir := ac.DirectoryURL
	if dir == "" {
		dir = autocert.DefaultACMEDirectory
	}
	m := &autocert.Manager{
		Prompt:     autocert.AcceptTOS,
		Cache:      autocert.DirCache(filepath.Join(c.g.opts.StateDir, "acme")),
		HostPolicy: c.hostPolicy,
		Client:     &acme.Client{DirectoryURL: dir, HTTPClient: hc, UserAgent: "hoist-gateway"},
		Email:      ac.Email,
	}
	if ac.EABKeyID != "" {
		k, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(ac.EABHMACKey, "="))
		if err != nil {
			return nil, fmt.Errorf("acme: eab_hmac_key is not base64url: %w", err)
		}
		m.ExternalAccountBinding = &acme.ExternalAccountBinding{KID: ac.EABKeyID, Key: k}
	}
	return m, nil
}

// hostPolicy admits the hosts served over TLS, and no other: a client
// naming any host cannot make the gateway ask ACME for it.
func (c *gatewayCerts) hostPolicy(_ context.Context, host string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h // the HTTP-01 handler passes the request's Host
	}
	if slices.Contains(c.hosts, strings.ToLower(host)) {
		return nil
	}
	return fmt.Errorf("host %q is not served over tls by this gateway", host)
}

// httpHandler returns the ACME HTTP-01 handler, nil without ACME.
func (c *gatewayCerts) httpHandler() http.Handler {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.http01
}

// getCertificate picks the certificate of a TLS handshake: the given one
// when it covers the host, else ACME's (the TLS-ALPN-01 challenge's
// included).
func (c *gatewayCerts) getCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	c.mu.Lock()
	m, given := c.manager, c.given
	c.mu.Unlock()
	isChallenge := len(hello.SupportedProtos) == 1 && hello.SupportedProtos[0] == acme.ALPNProto
	if given != nil && !isChallenge && given.Leaf != nil && given.Leaf.VerifyHostname(hello.ServerName) == nil {
		return given, nil
	}
	if m == nil {
		return nil, fmt.Errorf("no certificate for %q", hello.ServerName)
	}
	return m.GetCertificate(hello)
}

// ensure gets (or reads from the cache) the certificate of every HTTPS
// host, each in its own goroutine, and records what it got or why not.
func (c *gatewayCerts) ensure() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, h := range c.hosts {
		if c.given != nil && c.given.Leaf != nil && c.given.Leaf.VerifyHostname(h) == nil {
			c.held[h] = certInfo(h, c.given.Leaf)
			delete(c.errs, h)
			continue
		}
		if c.manager == nil {
			msg := "no certificate covers this host and acme is not configured"
			if c.givenErr != nil {
				msg = c.givenErr.Error()
			}
			if _, ok := c.errs[h]; !ok {
				c.errs[h] = msg
			}
			continue
		}
		if c.inflight[h] {
			continue
		}
		c.inflight[h] = true
		m, key := c.manager, c.acmeKey
		// Not waited for by Close: an ACME exchange may take minutes.
		go func() {
			cert, err := m.GetCertificate(&tls.ClientHelloInfo{
				ServerName:       h,
				SignatureSchemes: []tls.SignatureScheme{tls.ECDSAWithP256AndSHA256},
				SupportedCurves:  []tls.CurveID{tls.CurveP256},
				CipherSuites:     []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256},
			})
			c.mu.Lock()
			defer c.mu.Unlock()
			delete(c.inflight, h)
			if key != c.acmeKey || !slices.Contains(c.hosts, h) {
				return
			}
			if err != nil {
				// autocert keeps a failed request for a minute and answers
				// "missing certificate" meanwhile: the first error says why.
				msg := "acme: " + err.Error()
				if prev, ok := c.errs[h]; ok && (prev == msg || strings.Contains(msg, "missing certificate")) {
					return
				}
				c.errs[h] = msg
				delete(c.held, h)
				c.g.log.Warn("gateway_certificate_failed", "host", h, "error", err)
				return
			}
			leaf := cert.Leaf
			if leaf == nil && len(cert.Certificate) > 0 {
				leaf, _ = x509.ParseCertificate(cert.Certificate[0])
			}
			if leaf != nil {
				if old, ok := c.held[h]; !ok || !old.NotAfter.Equal(leaf.NotAfter) {
					c.g.log.Info("gateway_certificate_obtained", "host", h, "not_after", leaf.NotAfter)
				}
				c.held[h] = certInfo(h, leaf)
			}
			delete(c.errs, h)
		}()
	}
}

func certInfo(host string, leaf *x509.Certificate) api.GatewayCertificate {
	return api.GatewayCertificate{Host: host, Issuer: leaf.Issuer.String(), NotAfter: leaf.NotAfter}
}

// status returns the certificates held and the hosts' problems, by host.
func (c *gatewayCerts) status() ([]api.GatewayCertificate, []api.GatewayError) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var certs []api.GatewayCertificate
	var errs []api.GatewayError
	for _, h := range c.hosts {
		if ci, ok := c.held[h]; ok {
			certs = append(certs, ci)
		}
		if e, ok := c.errs[h]; ok {
			errs = append(errs, api.GatewayError{Host: h, Message: e})
		}
	}
	return certs, errs
}
