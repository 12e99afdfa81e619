package web

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"hoist/backends/offers"
	"hoist/reconciler/plan"
)

// fullFixture has every optional dependency.
func fullFixture(t *testing.T) (*fixture, *fakeController) {
	t.Helper()
	ctl := &fakeController{}
	cat, err := offers.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, func(c *Config, d *Deps) {
		d.Controller = ctl
		d.Inventory = &fakeInventory{
			fleets:    []Fleet{{Name: "gpu", Status: "active", NodesMin: 1, NodesTarget: 1, Instances: 1, Spec: json.RawMessage(`{"name":"gpu","password":"hunter2"}`)}},
			instances: []Instance{{Name: "gpu-0", Fleet: "gpu", Backend: "local", Status: "idle", Reachable: true}},
			volumes:   []Volume{{Name: "data", Status: "active", AttachedTo: []string{}}},
			gateways:  []Gateway{{Name: "edge", Status: "running"}},
		}
		d.Planner = &fakePlanner{
			specs: map[string]map[string]json.RawMessage{
				"aaa": {"task/hello": json.RawMessage(`{"name":"hello","commands":["a"]}`)},
				"bbb": {"task/hello": json.RawMessage(`{"name":"hello","commands":["b"]}`)},
			},
			plans: map[string]Plan{"bbb": {Valid: true}},
		}
		d.Offers = CatalogOffers{Catalog: cat}
		d.Secrets = &memSecrets{m: map[string][]byte{"HF_TOKEN": []byte("v")}}
		d.Users = newMemUsers()
		d.Artifacts = &memArtifacts{files: map[string]map[int]map[string]string{"hello": {0: {"out/model.bin": "weights"}}}}
	})
	f.store.mu.Lock()
	f.store.revs = []Revision{{SHA: "bbb", Message: "second", Valid: true, Applied: true}, {SHA: "aaa", Message: "first", Valid: true}}
	f.store.events = []Event{{ID: "e1", Kind: "run", Name: "hello", Type: "submitted", Message: "run submitted", Revision: "aaa"}}
	f.store.mu.Unlock()
	return f, ctl
}

// routeCase is one route and what each caller gets.
type routeCase struct {
	method, path, body string
	// anon, viewer, user, manager, admin are the expected statuses.
	anon, viewer, user, manager, admin int
}

const (
	read = iota
	act
)

func readRoute(method, path string, ok int) routeCase {
	return routeCase{method: method, path: path, anon: 401, viewer: ok, user: ok, manager: ok, admin: ok}
}

func actRoute(method, path, body string, ok int) routeCase {
	return routeCase{method: method, path: path, body: body, anon: 401, viewer: 403, user: ok, manager: ok, admin: ok}
}

func manageRoute(method, path, body string, ok int) routeCase {
	return routeCase{method: method, path: path, body: body, anon: 401, viewer: 403, user: 403, manager: ok, admin: ok}
}

func openRoute(method, path string, ok int) routeCase {
	return routeCase{method: method, path: path, anon: ok, viewer: ok, user: ok, manager: ok, admin: ok}
}

