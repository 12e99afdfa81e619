package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oauth2-proxy/mockoidc"
)

func TestOIDCConfig_refusesWhatCannotWork(t *testing.T) {
	dir := t.TempDir()
	const base = "oidc:\n  issuer: https://sso.example.com\n  client_id: hoist\n  client_secret_file: /etc/hoist/oidc\n  redirect_url: https://hoist.example.com/login/oidc/callback\n"
	for name, tc := range map[string]struct{ yaml, want string }{
		"missing issuer":       {"oidc:\n  client_id: hoist\n  client_secret_file: x\n  redirect_url: https://h/login/oidc/callback\n", "oidc.issuer is required"},
		"missing secret file":  {"oidc:\n  issuer: https://sso\n  client_id: hoist\n  redirect_url: https://h/login/oidc/callback\n", "oidc.client_secret_file is required"},
		"issuer not a URL":     {strings.Replace(base, "https://sso.example.com", "sso.example.com", 1), `oidc.issuer "sso.example.com" is not an http(s) URL`},
		"redirect elsewhere":   {strings.Replace(base, "/login/oidc/callback", "/callback", 1), "must end in /login/oidc/callback"},
		"claim not supported":  {base + "  claim: sub\n", `oidc.claim "sub": must be email or preferred_username`},
		"client secret inline": {base + "  client_secret: hunter2\n", "client_secret"},
	} {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".yml")
			if err := os.WriteFile(p, []byte(tc.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := loadServerConfig(p); err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), p) {
				t.Fatalf("loadServerConfig = %v, want an error naming the file and %q", err, tc.want)
			}
		})
	}
}

// TestOIDCConfig_opensTheProvider reads the section and the provider's
// discovery document from a local OpenID Connect server.
func TestOIDCConfig_opensTheProvider(t *testing.T) {
	m, err := mockoidc.Run()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Shutdown() })
	dir := t.TempDir()
	secret := filepath.Join(dir, "oidc-secret")
	if err := os.WriteFile(secret, []byte(m.Config().ClientSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "config.yml")
	yaml := "oidc:\n  name: Mock\n  issuer: " + m.Issuer() + "\n  client_id: " + m.Config().ClientID +
		"\n  client_secret_file: " + secret + "\n  redirect_url: http://127.0.0.1:8080/login/oidc/callback\n  claim: preferred_username\n"
	if err := os.WriteFile(p, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := loadServerConfig(p)
	if err != nil {
		t.Fatal(err)
	}
	o, err := openOIDC(t.Context(), cfg.OIDC)
	if err != nil || o.Name() != "Mock" {
		t.Fatalf("openOIDC = %v, %v", o, err)
	}
	if err := os.WriteFile(secret, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := openOIDC(t.Context(), cfg.OIDC); err == nil || !strings.Contains(err.Error(), "oidc.client_secret_file: the file is empty") {
		t.Errorf("empty secret file: %v", err)
	}
}
