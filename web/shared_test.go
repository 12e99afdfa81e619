package web_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"hoist/store"
	"hoist/web"
	"hoist/web/storeview"
)

// twoServers starts two web servers on one store, as two hoist servers
// share one database.
func twoServers(t *testing.T) (a, b *httptest.Server) {
	t.Helper()
	st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "hoist.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	start := func() *httptest.Server {
		view := storeview.New(st, "")
		srv, err := web.New(web.Config{AdminToken: "bootstrap-admin", WebhookSecret: "hook-secret"},
			web.Deps{Store: view, Syncer: noopSyncer{view}, Tokens: view, Inventory: view, Shared: view})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { srv.Close() })
		ts := httptest.NewServer(srv.Handler())
		t.Cleanup(ts.Close)
		return ts
	}
	return start(), start()
}

var noRedirect = &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func TestShared_sessionFromOneServerWorksOnTheOther(t *testing.T) {
	a, b := twoServers(t)
	resp, err := noRedirect.PostForm(a.URL+"/login", url.Values{"token": {"bootstrap-admin"}, "next": {"/"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var cookie *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == "hoist_session" {
			cookie = c
		}
	}
	if resp.StatusCode != http.StatusSeeOther || cookie == nil {
		t.Fatalf("login on a: %d, cookie %v", resp.StatusCode, cookie)
	}
	get := func(base string) int {
		req, _ := http.NewRequest(http.MethodGet, base+"/api/v1/pulls", nil)
		req.AddCookie(cookie)
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := get(b.URL); got != http.StatusOK {
		t.Errorf("server b with a's session cookie: %d, want 200", got)
	}
	req, _ := http.NewRequest(http.MethodGet, b.URL+"/api/v1/pulls", nil)
	req.AddCookie(&http.Cookie{Name: "hoist_session", Value: "forged"})
	if resp, err := noRedirect.Do(req); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("forged cookie: %v, %v; want 401", resp.StatusCode, err)
	}
}

func hook(t *testing.T, base, path, body string, hdr ...string) (int, string) {
	t.Helper()
	mac := hmac.New(sha256.New, []byte("hook-secret"))
	mac.Write([]byte(body))
	req, _ := http.NewRequest(http.MethodPost, base+path, strings.NewReader(body))
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestShared_replayToTheOtherServerIsCaught(t *testing.T) {
	a, b := twoServers(t)
	if code, body := hook(t, a.URL, "/hooks/generic", `{}`, "X-Hoist-Delivery", "d-1"); code != http.StatusAccepted {
		t.Fatalf("first delivery on a: %d %s", code, body)
	}
	if code, body := hook(t, b.URL, "/hooks/generic", `{}`, "X-Hoist-Delivery", "d-1"); code != http.StatusOK || !strings.Contains(body, `"duplicate":true`) {
		t.Errorf("replay on b: %d %s; want a duplicate", code, body)
	}
	if code, _ := hook(t, b.URL, "/hooks/generic", `{}`, "X-Hoist-Delivery", "d-2"); code != http.StatusAccepted {
		t.Errorf("new delivery on b: %d", code)
	}
}

func TestShared_pullRequestPlanIsSeenByTheOtherServer(t *testing.T) {
	a, b := twoServers(t)
	pr := `{"action":"opened","number":7,"pull_request":{"title":"t","head":{"sha":"abc","ref":"f"},"base":{"ref":"main"}},"repository":{"full_name":"o/r"}}`
	if code, body := hook(t, a.URL, "/hooks/github", pr, "X-GitHub-Event", "pull_request", "X-GitHub-Delivery", "p-1"); code != http.StatusAccepted {
		t.Fatalf("pull request on a: %d %s", code, body)
	}
	req, _ := http.NewRequest(http.MethodGet, b.URL+"/api/v1/pulls", nil)
	req.Header.Set("Authorization", "Bearer bootstrap-admin")
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(body), `"number":7`) && !strings.Contains(string(body), `"state":"planning"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("server b's pulls: %s", body)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
