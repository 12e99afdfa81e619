package web

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	fakeforge "hoist/e2e/forge"
)

const hookSecret = "It's a Secret to Everybody"

func sign(secret, body string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(body))
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

func TestValidSignature_githubTestVector(t *testing.T) {
	// From GitHub's "Validating webhook deliveries" documentation.
	const sig = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
	if !validSignature(hookSecret, []byte("Hello, World!"), sig) {
		t.Fatal("documented test vector rejected")
	}
	sha1mac := hmac.New(sha1.New, []byte(hookSecret))
	sha1mac.Write([]byte("Hello, World!"))
	tests := []struct{ name, body, header string }{
		{"other body", "Hello, World?", sig},
		{"other secret", "Hello, World!", sign("wrong", "Hello, World!")},
		{"missing", "Hello, World!", ""},
		{"no prefix", "Hello, World!", strings.TrimPrefix(sig, "sha256=")},
		{"sha1 digest", "Hello, World!", "sha1=" + hex.EncodeToString(sha1mac.Sum(nil))},
		{"sha1 digest under sha256 prefix", "Hello, World!", "sha256=" + hex.EncodeToString(sha1mac.Sum(nil))},
		{"not hex", "Hello, World!", "sha256=zz"},
		{"truncated", "Hello, World!", sig[:len(sig)-2]},
	}
	for _, tt := range tests {
		if validSignature(hookSecret, []byte(tt.body), tt.header) {
			t.Errorf("%s: accepted", tt.name)
		}
	}
}

// hook posts body to path with the given headers.
func (f *fixture) hook(t *testing.T, path, body string, hdr ...string) (*http.Response, string) {
	t.Helper()
	r := f.do(t, "POST", path, "", strings.NewReader(body), append([]string{"Content-Type", "application/json"}, hdr...)...)
	return r, readBody(t, r)
}

var deliverySeq struct {
	sync.Mutex
	n int
}

func delivery() string {
	deliverySeq.Lock()
	defer deliverySeq.Unlock()
	deliverySeq.n++
	return fmt.Sprintf("delivery-%d", deliverySeq.n)
}

func pushBody(ref, after string) string {
	return fmt.Sprintf(`{"ref":%q,"after":%q,"repository":{"full_name":"acme/specs"}}`, ref, after)
}

func githubPush(t *testing.T, f *fixture, ref, after string) *http.Response {
	t.Helper()
	body := pushBody(ref, after)
	r, _ := f.hook(t, "/hooks/github", body, "X-GitHub-Event", "push", "X-GitHub-Delivery", delivery(), "X-Hub-Signature-256", sign(hookSecret, body))
	return r
}

// waitSyncs checks that the syncer was asked for want syncs (the
// reconciler coalesces them: reconciler.TestSyncRequests_*).
func waitSyncs(t *testing.T, f *fixture, want int) {
	t.Helper()
	if got := f.syncer.count(); got != want {
		t.Fatalf("syncs = %d, want %d", got, want)
	}
}

func withBranch(b string) func(*Config, *Deps) {
	return func(c *Config, _ *Deps) { c.Branch = b }
}

func TestHookGitHub_authentication(t *testing.T) {
	f := newFixture(t, withBranch("main"))
	body := pushBody("refs/heads/main", "abc")
	sha1mac := hmac.New(sha1.New, []byte(hookSecret))
	sha1mac.Write([]byte(body))
	tests := []struct {
		name string
		hdr  []string
		want int
	}{
		{"valid signature", []string{"X-Hub-Signature-256", sign(hookSecret, body)}, 202},
		{"forged signature", []string{"X-Hub-Signature-256", sign("guess", body)}, 401},
		{"missing signature", nil, 401},
		{"sha1 only", []string{"X-Hub-Signature", "sha1=" + hex.EncodeToString(sha1mac.Sum(nil))}, 401},
		{"bearer token is not a signature", []string{"Authorization", "Bearer " + adminTok}, 401},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hdr := append([]string{"X-GitHub-Event", "push", "X-GitHub-Delivery", delivery()}, tt.hdr...)
			r, b := f.hook(t, "/hooks/github", body, hdr...)
			if r.StatusCode != tt.want {
				t.Errorf("status %d, want %d (%s)", r.StatusCode, tt.want, b)
			}
			if !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
				t.Errorf("content-type %q", r.Header.Get("Content-Type"))
			}
		})
	}
	waitSyncs(t, f, 1)
}

