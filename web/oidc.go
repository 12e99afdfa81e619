package web

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/labstack/echo/v5"
	"golang.org/x/oauth2"
)

// OIDCConfig configures login through an OpenID Connect provider (the
// authorization code flow with state, nonce and PKCE, as
// https://openid.net/specs/openid-connect-core-1_0.html#CodeFlowAuth and
// RFC 7636 describe).
type OIDCConfig struct {
	// Name is shown on the login page ("Log in with Name").
	Name string
	// Issuer is the provider's issuer URL; its discovery document is read
	// from Issuer + "/.well-known/openid-configuration".
	Issuer string
	// ClientID and ClientSecret are hoist's client at the provider.
	ClientID, ClientSecret string
	// RedirectURL is this server's /login/oidc/callback as the provider
	// knows it.
	RedirectURL string
	// Claim is the ID token claim naming the hoist user: "email" (then
	// email_verified must be true) or "preferred_username".
	Claim string
	// Scopes are requested besides "openid".
	Scopes []string
	// HTTPClient talks to the provider (nil: http.DefaultClient).
	HTTPClient *http.Client
}

// OIDCLogin logs people in with an OpenID Connect provider. The ID token's
// claim names an existing hoist user: unknown users are refused (an admin
// adds them first), so a provider's whole directory does not get in.
type OIDCLogin struct {
	cfg      OIDCConfig
	oauth    oauth2.Config
	verifier *oidc.IDTokenVerifier
	client   *http.Client

	mu      sync.Mutex
	pending map[string]oidcPending
}

// oidcPending is a login begun and not yet called back.
type oidcPending struct {
	nonce, verifier, next string
	expires               time.Time
}

// oidcPendingTTL bounds how long a login at the provider may take.
const oidcPendingTTL = 10 * time.Minute

// maxOIDCPending bounds the logins begun and not finished.
const maxOIDCPending = 10000

// oidcStateCookie binds a login's state to the browser that began it.
const oidcStateCookie = "hoist_oidc_state"

// NewOIDCLogin reads the provider's discovery document and keys' address.
func NewOIDCLogin(ctx context.Context, cfg OIDCConfig) (*OIDCLogin, error) {
	switch cfg.Claim {
	case "":
		cfg.Claim = "email"
	case "email", "preferred_username":
	default:
		return nil, fmt.Errorf("oidc: claim %q is not email or preferred_username", cfg.Claim)
	}
	if cfg.Name == "" {
		cfg.Name = "OpenID Connect"
	}
	client := cfg.HTTPClient
	if client == nil {
		client = http.DefaultClient
	}
	provider, err := oidc.NewProvider(oidc.ClientContext(ctx, client), cfg.Issuer)
	if err != nil {
		return nil, fmt.Errorf("oidc: discover %s: %w", cfg.Issuer, err)
	}
	scopes := []string{oidc.ScopeOpenID}
	switch cfg.Claim {
	case "email":
		scopes = append(scopes, "email")
	case "preferred_username":
		scopes = append(scopes, "profile")
	}
	scopes = append(scopes, cfg.Scopes...)
	return &OIDCLogin{
		cfg: cfg,
		oauth: oauth2.Config{ClientID: cfg.ClientID, ClientSecret: cfg.ClientSecret, RedirectURL: cfg.RedirectURL,
			Endpoint: provider.Endpoint(), Scopes: scopes},
		verifier: provider.Verifier(&oidc.Config{ClientID: cfg.ClientID}),
		client:   client,
		pending:  map[string]oidcPending{},
	}, nil
}

// Name is what the login page calls the provider ("" without one).
func (o *OIDCLogin) Name() string {
	if o == nil {
		return ""
	}
	return o.cfg.Name
}

// begin records a new login and returns its state and the provider's
// authorization URL.
func (o *OIDCLogin) begin(now time.Time, next string) (state, authURL string) {
	state, nonce, verifier := randomToken(), randomToken(), oauth2.GenerateVerifier()
	o.mu.Lock()
	for k, p := range o.pending {
		if now.After(p.expires) {
			delete(o.pending, k)
		}
	}
	if len(o.pending) >= maxOIDCPending {
		clear(o.pending)
	}
	o.pending[state] = oidcPending{nonce: nonce, verifier: verifier, next: next, expires: now.Add(oidcPendingTTL)}
	o.mu.Unlock()
	return state, o.oauth.AuthCodeURL(state, oidc.Nonce(nonce), oauth2.S256ChallengeOption(verifier))
}

// take removes and returns the login of state, if it is still pending.
func (o *OIDCLogin) take(now time.Time, state string) (oidcPending, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	p, ok := o.pending[state]
	delete(o.pending, state)
	if !ok || now.After(p.expires) {
		return oidcPending{}, false
	}
	return p, true
}

