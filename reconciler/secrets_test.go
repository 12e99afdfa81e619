package reconciler

import (
	"bytes"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"hoist/agents/api"
	"hoist/backends"
	"hoist/schema"
	"hoist/store"
)

// secretFixture is newFixture over a store that has a secret key.
func secretFixture(t *testing.T, files map[string]string, secrets map[string]string) *fixture {
	t.Helper()
	f := &fixture{t: t, ctx: t.Context(), clock: newFakeClock(), dir: t.TempDir()}
	for name, content := range files {
		f.write(name, content)
	}
	st, err := store.Open(f.ctx, filepath.Join(t.TempDir(), "hoist.db"), store.Options{Now: f.clock.Now, SecretKey: bytes.Repeat([]byte{1}, 32)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	for k, v := range secrets {
		if err := st.SetSecret(f.ctx, "", k, []byte(v)); err != nil {
			t.Fatal(err)
		}
	}
	f.st = st
	f.c = f.newController()
	return f
}

func TestResolveJobSecrets(t *testing.T) {
	f := secretFixture(t, nil, map[string]string{"HF_TOKEN": "hf_1", "PW": "p@ss", "USER": "bob"})
	tests := []struct {
		name     string
		spec     runSpec
		wantEnv  map[string]string
		wantAuth *api.RegistryAuth
		missing  string // the missing secret's name and path
	}{
		{
			name: "references in env values, with or without spaces",
			spec: runSpec{RunConfig: schema.RunConfig{Env: []schema.EnvVar{
				{Name: "A", Value: "x-${{ secrets.HF_TOKEN }}-${{secrets.PW}}"},
				{Name: "B", Value: "plain"},
			}}},
			wantEnv: map[string]string{"A": "x-hf_1-p@ss", "B": "plain"},
		},
		{
			name:    "a bare name passes the secret of that name through",
			spec:    runSpec{RunConfig: schema.RunConfig{Env: []schema.EnvVar{{Name: "HF_TOKEN", FromLocal: true}}}},
			wantEnv: map[string]string{"HF_TOKEN": "hf_1"},
		},
		{
			name:     "registry_auth username and password",
			spec:     runSpec{RunConfig: schema.RunConfig{RegistryAuth: &schema.RegistryAuth{Username: "${{ secrets.USER }}", Password: "${{ secrets.PW }}"}}},
			wantEnv:  map[string]string{},
			wantAuth: &api.RegistryAuth{Username: "bob", Password: "p@ss"},
		},
		{
			name:    "a missing reference names the secret and the env entry",
			spec:    runSpec{RunConfig: schema.RunConfig{Env: []schema.EnvVar{{Name: "A", Value: "1"}, {Name: "B", Value: "${{ secrets.NOPE }}"}}}},
			missing: "NOPE env[1]",
		},
		{
			name:    "a missing bare name",
			spec:    runSpec{RunConfig: schema.RunConfig{Env: []schema.EnvVar{{Name: "WANDB_KEY", FromLocal: true}}}},
			missing: "WANDB_KEY env[0]",
		},
		{
			name:    "a missing registry password",
			spec:    runSpec{RunConfig: schema.RunConfig{RegistryAuth: &schema.RegistryAuth{Username: "u", Password: "${{ secrets.REG }}"}}},
			missing: "REG registry_auth.password",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := f.c.resolveJobSecrets(f.ctx, tt.spec)
			if tt.missing != "" {
				var miss *missingSecretError
				if !errors.As(err, &miss) || miss.name+" "+miss.path != tt.missing {
					t.Fatalf("err = %v, want missing %s", err, tt.missing)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got.env) != len(tt.wantEnv) {
				t.Errorf("env = %v, want %v", got.env, tt.wantEnv)
			}
			for k, v := range tt.wantEnv {
				if got.env[k] != v {
					t.Errorf("env[%s] = %q, want %q", k, got.env[k], v)
				}
			}
			if (got.registryAuth == nil) != (tt.wantAuth == nil) || (got.registryAuth != nil && *got.registryAuth != *tt.wantAuth) {
				t.Errorf("registry auth = %+v, want %+v", got.registryAuth, tt.wantAuth)
			}
		})
	}
}

func TestMissingSecret_failsTheJobBeforePlacementWithFileLine(t *testing.T) {
	f := secretFixture(t, map[string]string{
		"train.dstack.yml": "type: task\nname: train\ncommands: [env]\nenv:\n  - A=1\n  - HF_TOKEN=${{ secrets.HF_TOKEN }}\n",
	}, nil)
	f.sync()
	f.reconcileRun("train")
	f.reconcileJobs("train")
	js := f.jobs(f.run("train").ID)
	if len(js) != 1 || js[0].Status != store.JobTerminating || js[0].InstanceID != "" {
		t.Fatalf("job = %+v, want terminating without an instance", js)
	}
	msg := js[0].TerminationMessage
	if !strings.Contains(msg, "secret HF_TOKEN is not set") || !strings.Contains(msg, "train.dstack.yml:6:5 env[1]") {
		t.Errorf("message %q: want the secret's name and train.dstack.yml:6:5", msg)
	}
	f.reconcileJobs("train")
	if j := f.jobs(f.run("train").ID)[0]; j.Status != store.JobFailed {
		t.Errorf("final status %s, want failed", j.Status)
	}
}

func TestResolveHostKey_identityFileFromSecret(t *testing.T) {
	f := secretFixture(t, nil, map[string]string{"SSH_KEY": "-----BEGIN OPENSSH PRIVATE KEY-----\nkey\n"})
	h := backends.SSHHost{Hostname: "127.0.0.9", IdentityFile: "${{ secrets.SSH_KEY }}",
		ProxyJump: &backends.SSHHost{Hostname: "jump", IdentityFile: "/keys/jump"}}
	if err := f.c.resolveHostKey(f.ctx, &h); err != nil {
		t.Fatal(err)
	}
	if string(h.PrivateKey) != "-----BEGIN OPENSSH PRIVATE KEY-----\nkey\n" || h.IdentityFile != "" {
		t.Errorf("host key %q identity_file %q", h.PrivateKey, h.IdentityFile)
	}
	if h.ProxyJump.IdentityFile != "/keys/jump" || h.ProxyJump.PrivateKey != nil {
		t.Errorf("a jump host's plain identity_file changed: %+v", h.ProxyJump)
	}
	h = backends.SSHHost{Hostname: "x", ProxyJump: &backends.SSHHost{IdentityFile: "${{ secrets.JUMP }}"}}
	var miss *missingSecretError
	if err := f.c.resolveHostKey(f.ctx, &h); !errors.As(err, &miss) || miss.name != "JUMP" {
		t.Errorf("missing jump key: %v", err)
	}
}

func TestLogMasker_masksEverySecretTheJobUses(t *testing.T) {
	f := secretFixture(t, nil, map[string]string{"HF_TOKEN": "hf_abcdef", "KEY": "line-one-of-key\nline-two-of-key\n", "OTHER": "not-used"})
	spec := `{"type":"task","env":[{"name":"HF_TOKEN","from_local":true},{"name":"K","value":"${{ secrets.KEY }}"}]}`
	m := f.c.maskFor(f.ctx, &store.Job{Spec: []byte(spec)})
	lines := []store.LogLine{
		{Data: []byte("token=hf_abcdef end")},
		{Data: []byte("line-two-of-key")},
		{Data: []byte("not-used stays")},
		{Data: []byte("-----")},
	}
	m.mask(lines)
	want := []string{"token=*** end", "***", "not-used stays", "-----"}
	for i, l := range lines {
		if string(l.Data) != want[i] {
			t.Errorf("line %d = %q, want %q", i, l.Data, want[i])
		}
	}
}

func TestSecretOfAnotherKey_keepsTheJobWaitingSayingSo(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "hoist.db")
	other, err := store.Open(t.Context(), db, store.Options{SecretKey: bytes.Repeat([]byte{2}, 32)})
	if err != nil {
		t.Fatal(err)
	}
	if err := other.SetSecret(t.Context(), "", "HF_TOKEN", []byte("v")); err != nil {
		t.Fatal(err)
	}
	other.Close()
	f := &fixture{t: t, ctx: t.Context(), clock: newFakeClock(), dir: t.TempDir()}
	f.write("train.dstack.yml", "type: task\nname: train\ncommands: [env]\nenv: [HF_TOKEN]\n")
	st, err := store.Open(f.ctx, db, store.Options{Now: f.clock.Now, SecretKey: bytes.Repeat([]byte{1}, 32)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	f.st = st
	f.c = f.newController()
	f.sync()
	f.reconcileRun("train")
	j := f.jobs(f.run("train").ID)[0]
	if _, err := f.c.reconcileJob(f.ctx, j.ID); !errors.Is(err, store.ErrSecretKey) {
		t.Fatalf("reconcile = %v, want ErrSecretKey for a retry", err)
	}
	j = f.jobs(f.run("train").ID)[0]
	if j.Status != store.JobSubmitted || !strings.Contains(j.StatusMessage, "same secret key") {
		t.Errorf("job %s %q: want submitted, saying the keys differ", j.Status, j.StatusMessage)
	}
}