func TestHookGitHub_pingAndOtherBranch(t *testing.T) {
	f := newFixture(t, withBranch("main"))
	body := `{"zen":"Keep it logically awesome.","hook_id":1}`
	r, b := f.hook(t, "/hooks/github", body, "X-GitHub-Event", "ping", "X-GitHub-Delivery", delivery(), "X-Hub-Signature-256", sign(hookSecret, body))
	if r.StatusCode != 200 || !strings.Contains(b, "pong") {
		t.Errorf("ping: %d %s", r.StatusCode, b)
	}
	if r := githubPush(t, f, "refs/heads/feature", "abc"); r.StatusCode != 200 {
		t.Errorf("push to other branch: %d", r.StatusCode)
	}
	time.Sleep(20 * time.Millisecond)
	if n := f.syncer.count(); n != 0 {
		t.Errorf("syncs = %d after ping and foreign push", n)
	}
}

func TestHookGitHub_replayIsNotProcessedTwice(t *testing.T) {
	f := newFixture(t, withBranch("main"))
	body := pushBody("refs/heads/main", "abc")
	hdr := []string{"X-GitHub-Event", "push", "X-GitHub-Delivery", "same-id", "X-Hub-Signature-256", sign(hookSecret, body)}
	r1, _ := f.hook(t, "/hooks/github", body, hdr...)
	waitSyncs(t, f, 1)
	r2, b2 := f.hook(t, "/hooks/github", body, hdr...)
	if r1.StatusCode != 202 || r2.StatusCode != 200 || !strings.Contains(b2, `"duplicate":true`) {
		t.Errorf("first %d, replay %d %s", r1.StatusCode, r2.StatusCode, b2)
	}
	// The same signed body under a fresh delivery id is a replay too.
	hdr[3] = "other-id"
	r3, b3 := f.hook(t, "/hooks/github", body, hdr...)
	if r3.StatusCode != 200 || !strings.Contains(b3, `"duplicate":true`) {
		t.Errorf("re-labelled replay %d %s", r3.StatusCode, b3)
	}
	time.Sleep(20 * time.Millisecond)
	waitSyncs(t, f, 1)
}

func TestHookGitHub_oversizedBody(t *testing.T) {
	f := newFixture(t)
	body := `{"ref":"refs/heads/main","pad":"` + strings.Repeat("x", maxHookBody) + `"}`
	r, _ := f.hook(t, "/hooks/github", body, "X-GitHub-Event", "push", "X-GitHub-Delivery", delivery(), "X-Hub-Signature-256", sign(hookSecret, body))
	if r.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("status %d, want 413", r.StatusCode)
	}
	// Without a Content-Length the cap still holds.
	req, _ := http.NewRequestWithContext(t.Context(), "POST", f.ts.URL+"/hooks/github", io.MultiReader(strings.NewReader(body)))
	req.ContentLength = -1
	req.Header.Set("X-Hub-Signature-256", sign(hookSecret, body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("chunked: status %d, want 413", resp.StatusCode)
	}
}

// TestHookGitHub_everyPushRequestsASync: each push reaches the reconciler
// as a request of its own, which coalesces them
// (reconciler.TestSyncRequests_burstDuringASyncCoalescesAndNoRequestIsLost).
func TestHookGitHub_everyPushRequestsASync(t *testing.T) {
	f := newFixture(t, withBranch("main"))
	for i := 1; i <= 20; i++ {
		body := pushBody("refs/heads/main", fmt.Sprintf("c%d", i))
		r, b := f.hook(t, "/hooks/github", body, "X-GitHub-Event", "push", "X-GitHub-Delivery", delivery(), "X-Hub-Signature-256", sign(hookSecret, body))
		if r.StatusCode != 202 || !strings.Contains(b, fmt.Sprintf(`"requested":%d`, i)) {
			t.Fatalf("push %d: %d %s", i, r.StatusCode, b)
		}
	}
	waitSyncs(t, f, 20)
}

