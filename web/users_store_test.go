package web_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"hoist/store"
	"hoist/web"
	"hoist/web/storeview"
)

// testClock is a clock tests move by hand.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// usersServer serves the API over a real SQLite store with the bootstrap
// admin token "boot-admin".
func usersServer(t *testing.T) (*httptest.Server, *testClock) {
	t.Helper()
	return usersServerWith(t, nil)
}

// usersServerWith is usersServer with the OpenID Connect login oidc builds
// for the server's base URL (nil: none).
func usersServerWith(t *testing.T, oidc func(base string) *web.OIDCLogin) (*httptest.Server, *testClock) {
	t.Helper()
	clock := &testClock{now: time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)}
	st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "hoist.db"), store.Options{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	view := storeview.New(st, "")
	ts := httptest.NewUnstartedServer(nil)
	ts.Start()
	ml := storeview.New(st, "ml")
	deps := web.Deps{Store: view, Syncer: noopSyncer{view}, Tokens: view, Users: view, Shared: view,
		Projects: map[string]web.ProjectDeps{"ml": {Store: ml, Syncer: noopSyncer{ml}}}}
	if oidc != nil {
		deps.OIDC = oidc(ts.URL)
	}
	srv, err := web.New(web.Config{AdminToken: "boot-admin", Now: clock.Now}, deps)
	if err != nil {
		t.Fatal(err)
	}
	ts.Config.Handler = srv.Handler()
	t.Cleanup(func() {
		srv.Close()
		ts.Close()
	})
	return ts, clock
}

// call sends a JSON request with a bearer token and decodes the answer
// into out (when not nil), returning the status.
func call(t *testing.T, c *http.Client, base, method, path, token string, body any, out any) int {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequestWithContext(t.Context(), method, base+path, rd)
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if out != nil && resp.StatusCode < 300 {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
	}
	return resp.StatusCode
}

func TestUsersAPI_rolesMembersAndTokensOverTheStore(t *testing.T) {
	ts, clock := usersServer(t)
	c := ts.Client()
	const boot = "boot-admin"
	mustStatus := func(what string, got, want int) {
		t.Helper()
		if got != want {
			t.Errorf("%s: %d, want %d", what, got, want)
		}
	}
	for _, u := range []string{"ann", "bob"} {
		mustStatus("create "+u, call(t, c, ts.URL, "POST", "/api/v1/users", boot, web.NewUser{Name: u}, nil), 201)
	}
	mustStatus("create ann again", call(t, c, ts.URL, "POST", "/api/v1/users", boot, web.NewUser{Name: "ann"}, nil), 409)
	mustStatus("create global viewer", call(t, c, ts.URL, "POST", "/api/v1/users", boot, web.NewUser{Name: "vic", Role: web.RoleViewer}, nil), 400)
	mustStatus("create user admin", call(t, c, ts.URL, "POST", "/api/v1/users", boot, web.NewUser{Name: "admin"}, nil), 400)
	mustStatus("ann manages ml", call(t, c, ts.URL, "POST", "/api/v1/projects/ml/members", boot, web.Member{User: "ann", Role: web.RoleManager}, nil), 200)
	mustStatus("member nobody", call(t, c, ts.URL, "POST", "/api/v1/projects/ml/members", boot, web.Member{User: "nobody", Role: web.RoleUser}, nil), 404)

	var annTok web.CreatedToken
	mustStatus("admin creates ann's token", call(t, c, ts.URL, "POST", "/api/v1/tokens", boot, web.NewToken{Name: "ci", User: "ann"}, &annTok), 201)
	if !strings.HasPrefix(annTok.Secret, store.TokenPrefix) || annTok.User != "ann" || annTok.ID == "" {
		t.Fatalf("created token %+v", annTok)
	}
	ann := annTok.Secret

	var who web.Principal
	mustStatus("ann whoami", call(t, c, ts.URL, "GET", "/api/v1/whoami", ann, nil, &who), 200)
	if who.Name != "ann" || who.Role != web.RoleUser || who.RoleIn("ml") != web.RoleManager || who.RoleIn("main") != "" {
		t.Errorf("ann is %+v", who)
	}
	// A manager manages members but makes no admins and sees no users.
	mustStatus("ann lists ml", call(t, c, ts.URL, "GET", "/api/v1/projects/ml/members", ann, nil, nil), 200)
	mustStatus("ann adds bob", call(t, c, ts.URL, "POST", "/api/v1/projects/ml/members", ann, web.Member{User: "bob", Role: web.RoleUser}, nil), 200)
	mustStatus("ann makes bob admin", call(t, c, ts.URL, "POST", "/api/v1/projects/ml/members", ann, web.Member{User: "bob", Role: web.RoleAdmin}, nil), 403)
	mustStatus("ann in web", call(t, c, ts.URL, "GET", "/api/v1/projects/web/members", ann, nil, nil), 404)
	mustStatus("ann lists users", call(t, c, ts.URL, "GET", "/api/v1/users", ann, nil, nil), 403)
	mustStatus("admin makes bob admin of ml", call(t, c, ts.URL, "POST", "/api/v1/projects/ml/members", boot, web.Member{User: "bob", Role: web.RoleAdmin}, nil), 200)
	mustStatus("ann removes admin bob", call(t, c, ts.URL, "DELETE", "/api/v1/projects/ml/members/bob", ann, nil, nil), 403)

	var members []web.Member
	call(t, c, ts.URL, "GET", "/api/v1/projects/ml/members", boot, nil, &members)
	if len(members) != 2 || members[0] != (web.Member{User: "ann", Role: web.RoleManager}) || members[1] != (web.Member{User: "bob", Role: web.RoleAdmin}) {
		t.Errorf("ml members %+v", members)
	}

	// Tokens: ann's own only; a second "ci" is refused; another user's is
	// not hers to make.
	var bobTok web.CreatedToken
	call(t, c, ts.URL, "POST", "/api/v1/tokens", boot, web.NewToken{Name: "laptop", User: "bob"}, &bobTok)
	var mine []web.Token
	call(t, c, ts.URL, "GET", "/api/v1/tokens", ann, nil, &mine)
	if len(mine) != 1 || mine[0].Name != "ci" || mine[0].User != "ann" {
		t.Errorf("ann's tokens %+v", mine)
	}
	var all []web.Token
	call(t, c, ts.URL, "GET", "/api/v1/tokens", boot, nil, &all)
	if len(all) != 2 {
		t.Errorf("all tokens %+v", all)
	}
	mustStatus("ann's second ci", call(t, c, ts.URL, "POST", "/api/v1/tokens", ann, web.NewToken{Name: "ci"}, nil), 409)
	mustStatus("ann makes bob's", call(t, c, ts.URL, "POST", "/api/v1/tokens", ann, web.NewToken{Name: "x", User: "bob"}, nil), 403)
	mustStatus("ann revokes bob's", call(t, c, ts.URL, "DELETE", "/api/v1/tokens/"+bobTok.ID, ann, nil, nil), 404)

	// An expiring token works until it expires.
	exp := clock.Now().Add(time.Hour)
	var short web.CreatedToken
	mustStatus("ann's short token", call(t, c, ts.URL, "POST", "/api/v1/tokens", ann, web.NewToken{Name: "short", ExpiresAt: &exp}, &short), 201)
	mustStatus("short before expiry", call(t, c, ts.URL, "GET", "/api/v1/whoami", short.Secret, nil, nil), 200)
	clock.Advance(2 * time.Hour)
	mustStatus("short after expiry", call(t, c, ts.URL, "GET", "/api/v1/whoami", short.Secret, nil, nil), 401)

	// A revoked token is refused.
	mustStatus("ann revokes ci", call(t, c, ts.URL, "DELETE", "/api/v1/tokens/"+annTok.ID, ann, nil, nil), 204)
	mustStatus("ann's revoked ci", call(t, c, ts.URL, "GET", "/api/v1/whoami", ann, nil, nil), 401)
}

