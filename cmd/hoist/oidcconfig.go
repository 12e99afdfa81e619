package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"hoist/web"
)

// oidcConfig is the `oidc:` section: login through an OpenID Connect
// provider. The ID token's claim (email by default) must name an existing
// hoist user (hoist user add); unknown users are refused.
type oidcConfig struct {
	// Name is shown on the login page ("Log in with <name>").
	Name string `yaml:"name"`
	// Issuer is the provider's issuer URL (discovery is read from it).
	Issuer string `yaml:"issuer"`
	// ClientID is hoist's client at the provider.
	ClientID string `yaml:"client_id"`
	// ClientSecretFile holds the client's secret (never in the config).
	ClientSecretFile string `yaml:"client_secret_file"`
	// RedirectURL is https://<hoist>/login/oidc/callback, registered at
	// the provider.
	RedirectURL string `yaml:"redirect_url"`
	// Claim names the hoist user: email (verified) or preferred_username.
	Claim string `yaml:"claim"`
	// Scopes are requested besides openid (and email or profile).
	Scopes []string `yaml:"scopes"`
}

// check refuses a section that cannot work, naming the field.
func (c *oidcConfig) check() error {
	if c == nil {
		return nil
	}
	for _, f := range []struct{ name, v string }{{"issuer", c.Issuer}, {"client_id", c.ClientID}, {"client_secret_file", c.ClientSecretFile}, {"redirect_url", c.RedirectURL}} {
		if f.v == "" {
			return fmt.Errorf("oidc.%s is required", f.name)
		}
	}
	if !strings.HasPrefix(c.Issuer, "https://") && !strings.HasPrefix(c.Issuer, "http://") {
		return fmt.Errorf("oidc.issuer %q is not an http(s) URL", c.Issuer)
	}
	if err := web.CheckOIDCRedirect(c.RedirectURL); err != nil {
		return fmt.Errorf("oidc.%w", err)
	}
	switch c.Claim {
	case "", "email", "preferred_username":
	default:
		return fmt.Errorf("oidc.claim %q: must be email or preferred_username", c.Claim)
	}
	return nil
}

// openOIDC reads the client secret and the provider's discovery document;
// nil without an oidc section.
func openOIDC(ctx context.Context, c *oidcConfig) (*web.OIDCLogin, error) {
	if c == nil {
		return nil, nil
	}
	b, err := os.ReadFile(c.ClientSecretFile)
	if err != nil {
		return nil, fmt.Errorf("oidc.client_secret_file: %w", err)
	}
	secret := strings.TrimSpace(string(b))
	if secret == "" {
		return nil, errors.New("oidc.client_secret_file: the file is empty")
	}
	return web.NewOIDCLogin(ctx, web.OIDCConfig{Name: c.Name, Issuer: c.Issuer, ClientID: c.ClientID, ClientSecret: secret,
		RedirectURL: c.RedirectURL, Claim: c.Claim, Scopes: c.Scopes})
}
