package e2e

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"hoist/e2e/forge"
	"hoist/web"
)

const previewSecret = "e2e-webhook-secret"

// signedHook posts a webhook to the server as GitHub or GitLab send it:
// GitHub signs the body with HMAC-SHA256 of the secret in
// X-Hub-Signature-256 (https://docs.github.com/webhooks/using-webhooks/validating-webhook-deliveries),
// GitLab sends the secret in X-Gitlab-Token
// (https://docs.gitlab.com/user/project/integrations/webhooks/).
func (s *server) signedHook(provider, event, body string) {
	s.t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.url+"/hooks/"+provider, strings.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	id := fmt.Sprint(time.Now().UnixNano())
	switch provider {
	case "github":
		mac := hmac.New(sha256.New, []byte(previewSecret))
		mac.Write([]byte(body))
		req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
		req.Header.Set("X-GitHub-Event", event)
		req.Header.Set("X-GitHub-Delivery", id)
	case "gitlab":
		req.Header.Set("X-Gitlab-Token", previewSecret)
		req.Header.Set("X-Gitlab-Event", event)
		req.Header.Set("X-Gitlab-Event-UUID", id)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		s.t.Fatalf("%s %s webhook: HTTP %d", provider, event, resp.StatusCode)
	}
}

func githubPR(action string, n int, sha string) string {
	return fmt.Sprintf(`{"action":%q,"number":%d,"pull_request":{"number":%d,"title":"Add train","state":"open",
"html_url":"https://github.com/acme/specs/pull/%d","head":{"sha":%q,"ref":"feature"},"base":{"ref":"main"}},
"repository":{"full_name":"acme/specs","html_url":"https://github.com/acme/specs"}}`, action, n, n, n, sha)
}

func gitlabMR(action string, iid int, sha string) string {
	return fmt.Sprintf(`{"object_kind":"merge_request","event_type":"merge_request",
"project":{"path_with_namespace":"acme/specs","web_url":"https://gitlab.example/acme/specs"},
"object_attributes":{"iid":%d,"title":"Add train","state":"opened","action":%q,"source_branch":"feature","target_branch":"main",
"url":"https://gitlab.example/acme/specs/-/merge_requests/%d","last_commit":{"id":%q}}}`, iid, action, iid, sha)
}

// prRepo is the repository hoist serves (main) and a clone whose feature
// branch the pull request's commits are pushed from, so that the server's
// work tree stays on main.
func prRepo(t *testing.T) (main, feature *repo, head string) {
	main = newRepo(t)
	main.write("hello.dstack.yml", task("hello", "  - echo hello\n"))
	head = main.commit("main")
	feature = &repo{t: t, dir: t.TempDir()}
	feature.git("clone", "-q", main.dir, ".")
	feature.git("checkout", "-q", "-b", "feature")
	return main, feature, head
}

func (r *repo) pushFeature(msg string) string {
	sha := r.commit(msg)
	r.git("push", "-q", "origin", "feature")
	return sha
}