// TestUsersAPI_sessionFollowsMembership logs bob in with a token, then
// changes his memberships: the session sees each change at once, and ends
// when bob is deleted.
func TestUsersAPI_sessionFollowsMembership(t *testing.T) {
	ts, _ := usersServer(t)
	const boot = "boot-admin"
	c := ts.Client()
	call(t, c, ts.URL, "POST", "/api/v1/users", boot, web.NewUser{Name: "bob"}, nil)
	call(t, c, ts.URL, "POST", "/api/v1/projects/ml/members", boot, web.Member{User: "bob", Role: web.RoleUser}, nil)
	var tok web.CreatedToken
	call(t, c, ts.URL, "POST", "/api/v1/tokens", boot, web.NewToken{Name: "login", User: "bob"}, &tok)

	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar, Transport: c.Transport, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := browser.PostForm(ts.URL+"/login", url.Values{"token": {tok.Secret}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("login: %d", resp.StatusCode)
	}
	whoami := func() (web.Principal, int) {
		var p web.Principal
		code := call(t, browser, ts.URL, "GET", "/api/v1/whoami", "", nil, &p)
		return p, code
	}
	if p, code := whoami(); code != 200 || p.RoleIn("ml") != web.RoleUser {
		t.Fatalf("session whoami: %d %+v", code, p)
	}
	call(t, c, ts.URL, "POST", "/api/v1/projects/ml/members", boot, web.Member{User: "bob", Role: web.RoleViewer}, nil)
	if p, _ := whoami(); p.RoleIn("ml") != web.RoleViewer {
		t.Errorf("after demotion: %+v", p)
	}
	call(t, c, ts.URL, "DELETE", "/api/v1/projects/ml/members/bob", boot, nil, nil)
	if p, _ := whoami(); p.RoleIn("ml") != "" {
		t.Errorf("after removal: %+v", p)
	}
	if code := call(t, c, ts.URL, "DELETE", "/api/v1/users/bob", boot, nil, nil); code != 204 {
		t.Fatalf("delete bob: %d", code)
	}
	if _, code := whoami(); code != 401 {
		t.Errorf("deleted user's session: %d, want 401", code)
	}
}
