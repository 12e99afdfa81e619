package web

import (
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

// login posts tok to /login and returns the session cookie.
func (f *fixture) login(t *testing.T, tok string) *http.Cookie {
	t.Helper()
	r := f.do(t, "POST", "/login", "", strings.NewReader(url.Values{"token": {tok}, "next": {"/runs"}}.Encode()),
		"Content-Type", "application/x-www-form-urlencoded")
	if r.StatusCode != http.StatusSeeOther || r.Header.Get("Location") != "/runs" {
		t.Fatalf("login: %d %q", r.StatusCode, r.Header.Get("Location"))
	}
	for _, c := range r.Cookies() {
		if c.Name == sessionCookie {
			if !c.HttpOnly || c.SameSite != http.SameSiteLaxMode {
				t.Errorf("cookie flags: HttpOnly=%v SameSite=%v", c.HttpOnly, c.SameSite)
			}
			return c
		}
	}
	t.Fatal("no session cookie")
	return nil
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func TestServer_loginCookieAndCSRF(t *testing.T) {
	f := newFixture(t)
	ck := f.login(t, userTok)
	cookie := ck.Name + "=" + ck.Value

	page := f.do(t, "GET", "/", "", nil, "Cookie", cookie)
	if page.StatusCode != 200 {
		t.Fatalf("overview with cookie: %d", page.StatusCode)
	}
	m := csrfRE.FindStringSubmatch(readBody(t, page))
	if m == nil {
		t.Fatal("overview has no csrf field")
	}
	form := "application/x-www-form-urlencoded"
	tests := []struct {
		name string
		body string
		hdr  []string
		want int
	}{
		{"no csrf token", "", nil, 403},
		{"wrong csrf token", "csrf=nope", nil, 403},
		{"cross-site request", "csrf=" + url.QueryEscape(m[1]), []string{"Sec-Fetch-Site", "cross-site"}, 403},
		{"valid token", "csrf=" + url.QueryEscape(m[1]), nil, 303},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hdr := append([]string{"Cookie", cookie, "Content-Type", form}, tt.hdr...)
			r := f.do(t, "POST", "/sync", "", strings.NewReader(tt.body), hdr...)
			if r.StatusCode != tt.want {
				t.Errorf("status %d, want %d", r.StatusCode, tt.want)
			}
		})
	}
}

func TestServer_loginRejectsBadToken(t *testing.T) {
	f := newFixture(t)
	r := f.do(t, "POST", "/login", "", strings.NewReader("token=wrong"), "Content-Type", "application/x-www-form-urlencoded")
	if r.StatusCode != 401 || len(r.Cookies()) != 0 {
		t.Errorf("status %d cookies %v", r.StatusCode, r.Cookies())
	}
}

func TestServer_logoutEndsSession(t *testing.T) {
	f := newFixture(t)
	ck := f.login(t, adminTok)
	cookie := ck.Name + "=" + ck.Value
	m := csrfRE.FindStringSubmatch(readBody(t, f.do(t, "GET", "/runs", "", nil, "Cookie", cookie)))
	if m == nil {
		t.Fatal("no csrf field")
	}
	r := f.do(t, "POST", "/logout", "", strings.NewReader("csrf="+url.QueryEscape(m[1])), "Cookie", cookie, "Content-Type", "application/x-www-form-urlencoded")
	if r.StatusCode != 303 {
		t.Fatalf("logout %d", r.StatusCode)
	}
	if r := f.do(t, "GET", "/runs", "", nil, "Cookie", cookie); r.StatusCode != 401 {
		t.Errorf("after logout: %d", r.StatusCode)
	}
}

