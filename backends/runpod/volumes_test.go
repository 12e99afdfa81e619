package runpod

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"hoist/backends"
	"hoist/backends/podcloud"
	"hoist/e2e/testenv"
)

// simVolumeDir is where the simulator keeps volume id's files.
func (e *simEnv) simVolumeDir(id string) string {
	return filepath.Join(e.sim.StateDir(), "runpod", "volumes", id)
}

// waitExit waits for pod id to exit and returns its message.
func waitExit(t *testing.T, p *Provider, id string) string {
	t.Helper()
	return waitStatus(t, p, id, podcloud.PodExited).Message
}

func TestProvider_volumes(t *testing.T) {
	testenv.Docker(t)
	e := startSim(t)
	p := e.provider(t, nil)
	ctx := t.Context()

	vol, err := p.CreateVolume(ctx, podcloud.VolumeRequest{Name: "hoist-data-0123abcd", Region: "us-tx-3", SizeGB: 10})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.DeleteVolume(context.Background(), vol.ID) })
	if vol.ID == "" || vol.Name != "hoist-data-0123abcd" || vol.Region != "US-TX-3" || vol.SizeGB != 10 {
		t.Errorf("CreateVolume = %+v; want the name, datacenter US-TX-3 (upper-cased), 10 GB", vol)
	}
	t.Run("list and get show the volume", func(t *testing.T) {
		all, err := p.ListVolumes(ctx)
		if err != nil || len(all) != 1 || all[0] != vol {
			t.Errorf("ListVolumes = %+v, %v; want [%+v]", all, err, vol)
		}
		if got, err := p.GetVolume(ctx, vol.ID); err != nil || got != vol {
			t.Errorf("GetVolume = %+v, %v", got, err)
		}
		if _, err := p.GetVolume(ctx, "nosuchvolume"); !errors.Is(err, backends.ErrNotFound) {
			t.Errorf("GetVolume(unknown) = %v, want ErrNotFound", err)
		}
	})
	t.Run("refused creates need the user", func(t *testing.T) {
		for _, req := range []podcloud.VolumeRequest{
			{Name: "v", Region: "US", SizeGB: 10},      // a community country
			{Name: "v", Region: "XX-NO-1", SizeGB: 10}, // no such datacenter
			{Name: "v", Region: "US-TX-3", SizeGB: 0},
		} {
			if _, err := p.CreateVolume(ctx, req); !backends.IsStalled(err) {
				t.Errorf("CreateVolume(%+v) = %v, want an error needing the user", req, err)
			}
		}
	})
	t.Run("pods of the volume's datacenter share its files", func(t *testing.T) {
		spec := testSpec("hoist-w", false, testTags("inst", "w"), "/bin/sh", "-c", "echo shared > /data/f")
		spec.Volumes = []podcloud.PodVolume{{ID: vol.ID, Path: "/data"}}
		w, err := p.CreatePod(ctx, spec)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.TerminatePod(context.Background(), w.ID) })
		if msg := waitExit(t, p, w.ID); !strings.Contains(msg, "code 0") {
			t.Fatalf("writer: %s", msg)
		}
		if b, err := os.ReadFile(filepath.Join(e.simVolumeDir(vol.ID), "f")); err != nil || string(b) != "shared\n" {
			t.Errorf("volume file: %q, %v", b, err)
		}
		spec = testSpec("hoist-r", false, testTags("inst", "r"), "/bin/sh", "-c", `test "$(cat /mnt/v/f)" = shared`)
		spec.Volumes = []podcloud.PodVolume{{ID: vol.ID, Path: "/mnt/v"}}
		r, err := p.CreatePod(ctx, spec)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.TerminatePod(context.Background(), r.ID) })
		if msg := waitExit(t, p, r.ID); !strings.Contains(msg, "code 0") {
			t.Errorf("reader: %s", msg)
		}
		if err := p.DeleteVolume(ctx, vol.ID); err == nil || !backends.IsStalled(err) {
			t.Errorf("DeleteVolume while pods have it = %v, want refused", err)
		}
		for _, id := range []string{w.ID, r.ID} {
			if err := p.TerminatePod(ctx, id); err != nil {
				t.Fatal(err)
			}
		}
	})
	t.Run("refused pods", func(t *testing.T) {
		for name, edit := range map[string]func(*podcloud.PodSpec){
			"another datacenter": func(s *podcloud.PodSpec) { s.Offer.Region = "EU-RO-1" },
			"two volumes": func(s *podcloud.PodSpec) {
				s.Volumes = append(s.Volumes, podcloud.PodVolume{ID: vol.ID, Path: "/other"})
			},
			"read-only":       func(s *podcloud.PodSpec) { s.Volumes[0].ReadOnly = true },
			"unknown volume":  func(s *podcloud.PodSpec) { s.Volumes[0].ID = "nosuchvolume" },
			"community cloud": func(s *podcloud.PodSpec) { s.Offer.Region = "US" },
		} {
			spec := testSpec("hoist-x", false, testTags("inst", "x"), "true")
			spec.Volumes = []podcloud.PodVolume{{ID: vol.ID, Path: "/data"}}
			edit(&spec)
			if pod, err := p.CreatePod(ctx, spec); !backends.IsStalled(err) {
				_ = p.TerminatePod(ctx, pod.ID)
				t.Errorf("%s: CreatePod = %v, want an error needing the user", name, err)
			}
		}
	})
	t.Run("delete twice, then gone with its files", func(t *testing.T) {
		for i := range 2 {
			if err := p.DeleteVolume(ctx, vol.ID); err != nil {
				t.Fatalf("delete %d: %v", i+1, err)
			}
		}
		if _, err := p.GetVolume(ctx, vol.ID); !errors.Is(err, backends.ErrNotFound) {
			t.Errorf("GetVolume after delete = %v", err)
		}
		if _, err := os.Stat(e.simVolumeDir(vol.ID)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("volume directory after delete: %v", err)
		}
	})
}
