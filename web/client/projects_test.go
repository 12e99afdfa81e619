package client_test

import (
	"bytes"
	"errors"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"hoist/store"
	"hoist/web"
	"hoist/web/client"
	"hoist/web/internal/fixture"
	"hoist/web/storeview"
)

// twoProjectServer is a real web server over one store holding the
// fixture's default project main and a project beta (fixture.SeedProject),
// each with a run hello.
func twoProjectServer(t *testing.T) (string, fixture.Seeded) {
	t.Helper()
	now := time.Now().UTC()
	st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "hoist.db"), store.Options{SecretKey: bytes.Repeat([]byte{7}, 32)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	seeded, err := fixture.Seed(t.Context(), st, now)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fixture.SeedProject(t.Context(), st, "beta", now); err != nil {
		t.Fatal(err)
	}
	main, beta := storeview.New(st, "main"), storeview.New(st, "beta")
	srv, err := web.New(web.Config{AdminToken: "admin-tok", ListCacheTTL: -1}, web.Deps{
		Store: main, Syncer: syncer{main}, Tokens: main, Secrets: main, Users: main,
		Projects: map[string]web.ProjectDeps{"beta": {Store: beta, Syncer: syncer{beta}, Secrets: beta}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return ts.URL, seeded
}

// TestClient_projectAddressesThatProjectsRoutes: with Project "beta" the
// project routes answer beta's runs, logs and secrets, where the run hello
// exists in both projects; the global routes are the same either way.
func TestClient_projectAddressesThatProjectsRoutes(t *testing.T) {
	url, seeded := twoProjectServer(t)
	ctx := t.Context()
	def := &client.Client{BaseURL: url, Token: seeded.Tokens.Admin}
	beta := &client.Client{BaseURL: url, Token: seeded.Tokens.Admin, Project: "beta"}

	runs, err := beta.Runs(ctx, client.RunsQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 || runs[0].Name != "hello" || runs[0].StatusMessage != "hello from beta" {
		t.Errorf("beta's runs %+v, want its one run hello", runs)
	}
	all, err := def.Runs(ctx, client.RunsQuery{})
	if err != nil || len(all) < 2 {
		t.Errorf("default project's runs %d (%v), want the fixture's several", len(all), err)
	}
	run, err := beta.Run(ctx, "hello")
	if err != nil || run.StatusMessage != "hello from beta" {
		t.Errorf("beta's hello %q (%v), want beta's", run.StatusMessage, err)
	}
	if run, err := def.Run(ctx, "hello"); err != nil || run.StatusMessage == "hello from beta" {
		t.Errorf("default project's hello %q (%v), want main's", run.StatusMessage, err)
	}
	var logs bytes.Buffer
	if err := beta.Logs(ctx, "hello", client.LogsQuery{}, &logs); err != nil || logs.String() != "hello from beta\n" {
		t.Errorf("beta's hello logs %q (%v)", logs.String(), err)
	}
	if v, err := beta.Secret(ctx, "HF_TOKEN"); err != nil || v != "hf_beta" {
		t.Errorf("beta's secret %q (%v), want hf_beta", v, err)
	}
	if _, err := beta.Run(ctx, "train"); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("main's run train in beta: %v, want not found", err)
	}

	// Global routes ignore Project.
	who, err := beta.Whoami(ctx)
	if err != nil || who.Role != web.RoleAdmin {
		t.Errorf("whoami in beta %+v (%v)", who, err)
	}
	ps, err := beta.Projects(ctx)
	if err != nil || len(ps) != 2 || ps[0] != (web.ProjectRole{Name: "beta", Role: web.RoleAdmin}) ||
		ps[1] != (web.ProjectRole{Name: "main", Role: web.RoleAdmin, Default: true}) {
		t.Errorf("projects %+v (%v), want beta and the default main", ps, err)
	}
	if err := beta.SetMember(ctx, "beta", web.Member{User: "victor", Role: web.RoleViewer}); err != nil {
		t.Errorf("members of beta with Project beta: %v", err)
	}

	// A project the caller has no role in, or none at all, is not found.
	viewer := &client.Client{BaseURL: url, Token: seeded.Tokens.User, Project: "beta"}
	if _, err := viewer.Runs(ctx, client.RunsQuery{}); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("a user of main only listing beta's runs: %v, want not found", err)
	}
	nope := &client.Client{BaseURL: url, Token: seeded.Tokens.Admin, Project: "nope"}
	if _, err := nope.Runs(ctx, client.RunsQuery{}); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("unknown project: %v, want not found", err)
	}
}