func TestHookGitLab_token(t *testing.T) {
	f := newFixture(t, withBranch("main"))
	body := pushBody("refs/heads/main", "abc")
	tests := []struct {
		name, token string
		want        int
	}{
		{"valid token", hookSecret, 202},
		{"wrong token", "nope", 401},
		{"missing token", "", 401},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hdr := []string{"X-Gitlab-Event", "Push Hook", "X-Gitlab-Event-UUID", delivery()}
			if tt.token != "" {
				hdr = append(hdr, "X-Gitlab-Token", tt.token)
			}
			if r, b := f.hook(t, "/hooks/gitlab", body, hdr...); r.StatusCode != tt.want {
				t.Errorf("status %d, want %d: %s", r.StatusCode, tt.want, b)
			}
		})
	}
	waitSyncs(t, f, 1)
}

func TestHookGeneric_signatureAndReplay(t *testing.T) {
	f := newFixture(t)
	body := `{}`
	r, _ := f.hook(t, "/hooks/generic", body, "X-Hub-Signature-256", sign(hookSecret, body), "X-Hoist-Delivery", "d1")
	if r.StatusCode != 202 {
		t.Errorf("signed: %d", r.StatusCode)
	}
	waitSyncs(t, f, 1)
	if r, _ := f.hook(t, "/hooks/generic", body, "X-Hub-Signature-256", sign(hookSecret, body), "X-Hoist-Delivery", "d1"); r.StatusCode != 200 {
		t.Errorf("replay: %d", r.StatusCode)
	}
	if r, _ := f.hook(t, "/hooks/generic", body, "X-Hub-Signature-256", sign("x", body)); r.StatusCode != 401 {
		t.Errorf("forged: %d", r.StatusCode)
	}
	// Identical bodies with new delivery ids are separate deliveries.
	if r, _ := f.hook(t, "/hooks/generic", body, "X-Hub-Signature-256", sign(hookSecret, body), "X-Hoist-Delivery", "d2"); r.StatusCode != 202 {
		t.Errorf("second delivery: %d", r.StatusCode)
	}
	waitSyncs(t, f, 2)
}

func TestHooks_disabledWithoutSecret(t *testing.T) {
	f := newFixture(t, func(c *Config, _ *Deps) { c.WebhookSecret = "" })
	body := pushBody("refs/heads/main", "abc")
	for _, p := range []string{"/hooks/github", "/hooks/gitlab", "/hooks/generic"} {
		if r, _ := f.hook(t, p, body, "X-Hub-Signature-256", sign("", body), "X-Gitlab-Token", ""); r.StatusCode != 404 {
			t.Errorf("%s: %d, want 404", p, r.StatusCode)
		}
	}
}

