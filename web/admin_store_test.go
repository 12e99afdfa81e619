package web_test

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"hoist/web"
)

// TestAdminPage_tokenSecretShownOnceAndMembersManaged logs a manager in
// with a token and uses the page's forms (with the CSRF token the page
// carries): a member is added, a token created (its secret on that answer
// only) and revoked; without the CSRF token a form is refused.
func TestAdminPage_tokenSecretShownOnceAndMembersManaged(t *testing.T) {
	ts, _ := usersServer(t)
	const boot = "boot-admin"
	c := ts.Client()
	call(t, c, ts.URL, "POST", "/api/v1/users", boot, web.NewUser{Name: "ann"}, nil)
	call(t, c, ts.URL, "POST", "/api/v1/users", boot, web.NewUser{Name: "bob"}, nil)
	call(t, c, ts.URL, "POST", "/api/v1/projects/main/members", boot, web.Member{User: "ann", Role: web.RoleManager}, nil)
	var tok web.CreatedToken
	call(t, c, ts.URL, "POST", "/api/v1/tokens", boot, web.NewToken{Name: "login", User: "ann"}, &tok)

	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar}
	if resp, err := browser.PostForm(ts.URL+"/login", url.Values{"token": {tok.Secret}, "next": {"/admin"}}); err != nil {
		t.Fatal(err)
	} else {
		resp.Body.Close()
	}
	get := func() string {
		t.Helper()
		resp, err := browser.Get(ts.URL + "/admin")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("GET /admin: %d %s", resp.StatusCode, b)
		}
		return string(b)
	}
	page := get()
	if strings.Contains(page, `data-testid="users-table"`) {
		t.Error("a manager sees the users table")
	}
	if !strings.Contains(page, `data-testid="members-main"`) || strings.Contains(page, `<option value="admin">admin</option>`) {
		t.Errorf("a manager should see main's members and no admin option:\n%s", page)
	}
	csrf := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(page)
	if csrf == nil {
		t.Fatal("no csrf token on the page")
	}
	post := func(path string, form url.Values) (int, string) {
		t.Helper()
		resp, err := browser.PostForm(ts.URL+path, form)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := post("/admin/projects/main/members", url.Values{"user": {"bob"}, "role": {"viewer"}}); code != http.StatusForbidden {
		t.Errorf("form without csrf: %d, want 403", code)
	}
	if code, body := post("/admin/projects/main/members", url.Values{"csrf": {csrf[1]}, "user": {"bob"}, "role": {"viewer"}}); code != 200 || !strings.Contains(body, "bob is viewer of main") {
		t.Errorf("add bob: %d", code)
	}
	code, body := post("/admin/tokens", url.Values{"csrf": {csrf[1]}, "name": {"ci"}, "days": {"7"}})
	secret := regexp.MustCompile(`hoist_[A-Za-z0-9_-]{43}`).FindString(body)
	if code != 200 || secret == "" || !strings.Contains(body, `data-testid="token-secret"`) {
		t.Fatalf("create token on the page: %d, secret %q", code, secret)
	}
	if strings.Contains(get(), secret) {
		t.Error("the secret is shown again")
	}
	var who web.Principal
	if code := call(t, c, ts.URL, "GET", "/api/v1/whoami", secret, nil, &who); code != 200 || who.Name != "ann" {
		t.Errorf("the page's token: %d %+v", code, who)
	}
	var mine []web.Token
	call(t, c, ts.URL, "GET", "/api/v1/tokens", secret, nil, &mine)
	for _, tk := range mine {
		if tk.Name == "ci" {
			if code, _ := post("/admin/tokens/"+tk.ID+"/revoke", url.Values{"csrf": {csrf[1]}}); code != 200 {
				t.Errorf("revoke: %d", code)
			}
		}
	}
	if code := call(t, c, ts.URL, "GET", "/api/v1/whoami", secret, nil, nil); code != 401 {
		t.Errorf("revoked on the page: %d, want 401", code)
	}
}
