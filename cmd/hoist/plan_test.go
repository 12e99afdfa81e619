package main

import (
	"encoding/json"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"hoist/reconciler"
	"hoist/reconciler/source"
	"hoist/reconciler/support"
	"hoist/store"
	"hoist/web"
	"hoist/web/storeview"
)

// planServer is a real web server whose planner is a real controller over a
// real store, wired as `hoist serve` wires them (support checks and
// advisories).
func planServer(t *testing.T) *httptest.Server {
	t.Helper()
	st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "hoist.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	src, err := source.Open(t.Context(), source.Config{Repo: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ctrl, err := reconciler.New(reconciler.Config{NoLocalFleet: true}, reconciler.Deps{Store: st, Source: src,
		Checks: []reconciler.Check{support.Check}, Advisories: []reconciler.Check{support.Warnings}})
	if err != nil {
		t.Fatal(err)
	}
	view := storeview.New(st, "")
	srv, err := web.New(web.Config{AdminToken: "admin-tok"}, web.Deps{Store: view, Syncer: noSync{view}, Planner: planner{ctrl: ctrl, src: src}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return ts
}

const advisoryService = "type: service\nname: web\nimage: busybox\ncommands: [httpd]\nport: 80\npriority: 5\n"

func TestPlanCmd_printsTheServersWarnings(t *testing.T) {
	ts := planServer(t)
	dir := writeSpecs(t, map[string]string{"web.dstack.yml": advisoryService})
	out, errOut, code := runValidateCmd(t, "plan", "--server", ts.URL, "--token", "admin-tok", dir)
	if code != 0 {
		t.Fatalf("exit code %d; stderr:\n%s", code, errOut)
	}
	// The server names the file as sent (relative to the directory given).
	if want := "web.dstack.yml:6:11: warning: priority: "; !strings.Contains(out, want) {
		t.Errorf("stdout:\n%s\nwant a line %s…", out, want)
	}
	if strings.Count(out+errOut, "warning: priority") != 1 {
		t.Errorf("the warning is printed %d times:\n%s%s", strings.Count(out+errOut, "warning: priority"), errOut, out)
	}

	out, errOut, code = runValidateCmd(t, "plan", "-o", "json", "--server", ts.URL, "--token", "admin-tok", dir)
	if code != 0 {
		t.Fatalf("json: exit code %d; stderr:\n%s", code, errOut)
	}
	var p web.Plan
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatal(err)
	}
	if !p.Valid || len(p.Warnings) != 1 || !strings.HasPrefix(p.Warnings[0], "web.dstack.yml:6:11: priority: ") {
		t.Errorf("plan = %+v", p)
	}
}

func TestPlanCmd_noWarningsIsAnEmptyList(t *testing.T) {
	ts := planServer(t)
	dir := writeSpecs(t, map[string]string{"t.dstack.yml": "type: task\nname: job\nimage: busybox\ncommands: [echo]\n"})
	out, errOut, code := runValidateCmd(t, "plan", "-o", "json", "--server", ts.URL, "--token", "admin-tok", dir)
	if code != 0 {
		t.Fatalf("exit code %d; stderr:\n%s", code, errOut)
	}
	if !strings.Contains(out, `"warnings": []`) {
		t.Errorf("json:\n%s\nwant \"warnings\": []", out)
	}
}
