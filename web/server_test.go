package web

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const (
	adminTok   = "admin-secret-token"
	userTok    = "user-token"
	managerTok = "manager-token"
	viewerTok  = "viewer-token"
)

var t0 = time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)

type fixture struct {
	srv    *Server
	store  *memStore
	syncer *fakeSyncer
	ts     *httptest.Server
}

func intp(n int) *int { return &n }

func newFixture(t *testing.T, mutate ...func(*Config, *Deps)) *fixture {
	t.Helper()
	st := newMemStore()
	st.putRun(Run{
		Name: "hello", Type: "task", Status: "done", StatusMessage: "exited (0)", Revision: "0123456789abcdef0123",
		SubmittedAt: t0.Add(-time.Hour), CostPerHour: 0.5, Spec: json.RawMessage(`{"type":"task","name":"hello"}`),
		Jobs: []Job{
			{ID: "job-2", SubmissionID: "sub-2", SubmissionNum: 1, Status: "done", ExitCode: intp(0), SubmittedAt: t0.Add(-30 * time.Minute)},
			{ID: "job-1", SubmissionID: "sub-1", SubmissionNum: 0, Status: "failed", ExitCode: intp(3), TerminationReason: "container_exited_with_error", SubmittedAt: t0.Add(-time.Hour)},
		},
	})
	st.putRun(Run{Name: "train", Type: "task", Status: "running", Revision: "abc", SubmittedAt: t0.Add(-time.Minute), Fleet: "gpu",
		Jobs: []Job{{ID: "job-3", SubmissionID: "sub-3", Status: "running", SubmittedAt: t0.Add(-time.Minute)}}})
	st.appendLog("job-2", "hello", "world")
	st.appendLog("job-1", "boom")
	sy := &fakeSyncer{status: SyncStatus{Status: SyncSynced, Revision: "0123", LatestRevision: "0123"}}
	cfg := Config{AdminToken: adminTok, WebhookSecret: "It's a Secret to Everybody", Now: func() time.Time { return t0 }, ListCacheTTL: -1}
	deps := Deps{Store: st, Syncer: sy, Tokens: fakeTokens{
		userTok:    {Name: "ursula", Role: RoleUser, Projects: map[string]Role{DefaultProject: RoleUser}},
		managerTok: {Name: "mona", Role: RoleUser, Projects: map[string]Role{DefaultProject: RoleManager}},
		viewerTok:  {Name: "vic", Role: RoleUser, Projects: map[string]Role{DefaultProject: RoleViewer}},
	}}
	for _, m := range mutate {
		m(&cfg, &deps)
	}
	s, err := New(cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return &fixture{srv: s, store: st, syncer: sy, ts: ts}
}

// do sends a request with the bearer token tok (none when empty).
func (f *fixture) do(t *testing.T, method, path, tok string, body io.Reader, hdr ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, f.ts.URL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func readBody(t *testing.T, r *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestServer_healthzIsOpen(t *testing.T) {
	f := newFixture(t)
	r := f.do(t, "GET", "/healthz", "", nil)
	if r.StatusCode != 200 {
		t.Fatalf("status %d", r.StatusCode)
	}
}

func TestServer_getRunJSON(t *testing.T) {
	f := newFixture(t)
	r := f.do(t, "GET", "/api/v1/runs/hello", adminTok, nil)
	if r.StatusCode != 200 {
		t.Fatalf("status %d: %s", r.StatusCode, readBody(t, r))
	}
	var got struct {
		Name          string `json:"name"`
		Status        string `json:"status"`
		StatusMessage string `json:"status_message"`
		Revision      string `json:"revision"`
		Jobs          []struct {
			SubmissionID string `json:"submission_id"`
			Status       string `json:"status"`
			ExitCode     *int   `json:"exit_code"`
		} `json:"jobs"`
	}
	if err := json.NewDecoder(r.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	if got.Name != "hello" || got.Status != "done" || got.StatusMessage != "exited (0)" || got.Revision != "0123456789abcdef0123" {
		t.Errorf("run = %+v", got)
	}
	if len(got.Jobs) != 2 || got.Jobs[0].SubmissionID != "sub-2" || *got.Jobs[0].ExitCode != 0 || *got.Jobs[1].ExitCode != 3 {
		t.Errorf("jobs = %+v", got.Jobs)
	}
}

func TestServer_listRunsJSONArray(t *testing.T) {
	f := newFixture(t)
	r := f.do(t, "GET", "/api/v1/runs?status=running", viewerTok, nil)
	var got []map[string]any
	if err := json.NewDecoder(r.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0]["name"] != "train" {
		t.Errorf("runs = %v", got)
	}
}

func TestServer_runLogsText(t *testing.T) {
	f := newFixture(t)
	tests := []struct{ query, want string }{
		{"", "hello\nworld\n"},
		{"?job=sub-1", "boom\n"},
		{"?after=1", "world\n"},
		{"?limit=1", "hello\n"},
	}
	for _, tt := range tests {
		r := f.do(t, "GET", "/api/v1/runs/hello/logs"+tt.query, adminTok, nil)
		if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
			t.Errorf("%s: content-type %q", tt.query, ct)
		}
		if got := readBody(t, r); got != tt.want {
			t.Errorf("%s: body %q, want %q", tt.query, got, tt.want)
		}
	}
}

func TestServer_notFoundIsJSON(t *testing.T) {
	f := newFixture(t)
	r := f.do(t, "GET", "/api/v1/runs/nope", adminTok, nil)
	if r.StatusCode != 404 {
		t.Fatalf("status %d", r.StatusCode)
	}
	var e APIError
	if err := json.NewDecoder(r.Body).Decode(&e); err != nil || e.Message == "" {
		t.Errorf("error body %+v, %v", e, err)
	}
}

func TestServer_syncStatusAndTrigger(t *testing.T) {
	f := newFixture(t)
	r := f.do(t, "GET", "/api/v1/sync", userTok, nil)
	var got map[string]any
	if err := json.NewDecoder(r.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"status": "synced", "revision": "0123", "latest_revision": "0123", "errors": []any{}, "held": false, "held_reasons": []any{}, "auto_sync": false}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("sync status (-want +got):\n%s", d)
	}
	r = f.do(t, "POST", "/api/v1/sync?wait=true", userTok, nil)
	if r.StatusCode != 200 {
		t.Fatalf("POST sync: %d %s", r.StatusCode, readBody(t, r))
	}
	if n := f.syncer.count(); n != 1 {
		t.Errorf("syncs = %d, want 1", n)
	}
}

func TestServer_authPerRole(t *testing.T) {
	f := newFixture(t)
	tests := []struct {
		name, method, path, tok string
		want                    int
	}{
		{"no token on API", "GET", "/api/v1/runs", "", 401},
		{"bad token on API", "GET", "/api/v1/runs", "nope", 401},
		{"no token on page", "GET", "/runs", "", 401},
		{"viewer reads", "GET", "/api/v1/runs", viewerTok, 200},
		{"viewer cannot sync", "POST", "/api/v1/sync", viewerTok, 403},
		{"user syncs", "POST", "/api/v1/sync", userTok, 202},
		{"admin syncs", "POST", "/api/v1/sync", adminTok, 202},
		{"viewer sees page", "GET", "/runs", viewerTok, 200},
		{"viewer cannot sync from page", "POST", "/sync", viewerTok, 403},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := f.do(t, tt.method, tt.path, tt.tok, nil)
			if r.StatusCode != tt.want {
				t.Errorf("%s %s as %q: %d, want %d", tt.method, tt.path, tt.tok, r.StatusCode, tt.want)
			}
		})
	}
}

func TestServer_pageRedirectsBrowserToLogin(t *testing.T) {
	f := newFixture(t)
	r := f.do(t, "GET", "/runs/hello", "", nil, "Accept", "text/html")
	if r.StatusCode != http.StatusSeeOther || r.Header.Get("Location") != "/login?next="+url.QueryEscape("/runs/hello") {
		t.Errorf("got %d Location %q", r.StatusCode, r.Header.Get("Location"))
	}
}

func TestServer_runPageShowsLogs(t *testing.T) {
	f := newFixture(t)
	r := f.do(t, "GET", "/runs/hello", adminTok, nil)
	body := readBody(t, r)
	for _, want := range []string{"hello", "world", "sub-2", "container_exited_with_error"} {
		if !strings.Contains(body, want) {
			t.Errorf("run page lacks %q", want)
		}
	}
}