func TestHookGitHub_pullRequestPlanIsPostedAsCommitStatus(t *testing.T) {
	gh := fakeforge.NewGitHub(t, "ghp_test")
	pl := &fakePlanner{plans: map[string]Plan{"headsha": {Revision: "headsha", Valid: true, Errors: []string{},
		Changes: []Change{{Action: "create", Kind: "task", Name: "new"}, {Action: "replace", Kind: "task", Name: "hello"}}}}}
	f := newFixture(t, withBranch("main"), func(c *Config, d *Deps) {
		c.GitHubToken, c.GitHubAPI, c.ExternalURL = "ghp_test", gh.URL, "http://hoist.example"
		d.Planner = pl
	})
	body := `{"action":"opened","number":7,"pull_request":{"title":"Add new","html_url":"https://github.com/acme/specs/pull/7",
		"head":{"sha":"headsha","ref":"feature"},"base":{"ref":"main"}},"repository":{"full_name":"acme/specs"}}`
	r, b := f.hook(t, "/hooks/github", body, "X-GitHub-Event", "pull_request", "X-GitHub-Delivery", delivery(), "X-Hub-Signature-256", sign(hookSecret, body))
	if r.StatusCode != 202 {
		t.Fatalf("pull_request: %d %s", r.StatusCode, b)
	}
	f.srv.bg.Wait()
	st := gh.Statuses()
	if len(st) != 2 || st[1].Repo != "acme/specs" || st[1].SHA != "headsha" {
		t.Fatalf("statuses %+v", st)
	}
	if st[0].State != "pending" || st[1].State != "success" || st[1].Context != "hoist/plan" ||
		st[1].Description != "1 to create, 1 to replace" || st[1].TargetURL != "http://hoist.example/history#pr-7" {
		t.Errorf("statuses %+v", st)
	}
	prs := f.srv.prs.list()
	if len(prs) != 1 || prs[0].State != "planned" || prs[0].Posted != "success" || pl.calls[0] != "refs/pull/7/head@headsha" {
		t.Errorf("pr plans %+v, planner calls %v", prs, pl.calls)
	}
	// The plan is visible through the API.
	resp := f.do(t, "GET", "/api/v1/pulls", viewerTok, nil)
	if got := readBody(t, resp); !strings.Contains(got, `"number":7`) || !strings.Contains(got, `"state":"planned"`) {
		t.Errorf("GET /api/v1/pulls: %d %s", resp.StatusCode, got)
	}
}

func TestHookGitHub_newPushEditsTheOneComment(t *testing.T) {
	gh := fakeforge.NewGitHub(t, "ghp_test")
	pl := &fakePlanner{plans: map[string]Plan{
		"sha1": {Valid: true, Errors: []string{}, Changes: []Change{{Action: "create", Kind: "task", Name: "new"}}},
		"sha2": {Valid: false, Errors: []string{"specs/new.dstack.yml:3:5: commands: must be a list"}},
		"sha3": {Valid: true, Errors: []string{}, Changes: []Change{{Action: "none", Kind: "task", Name: "new"}}},
	}}
	f := newFixture(t, withBranch("main"), func(c *Config, d *Deps) {
		c.GitHubToken, c.GitHubAPI = "ghp_test", gh.URL
		d.Planner = pl
	})
	other := gh.AddComment("acme/specs", 9, "LGTM")
	push := func(action, sha string) {
		t.Helper()
		body := `{"action":"` + action + `","number":9,"pull_request":{"title":"x","head":{"sha":"` + sha + `","ref":"feature"},"base":{"ref":"main"}},
			"repository":{"full_name":"acme/specs","html_url":"https://github.com/acme/specs"}}`
		r, b := f.hook(t, "/hooks/github", body, "X-GitHub-Event", "pull_request", "X-GitHub-Delivery", delivery(), "X-Hub-Signature-256", sign(hookSecret, body))
		if r.StatusCode != 202 {
			t.Fatalf("pull_request: %d %s", r.StatusCode, b)
		}
		f.srv.bg.Wait()
	}
	ours := func() Comment {
		t.Helper()
		var mine []Comment
		for _, c := range gh.Comments("acme/specs", 9) {
			if c.ID != other {
				mine = append(mine, Comment(c))
			}
		}
		if len(mine) != 1 {
			t.Fatalf("hoist's comments: %+v, want one", mine)
		}
		return mine[0]
	}
	push("opened", "sha1")
	first := ours()
	if !strings.HasPrefix(first.Body, previewMarker) || !strings.Contains(first.Body, "| `task/new` | create |") {
		t.Errorf("first comment:\n%s", first.Body)
	}
	push("synchronize", "sha2")
	second := ours()
	link := "[`specs/new.dstack.yml:3:5`](https://github.com/acme/specs/blob/sha2/specs/new.dstack.yml#L3)"
	if second.ID != first.ID || second.Edits != 1 || !strings.Contains(second.Body, link) {
		t.Errorf("after a push the comment is %+v, want comment %d edited with %s", second, first.ID, link)
	}
	if st := gh.Statuses(); st[len(st)-1].State != "failure" {
		t.Errorf("status of a broken spec = %+v", st[len(st)-1])
	}
	// A user deleted hoist's comment: the next push posts a new one.
	gh.DeleteComment(second.ID)
	push("synchronize", "sha3")
	if third := ours(); third.ID == second.ID || !strings.Contains(third.Body, "No changes (1 unchanged)") {
		t.Errorf("after deletion: %+v", third)
	}
}