func TestServer_everyRouteByRole(t *testing.T) {
	cases := map[string]routeCase{
		"GET /healthz":  openRoute("GET", "/healthz", 200),
		"GET /metrics":  openRoute("GET", "/metrics", 200),
		"GET /static/*": openRoute("GET", "/static/hoist.js", 200),
		"GET /login":    openRoute("GET", "/login", 200),
		"POST /login":   openRoute("POST", "/login", 401),
		"POST /logout":  openRoute("POST", "/logout", 303),
		// Without an OpenID Connect provider (oidc_test.go has one).
		"GET /login/oidc":          openRoute("GET", "/login/oidc", 404),
		"GET /login/oidc/callback": openRoute("GET", "/login/oidc/callback", 404),
		"POST /hooks/github":       openRoute("POST", "/hooks/github", 401),
		"POST /hooks/gitlab":       openRoute("POST", "/hooks/gitlab", 401),
		"POST /hooks/generic":      openRoute("POST", "/hooks/generic", 401),
		// Pods download the runner with a per-task grant, which no role's
		// token is (runnerdownload_test.go); this server grants none.
		"GET /agents/runner/:arch":                openRoute("GET", "/agents/runner/amd64", 404),
		"GET /api/v1/runs":                        readRoute("GET", "/api/v1/runs", 200),
		"GET /api/v1/runs/:name":                  readRoute("GET", "/api/v1/runs/hello", 200),
		"GET /api/v1/runs/:name/jobs":             readRoute("GET", "/api/v1/runs/hello/jobs", 200),
		"GET /api/v1/runs/:name/logs":             readRoute("GET", "/api/v1/runs/hello/logs", 200),
		"GET /api/v1/runs/:name/events":           readRoute("GET", "/api/v1/runs/hello/events", 200),
		"GET /api/v1/runs/:name/artifacts":        readRoute("GET", "/api/v1/runs/hello/artifacts", 200),
		"GET /api/v1/runs/:name/artifacts/:job/*": readRoute("GET", "/api/v1/runs/hello/artifacts/0/out/model.bin", 200),
		"POST /api/v1/runs/:name/stop":            actRoute("POST", "/api/v1/runs/hello/stop", "", 200),
		"POST /api/v1/runs/:name/rerun":           actRoute("POST", "/api/v1/runs/hello/rerun", "", 200),
		"POST /api/v1/runs/:name/suspend":         actRoute("POST", "/api/v1/runs/hello/suspend", "", 200),
		"POST /api/v1/runs/:name/resume":          actRoute("POST", "/api/v1/runs/hello/resume", "", 200),
		"GET /api/v1/runs/:name/ssh":              actRoute("GET", "/api/v1/runs/hello/ssh", "", 501), // the fake has no JobSSH
		"GET /api/v1/jobs":                        readRoute("GET", "/api/v1/jobs", 200),
		"GET /api/v1/fleets":                      readRoute("GET", "/api/v1/fleets", 200),
		"GET /api/v1/fleets/:name":                readRoute("GET", "/api/v1/fleets/gpu", 200),
		"GET /api/v1/instances":                   readRoute("GET", "/api/v1/instances?fleet=gpu", 200),
		"GET /api/v1/volumes":                     readRoute("GET", "/api/v1/volumes", 200),
		"GET /api/v1/gateways":                    readRoute("GET", "/api/v1/gateways", 200),
		"GET /api/v1/audit":                       manageRoute("GET", "/api/v1/audit", "", 200),
		"GET /api/v1/offers":                      readRoute("GET", "/api/v1/offers?gpu=H100&limit=3", 200),
		"GET /api/v1/revisions":                   readRoute("GET", "/api/v1/revisions", 200),
		"GET /api/v1/revisions/:sha":              readRoute("GET", "/api/v1/revisions/aaa", 200),
		"POST /api/v1/revisions/:sha/apply":       actRoute("POST", "/api/v1/revisions/aaa/apply", "", 200), // auto-sync is off in the fake
		"GET /api/v1/diff":                        readRoute("GET", "/api/v1/diff?from=aaa&to=bbb", 200),
		"GET /api/v1/events":                      readRoute("GET", "/api/v1/events", 200),
		"GET /api/v1/pulls":                       readRoute("GET", "/api/v1/pulls", 200),
		"GET /api/v1/spend":                       readRoute("GET", "/api/v1/spend?window=7d", 200),
		"GET /api/v1/budget":                      readRoute("GET", "/api/v1/budget", 200),
		"GET /api/v1/sync":                        readRoute("GET", "/api/v1/sync", 200),
		"POST /api/v1/sync":                       actRoute("POST", "/api/v1/sync", "", 202),
		"POST /api/v1/sync/suspend":               actRoute("POST", "/api/v1/sync/suspend", "", 200),
		"POST /api/v1/sync/confirm":               manageRoute("POST", "/api/v1/sync/confirm", `{"revision":"bbb"}`, 200),
		"POST /sync/confirm":                      manageRoute("POST", "/sync/confirm", "", 400),
		"POST /api/v1/sync/resume":                actRoute("POST", "/api/v1/sync/resume", "", 200),
		"GET /api/v1/whoami":                      readRoute("GET", "/api/v1/whoami", 200),
		"GET /api/v1/projects":                    readRoute("GET", "/api/v1/projects", 200),
		"GET /":                                   readRoute("GET", "/", 200),
		"GET /runs":                               readRoute("GET", "/runs?status=done", 200),
		"GET /runs/:name":                         readRoute("GET", "/runs/hello", 200),
		"GET /runs/:name/logs/stream":             readRoute("GET", "/runs/hello/logs/stream", 200),
		"POST /runs/:name/:action":                actRoute("POST", "/runs/hello/stop", "", 303),
		"GET /fleets":                             readRoute("GET", "/fleets", 200),
		"GET /volumes":                            readRoute("GET", "/volumes", 200),
		"GET /gateways":                           readRoute("GET", "/gateways", 200),
		"GET /offers":                             readRoute("GET", "/offers?gpu=A100&group_by=gpu", 200),
		"GET /history":                            readRoute("GET", "/history", 200),
		"GET /history/diff":                       readRoute("GET", "/history/diff?from=aaa&to=bbb", 200),
		"GET /history/:sha":                       readRoute("GET", "/history/bbb?plan=1", 200),
		"POST /history/:sha/apply":                actRoute("POST", "/history/aaa/apply", "", 303),
		"POST /sync":                              actRoute("POST", "/sync", "", 303),
		"POST /sync/suspend":                      actRoute("POST", "/sync/suspend", "", 303),
		"POST /sync/resume":                       actRoute("POST", "/sync/resume", "", 303),
		// Viewers see secret names; only managers and admins read or change values.
		"GET /api/v1/secrets":          readRoute("GET", "/api/v1/secrets", 200),
		"GET /api/v1/secrets/:name":    manageRoute("GET", "/api/v1/secrets/HF_TOKEN", "", 200),
		"PUT /api/v1/secrets/:name":    manageRoute("PUT", "/api/v1/secrets/NEW", `{"value":"v"}`, 200),
		"POST /api/v1/secrets":         manageRoute("POST", "/api/v1/secrets", `{"name":"NEW2","value":"v"}`, 200),
		"DELETE /api/v1/secrets/:name": manageRoute("DELETE", "/api/v1/secrets/NOPE", "", 404),
		"GET /secrets":                 readRoute("GET", "/secrets", 200),
		"POST /secrets":                manageRoute("POST", "/secrets", "", 303),
		"POST /secrets/:name/delete":   manageRoute("POST", "/secrets/NOPE/delete", "", 404),
	}
	// Users are global admins' (users_api.go); members a project's admins'
	// and managers'; tokens everyone's own.
	adminOnly := func(method, path, body string, ok int) routeCase {
		return routeCase{method: method, path: path, body: body, anon: 401, viewer: 403, user: 403, manager: 403, admin: ok}
	}
	managers := func(method, path, body string, ok int) routeCase {
		return routeCase{method: method, path: path, body: body, anon: 401, viewer: 403, user: 403, manager: ok, admin: ok}
	}
	for k, rc := range map[string]routeCase{
		"GET /admin":                                         readRoute("GET", "/admin", 200),
		"POST /admin/users":                                  adminOnly("POST", "/admin/users", "", 303),
		"POST /admin/users/:name/delete":                     adminOnly("POST", "/admin/users/nobody/delete", "", 303),
		"POST /admin/projects/:project/members":              managers("POST", "/admin/projects/main/members", "", 303),
		"POST /admin/projects/:project/members/:user/delete": managers("POST", "/admin/projects/main/members/nobody/delete", "", 303),
		"POST /admin/tokens":                                 readRoute("POST", "/admin/tokens", 303),
		"POST /admin/tokens/:id/revoke":                      readRoute("POST", "/admin/tokens/nope/revoke", 303),
		"GET /api/v1/users":                                  adminOnly("GET", "/api/v1/users", "", 200),
		"GET /debug/pprof/*":                                 adminOnly("GET", "/debug/pprof/goroutine?debug=1", "", 200),
		"POST /api/v1/users":                                 adminOnly("POST", "/api/v1/users", `{"name":"newbie"}`, 201),
		"DELETE /api/v1/users/:name":                         adminOnly("DELETE", "/api/v1/users/nobody", "", 404),
		"GET /api/v1/projects/:project/members":              managers("GET", "/api/v1/projects/main/members", "", 200),
		"POST /api/v1/projects/:project/members":             managers("POST", "/api/v1/projects/main/members", `{"user":"vic","role":"viewer"}`, 200),
		"DELETE /api/v1/projects/:project/members/:user":     managers("DELETE", "/api/v1/projects/main/members/nobody", "", 404),
		"GET /api/v1/tokens":                                 readRoute("GET", "/api/v1/tokens", 200),
		// vic (the viewer) creates its own token; ursula may not create
		// vic's; the admin may, but the name is then taken.
		"POST /api/v1/tokens":       {method: "POST", path: "/api/v1/tokens", body: `{"name":"ci","user":"vic"}`, anon: 401, viewer: 201, user: 403, manager: 403, admin: 409},
		"DELETE /api/v1/tokens/:id": readRoute("DELETE", "/api/v1/tokens/nope", 404),
	} {
		cases[k] = rc
	}
	cases["POST /api/v1/plan"] = actRoute("POST", "/api/v1/plan", `{"files":{"a.dstack.yml":"type: task"}}`, 200)

	f, _ := fullFixture(t)
	// Every registered route is in the table, but for the routes below
	// /projects/:project, which TestProjects_everyRouteByProjectRole walks.
	for _, r := range f.srv.echo.Router().Routes() {
		switch r.Method {
		case http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete:
		default:
			continue
		}
		if strings.Contains(r.Path, "/projects/:project") {
			continue
		}
		if _, ok := cases[r.Method+" "+r.Path]; !ok {
			t.Errorf("route %s %s has no role test", r.Method, r.Path)
		}
	}
	for name, rc := range cases {
		for _, who := range []struct {
			tok  string
			want int
		}{{"", rc.anon}, {viewerTok, rc.viewer}, {userTok, rc.user}, {managerTok, rc.manager}, {adminTok, rc.admin}} {
			var body io.Reader
			if rc.body != "" {
				body = strings.NewReader(rc.body)
			}
			r := f.do(t, rc.method, rc.path, who.tok, body, "Content-Type", "application/json")
			if r.StatusCode != who.want {
				t.Errorf("%s as %q: %d, want %d: %.200s", name, who.tok, r.StatusCode, who.want, readBody(t, r))
			}
			if strings.HasPrefix(rc.path, "/api/") && r.StatusCode >= 400 {
				var e APIError
				if err := json.NewDecoder(r.Body).Decode(&e); err != nil || e.Message == "" {
					t.Errorf("%s as %q: error body is not {\"message\"}: %v", name, who.tok, err)
				}
			}
		}
	}
}

