package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestUsers_cliGivesRolesAndTokensThatTheServerHonours drives a real
// `hoist serve` with the CLI only: the admin adds a user, makes it a member
// of the default project and creates it a token; the token then acts as
// its role says (a user syncs, a viewer may not), lists its own tokens,
// revokes itself and is refused. The token's secret is nowhere in the data
// directory.
func TestUsers_cliGivesRolesAndTokensThatTheServerHonours(t *testing.T) {
	r := newRepo(t)
	r.write("README.md", "users e2e\n")
	r.commit("init")
	s := startServer(t, r.dir)
	cfgHome := t.TempDir()

	cli := func(token string, args ...string) (string, error) {
		t.Helper()
		cmd := exec.Command(filepath.Join(bin, "hoist"), args...)
		cmd.Env = append(os.Environ(), "HOIST_SERVER="+s.url, "HOIST_TOKEN="+token, "XDG_CONFIG_HOME="+cfgHome)
		var out, errb strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			return out.String(), fmt.Errorf("hoist %s: %w: %s", strings.Join(args, " "), err, errb.String())
		}
		return out.String(), nil
	}
	must := func(token string, args ...string) string {
		t.Helper()
		out, err := cli(token, args...)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	api := func(token, method, path string) (int, []byte) {
		t.Helper()
		req, _ := http.NewRequest(method, s.url+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		return resp.StatusCode, b.Bytes()
	}

	must(s.token, "user", "add", "ann")
	must(s.token, "project", "member", "add", "main", "ann", "--role", "user")
	secret := strings.TrimSpace(must(s.token, "token", "create", "laptop", "--user", "ann", "--expires", "30d"))
	if !strings.HasPrefix(secret, "hoist_") {
		t.Fatalf("token create printed %q", secret)
	}

	code, body := api(secret, "GET", "/api/v1/whoami")
	var who struct {
		Name     string            `json:"name"`
		Role     string            `json:"role"`
		Projects map[string]string `json:"projects"`
	}
	if code != 200 || json.Unmarshal(body, &who) != nil || who.Name != "ann" || who.Role != "user" || who.Projects["main"] != "user" {
		t.Fatalf("whoami with ann's token: %d %s", code, body)
	}
	if code, body := api(secret, "POST", "/api/v1/sync"); code != http.StatusAccepted {
		t.Errorf("ann (user of main) syncs: %d %s", code, body)
	}
	must(s.token, "project", "member", "add", "main", "ann", "--role", "viewer")
	if code, _ := api(secret, "POST", "/api/v1/sync"); code != http.StatusForbidden {
		t.Errorf("ann (viewer of main) syncs: %d, want 403", code)
	}
	if out := must(s.token, "project", "member", "list", "main"); !strings.Contains(out, "ann") || !strings.Contains(out, "viewer") {
		t.Errorf("member list:\n%s", out)
	}
	if out := must(s.token, "user", "list"); !strings.Contains(out, "main=viewer") {
		t.Errorf("user list:\n%s", out)
	}
	if _, err := cli(secret, "user", "add", "eve"); err == nil {
		t.Error("ann (no global admin) added a user")
	}

	// ann lists and revokes her own token with it.
	list := must(secret, "token", "list", "-o", "json")
	var toks []struct {
		ID   string `json:"id"`
		Name string `json:"name"`
	}
	if err := json.Unmarshal([]byte(list), &toks); err != nil || len(toks) != 1 || toks[0].Name != "laptop" {
		t.Fatalf("ann's token list: %v\n%s", err, list)
	}
	if strings.Contains(list, secret) {
		t.Error("token list shows the secret")
	}
	must(secret, "token", "revoke", toks[0].ID)
	if code, _ := api(secret, "GET", "/api/v1/whoami"); code != http.StatusUnauthorized {
		t.Errorf("revoked token: %d, want 401", code)
	}

	// The secret is nowhere under the data directory (database, WAL, logs).
	err := filepath.WalkDir(s.dataDir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil // sockets and files that vanished
		}
		if bytes.Contains(b, []byte(secret[len("hoist_"):])) {
			t.Errorf("%s holds the token's secret", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(s.logText(), secret) {
		t.Error("the server's log holds the token's secret")
	}
	must(s.token, "user", "rm", "ann")
	if out := must(s.token, "user", "list"); strings.Contains(out, "ann") {
		t.Errorf("ann still listed:\n%s", out)
	}
}
