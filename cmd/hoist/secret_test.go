package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"hoist/store"
	"hoist/web"
	"hoist/web/storeview"
)

// secretServer is a real web server over a real store.
func secretServer(t *testing.T) (*httptest.Server, *store.Store) {
	t.Helper()
	st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "hoist.db"), store.Options{SecretKey: bytes.Repeat([]byte{7}, 32)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	view := storeview.New(st, "")
	srv, err := web.New(web.Config{AdminToken: "admin-tok"}, web.Deps{Store: view, Syncer: noSync{view}, Secrets: view})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return ts, st
}

// noSync reports the store's sync status and never syncs.
type noSync struct{ *storeview.View }

func (noSync) RequestSync() uint64 { return 1 }

func (noSync) WaitSynced(context.Context, uint64) error { return nil }

func runSecretCmd(t *testing.T, stdin string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	cmd := newRootCmd()
	var out, errb bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errb)
	cmd.SetIn(strings.NewReader(stdin))
	cmd.SetArgs(args)
	err = cmd.Execute()
	return out.String(), errb.String(), err
}

func TestSecretCmd_setGetListDelete(t *testing.T) {
	ts, st := secretServer(t)
	t.Setenv("HOIST_TOKEN", "admin-tok")
	t.Setenv("HOIST_SERVER", ts.URL)
	key := filepath.Join(t.TempDir(), "id")
	if err := os.WriteFile(key, []byte("-----BEGIN KEY-----\nabc\n-----END KEY-----\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name, stdin string
		args        []string
		wantOut     string
		wantErr     string
	}{
		{"set from stdin drops one newline", "hf_abc\n", []string{"secret", "set", "HF_TOKEN"}, "", ""},
		{"set from file keeps bytes", "", []string{"secret", "set", "SSH_KEY", "--from-file", key}, "", ""},
		{"get prints the exact value", "", []string{"secret", "get", "HF_TOKEN"}, "hf_abc", ""},
		{"get a key file", "", []string{"secret", "get", "SSH_KEY"}, "-----BEGIN KEY-----\nabc\n-----END KEY-----\n", ""},
		{"empty stdin is refused", "", []string{"secret", "set", "EMPTY"}, "", "empty value"},
		{"a value argument is refused", "", []string{"secret", "set", "X", "value"}, "", "accepts 1 arg"},
		{"invalid name names the rule", "v", []string{"secret", "set", "a.b"}, "", "invalid secret name"},
		{"delete", "", []string{"secret", "delete", "SSH_KEY"}, "", ""},
		{"delete a missing secret", "", []string{"secret", "delete", "SSH_KEY"}, "", "404"},
		{"get a missing secret", "", []string{"secret", "get", "NOPE"}, "", "404"},
	}
	for _, s := range steps {
		out, _, err := runSecretCmd(t, s.stdin, s.args...)
		switch {
		case s.wantErr == "" && err != nil:
			t.Errorf("%s: %v", s.name, err)
		case s.wantErr != "" && (err == nil || !strings.Contains(err.Error(), s.wantErr)):
			t.Errorf("%s: error %v, want %q", s.name, err, s.wantErr)
		case out != s.wantOut:
			t.Errorf("%s: stdout %q, want %q", s.name, out, s.wantOut)
		}
	}
	if v, err := st.GetSecret(t.Context(), "", "HF_TOKEN"); err != nil || string(v) != "hf_abc" {
		t.Errorf("stored %q, %v", v, err)
	}
	out, _, err := runSecretCmd(t, "", "secret", "list")
	if err != nil || !strings.Contains(out, "HF_TOKEN") || strings.Contains(out, "hf_abc") || strings.Contains(out, "SSH_KEY") {
		t.Errorf("list: %v\n%s", err, out)
	}
	_, _, err = runSecretCmd(t, "", "secret", "list", "--token", "wrong")
	if err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("wrong token: %v", err)
	}
	var ee *exitError
	if errors.As(err, &ee) {
		t.Errorf("wrong token gave an exit code, want an error message")
	}
}

// TestSecretCmd_setAndDeleteAreEvents: setting and deleting a secret show
// in /api/v1/events with its name and who did it, never its value.
func TestSecretCmd_setAndDeleteAreEvents(t *testing.T) {
	ts, _ := secretServer(t)
	t.Setenv("HOIST_TOKEN", "admin-tok")
	t.Setenv("HOIST_SERVER", ts.URL)
	const value = "hf_event-value-must-not-show"
	for _, args := range [][]string{{"secret", "set", "HF_TOKEN"}, {"secret", "set", "HF_TOKEN"}, {"secret", "delete", "HF_TOKEN"}} {
		if _, _, err := runSecretCmd(t, value+"\n", args...); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, ts.URL+"/api/v1/events?kind=secret", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer admin-tok")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /api/v1/events: %d %v %s", resp.StatusCode, err, body)
	}
	if strings.Contains(string(body), "hf_event") {
		t.Fatalf("the events carry the secret's value:\n%s", body)
	}
	var events []web.Event
	if err := json.Unmarshal(body, &events); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range events { // newest first
		got = append(got, e.Kind+" "+e.Name+" "+e.Type+": "+e.Message)
	}
	want := []string{
		"secret HF_TOKEN deleted: secret HF_TOKEN deleted by admin",
		"secret HF_TOKEN set: secret HF_TOKEN set by admin",
		"secret HF_TOKEN set: secret HF_TOKEN set by admin",
	}
	if !slices.Equal(got, want) {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
