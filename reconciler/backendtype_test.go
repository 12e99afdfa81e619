package reconciler

import (
	"errors"
	"path/filepath"
	"testing"

	"hoist/backends"
	"hoist/backends/sshfleet"
	"hoist/store"
)

// TestSync_sshFleetUsesTheBackendOfTypeSSH: a backend configured as
// `{name: gpu-hosts, type: ssh}` serves SSH fleets; nothing compares
// backend names with "ssh".
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
		Backends: map[string]backends.Backend{"gpu-hosts": be}, BackendTypes: map[string]string{"gpu-hosts": "ssh"}})
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
		Backends: map[string]backends.Backend{"ssh-like": be}, BackendTypes: map[string]string{"ssh-like": "local"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c2.sshBackend(); err == nil || !backends.IsStalled(err) {
		t.Errorf("sshBackend without an ssh-type backend = %v, want a stalled error", err)
	}
}
