package runner

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/pem"
	"os"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"hoist/agents/api"
)

// standaloneTestEnv returns a valid standalone environment: a fresh host
// key and one authorized key.
func standaloneTestEnv(t *testing.T) map[string]string {
	t.Helper()
	_, host, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(host, "")
	if err != nil {
		t.Fatal(err)
	}
	user, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := ssh.NewPublicKey(user)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]string{
		api.RunnerEnvToken:          strings.Repeat("t", 32),
		api.RunnerEnvHostKey:        base64.StdEncoding.EncodeToString(pem.EncodeToMemory(block)),
		api.RunnerEnvAuthorizedKeys: string(ssh.MarshalAuthorizedKey(pub)),
	}
}

func TestParseStandaloneEnv(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(env map[string]string)
		// wantErr is a part of the error; "" means none.
		wantErr    string
		wantListen string
		wantKeys   int
	}{
		{name: "without an address it listens on every address on the pod's SSH port",
			edit: func(map[string]string) {}, wantListen: "0.0.0.0:10022", wantKeys: 1},
		{name: "the address given is the one it listens on",
			edit:       func(e map[string]string) { e[api.RunnerEnvSSHListen] = "127.77.0.3:2222" },
			wantListen: "127.77.0.3:2222", wantKeys: 1},
		{name: "blank lines and comments among the authorized keys are skipped",
			edit: func(e map[string]string) {
				line := strings.TrimSpace(e[api.RunnerEnvAuthorizedKeys])
				e[api.RunnerEnvAuthorizedKeys] = "# the task's key\n\n" + line + "\r\n" + line + "\n"
			},
			wantListen: "0.0.0.0:10022", wantKeys: 2},
		{name: "a missing token is refused",
			edit: func(e map[string]string) { delete(e, api.RunnerEnvToken) }, wantErr: api.RunnerEnvToken + " is not set"},
		{name: "a short token is refused",
			edit: func(e map[string]string) { e[api.RunnerEnvToken] = "short" }, wantErr: api.RunnerEnvToken + ": the token must have at least 32"},
		{name: "a missing host key is refused",
			edit: func(e map[string]string) { delete(e, api.RunnerEnvHostKey) }, wantErr: api.RunnerEnvHostKey + " is not set"},
		{name: "a host key that is not base64 is refused",
			edit: func(e map[string]string) { e[api.RunnerEnvHostKey] = "not base64!" }, wantErr: api.RunnerEnvHostKey + ": not base64"},
		{name: "a host key that is not a private key is refused",
			edit: func(e map[string]string) {
				e[api.RunnerEnvHostKey] = base64.StdEncoding.EncodeToString([]byte("-----BEGIN NOTHING-----\n"))
			},
			wantErr: api.RunnerEnvHostKey + ": not an unencrypted OpenSSH PEM private key"},
		{name: "no authorized key is refused",
			edit: func(e map[string]string) { e[api.RunnerEnvAuthorizedKeys] = "# nobody\n" }, wantErr: api.RunnerEnvAuthorizedKeys + " holds no key"},
		{name: "a malformed authorized key names its line",
			edit:    func(e map[string]string) { e[api.RunnerEnvAuthorizedKeys] += "ssh-ed25519 garbage\n" },
			wantErr: api.RunnerEnvAuthorizedKeys + " line 2"},
		{name: "an authorized key with options is refused",
			edit: func(e map[string]string) {
				e[api.RunnerEnvAuthorizedKeys] = `command="true" ` + e[api.RunnerEnvAuthorizedKeys]
			},
			wantErr: "options"},
		{name: "an address without a port is refused",
			edit: func(e map[string]string) { e[api.RunnerEnvSSHListen] = "127.0.0.1" }, wantErr: api.RunnerEnvSSHListen},
		{name: "an address with a port out of range is refused",
			edit: func(e map[string]string) { e[api.RunnerEnvSSHListen] = "127.0.0.1:70000" }, wantErr: "from 1 to 65535"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := standaloneTestEnv(t)
			tc.edit(env)
			got, err := parseStandaloneEnv(env)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.listen != tc.wantListen || len(got.authorizedKeys) != tc.wantKeys || got.hostKey == nil || got.token != env[api.RunnerEnvToken] {
				t.Fatalf("got listen %q, %d keys, host key %v, token %q; want %q, %d keys",
					got.listen, len(got.authorizedKeys), got.hostKey != nil, got.token, tc.wantListen, tc.wantKeys)
			}
		})
	}
}

func TestTakeRunnerEnv_removesEveryRunnerVariableAndKeepsTheRest(t *testing.T) {
	t.Setenv(api.RunnerEnvToken, "secret")
	t.Setenv("HOIST_RUNNER_SOMETHING_NEW", "x")
	t.Setenv("HOIST_RUN_NAME_LIKE", "kept")
	got := takeRunnerEnv()
	if got[api.RunnerEnvToken] != "secret" || got["HOIST_RUNNER_SOMETHING_NEW"] != "x" {
		t.Fatalf("taken = %v", got)
	}
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, runnerEnvPrefix) {
			t.Fatalf("%s is still in the environment", kv)
		}
	}
	if os.Getenv("HOIST_RUN_NAME_LIKE") != "kept" {
		t.Fatal("a variable not meant for the runner was removed")
	}
}