func TestServer_applyRevisionNeedsAutoSyncSuspended(t *testing.T) {
	f, ctl := fullFixture(t)
	f.syncer.mu.Lock()
	f.syncer.status.AutoSync = true
	f.syncer.mu.Unlock()
	r := f.do(t, "POST", "/api/v1/revisions/aaa/apply", adminTok, nil)
	if body := readBody(t, r); r.StatusCode != 409 || !strings.Contains(body, "git revert") {
		t.Errorf("apply with auto-sync on: %d %s", r.StatusCode, body)
	}
	if got := ctl.list(); len(got) != 0 {
		t.Errorf("controller called: %v", got)
	}
	f.syncer.mu.Lock()
	f.syncer.status.AutoSync = false
	f.syncer.mu.Unlock()
	if r := f.do(t, "POST", "/api/v1/revisions/aaa/apply", adminTok, nil); r.StatusCode != 200 {
		t.Errorf("apply with auto-sync off: %d", r.StatusCode)
	}
	if got := ctl.list(); len(got) != 1 || got[0] != "apply aaa" {
		t.Errorf("controller calls %v", got)
	}
}

func TestServer_actionsReachTheController(t *testing.T) {
	f, ctl := fullFixture(t)
	for _, a := range []string{"stop", "stop?abort=true", "rerun", "suspend", "resume"} {
		if r := f.do(t, "POST", "/api/v1/runs/hello/"+a, userTok, nil); r.StatusCode != 200 {
			t.Errorf("%s: %d", a, r.StatusCode)
		}
	}
	if r := f.do(t, "POST", "/api/v1/runs/nope/stop", userTok, nil); r.StatusCode != 404 {
		t.Errorf("stop missing run: %d", r.StatusCode)
	}
	if r := f.do(t, "POST", "/api/v1/runs/hello/stop?abort=yes", userTok, nil); r.StatusCode != 400 {
		t.Errorf("stop with abort=yes: %d, want 400", r.StatusCode)
	}
	want := "stop hello,abort hello,rerun hello,suspend hello true,suspend hello false"
	if got := strings.Join(ctl.list(), ","); got != want {
		t.Errorf("controller calls %q, want %q", got, want)
	}
}