// Comment is fakeforge.Comment, named for the assertions above.
type Comment = fakeforge.Comment

func TestHookGitLab_mergeRequestIsPlanned(t *testing.T) {
	pl := &fakePlanner{plans: map[string]Plan{"mrsha": {Valid: false, Errors: []string{"a.yml:1:1: bad"}}}, planned: make(chan string, 1)}
	f := newFixture(t, withBranch("main"), func(_ *Config, d *Deps) { d.Planner = pl })
	body := `{"object_kind":"merge_request","project":{"path_with_namespace":"acme/specs"},
		"object_attributes":{"iid":3,"title":"Break it","action":"open","source_branch":"x","target_branch":"main","last_commit":{"id":"mrsha"}}}`
	r, b := f.hook(t, "/hooks/gitlab", body, "X-Gitlab-Event", "Merge Request Hook", "X-Gitlab-Token", hookSecret, "X-Gitlab-Event-UUID", delivery())
	if r.StatusCode != 202 {
		t.Fatalf("merge request: %d %s", r.StatusCode, b)
	}
	select {
	case <-pl.planned:
	case <-time.After(5 * time.Second):
		t.Fatal("not planned")
	}
	f.srv.bg.Wait()
	prs := f.srv.prs.list()
	if len(prs) != 1 || prs[0].State != "invalid" || prs[0].Ref != "refs/merge-requests/3/head" || prs[0].Posted != "" {
		t.Errorf("plans %+v", prs)
	}
	// Closing forgets it.
	closeBody := strings.Replace(body, `"action":"open"`, `"action":"close"`, 1)
	f.hook(t, "/hooks/gitlab", closeBody, "X-Gitlab-Event", "Merge Request Hook", "X-Gitlab-Token", hookSecret, "X-Gitlab-Event-UUID", delivery())
	if n := len(f.srv.prs.list()); n != 0 {
		t.Errorf("%d plans after close", n)
	}
}

// BenchmarkHookGitHub_push measures the answer to a signed push (the sync
// itself runs after the answer).
func BenchmarkHookGitHub_push(b *testing.B) {
	st := newMemStore()
	s, err := New(Config{WebhookSecret: hookSecret, Branch: "main"}, Deps{Store: st, Syncer: &fakeSyncer{}})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	h := s.Handler()
	i := 0
	for b.Loop() {
		i++
		body := pushBody("refs/heads/main", fmt.Sprint(i))
		sig := sign(hookSecret, body)
		req := httptest.NewRequest("POST", "/hooks/github", strings.NewReader(body))
		req.Header.Set("X-GitHub-Event", "push")
		req.Header.Set("X-GitHub-Delivery", fmt.Sprint(i))
		req.Header.Set("X-Hub-Signature-256", sig)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != 202 {
			b.Fatalf("status %d", w.Code)
		}
	}
}

