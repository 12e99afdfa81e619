package sshfleet_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"hoist/backends"
	"hoist/backends/internal/agentbin"
	"hoist/backends/internal/drivertest"
	"hoist/backends/sshfleet"
)

func TestRecords_filesOfAnOlderHoistAreMigrated(t *testing.T) {
	state := t.TempDir()
	dir := filepath.Join(state, "instances")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	old := `{"id":"old-1","tags":{"hoist.test":"backends-sshfleet"},"host":{"hostname":"127.0.0.9","port":22},"host_key":"ssh-ed25519 AAAA","status":"running","created_at":"2026-11-01T00:00:00Z"}`
	if err := os.WriteFile(filepath.Join(dir, "old-1.json"), []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	recs := drivertest.Records(t)
	b, err := sshfleet.New(sshfleet.Config{Name: "gpu-hosts", StateDir: state, Records: recs, Agents: agentbin.Agents})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := os.Stat(filepath.Join(dir, "old-1.json")); !os.IsNotExist(err) {
		t.Errorf("the migrated file is still there: %v", err)
	}
	raw, ok, err := recs.GetBackendRecord(t.Context(), "gpu-hosts", "old-1")
	if err != nil || !ok {
		t.Fatalf("record not migrated: %v, %v", ok, err)
	}
	var got struct {
		HostKey string `json:"host_key"`
	}
	if json.Unmarshal(raw, &got) != nil || got.HostKey != "ssh-ed25519 AAAA" {
		t.Errorf("migrated record lost the pinned host key: %s", raw)
	}
	// Another server (no files, same records) lists the instance.
	b2, err := sshfleet.New(sshfleet.Config{Name: "gpu-hosts", Records: recs, Agents: agentbin.Agents})
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Close()
	insts, err := b2.List(t.Context(), map[string]string{testLabel: "backends-sshfleet"})
	if err != nil || len(insts) != 1 || insts[0].ID != "old-1" || insts[0].HostKey != "ssh-ed25519 AAAA" {
		t.Errorf("second server lists %+v, %v", insts, err)
	}
}

func TestFleet_secondServerSeesTheInstance(t *testing.T) {
	f := newFleet(t, 1)
	ctx := t.Context()
	inst, err := f.b.Create(ctx, f.spec(0, "shared-0"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.b.Terminate(t.Context(), inst.ID) })
	// A second server on the same records, started after the instance was
	// created: it describes the running instance (it must not believe it
	// gone) and pins the same host key.
	other, err := sshfleet.New(sshfleet.Config{Records: f.recs, Agents: agentbin.Agents, RemoteDir: f.remote, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	got, err := other.Describe(ctx, inst.ID)
	if err != nil || got.Status != backends.StatusRunning || got.HostKey != inst.HostKey {
		t.Fatalf("second server Describe = %+v, %v; want running with host key %q", got, err, inst.HostKey)
	}
	list, err := other.List(ctx, map[string]string{backends.TagInstance: inst.ID})
	if err != nil || len(list) != 1 {
		t.Errorf("second server List = %+v, %v", list, err)
	}
	// Terminated by the second server: the first one sees it gone.
	if err := other.Terminate(ctx, inst.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := f.b.Describe(ctx, inst.ID); err == nil {
		t.Errorf("first server still describes the instance the second terminated")
	}
}
