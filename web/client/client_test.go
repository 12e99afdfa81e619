package client_test

import (
	"bytes"
	"context"
	"errors"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"hoist/store"
	"hoist/web"
	"hoist/web/client"
	"hoist/web/internal/fixture"
	"hoist/web/storeview"
)

// syncer reports the store's sync status and never syncs.
type syncer struct{ *storeview.View }

func (syncer) RequestSync() uint64 { return 1 }

func (syncer) WaitSynced(context.Context, uint64) error { return nil }

// server is a real web server over the fixture's store.
func server(t *testing.T) (string, fixture.Seeded) {
	t.Helper()
	st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "hoist.db"), store.Options{SecretKey: bytes.Repeat([]byte{7}, 32)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	seeded, err := fixture.Seed(t.Context(), st, time.Now().UTC())
	if err != nil {
		t.Fatal(err)
	}
	view := storeview.New(st, "")
	srv, err := web.New(web.Config{AdminToken: "admin-tok"}, web.Deps{Store: view, Syncer: syncer{view}, Tokens: view, Secrets: view, Users: view})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return ts.URL, seeded
}

func TestClient_readsRunsLogsAndEvents(t *testing.T) {
	url, seeded := server(t)
	c := &client.Client{BaseURL: url, Token: seeded.Tokens.Viewer}
	ctx := t.Context()
	runs, err := c.Runs(ctx, client.RunsQuery{Status: "running"})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 || runs[0].Name != "train" {
		t.Errorf("running runs %+v, want train", runs)
	}
	run, err := c.Run(ctx, "hello")
	if err != nil || run.Status != "done" || len(run.Jobs) == 0 {
		t.Fatalf("run hello: %+v, %v", run, err)
	}
	var logs bytes.Buffer
	if err := c.Logs(ctx, "hello", client.LogsQuery{}, &logs); err != nil {
		t.Fatal(err)
	}
	if logs.String() != "hello line 1\nhello line 2\nhello line 3\n" {
		t.Errorf("logs %q", logs.String())
	}
	evs, err := c.Events(ctx, client.EventsQuery{Kind: "run", Name: "hello"})
	if err != nil || len(evs) != 3 || evs[0].Type != "done" {
		t.Errorf("events of hello, newest first: %+v, %v", evs, err)
	}
	who, err := c.Whoami(ctx)
	if err != nil || who.RoleIn("main") != web.RoleViewer || who.Role != web.RoleUser {
		t.Errorf("whoami %+v, %v", who, err)
	}
}

func TestClient_typedErrorsCarryTheServersMessage(t *testing.T) {
	url, seeded := server(t)
	ctx := t.Context()
	viewer := &client.Client{BaseURL: url, Token: seeded.Tokens.Viewer}
	for _, tc := range []struct {
		name   string
		call   func() error
		want   error
		status int
	}{
		{"unknown run", func() error { _, err := viewer.Run(ctx, "nope"); return err }, client.ErrNotFound, 404},
		{"wrong token", func() error {
			_, err := (&client.Client{BaseURL: url, Token: "wrong"}).Runs(ctx, client.RunsQuery{})
			return err
		}, client.ErrUnauthorized, 401},
		{"viewer stops", func() error { _, err := viewer.Stop(ctx, "train", false); return err }, client.ErrForbidden, 403},
		{"viewer sets a secret", func() error { return viewer.SetSecret(ctx, "K", "v") }, client.ErrForbidden, 403},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if !errors.Is(err, tc.want) {
				t.Fatalf("error %v, want %v", err, tc.want)
			}
			var e *client.Error
			if !errors.As(err, &e) || e.Status != tc.status || e.Message == "" {
				t.Errorf("error %#v, want status %d with the server's message", err, tc.status)
			}
		})
	}
}

func TestClient_secretsRoundTrip(t *testing.T) {
	url, seeded := server(t)
	ctx := t.Context()
	// Secrets' values are the managers' (the fixture's store roles have no
	// manager; its admin is one everywhere).
	c := &client.Client{BaseURL: url, Token: seeded.Tokens.Admin}
	if err := c.SetSecret(ctx, "HF_TOKEN", "hf_123\n"); err != nil {
		t.Fatal(err)
	}
	v, err := c.Secret(ctx, "HF_TOKEN")
	if err != nil || v != "hf_123\n" {
		t.Fatalf("value %q, %v", v, err)
	}
	list, err := c.Secrets(ctx)
	if err != nil || len(list) != 1 || list[0].Name != "HF_TOKEN" {
		t.Fatalf("list %+v, %v", list, err)
	}
	if err := c.DeleteSecret(ctx, "HF_TOKEN"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Secret(ctx, "HF_TOKEN"); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("deleted secret: %v, want not found", err)
	}
	if err := c.SetSecret(ctx, "BAD NAME", "v"); err == nil || !strings.Contains(err.Error(), "400") {
		t.Errorf("invalid name: %v, want a 400 with the server's message", err)
	}
}
