package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"hoist/backends"
)

// testAuthorizedKey is an ed25519 public key with a comment.
const testAuthorizedKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGb8dYbJ6fMPrV2vB3kq0h2Qm0a7d2s3K5m4x3c2b1a0 ci@example"

func TestLoadServerConfig_rejectsWhatItCannotUse(t *testing.T) {
	dir := t.TempDir()
	for name, tc := range map[string]struct{ yaml, want string }{
		"unknown field":             {"backendz:\n  - type: local\n", "backendz"},
		"entry setting unknown":     {"backends:\n  - type: local\n    nmae: x\n", "nmae"},
		"missing type":              {"backends:\n  - name: a\n", "type is required"},
		"duplicate backend":         {"backends:\n  - type: local\n  - name: local\n    type: local\n", "configured twice"},
		"policy typo":               {"policy:\n  privilegd: true\n", "privilegd"},
		"policy granting docker":    {"policy:\n  docker: true\n", "docker"},
		"policy granting the root":  {"policy:\n  instance_volumes:\n    - path: /\n", "policy.instance_volumes[0].path: / can never be mounted"},
		"ssh key that is not a key": {"ssh:\n  authorized_keys:\n    - ssh-ed25519 AAAAnope team\n", "ssh.authorized_keys[0]: not an authorized_keys line"},
		"ssh key with options": {"ssh:\n  authorized_keys:\n    - 'command=\"true\" " + testAuthorizedKey + "'\n",
			"ssh.authorized_keys[0]: options (command=\"true\") are not supported"},
		"policy for a backend not configured": {"backends:\n  - type: local\npolicy:\n  backends:\n    ssh:\n      privileged: true\n",
			`policy.backends.ssh: no backend "ssh" is configured`},
	} {
		t.Run(name, func(t *testing.T) {
			p := dir + "/" + name + ".yml"
			if err := os.WriteFile(p, []byte(tc.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg, err := loadServerConfig(p)
			if err == nil {
				_, err = buildPolicy(cfg, dir, "")
			}
			if err == nil {
				// An entry's settings are the driver's to check.
				var bes map[string]backends.Backend
				bes, err = openBackends(cfg, true, dir, backends.Deps{})
				closeBackends(bes)
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("loadServerConfig = %v, want an error mentioning %q", err, tc.want)
			}
		})
	}
	good := dir + "/ssh.yml"
	if err := os.WriteFile(good, []byte("ssh:\n  authorized_keys:\n    - "+testAuthorizedKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if cfg, err := loadServerConfig(good); err != nil || len(cfg.SSH.AuthorizedKeys) != 1 {
		t.Fatalf("ssh config = %+v, %v; want its one key", cfg.SSH, err)
	}
	if cfg, err := loadServerConfig(""); err != nil || len(cfg.Backends) != 2 {
		t.Fatalf("default config = %+v, %v; want local and ssh", cfg, err)
	}
}

// TestGatewaySettings_readsACMEAndCertificates: the `gateways:` section's
// ACME settings and CA file, and its certificates, reach the reconciler;
// a missing file, a certificate without its key, a lone EAB setting or an
// unknown key are refused.
func TestGatewaySettings_readsACMEAndCertificates(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	certPEM, keyPEM := testCertificate(t)
	ca := write("ca.pem", certPEM)
	cert, key := write("cert.pem", certPEM), write("key.pem", keyPEM)
	cfgPath := write("ok.yml", "gateways:\n  acme:\n    directory: https://127.0.0.1:14000/dir\n    ca_file: "+ca+
		"\n    email: ops@example.com\n    eab_kid: kid\n    eab_hmac_key: hmac\n  certificates:\n    - {cert_file: "+cert+", key_file: "+key+"}\n")
	cfg, err := loadServerConfig(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	gs, err := gatewaySettings(cfg.Gateways)
	if err != nil {
		t.Fatal(err)
	}
	if a := gs.ACME; a == nil || a.DirectoryURL != "https://127.0.0.1:14000/dir" || a.CAPEM != certPEM || a.Email != "ops@example.com" || a.EABKeyID != "kid" || a.EABHMACKey != "hmac" {
		t.Errorf("acme = %+v", gs.ACME)
	}
	if len(gs.Certificates) != 1 || gs.Certificates[0].CertPEM != certPEM || gs.Certificates[0].KeyPEM != keyPEM {
		t.Errorf("certificates = %+v", gs.Certificates)
	}
	if gs, err := gatewaySettings(gatewaysConfig{}); err != nil || gs.ACME != nil || gs.Certificates != nil {
		t.Errorf("no gateways section = %+v, %v; want nothing", gs, err)
	}
	for name, tc := range map[string]struct{ yaml, want string }{
		"unknown key":        {"gateways:\n  acme:\n    directroy: x\n", "directroy"},
		"lone eab key id":    {"gateways:\n  acme:\n    eab_kid: k\n", "eab_kid and eab_hmac_key go together"},
		"missing ca file":    {"gateways:\n  acme:\n    ca_file: " + dir + "/nope.pem\n", "gateways.acme.ca_file"},
		"key not the cert's": {"gateways:\n  certificates:\n    - {cert_file: " + cert + ", key_file: " + cert + "}\n", "gateways.certificates[0]"},
	} {
		t.Run(name, func(t *testing.T) {
			cfg, err := loadServerConfig(write(strings.ReplaceAll(name, " ", "-")+".yml", tc.yaml))
			if err == nil {
				_, err = gatewaySettings(cfg.Gateways)
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}

// testCertificate returns a self-signed certificate for *.example.com and
// its key, PEM.
func testCertificate(t *testing.T) (string, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "*.example.com"}, DNSNames: []string{"*.example.com"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})), string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb}))
}

// TestIDEConfig_downloadURLsReachTheReconciler: the `ide:` section's URL
// templates are passed on by IDE; an URL that is not http(s), or an IDE
// whose server hoist does not install, is refused.
func TestIDEConfig_downloadURLsReachTheReconciler(t *testing.T) {
	dir := t.TempDir()
	load := func(yaml string) (serverConfig, error) {
		t.Helper()
		p := filepath.Join(dir, "config.yml")
		if err := os.WriteFile(p, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		return loadServerConfig(p)
	}
	cfg, err := load("ide:\n  vscode:\n    download_url: http://127.0.0.1:9000/vscode/{version}/server-linux-{arch}.tar.gz\n" +
		"  windsurf:\n    download_url: https://mirror.example/ws/{commit}/{version}-{arch}.tgz\n")
	if err != nil {
		t.Fatal(err)
	}
	got, err := cfg.IDE.downloadURLs()
	if err != nil || len(got) != 2 || got["vscode"] != "http://127.0.0.1:9000/vscode/{version}/server-linux-{arch}.tar.gz" ||
		got["windsurf"] != "https://mirror.example/ws/{commit}/{version}-{arch}.tgz" {
		t.Fatalf("downloadURLs = %v, %v", got, err)
	}
	if got, err := (ideConfig{}).downloadURLs(); err != nil || len(got) != 0 {
		t.Errorf("no ide section = %v, %v; want dstack's URLs (none replaced)", got, err)
	}
	cfg, err = load("ide:\n  cursor:\n    download_url: file:///srv/cursor.tar.gz\n")
	if err == nil {
		_, err = cfg.IDE.downloadURLs()
	}
	if err == nil || !strings.Contains(err.Error(), "ide.cursor.download_url") {
		t.Errorf("a file URL: %v, want refused", err)
	}
	if _, err := load("ide:\n  zed:\n    download_url: https://x/\n"); err == nil || !strings.Contains(err.Error(), "zed") {
		t.Errorf("an ide hoist installs no server of: %v, want refused", err)
	}
}