func TestServer_optionalDepsAnswer501(t *testing.T) {
	f := newFixture(t)
	for _, p := range []string{"/api/v1/fleets", "/api/v1/volumes", "/api/v1/gateways", "/api/v1/offers", "/api/v1/diff?from=a&to=b"} {
		if r := f.do(t, "GET", p, adminTok, nil); r.StatusCode != 501 {
			t.Errorf("%s without the dependency: %d", p, r.StatusCode)
		}
	}
	for _, p := range []string{"/fleets", "/volumes", "/gateways", "/offers"} {
		r := f.do(t, "GET", p, adminTok, nil)
		if body := readBody(t, r); r.StatusCode != 200 || !strings.Contains(body, "not available") {
			t.Errorf("%s page without the dependency: %d", p, r.StatusCode)
		}
	}
}

func TestServer_secretsAreNeverRendered(t *testing.T) {
	f, _ := fullFixture(t)
	f.store.putRun(Run{Name: "sec", Type: "task", Status: "running",
		Spec: json.RawMessage(`{"name":"sec","env":[{"name":"HF_TOKEN","value":"hf_leak"},"API_KEY=sk_leak"],"registry_auth":{"username":"u","password":"pw_leak"}}`)})
	for _, p := range []string{"/runs/sec", "/api/v1/runs/sec", "/api/v1/fleets", "/api/v1/fleets/gpu", "/fleets"} {
		body := readBody(t, f.do(t, "GET", p, adminTok, nil))
		for _, leak := range []string{"hf_leak", "sk_leak", "pw_leak", "hunter2", adminTok, hookSecret} {
			if strings.Contains(body, leak) {
				t.Errorf("%s renders %q", p, leak)
			}
		}
	}
}