func TestHookGitHub_pullRequestPlanShowsWarnings(t *testing.T) {
	gh := fakeforge.NewGitHub(t, "ghp_test")
	warning := "web.dstack.yml:6:7: auth: has no effect in hoist"
	pl := &fakePlanner{plans: map[string]Plan{"headsha": {Revision: "headsha", Valid: true, Errors: []string{},
		Changes: []Change{{Action: "create", Kind: "service", Name: "web"}}, Warnings: []string{warning}}}}
	f := newFixture(t, withBranch("main"), func(c *Config, d *Deps) {
		c.GitHubToken, c.GitHubAPI = "ghp_test", gh.URL
		d.Planner = pl
	})
	body := `{"action":"opened","number":8,"pull_request":{"title":"Add web","head":{"sha":"headsha","ref":"feature"},"base":{"ref":"main"}},
		"repository":{"full_name":"acme/specs"}}`
	r, b := f.hook(t, "/hooks/github", body, "X-GitHub-Event", "pull_request", "X-GitHub-Delivery", delivery(), "X-Hub-Signature-256", sign(hookSecret, body))
	if r.StatusCode != 202 {
		t.Fatalf("pull_request: %d %s", r.StatusCode, b)
	}
	f.srv.bg.Wait()
	st := gh.Statuses()
	got := st[len(st)-1].Description
	if want := "1 to create; 1 warning(s): " + warning; got != want {
		t.Errorf("commit status description %q, want %q", got, want)
	}
	resp := f.do(t, "GET", "/api/v1/pulls", viewerTok, nil)
	if got := readBody(t, resp); !strings.Contains(got, `"warnings":["`+warning+`"]`) {
		t.Errorf("GET /api/v1/pulls: %d %s", resp.StatusCode, got)
	}
	var html strings.Builder
	if err := planView(*f.srv.prs.list()[0].Plan).Render(t.Context(), &html); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(html.String(), `data-testid="plan-warnings"`) || !strings.Contains(html.String(), warning) {
		t.Errorf("plan view:\n%s", html.String())
	}
}