func TestSafeNext(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"empty", "", "/"},
		{"local path", "/runs", "/runs"},
		{"local path with query and fragment", "/runs/a?job=1#end", "/runs/a?job=1#end"},
		{"escaped local path", "/runs/a%20b", "/runs/a%20b"},
		{"protocol-relative", "//evil.example", "/"},
		{"absolute URL", "https://evil.example/x", "/"},
		{"scheme without slashes", "http:evil.example", "/"},
		{"javascript", "javascript:alert(1)", "/"},
		{"backslash", "/\\evil.example", "/"},
		{"leading backslashes", "\\\\evil.example", "/"},
		{"tab after slash", "/\t/evil.example", "/"},
		{"newline after slash", "/\n/evil.example", "/"},
		{"carriage return", "/\r//evil.example", "/"},
		{"encoded tab", "/%09/evil.example", "/"},
		{"encoded newline", "/%0a/evil.example", "/"},
		{"encoded backslash", "/%5Cevil.example", "/"},
		{"encoded slash", "/%2Fevil.example", "/"},
		{"relative path", "runs", "/"},
		{"user info", "//u@evil.example", "/"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := safeNext(tt.in); got != tt.want {
				t.Errorf("safeNext(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestServer_loginRedirectStaysLocal(t *testing.T) {
	f := newFixture(t)
	for _, next := range []string{"/\t/evil.example", "/%09/evil.example", "//evil.example", "/\\evil.example", "https://evil.example"} {
		r := f.do(t, "POST", "/login", "", strings.NewReader(url.Values{"token": {adminTok}, "next": {next}}.Encode()),
			"Content-Type", "application/x-www-form-urlencoded")
		if r.StatusCode != http.StatusSeeOther || r.Header.Get("Location") != "/" {
			t.Errorf("next=%q: %d Location %q, want 303 to /", next, r.StatusCode, r.Header.Get("Location"))
		}
	}
}

func TestServer_loginFailuresAreLimited(t *testing.T) {
	f := newFixture(t)
	form := []string{"Content-Type", "application/x-www-form-urlencoded"}
	for i := range maxLoginFailures {
		if r := f.do(t, "POST", "/login", "", strings.NewReader("token=wrong"), form...); r.StatusCode != 401 {
			t.Fatalf("attempt %d: %d", i, r.StatusCode)
		}
	}
	r := f.do(t, "POST", "/login", "", strings.NewReader("token="+adminTok), form...)
	if r.StatusCode != http.StatusTooManyRequests {
		t.Errorf("after %d failures even a good token gets %d, want 429", maxLoginFailures, r.StatusCode)
	}
}

func TestServer_loginLimitIgnoresForwardedFor(t *testing.T) {
	f := newFixture(t)
	form := []string{"Content-Type", "application/x-www-form-urlencoded"}
	for i := range maxLoginFailures + 1 {
		f.do(t, "POST", "/login", "", strings.NewReader("token=wrong"), append(form, "X-Forwarded-For", fmt.Sprintf("10.0.0.%d", i))...)
	}
	if r := f.do(t, "POST", "/login", "", strings.NewReader("token=wrong"), form...); r.StatusCode != http.StatusTooManyRequests {
		t.Errorf("forged X-Forwarded-For escaped the limit: %d", r.StatusCode)
	}
}

func TestServer_bearerFailuresAreLimitedLikeLogins(t *testing.T) {
	f := newFixture(t)
	for i := range maxLoginFailures {
		if r := f.do(t, "GET", "/api/v1/runs", "guess-"+fmt.Sprint(i), nil); r.StatusCode != http.StatusUnauthorized {
			t.Fatalf("attempt %d: %d, want 401", i, r.StatusCode)
		}
	}
	r := f.do(t, "GET", "/api/v1/runs", adminTok, nil)
	if r.StatusCode != http.StatusTooManyRequests || r.Header.Get("Retry-After") == "" {
		t.Errorf("after %d bad tokens: %d Retry-After %q, want 429 with Retry-After", maxLoginFailures, r.StatusCode, r.Header.Get("Retry-After"))
	}
	form := []string{"Content-Type", "application/x-www-form-urlencoded"}
	if r := f.do(t, "POST", "/login", "", strings.NewReader("token="+adminTok), form...); r.StatusCode != http.StatusTooManyRequests {
		t.Errorf("login after bad bearer tokens: %d, want 429 (one limit per address)", r.StatusCode)
	}
}

func TestServer_goodBearerTokensAreNotLimited(t *testing.T) {
	f := newFixture(t)
	for i := range 3 * maxLoginFailures {
		if r := f.do(t, "GET", "/api/v1/runs", adminTok, nil); r.StatusCode != http.StatusOK {
			t.Fatalf("request %d: %d, want 200", i, r.StatusCode)
		}
	}
}
