package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/registry"
	"github.com/docker/docker/client"

	"hoist/e2e/testenv"
)

// TestSecrets_setByCLIReachEnvAndRegistryAuthAndNeverLeak sets secrets with
// `hoist secret set` and commits a task that pulls its image from a private
// registry (Debian's docker-registry with htpasswd on loopback) with
// registry_auth from secrets and gets a secret in its env (by reference and
// by `env: [NAME]`). The values must reach the container and the registry,
// and appear nowhere else: not in /api/v1 answers, pages, events, stored
// output or the server's log. A task that names a secret nobody set fails
// before it starts, naming the secret and its file:line.
func TestSecrets_setByCLIReachEnvAndRegistryAuthAndNeverLeak(t *testing.T) {
	testenv.Docker(t)
	const (
		regUser   = "hoist-e2e"
		regPass   = "reg-pass-5c1f0e9a7b"
		tokValue  = "hf_tok-e2e-8d3a61f2c4"
		passVal   = "pass-through-77e0b1d9"
		wrongPass = "not-the-password-2b9c"
	)
	reg := testenv.StartRegistry(t, regUser, regPass)
	ref := pushToRegistry(t, reg, regUser, regPass)

	r := newRepo(t)
	r.write("README.md", "secrets e2e\n")
	r.commit("init")
	s := startServer(t, r.dir)

	cli := func(stdin string, args ...string) (string, error) {
		cmd := exec.Command(filepath.Join(bin, "hoist"), append([]string{"secret"}, args...)...)
		cmd.Env = append(os.Environ(), "HOIST_SERVER="+s.url, "HOIST_TOKEN="+s.token)
		cmd.Stdin = strings.NewReader(stdin)
		var out, errb strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		if err != nil {
			return out.String(), fmt.Errorf("%w: %s", err, errb.String())
		}
		return out.String(), nil
	}
	for name, v := range map[string]string{"HF_TOKEN": tokValue, "REG_USER": regUser, "REG_PASS": regPass, "PASS_THROUGH": passVal, "REG_WRONG": wrongPass} {
		if _, err := cli(v+"\n", "set", name); err != nil {
			t.Fatalf("hoist secret set %s: %v", name, err)
		}
	}
	if got, err := cli("", "get", "HF_TOKEN"); err != nil || got != tokValue {
		t.Fatalf("hoist secret get = %q, %v", got, err)
	}

	sum := func(v string) string { h := sha256.Sum256([]byte(v)); return hex.EncodeToString(h[:]) }
	r.write("private.dstack.yml", fmt.Sprintf(`type: task
name: private
image: %s
registry_auth:
  username: ${{ secrets.REG_USER }}
  password: ${{ secrets.REG_PASS }}
env:
  - HF_TOKEN=${{ secrets.HF_TOKEN }}
  - PASS_THROUGH
commands:
  - test "$(printf %%s "$HF_TOKEN" | sha256sum | cut -d' ' -f1)" = %s && echo env-ok
  - test "$(printf %%s "$PASS_THROUGH" | sha256sum | cut -d' ' -f1)" = %s && echo pass-through-ok
  - echo "printed $HF_TOKEN"
`, ref, sum(tokValue), sum(passVal)))
	r.write("nosecret.dstack.yml", task("nosecret", "  - echo never\n")+"env:\n  - A=1\n  - B=${{ secrets.NOT_SET_ANYWHERE }}\n")
	// The same image with a wrong password from a secret: the pull is
	// refused, so the right one above did authenticate.
	r.write("wrongauth.dstack.yml", fmt.Sprintf("type: task\nname: wrongauth\nimage: %s\nregistry_auth:\n  username: ${{ secrets.REG_USER }}\n  password: ${{ secrets.REG_WRONG }}\ncommands: [echo pulled]\n", ref))
	r.commit("tasks with secrets")

	s.waitRun("private", "", "done", reconcileWait)
	logs := s.logs("private")
	for _, want := range []string{"env-ok", "pass-through-ok", "printed ***"} {
		if !strings.Contains(logs, want) {
			t.Errorf("logs of private lack %q:\n%s", want, logs)
		}
	}

	wrong := s.waitRun("wrongauth", "", "failed", reconcileWait)
	var wrongJobs []struct {
		TerminationMessage string `json:"termination_message"`
	}
	s.getJSON("/api/v1/runs/wrongauth/jobs", &wrongJobs)
	if strings.Contains(s.logs("wrongauth"), "pulled") || len(wrongJobs) == 0 || !strings.Contains(strings.ToLower(wrongJobs[0].TerminationMessage), "unauthorized") {
		t.Errorf("a wrong registry password: run %+v jobs %+v, want a pull refused as unauthorized", wrong, wrongJobs)
	}

	failed := s.waitRun("nosecret", "", "failed", reconcileWait)
	var jobs []struct {
		Status             string `json:"status"`
		TerminationMessage string `json:"termination_message"`
	}
	s.getJSON("/api/v1/runs/nosecret/jobs", &jobs)
	if len(jobs) == 0 || !strings.Contains(jobs[0].TerminationMessage, "NOT_SET_ANYWHERE") ||
		!strings.Contains(jobs[0].TerminationMessage, "nosecret.dstack.yml:8:") {
		t.Errorf("nosecret: run %+v jobs %+v: want a message naming NOT_SET_ANYWHERE at nosecret.dstack.yml:8", failed, jobs)
	}
	if strings.Contains(s.logs("nosecret"), "never") {
		t.Error("the task with a missing secret ran")
	}

	// Nowhere but `secret get` shows a value.
	paths := []string{
		"/api/v1/runs", "/api/v1/runs/private", "/api/v1/runs/private/jobs", "/api/v1/runs/private/logs",
		"/api/v1/runs/private/events", "/api/v1/runs/nosecret", "/api/v1/events", "/api/v1/jobs",
		"/api/v1/secrets", "/api/v1/sync", "/api/v1/revisions", "/api/v1/fleets", "/api/v1/instances",
		"/", "/runs", "/runs/private", "/runs/nosecret", "/secrets", "/history", "/fleets",
	}
	secrets := []string{tokValue, regPass, passVal, wrongPass}
	for _, p := range paths {
		code, body := s.do("GET", p, nil)
		if code != 200 {
			t.Errorf("GET %s: %d", p, code)
		}
		for _, v := range secrets {
			if strings.Contains(string(body), v) {
				t.Errorf("GET %s shows a secret value", p)
			}
		}
	}
	var list []map[string]any
	s.getJSON("/api/v1/secrets", &list)
	if len(list) != 5 {
		t.Errorf("secret list = %v", list)
	}
	for _, e := range list {
		if _, has := e["value"]; has {
			t.Errorf("secret list carries a value field: %v", e)
		}
	}
	s.stop() // flush the log
	for _, v := range secrets {
		if strings.Contains(s.logText(), v) {
			t.Errorf("the server log shows a secret value")
		}
	}
}

