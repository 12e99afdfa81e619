package reconciler

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"hoist/backends"
	"hoist/backends/local"
	"hoist/backends/sshfleet"
	"hoist/e2e/testenv"
	"hoist/store"
)

// TestSync_sshFleetUsesTheBackendOfTypeSSH: a backend configured as
// `{name: gpu-hosts, type: ssh}` serves SSH fleets; the reconciler asks the
// driver's traits, it does not compare backend names with "ssh".
func TestSync_sshFleetUsesTheBackendOfTypeSSH(t *testing.T) {
	key := filepath.Join(t.TempDir(), "id")
	f := newFixture(t, map[string]string{
		"fleet.dstack.yml": "type: fleet\nname: hosts\nssh_config:\n  user: u\n  identity_file: " + key + "\n  hosts: [127.0.0.9]\n",
	})
	be, err := sshfleet.New(sshfleet.Config{Name: "gpu-hosts", Records: f.st,
		Agents: func(string) (string, string, error) { return "", "", errors.New("no agents in this test") }})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	c, err := New(Config{Now: f.clock.Now, Owner: "test"}, Deps{Store: f.st, Source: f.c.src,
		Backends: map[string]backends.Backend{"gpu-hosts": be}})
	if err != nil {
		t.Fatal(err)
	}
	f.c = c
	if res := f.sync(); res != resultSynced {
		t.Fatalf("sync = %s (%q)", res, f.syncState().Errors)
	}
	insts, err := f.st.ListInstances(f.ctx, store.InfraFilter{Project: store.DefaultProject})
	if err != nil || len(insts) != 1 {
		t.Fatalf("instances = %+v, %v", insts, err)
	}
	if insts[0].Backend != "gpu-hosts" || insts[0].Hostname != "127.0.0.9" {
		t.Errorf("instance on backend %q host %q, want gpu-hosts 127.0.0.9", insts[0].Backend, insts[0].Hostname)
	}
	if reap, _, err := c.idleReapable(f.ctx, insts[0]); err != nil || reap {
		t.Errorf("an SSH host of a backend named gpu-hosts is reapable: %v, %v", reap, err)
	}

	// Without any backend of type ssh the fleet cannot be served, and says so.
	c2, err := New(Config{Now: f.clock.Now, Owner: "test"}, Deps{Store: f.st, Source: f.c.src,
		Backends: map[string]backends.Backend{}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c2.sshBackend(); err == nil || !backends.IsStalled(err) {
		t.Errorf("sshBackend without an ssh-type backend = %v, want a stalled error", err)
	}
}

// TestNew_backendsAreKnownByTheirTraitsNotTheirNames: a local backend named
// this-host is the backend of the server's own fleet, and a job naming the
// backend "remote" (dstack's name for SSH hosts) may run on the hosts of
// an SSH backend named gpu-hosts, not on this host.
func TestNew_backendsAreKnownByTheirTraitsNotTheirNames(t *testing.T) {
	testenv.Docker(t)
	f := newFixture(t, nil)
	runner := filepath.Join(t.TempDir(), "hoist-runner")
	if err := os.WriteFile(runner, nil, 0o755); err != nil { // any file: no job runs here
		t.Fatal(err)
	}
	here, err := local.New(local.Config{Name: "this-host", RunnerBinary: runner, Records: f.st, StateDir: t.TempDir(), Now: f.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { here.Close() })
	hosts, err := sshfleet.New(sshfleet.Config{Name: "gpu-hosts", Records: f.st,
		Agents: func(string) (string, string, error) { return "", "", errors.New("no agents in this test") }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hosts.Close() })
	c, err := New(Config{Now: f.clock.Now, Owner: "test"}, Deps{Store: f.st, Source: f.c.src,
		Backends: map[string]backends.Backend{"this-host": here, "gpu-hosts": hosts}})
	if err != nil {
		t.Fatal(err)
	}
	if c.cfg.LocalBackend != "this-host" {
		t.Errorf("LocalBackend = %q, want this-host (the backend sharing this host)", c.cfg.LocalBackend)
	}
	if name, err := c.sshBackend(); err != nil || name != "gpu-hosts" {
		t.Errorf("sshBackend = %q, %v; want gpu-hosts", name, err)
	}
	for _, tc := range []struct {
		backends []string
		be       string
		want     bool
	}{
		{[]string{"remote"}, "gpu-hosts", true},
		{[]string{"remote"}, "this-host", false},
		{[]string{"this-host"}, "this-host", true},
		{nil, "this-host", true},
	} {
		if got := c.onBackends(tc.backends, tc.be); got != tc.want {
			t.Errorf("onBackends(%q, %s) = %t, want %t", tc.backends, tc.be, got, tc.want)
		}
	}
}