func TestServer_confirmHeldRevision(t *testing.T) {
	f, ctl := fullFixture(t)
	f.syncer.mu.Lock()
	f.syncer.status = SyncStatus{Status: SyncSynced, Revision: "aaa", LatestRevision: "bbb", Held: true, HeldReasons: []string{"would delete 2 of 3 runs"}}
	f.syncer.mu.Unlock()
	d := doc(t, f.do(t, "GET", "/", managerTok, nil))
	if d.Find(`[data-testid=sync-held]`).Length() != 1 || d.Find(`[data-testid=confirm-held]`).Length() != 1 {
		t.Error("overview does not offer to confirm the held plan")
	}
	r := f.do(t, "POST", "/api/v1/sync/confirm", managerTok, strings.NewReader(`{"revision":"bbb"}`))
	if r.StatusCode != 200 {
		t.Fatalf("confirm: %d %s", r.StatusCode, readBody(t, r))
	}
	if got := ctl.list(); len(got) != 1 || got[0] != "confirm bbb" {
		t.Errorf("controller calls %v", got)
	}
	if r := f.do(t, "POST", "/api/v1/sync/confirm", managerTok, strings.NewReader(`{}`)); r.StatusCode != 400 {
		t.Errorf("confirm without revision: %d", r.StatusCode)
	}
}

// TestServer_confirmBudgetHoldNeedsAProjectAdmin: a revision whose plan
// its project's budget holds is confirmed only by an admin of the project.
func TestServer_confirmBudgetHoldNeedsAProjectAdmin(t *testing.T) {
	f, ctl := fullFixture(t)
	f.store.mu.Lock()
	f.store.revs = append(f.store.revs, Revision{SHA: "ccc", Valid: true, Plan: &Plan{Held: true, CostAfter: 12,
		Budget: &plan.BudgetCheck{Project: "main", Budget: plan.Budget{MaxPerHour: 10}, OverPerHour: 2, Holds: true}}})
	f.store.mu.Unlock()
	if r := f.do(t, "POST", "/api/v1/sync/confirm", managerTok, strings.NewReader(`{"revision":"ccc"}`)); r.StatusCode != 403 ||
		!strings.Contains(readBody(t, r), "only an admin of the project may confirm it") {
		t.Errorf("a manager confirming a budget hold: %d", r.StatusCode)
	}
	if r := f.do(t, "POST", "/api/v1/sync/confirm", adminTok, strings.NewReader(`{"revision":"ccc"}`)); r.StatusCode != 200 {
		t.Errorf("an admin confirming a budget hold: %d %s", r.StatusCode, readBody(t, r))
	}
	if got := ctl.list(); len(got) != 1 || got[0] != "confirm ccc" {
		t.Errorf("controller calls %v, want the admin's confirmation only", got)
	}
}