// TestSecrets_sshFleetKeyFromSecret commits an SSH fleet whose
// identity_file is `${{ secrets.FLEET_KEY }}` before the secret exists: the
// instance waits, saying which secret at which file:line; once the key is
// set with `hoist secret set --from-file`, the host comes up with it and a
// task runs there. The key never shows in API answers or the server log.
func TestSecrets_sshFleetKeyFromSecret(t *testing.T) {
	testenv.Docker(t)
	keys := t.TempDir()
	key := testenv.NewSSHKey(t, keys, "fleet_key")
	host := testenv.StartSSHD(t, "127.0.0.13", key.Signer.PublicKey())
	remote := t.TempDir()
	t.Cleanup(func() { reapShims(t, remote) })
	cfg := filepath.Join(keys, "hoist.yaml")
	writeTestFile(t, cfg, fmt.Sprintf("backends:\n  - name: local\n    type: local\n  - name: ssh\n    type: ssh\n    remote_dir: %s\n    connect_timeout: 2s\n    drain_grace: 2s\n", remote))
	r := newRepo(t)
	r.write("README.md", "specs\n")
	r.commit("empty")
	s := startServer(t, r.dir, "--config", cfg, "--resync-interval", "2s")

	r.write("fleet.dstack.yml", fmt.Sprintf("type: fleet\nname: %s\nssh_config:\n  user: %s\n  identity_file: ${{ secrets.FLEET_KEY }}\n  hosts:\n    - hostname: %s\n      port: %d\n",
		sshFleetName, testenv.LoginUser(t), host.IP, host.Port))
	r.commit("ssh fleet keyed by a secret")
	s.waitInstances(sshWithin, "the instance waiting for FLEET_KEY", func(is map[string]apiInstance) bool {
		for _, i := range is {
			if strings.Contains(i.StatusMessage, "secret FLEET_KEY is not set") && strings.Contains(i.StatusMessage, "fleet.dstack.yml:") {
				return true
			}
		}
		return false
	})

	cmd := exec.Command(filepath.Join(bin, "hoist"), "secret", "set", "FLEET_KEY", "--from-file", key.Path, "--server", s.url)
	cmd.Env = append(os.Environ(), "HOIST_TOKEN="+s.token)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("hoist secret set --from-file: %v: %s", err, out)
	}
	s.waitInstances(sshWithin, "the host idle and reachable with the key", func(is map[string]apiInstance) bool {
		return len(is) == 1 && allInstances(is, func(i apiInstance) bool { return i.Status == "idle" && i.Reachable })
	})
	r.write("onhost.dstack.yml", task("onhost", "  - echo on the keyed host\n")+"fleets: ["+sshFleetName+"]\n")
	sha := r.commit("a task on the fleet")
	s.waitRun("onhost", sha, "done", sshWithin)

	keyLine := strings.Split(strings.TrimSpace(string(key.PEM)), "\n")[1] // a line of the key's body
	for _, p := range []string{"/api/v1/instances", "/api/v1/fleets/" + sshFleetName, "/api/v1/events", "/api/v1/secrets", "/fleets"} {
		if _, body := s.do("GET", p, nil); strings.Contains(string(body), keyLine) {
			t.Errorf("GET %s shows the private key", p)
		}
	}
	s.stop()
	if strings.Contains(s.logText(), keyLine) {
		t.Error("the server log shows the private key")
	}
}

// pushToRegistry tags the test image into the registry, pushes it with
// the credentials and removes the local tag, so a pull must authenticate.
func pushToRegistry(t *testing.T, reg, user, pass string) string {
	t.Helper()
	ctx := t.Context()
	dc, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dc.Close() })
	ref := fmt.Sprintf("%s/hoist-e2e/private:%d", reg, time.Now().UnixNano())
	if err := dc.ImageTag(ctx, testenv.BusyboxImage, ref); err != nil {
		t.Fatal(err)
	}
	untag := func() { _, _ = dc.ImageRemove(context.Background(), ref, image.RemoveOptions{}) }
	t.Cleanup(untag)
	auth, _ := registry.EncodeAuthConfig(registry.AuthConfig{Username: user, Password: pass, ServerAddress: reg})
	rc, err := dc.ImagePush(ctx, ref, image.PushOptions{RegistryAuth: auth})
	if err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
	defer rc.Close()
	dec := json.NewDecoder(rc)
	for {
		var m struct {
			Error string `json:"error"`
		}
		if err := dec.Decode(&m); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("push %s: %v", ref, err)
		}
		if m.Error != "" {
			t.Fatalf("push %s: %s", ref, m.Error)
		}
	}
	untag()
	return ref
}