// finish exchanges the code for tokens, verifies the ID token and its
// nonce, and returns the user name its claim holds.
func (o *OIDCLogin) finish(ctx context.Context, p oidcPending, code string) (string, error) {
	ctx = oidc.ClientContext(ctx, o.client)
	tok, err := o.oauth.Exchange(ctx, code, oauth2.VerifierOption(p.verifier))
	if err != nil {
		return "", fmt.Errorf("exchange the code: %w", err)
	}
	raw, ok := tok.Extra("id_token").(string)
	if !ok || raw == "" {
		return "", errors.New("the provider returned no id_token")
	}
	idt, err := o.verifier.Verify(ctx, raw)
	if err != nil {
		return "", fmt.Errorf("verify the id token: %w", err)
	}
	if subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(p.nonce)) != 1 {
		return "", errors.New("the id token's nonce is not this login's")
	}
	var claims map[string]any
	if err := idt.Claims(&claims); err != nil {
		return "", fmt.Errorf("read the id token's claims: %w", err)
	}
	name, _ := claims[o.cfg.Claim].(string)
	if name == "" {
		return "", fmt.Errorf("the id token has no %s claim", o.cfg.Claim)
	}
	if o.cfg.Claim == "email" {
		// An address the provider has not verified could be anyone's.
		if v, _ := claims["email_verified"].(bool); !v {
			return "", fmt.Errorf("the provider does not say it verified %s (email_verified)", name)
		}
	}
	return name, nil
}

// oidcBegin sends the browser to the provider.
func (s *Server) oidcBegin(c *echo.Context) error {
	o := s.deps.OIDC
	if o == nil {
		return ErrNotFound
	}
	state, authURL := o.begin(s.now(), safeNext(c.QueryParam("next")))
	c.SetCookie(&http.Cookie{Name: oidcStateCookie, Value: state, Path: "/login/oidc", HttpOnly: true,
		Secure: c.IsTLS(), SameSite: http.SameSiteLaxMode, MaxAge: int(oidcPendingTTL / time.Second)})
	return c.Redirect(http.StatusFound, authURL)
}

// oidcCallback finishes a login the provider sent back: the state must be
// the one this browser began, the ID token valid, and its claim an
// existing hoist user.
func (s *Server) oidcCallback(c *echo.Context) error {
	o := s.deps.OIDC
	if o == nil {
		return ErrNotFound
	}
	ip := c.RealIP()
	if !s.logins.allow(ip) {
		c.Response().Header().Set("Retry-After", "60")
		return s.render(c, http.StatusTooManyRequests, loginPage("/", "Too many failed attempts; wait a minute.", o.Name()))
	}
	fail := func(code int, msg string, err error) error {
		s.logins.fail(ip)
		s.log.Warn("oidc_login_failed", "remote", ip, "error", err)
		return s.render(c, code, loginPage("/", msg, o.Name()))
	}
	c.SetCookie(&http.Cookie{Name: oidcStateCookie, Value: "", Path: "/login/oidc", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteLaxMode})
	if e := c.QueryParam("error"); e != "" {
		return fail(http.StatusUnauthorized, "The provider refused the login: "+e, errors.New(e))
	}
	state := c.QueryParam("state")
	ck, err := c.Request().Cookie(oidcStateCookie)
	if err != nil || state == "" || subtle.ConstantTimeCompare([]byte(ck.Value), []byte(state)) != 1 {
		return fail(http.StatusBadRequest, "This login was not begun in this browser; try again.", errors.New("state does not match the cookie"))
	}
	p, ok := o.take(s.now(), state)
	if !ok {
		return fail(http.StatusBadRequest, "This login expired; try again.", errors.New("unknown or expired state"))
	}
	name, err := o.finish(c.Request().Context(), p, c.QueryParam("code"))
	if err != nil {
		return fail(http.StatusUnauthorized, "The provider's answer was not valid.", err)
	}
	if s.deps.Users == nil {
		return fail(http.StatusForbidden, "This hoist keeps no users; log in with a token.", errors.New("no users"))
	}
	pr, err := s.deps.Users.Principal(c.Request().Context(), name)
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return fail(http.StatusForbidden, "There is no hoist user "+name+": ask an admin to add it (hoist user add "+name+").", err)
		}
		return err
	}
	s.startSession(c, pr)
	s.log.Info("oidc_login", "user", name)
	return c.Redirect(http.StatusSeeOther, p.next)
}

// oidcRedirectPath is the callback's path, for checking a redirect URL.
const oidcRedirectPath = "/login/oidc/callback"

// CheckOIDCRedirect reports whether a redirect URL ends at this server's
// callback path.
func CheckOIDCRedirect(redirect string) error {
	u, err := url.Parse(redirect)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("redirect_url %q is not an http(s) URL", redirect)
	}
	if !strings.HasSuffix(u.Path, oidcRedirectPath) {
		return fmt.Errorf("redirect_url %q must end in %s", redirect, oidcRedirectPath)
	}
	return nil
}