func TestPlanSummary_fitsACommitStatus(t *testing.T) {
	long := strings.Repeat("x", 300)
	for _, tc := range []struct {
		name string
		plan Plan
		want string
	}{
		{"no changes", Plan{}, "no changes"},
		{"no changes with a warning", Plan{Warnings: []string{"a.yml:1:1: w"}}, "no changes; 1 warning(s): a.yml:1:1: w"},
		{"long warning is cut", Plan{Warnings: []string{long}}, ("no changes; 1 warning(s): " + long)[:140]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := planSummary(&tc.plan); got != tc.want {
				t.Errorf("planSummary = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestHookGitLab_mergeRequestGetsOneNoteAndAStatus(t *testing.T) {
	gl := fakeforge.NewGitLab(t, "glpat-test")
	pl := &fakePlanner{plans: map[string]Plan{
		"aaa1": {Valid: false, Errors: []string{"ml/train.dstack.yml:2:1: type: unknown"}},
		"aaa2": {Valid: true, Errors: []string{}, CostAfter: 1.5,
			Changes: []Change{{Action: "create", Kind: "task", Name: "train", CostAfter: ptrF(1.5)}}},
	}}
	f := newFixture(t, withBranch("main"), func(c *Config, d *Deps) {
		c.GitLabToken, c.GitLabAPI = "glpat-test", gl.URL
		d.Planner = pl
	})
	mr := func(action, sha string) {
		t.Helper()
		body := `{"object_kind":"merge_request","project":{"path_with_namespace":"acme/ml","web_url":"https://gitlab.example/acme/ml"},
			"object_attributes":{"iid":4,"title":"Train","action":"` + action + `","source_branch":"x","target_branch":"main","last_commit":{"id":"` + sha + `"}}}`
		r, b := f.hook(t, "/hooks/gitlab", body, "X-Gitlab-Event", "Merge Request Hook", "X-Gitlab-Token", hookSecret, "X-Gitlab-Event-UUID", delivery())
		if r.StatusCode != 202 {
			t.Fatalf("merge request: %d %s", r.StatusCode, b)
		}
		f.srv.bg.Wait()
	}
	mr("open", "aaa1")
	notes := gl.Notes("acme/ml", 4)
	link := "[`ml/train.dstack.yml:2:1`](https://gitlab.example/acme/ml/-/blob/aaa1/ml/train.dstack.yml#L2)"
	if len(notes) != 1 || !strings.Contains(notes[0].Body, link) {
		t.Fatalf("notes %+v, want one with %s", notes, link)
	}
	st := gl.Statuses()
	if len(st) != 2 || st[0].State != "pending" || st[1].State != "failed" || st[1].Context != "hoist/plan" || st[1].Repo != "acme/ml" {
		t.Errorf("statuses %+v", st)
	}
	mr("update", "aaa2")
	again := gl.Notes("acme/ml", 4)
	if len(again) != 1 || again[0].ID != notes[0].ID || again[0].Edits != 1 ||
		!strings.Contains(again[0].Body, "| `task/train` | create |  | — → $1.50 |") {
		t.Errorf("after a push: %+v", again)
	}
	if st := gl.Statuses(); st[len(st)-1].State != "success" {
		t.Errorf("last status %+v", st[len(st)-1])
	}
	if prs := f.srv.prs.list(); len(prs) != 1 || prs[0].CommentID != notes[0].ID {
		t.Errorf("stored plans %+v, want comment id %d", prs, notes[0].ID)
	}
}

func ptrF(v float64) *float64 { return &v }

// TestHooks_reachEveryProjectOfTheRepository: a second project reading
// another directory of the default project's repository is synced by a
// push and planned with a pull request, in its own section of the one
// comment; a project of another repository is left alone.
func TestHooks_reachEveryProjectOfTheRepository(t *testing.T) {
	gh := fakeforge.NewGitHub(t, "ghp_test")
	mainPl := &fakePlanner{plans: map[string]Plan{"sha1": {Valid: true, Errors: []string{}, Changes: []Change{{Action: "create", Kind: "task", Name: "a"}}}}}
	bPl := &fakePlanner{plans: map[string]Plan{"sha1": {Valid: false, Errors: []string{"b/broken.dstack.yml:2:3: type: unknown"}}}}
	otherPl := &fakePlanner{plans: map[string]Plan{}}
	bSync := &fakeSyncer{status: SyncStatus{Repo: "/srv/specs", Branch: "main"}}
	otherSync := &fakeSyncer{status: SyncStatus{Repo: "https://git.example.com/acme/other.git", Branch: "main"}}
	f := newFixture(t, withBranch("main"), func(c *Config, d *Deps) {
		c.GitHubToken, c.GitHubAPI = "ghp_test", gh.URL
		d.Planner = mainPl
		d.Syncer.(*fakeSyncer).status.Repo = "/srv/specs"
		d.Projects = map[string]ProjectDeps{
			"b":     {Store: newMemStore(), Syncer: bSync, Planner: bPl},
			"other": {Store: newMemStore(), Syncer: otherSync, Planner: otherPl},
		}
	})
	if r := githubPush(t, f, "refs/heads/main", "sha1"); r.StatusCode != 202 {
		t.Fatalf("push: %d", r.StatusCode)
	}
	if f.syncer.count() != 1 || bSync.count() != 1 || otherSync.count() != 0 {
		t.Errorf("syncs requested: main %d, b %d, other %d; want 1, 1, 0", f.syncer.count(), bSync.count(), otherSync.count())
	}
	body := `{"action":"opened","number":4,"pull_request":{"title":"x","head":{"sha":"sha1","ref":"feature"},"base":{"ref":"main"}},
		"repository":{"full_name":"acme/specs","html_url":"https://github.com/acme/specs"}}`
	if r, b := f.hook(t, "/hooks/github", body, "X-GitHub-Event", "pull_request", "X-GitHub-Delivery", delivery(), "X-Hub-Signature-256", sign(hookSecret, body)); r.StatusCode != 202 {
		t.Fatalf("pull_request: %d %s", r.StatusCode, b)
	}
	f.srv.bg.Wait()
	cs := gh.Comments("acme/specs", 4)
	if len(cs) != 1 {
		t.Fatalf("comments: %+v, want one", cs)
	}
	for _, want := range []string{"#### Project `main`", "#### Project `b`", "| `task/a` | create |", "`b/broken.dstack.yml:2:3`"} {
		if !strings.Contains(cs[0].Body, want) {
			t.Errorf("comment lacks %q:\n%s", want, cs[0].Body)
		}
	}
	otherPl.mu.Lock()
	if len(otherPl.calls) != 0 {
		t.Errorf("the project of another repository was planned: %v", otherPl.calls)
	}
	otherPl.mu.Unlock()
	if st := gh.Statuses(); st[len(st)-1].State != "failure" {
		t.Errorf("status with b broken = %+v", st[len(st)-1])
	}
}
