package web_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"hoist/store"
	"hoist/web"
	"hoist/web/internal/fixture"
	"hoist/web/storeview"
)

// tokenTable gives each test caller its principal (project memberships
// are not in the store yet).
type tokenTable map[string]web.Principal

func (tt tokenTable) LookupToken(_ context.Context, tok string) (web.Principal, error) {
	if p, ok := tt[tok]; ok {
		return p, nil
	}
	return web.Principal{}, web.ErrNotFound
}

// callRecorder is a project's Controller that records what reached it.
type callRecorder struct {
	mu    sync.Mutex
	calls []string
}

func (r *callRecorder) rec(s string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, s)
	return nil
}

func (r *callRecorder) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.calls...)
}

func (r *callRecorder) StopRun(_ context.Context, name string, _ bool) error {
	return r.rec("stop " + name)
}
func (r *callRecorder) RerunRun(_ context.Context, name string) error { return r.rec("rerun " + name) }
func (r *callRecorder) SetRunSuspended(_ context.Context, name string, _ bool) error {
	return r.rec("suspend " + name)
}
func (r *callRecorder) SetAutoSync(context.Context, bool) error { return r.rec("autosync") }
func (r *callRecorder) ApplyRevision(_ context.Context, sha string) error {
	return r.rec("apply " + sha)
}

// projectEnv serves two projects of one real store: main (the default,
// "A") and beta ("B"), each with a run hello.
type projectEnv struct {
	ts       *httptest.Server
	srv      *web.Server
	seeded   fixture.Seeded
	ctl      map[string]*callRecorder
	betaJob  string
	projects []string
}

// caller is a test principal and what it may do in main.
type caller struct {
	name string
	p    web.Principal
	// role is the caller's role in main ("" for none); admin is global.
	role web.Role
}

var projectCallers = []caller{
	{"viewer of A", web.Principal{Name: "va", Role: web.RoleUser, Projects: map[string]web.Role{"main": web.RoleViewer}}, web.RoleViewer},
	{"user of A", web.Principal{Name: "ua", Role: web.RoleUser, Projects: map[string]web.Role{"main": web.RoleUser}}, web.RoleUser},
	{"manager of A", web.Principal{Name: "ma", Role: web.RoleUser, Projects: map[string]web.Role{"main": web.RoleManager}}, web.RoleManager},
	{"admin of A", web.Principal{Name: "aa", Role: web.RoleUser, Projects: map[string]web.Role{"main": web.RoleAdmin}}, web.RoleAdmin},
	{"no role", web.Principal{Name: "nobody", Role: web.RoleUser}, ""},
	// The global admin comes last: it may act in beta, and the others'
	// refusals there are checked against beta's controller before.
	{"global admin", web.Principal{Name: "root", Role: web.RoleAdmin}, web.RoleAdmin},
}

