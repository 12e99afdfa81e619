package web_test

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"

	"github.com/oauth2-proxy/mockoidc"

	"hoist/web"
)

// oidcLogin runs the whole redirect flow with a fresh browser (cookie jar):
// hoist's /login/oidc, the provider's authorization endpoint, hoist's
// callback. It returns the browser, the callback's status and its page.
func oidcLogin(t *testing.T, base string, next string) (*http.Client, int, string) {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar}
	resp, err := browser.Get(base + "/login/oidc?next=" + url.QueryEscape(next))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return browser, resp.StatusCode, string(b)
}

func TestOIDC_loginMapsTheClaimToAnExistingUser(t *testing.T) {
	m, err := mockoidc.Run()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Shutdown() })

	ts, _ := usersServerWith(t, func(base string) *web.OIDCLogin {
		cfg := m.Config()
		o, err := web.NewOIDCLogin(t.Context(), web.OIDCConfig{Name: "Mock", Issuer: cfg.Issuer,
			ClientID: cfg.ClientID, ClientSecret: cfg.ClientSecret, RedirectURL: base + "/login/oidc/callback"})
		if err != nil {
			t.Fatal(err)
		}
		return o
	})
	const boot = "boot-admin"
	c := ts.Client()

	// The login page offers the provider.
	resp, err := c.Get(ts.URL + "/login")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(page), "Log in with Mock") {
		t.Errorf("login page lacks the provider:\n%s", page)
	}

	// Unknown to hoist: refused, naming the user.
	m.QueueUser(&mockoidc.MockUser{Subject: "1", Email: "jane@example.com", EmailVerified: true})
	_, code, body := oidcLogin(t, ts.URL, "/runs")
	if code != http.StatusForbidden || !strings.Contains(body, "no hoist user jane@example.com") {
		t.Fatalf("unknown user: %d\n%s", code, body)
	}

	// Added, and a member of ml: logged in, sent to next, with her roles.
	call(t, c, ts.URL, "POST", "/api/v1/users", boot, web.NewUser{Name: "jane@example.com"}, nil)
	call(t, c, ts.URL, "POST", "/api/v1/projects/ml/members", boot, web.Member{User: "jane@example.com", Role: web.RoleUser}, nil)
	m.QueueUser(&mockoidc.MockUser{Subject: "1", Email: "jane@example.com", EmailVerified: true})
	browser, code, _ := oidcLogin(t, ts.URL, "/api/v1/whoami")
	if code != http.StatusOK {
		t.Fatalf("known user's login: %d", code)
	}
	var who web.Principal
	if code := call(t, browser, ts.URL, "GET", "/api/v1/whoami", "", nil, &who); code != 200 || who.Name != "jane@example.com" || who.RoleIn("ml") != web.RoleUser {
		t.Errorf("whoami after OIDC login: %d %+v", code, who)
	}

	// An unverified e-mail address is refused.
	m.QueueUser(&mockoidc.MockUser{Subject: "1", Email: "jane@example.com", EmailVerified: false})
	if _, code, _ := oidcLogin(t, ts.URL, "/"); code != http.StatusUnauthorized {
		t.Errorf("unverified e-mail: %d, want 401", code)
	}
}

func TestOIDC_callbackNeedsTheStateThisBrowserBegan(t *testing.T) {
	m, err := mockoidc.Run()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Shutdown() })
	ts, _ := usersServerWith(t, func(base string) *web.OIDCLogin {
		cfg := m.Config()
		o, err := web.NewOIDCLogin(t.Context(), web.OIDCConfig{Issuer: cfg.Issuer, ClientID: cfg.ClientID,
			ClientSecret: cfg.ClientSecret, RedirectURL: base + "/login/oidc/callback"})
		if err != nil {
			t.Fatal(err)
		}
		return o
	})
	call(t, ts.Client(), ts.URL, "POST", "/api/v1/users", "boot-admin", web.NewUser{Name: "jane.doe@example.com"}, nil)

	// The victim's browser begins a login; the attacker's follows its
	// redirect to the provider and back, without the victim's cookie.
	jar, _ := cookiejar.New(nil)
	victim := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := victim.Get(ts.URL + "/login/oidc")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	authURL := resp.Header.Get("Location")
	q, _ := url.Parse(authURL)
	if q.Query().Get("code_challenge_method") != "S256" || q.Query().Get("nonce") == "" || q.Query().Get("state") == "" {
		t.Errorf("authorization request lacks PKCE, nonce or state: %s", authURL)
	}
	attacker := &http.Client{}
	resp, err = attacker.Get(authURL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("callback without the browser's state cookie: %d, want 400", resp.StatusCode)
	}
}