func TestServer_confirmWithoutTheCapabilityIs404(t *testing.T) {
	f := newFixture(t, func(_ *Config, d *Deps) { d.Controller = noConfirm{&fakeController{}} })
	if r := f.do(t, "POST", "/api/v1/sync/confirm", managerTok, strings.NewReader(`{"revision":"x"}`)); r.StatusCode != 404 {
		t.Errorf("confirm without Confirmer: %d", r.StatusCode)
	}
}

// noConfirm hides fakeController's ConfirmRevision.
type noConfirm struct{ c *fakeController }

func (n noConfirm) StopRun(ctx context.Context, name string, abort bool) error {
	return n.c.StopRun(ctx, name, abort)
}
func (n noConfirm) RerunRun(ctx context.Context, name string) error { return n.c.RerunRun(ctx, name) }
func (n noConfirm) SetRunSuspended(ctx context.Context, name string, s bool) error {
	return n.c.SetRunSuspended(ctx, name, s)
}
func (n noConfirm) SetAutoSync(ctx context.Context, on bool) error { return n.c.SetAutoSync(ctx, on) }
func (n noConfirm) ApplyRevision(ctx context.Context, sha string) error {
	return n.c.ApplyRevision(ctx, sha)
}

// Plans are rate-limited per caller: a burst, then 429 with Retry-After,
// while other callers still plan.
func TestServer_planIsRateLimitedPerCaller(t *testing.T) {
	f, _ := fullFixture(t)
	body := `{"files":{"a.dstack.yml":"type: task"}}`
	plan := func(tok string) *http.Response {
		return f.do(t, "POST", "/api/v1/plan", tok, strings.NewReader(body), "Content-Type", "application/json")
	}
	for i := 0; i < planBurst; i++ {
		if r := plan(userTok); r.StatusCode != 200 {
			t.Fatalf("plan %d: %d", i, r.StatusCode)
		}
	}
	r := plan(userTok)
	if r.StatusCode != http.StatusTooManyRequests || r.Header.Get("Retry-After") != "12" {
		t.Fatalf("plan over the burst: %d Retry-After %q", r.StatusCode, r.Header.Get("Retry-After"))
	}
	if r := plan(adminTok); r.StatusCode != 200 {
		t.Errorf("another caller: %d", r.StatusCode)
	}
}

func TestServer_planBodyOverTheLimitIsRefused(t *testing.T) {
	f, _ := fullFixture(t)
	big := `{"files":{"a.dstack.yml":"` + strings.Repeat("x", planBodyMax) + `"}}`
	r := f.do(t, "POST", "/api/v1/plan", userTok, strings.NewReader(big), "Content-Type", "application/json")
	if b := readBody(t, r); r.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(b, "8 MiB") {
		t.Errorf("big body: %d %s", r.StatusCode, b)
	}
}

// The history page computes a plan (?plan=1) under the rules of
// POST /api/v1/plan: a viewer is told it needs the user role.
func TestServer_historyPlanNeedsTheUserRole(t *testing.T) {
	f, _ := fullFixture(t)
	if b := readBody(t, f.do(t, "GET", "/history/bbb?plan=1", viewerTok, nil)); !strings.Contains(b, "computing a plan needs the user role") {
		t.Errorf("viewer's page does not say the plan needs the user role")
	}
	if b := readBody(t, f.do(t, "GET", "/history/bbb?plan=1", userTok, nil)); strings.Contains(b, "needs the user role") {
		t.Errorf("user's page refuses the plan")
	}
}