func newProjectEnv(t *testing.T) *projectEnv {
	t.Helper()
	now := time.Now().UTC()
	st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "hoist.db"), store.Options{SecretKey: []byte("projects-test-secret-key-32bytes")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	seeded, err := fixture.Seed(t.Context(), st, now)
	if err != nil {
		t.Fatal(err)
	}
	betaJob, err := fixture.SeedProject(t.Context(), st, "beta", now)
	if err != nil {
		t.Fatal(err)
	}
	tokens := tokenTable{}
	for _, c := range projectCallers {
		tokens["tok-"+c.p.Name] = c.p
	}
	env := &projectEnv{seeded: seeded, betaJob: betaJob, ctl: map[string]*callRecorder{"main": {}, "beta": {}},
		projects: []string{"main", "beta"}}
	main, beta := storeview.New(st, "main"), storeview.New(st, "beta")
	srv, err := web.New(web.Config{ListCacheTTL: -1}, web.Deps{
		Store: main, Syncer: noopSyncer{main}, Inventory: main, Secrets: main, Controller: env.ctl["main"],
		Planner: specPlanner{seeded}, Tokens: tokens,
		Projects: map[string]web.ProjectDeps{"beta": {
			Store: beta, Syncer: noopSyncer{beta}, Inventory: beta, Secrets: beta, Controller: env.ctl["beta"],
			Planner: specPlanner{seeded},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	env.srv = srv
	env.ts = httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		srv.Close()
		env.ts.Close()
	})
	return env
}

// do sends one request as tok and returns the status and body.
func (e *projectEnv) do(t *testing.T, method, path, tok, body string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, e.ts.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// globalRoutes are the routes outside any project; every other route must
// be a project route (named "project:<access>").
var globalRoutes = map[string]bool{
	"GET /metrics": true, "GET /healthz": true, "GET /static/*": true, "GET /agents/runner/:arch": true,
	"GET /login": true, "POST /login": true, "POST /logout": true,
	"POST /hooks/github": true, "POST /hooks/gitlab": true, "POST /hooks/generic": true,
	"GET /api/v1/whoami": true, "GET /api/v1/projects": true,
	// Users, members and tokens check the caller's global or project role
	// themselves (users_api.go; TestUsersAPI_* and TestServer_everyRouteByRole).
	"GET /admin": true, "POST /admin/users": true, "POST /admin/users/:name/delete": true,
	"POST /admin/projects/:project/members": true, "POST /admin/projects/:project/members/:user/delete": true,
	"POST /admin/tokens": true, "POST /admin/tokens/:id/revoke": true,
	"GET /api/v1/users": true, "POST /api/v1/users": true, "DELETE /api/v1/users/:name": true,
	// Runtime profiles are global admins' (pprof.go).
	"GET /debug/pprof/*":                    true,
	"GET /api/v1/projects/:project/members": true, "POST /api/v1/projects/:project/members": true,
	"DELETE /api/v1/projects/:project/members/:user": true,
	"GET /api/v1/tokens":                             true, "POST /api/v1/tokens": true, "DELETE /api/v1/tokens/:id": true,
	"GET /login/oidc": true, "GET /login/oidc/callback": true,
}

// wantAccess is what a project route must need, independently of the route
// table: reading is open to viewers (but SSH, which acts on a job, and a
// secret's value); changes need a user, and secrets and held plans a
// manager.
func wantAccess(method, path string) string {
	path = strings.TrimPrefix(strings.TrimPrefix(path, "/api/v1"), "/projects/:project")
	switch {
	case strings.HasPrefix(path, "/secrets") && (method != http.MethodGet || path != "/secrets"):
		return "manage"
	case path == "/sync/confirm" || path == "/audit":
		return "manage"
	case method != http.MethodGet || path == "/runs/:name/ssh":
		return "act"
	}
	return "read"
}

// concrete fills a route's path parameters with objects both projects have.
func concrete(path, project, sha string) (string, string) {
	path = strings.Replace(path, ":project", project, 1)
	switch {
	case strings.Contains(path, "/fleets/:name"):
		path = strings.Replace(path, ":name", "gpu-pool", 1)
	case strings.Contains(path, "/secrets/:name"):
		path = strings.Replace(path, ":name", "HF_TOKEN", 1)
	default:
		path = strings.Replace(path, ":name", "hello", 1)
	}
	path = strings.Replace(path, ":action", "stop", 1)
	path = strings.Replace(path, ":sha", sha, 1)
	path = strings.Replace(path, ":job", "0", 1)
	path = strings.Replace(path, "*", "out/model.bin", 1)
	body := ""
	switch {
	case strings.HasSuffix(path, "/plan"):
		body = `{"files":{"a.dstack.yml":"type: task"}}`
	case strings.HasSuffix(path, "/sync/confirm"):
		body = `{"revision":"` + sha + `"}`
	case strings.Contains(path, "/api/v1/") && strings.Contains(path, "/secrets"):
		body = `{"name":"HF_TOKEN","value":"v"}`
	}
	if strings.HasSuffix(path, "/diff") {
		path += "?from=" + sha + "&to=" + sha
	}
	return path, body
}

// TestProjects_everyRouteByProjectRole walks every route of the route
// table for both projects and every caller: beta's routes are 404 (as an
// unknown project) to main's members, main's read routes answer viewers and
// above, its action routes users and above, its manage routes managers
// and above, and a caller without a role gets 404 everywhere but from the
// global admin.
func TestProjects_everyRouteByProjectRole(t *testing.T) {
	e := newProjectEnv(t)
	type target struct{ method, path, body, project, need string }
	var targets []target
	for _, r := range web.RoutesOf(e.srv) {
		switch r.Method {
		case http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete:
		default:
			continue
		}
		need, isProject := strings.CutPrefix(r.Name, "project:")
		if !isProject {
			if !globalRoutes[r.Method+" "+r.Path] && !strings.HasPrefix(r.Path, "/proxy/") {
				t.Errorf("route %s %s is neither a project route nor a known global one", r.Method, r.Path)
			}
			continue
		}
		if w := wantAccess(r.Method, r.Path); need != w {
			t.Errorf("route %s %s needs %s, want %s", r.Method, r.Path, need, w)
		}
		projects := []string{"main"} // the unprefixed routes address the default project
		if strings.Contains(r.Path, ":project") {
			projects = e.projects
		}
		for _, p := range projects {
			path, body := concrete(r.Path, p, e.seeded.RevNew)
			targets = append(targets, target{r.Method, path, body, p, need})
		}
	}
	checked, codes := 0, map[int]int{}
	for _, c := range projectCallers {
		tok := "tok-" + c.p.Name
		for _, tg := range targets {
			code, body := e.do(t, tg.method, tg.path, tok, tg.body)
			checked++
			codes[code]++
			hidden := code == 404 && strings.Contains(body, "project not found")
			role := c.p.RoleIn(tg.project)
			var allowed bool
			switch tg.need {
			case "read":
				allowed = role.CanRead()
			case "act":
				allowed = role.CanAct()
			case "manage":
				allowed = role.CanManage()
			default:
				t.Fatalf("route %s %s: unknown access %q", tg.method, tg.path, tg.need)
			}
			switch {
			case !role.CanRead():
				if !hidden {
					t.Errorf("%s: %s %s = %d %.120s, want 404 project not found", c.name, tg.method, tg.path, code, body)
				}
			case !allowed:
				if code != 403 {
					t.Errorf("%s: %s %s = %d %.120s, want 403", c.name, tg.method, tg.path, code, body)
				}
			default:
				if hidden || code == 401 || code == 403 {
					t.Errorf("%s: %s %s = %d %.120s, want it served", c.name, tg.method, tg.path, code, body)
				}
			}
		}
		if c.p.Role != web.RoleAdmin {
			if calls := e.ctl["beta"].list(); len(calls) != 0 {
				t.Fatalf("after %s, beta's controller got %v", c.name, calls)
			}
		}
	}
	if calls := e.ctl["beta"].list(); len(calls) == 0 {
		t.Errorf("the global admin's actions never reached beta's controller")
	}
	t.Logf("route-by-role matrix: %d project routes (both projects, prefixed and unprefixed) x %d callers = %d requests checked",
		len(targets), len(projectCallers), checked)
	t.Logf("statuses: %v", codes)
}

// TestProjects_sameRunNameStaysInItsProject reads and acts on run hello of
// each project: each answer is the project's own run, and main's members
// cannot reach beta's.
func TestProjects_sameRunNameStaysInItsProject(t *testing.T) {
	e := newProjectEnv(t)
	admin, user := "tok-root", "tok-ua"
	get := func(path, tok string) (int, web.Run) {
		code, body := e.do(t, "GET", path, tok, "")
		var r web.Run
		if code == 200 {
			if err := json.Unmarshal([]byte(body), &r); err != nil {
				t.Fatalf("%s: %v", path, err)
			}
		}
		return code, r
	}
	if code, r := get("/api/v1/projects/beta/runs/hello", admin); code != 200 || r.StatusMessage != "hello from beta" {
		t.Errorf("beta's hello as admin: %d %q", code, r.StatusMessage)
	}
	for _, path := range []string{"/api/v1/runs/hello", "/api/v1/projects/main/runs/hello"} {
		if code, r := get(path, user); code != 200 || r.StatusMessage == "hello from beta" || r.StatusMessage == "" {
			t.Errorf("%s as main's user: %d %q", path, code, r.StatusMessage)
		}
	}
	if code, body := e.do(t, "GET", "/api/v1/projects/beta/runs/hello/logs?job="+e.betaJob, admin, ""); code != 200 || !strings.Contains(body, "hello from beta") {
		t.Errorf("beta's logs as admin: %d %q", code, body)
	}
	for _, rq := range [][2]string{{"GET", "/api/v1/projects/beta/runs/hello/logs?job=" + e.betaJob}, {"POST", "/api/v1/projects/beta/runs/hello/stop"},
		{"GET", "/projects/beta/runs/hello"}, {"GET", "/api/v1/projects/nope/runs"}} {
		if code, body := e.do(t, rq[0], rq[1], user, ""); code != 404 || !strings.Contains(body, "project not found") {
			t.Errorf("%s %s as main's user: %d %.100s", rq[0], rq[1], code, body)
		}
	}
	if code, _ := e.do(t, "POST", "/api/v1/runs/hello/stop", user, ""); code != 200 {
		t.Errorf("stop main's hello: %d", code)
	}
	if got := e.ctl["main"].list(); len(got) != 1 || got[0] != "stop hello" {
		t.Errorf("main's controller: %v", got)
	}
	if got := e.ctl["beta"].list(); len(got) != 0 {
		t.Errorf("beta's controller: %v", got)
	}
	// Pages link within their project.
	if code, body := e.do(t, "GET", "/projects/beta/runs", admin, ""); code != 200 || !strings.Contains(body, `href="/projects/beta/runs/hello"`) {
		t.Errorf("beta's runs page: %d, no link to /projects/beta/runs/hello", code)
	}
	// The switcher lists the caller's projects, and only when there are
	// several.
	if _, body := e.do(t, "GET", "/runs", admin, ""); !strings.Contains(body, `data-testid="project-switcher"`) || !strings.Contains(body, `href="/projects/beta/"`) {
		t.Errorf("admin's runs page has no switcher to beta")
	}
	if _, body := e.do(t, "GET", "/runs", user, ""); strings.Contains(body, `project-switcher`) || strings.Contains(body, "/projects/beta") {
		t.Errorf("main's user sees beta in the page")
	}
}

// TestProjects_listAndWhoamiShowOnlyTheCallersProjects lists the projects
// each caller may read.
func TestProjects_listAndWhoamiShowOnlyTheCallersProjects(t *testing.T) {
	e := newProjectEnv(t)
	for tok, want := range map[string]string{
		"tok-root":   `[{"name":"beta","role":"admin"},{"name":"main","role":"admin","default":true}]`,
		"tok-va":     `[{"name":"main","role":"viewer","default":true}]`,
		"tok-nobody": `[]`,
	} {
		if code, body := e.do(t, "GET", "/api/v1/projects", tok, ""); code != 200 || strings.TrimSpace(body) != want {
			t.Errorf("projects as %s: %d %s, want %s", tok, code, body, want)
		}
	}
	if code, body := e.do(t, "GET", "/api/v1/whoami", "tok-ma", ""); code != 200 || !strings.Contains(body, `"projects":{"main":"manager"}`) {
		t.Errorf("whoami: %d %s", code, body)
	}
}