// TestPreviews_githubAndGitLab runs a real hoist serve with fakes of
// GitHub and GitLab on loopback: opening a pull request posts one comment
// with the plan's table and a success status; a push with a broken spec
// edits the same comment to show the error's path:line:col, linked to the
// file, with a failure status — after a restart too, without searching
// for the comment (its id is in the database). A merge request gets one
// note and statuses the same way.
func TestPreviews_githubAndGitLab(t *testing.T) {
	gh := forge.NewGitHub(t, "ghp_e2e")
	gl := forge.NewGitLab(t, "glpat-e2e")
	t.Setenv("HOIST_WEBHOOK_SECRET", previewSecret)
	t.Setenv("HOIST_GITHUB_TOKEN", "ghp_e2e")
	t.Setenv("HOIST_GITHUB_API", gh.URL)
	t.Setenv("HOIST_GITLAB_TOKEN", "glpat-e2e")
	t.Setenv("HOIST_GITLAB_API", gl.URL)
	main, feature, head := prRepo(t)
	s := startServer(t, main.dir, "--branch", "main")
	// The pull request is planned against main as applied.
	s.waitRun("hello", head, "done", time.Minute)

	feature.write("train.dstack.yml", task("train", "  - echo train\n"))
	sha1 := feature.pushFeature("add train")
	s.signedHook("github", "pull_request", githubPR("opened", 5, sha1))
	lastStatus := func(st []forge.Status) forge.Status {
		if len(st) == 0 {
			return forge.Status{}
		}
		return st[len(st)-1]
	}
	waitFor(t, time.Minute, func() string { return fmt.Sprintf("statuses %+v", gh.Statuses()) }, func() bool {
		st := lastStatus(gh.Statuses())
		return st.SHA == sha1 && st.State != "pending" && len(gh.Comments("acme/specs", 5)) == 1
	})
	if st := lastStatus(gh.Statuses()); st.State != "success" || st.Context != "hoist/plan" || st.Repo != "acme/specs" {
		t.Errorf("status %+v, want success of hoist/plan", st)
	}
	cs := gh.Comments("acme/specs", 5)
	if !strings.HasPrefix(cs[0].Body, "<!-- hoist:plan -->") || !strings.Contains(cs[0].Body, "| `task/train` | create |") ||
		strings.Contains(cs[0].Body, "task/hello") {
		t.Errorf("comment:\n%s", cs[0].Body)
	}
	first := cs[0].ID

	// A broken spec: the comment is edited to show where, linked.
	feature.write("broken.dstack.yml", "type: task\nname: broken\ncommands: 5\n")
	sha2 := feature.pushFeature("break it")
	s.restart()
	lists := gh.Lists()
	s.signedHook("github", "pull_request", githubPR("synchronize", 5, sha2))
	waitFor(t, time.Minute, func() string { return fmt.Sprintf("statuses %+v", gh.Statuses()) }, func() bool {
		st := lastStatus(gh.Statuses())
		return st.SHA == sha2 && st.State != "pending"
	})
	if st := lastStatus(gh.Statuses()); st.State != "failure" {
		t.Errorf("status of a broken spec %+v, want failure", st)
	}
	waitFor(t, 10*time.Second, func() string { return fmt.Sprintf("comments %+v", gh.Comments("acme/specs", 5)) }, func() bool {
		cs := gh.Comments("acme/specs", 5)
		return len(cs) == 1 && cs[0].Edits == 1
	})
	cs = gh.Comments("acme/specs", 5)
	link := "](https://github.com/acme/specs/blob/" + sha2 + "/broken.dstack.yml#L3)"
	if cs[0].ID != first || !strings.Contains(cs[0].Body, "[`broken.dstack.yml:3:") || !strings.Contains(cs[0].Body, link) {
		t.Errorf("comment %d (want %d):\n%s", cs[0].ID, first, cs[0].Body)
	}
	if gh.Lists() != lists {
		t.Errorf("after a restart the comment was searched (%d listings), want its stored id used", gh.Lists()-lists)
	}

	// GitLab: a merge request gets one note and statuses.
	s.signedHook("gitlab", "Merge Request Hook", gitlabMR("open", 8, sha1))
	waitFor(t, time.Minute, func() string { return fmt.Sprintf("statuses %+v", gl.Statuses()) }, func() bool {
		st := lastStatus(gl.Statuses())
		return st.SHA == sha1 && st.State != "pending" && len(gl.Notes("acme/specs", 8)) == 1
	})
	if st := lastStatus(gl.Statuses()); st.State != "success" {
		t.Errorf("gitlab status %+v", st)
	}
	s.signedHook("gitlab", "Merge Request Hook", gitlabMR("update", 8, sha2))
	waitFor(t, time.Minute, func() string { return fmt.Sprintf("notes %+v", gl.Notes("acme/specs", 8)) }, func() bool {
		ns := gl.Notes("acme/specs", 8)
		return len(ns) == 1 && ns[0].Edits == 1
	})
	if st := lastStatus(gl.Statuses()); st.SHA != sha2 || st.State != "failed" {
		t.Errorf("gitlab status %+v, want failed for %s", st, sha2)
	}
	if ns := gl.Notes("acme/specs", 8); !strings.Contains(ns[0].Body, "](https://gitlab.example/acme/specs/-/blob/"+sha2+"/broken.dstack.yml#L3)") {
		t.Errorf("note:\n%s", ns[0].Body)
	}
}

// TestPreviews_planJSONForCI: generic CI gets the preview as JSON from
// `hoist plan --server URL -o json`, the same plan POST /api/v1/plan
// answers.
func TestPreviews_planJSONForCI(t *testing.T) {
	main, feature, _ := prRepo(t)
	s := startServer(t, main.dir)
	feature.write("train.dstack.yml", task("train", "  - echo train\n"))
	cmd := exec.Command(filepath.Join(bin, "hoist"), "plan", "--server", s.url, "--token", s.token, "-o", "json", feature.dir)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("hoist plan: %v\n%s", err, stderr.String())
	}
	var cli web.Plan
	if err := json.Unmarshal(stdout.Bytes(), &cli); err != nil {
		t.Fatalf("output is not a plan: %v\n%s", err, stdout.String())
	}
	actions := map[string]string{}
	for _, c := range cli.Changes {
		actions[c.Kind+"/"+c.Name] = c.Action
	}
	if !cli.Valid || actions["task/train"] != "create" || actions["task/hello"] != "none" {
		t.Errorf("plan %+v", cli)
	}
	body, _ := json.Marshal(web.PlanRequest{Files: map[string]string{
		"hello.dstack.yml": task("hello", "  - echo hello\n"), "train.dstack.yml": task("train", "  - echo train\n")}})
	code, out := s.do(http.MethodPost, "/api/v1/plan", bytes.NewReader(body))
	var api web.Plan
	if code != http.StatusOK || json.Unmarshal(out, &api) != nil {
		t.Fatalf("POST /api/v1/plan: %d %s", code, out)
	}
	if len(api.Changes) != len(cli.Changes) || api.CostAfter != cli.CostAfter {
		t.Errorf("API plan %+v differs from the CLI's %+v", api, cli)
	}
}
