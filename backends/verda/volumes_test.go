package verda

import (
	"errors"
	"os"
	"strings"
	"testing"

	"hoist/backends"
	"hoist/backends/vm"
	"hoist/e2e/cloudsim/sim"
)

func volumeReq(id, region string) vm.VolumeRequest {
	return vm.VolumeRequest{
		ID: id, Name: "hoist-" + id + "-1a2b3c4d", Region: region, SizeGB: 1,
		Tags: map[string]string{backends.TagInstallation: "inst-1", backends.TagProject: "p"},
	}
}

func TestVolumeName(t *testing.T) {
	tags := map[string]string{backends.TagInstallation: "inst 1", backends.TagVolume: "v&1", backends.TagProject: "p?"}
	n := volumeName("hoist-v-1a2b3c4d", tags)
	got, ok := parseVolumeName(n)
	if !ok || !backends.MatchTags(got, tags) || len(got) != len(tags) {
		t.Errorf("parseVolumeName(%q) = %v, %v; want %v", n, got, ok, tags)
	}
	for _, foreign := range []string{
		"", "data", "hoist-data", "my-disk?hoist.installation=inst-1&hoist.volume=v",
		"hoist-x?hoist.installation=inst-1", "hoist-x?hoist.volume=v", "hoist-x?%zz",
	} {
		if got, ok := parseVolumeName(foreign); ok {
			t.Errorf("parseVolumeName(%q) = %v, want a foreign volume", foreign, got)
		}
	}
}

func TestProvider_volumeCreateIdempotentListNeverForeign(t *testing.T) {
	env := startSim(t)
	p := env.newTestProvider(t, nil)
	ctx := t.Context()
	d1, err := p.CreateVolume(ctx, volumeReq("v1", "FIN-01"))
	if err != nil {
		t.Fatal(err)
	}
	d2, err := p.CreateVolume(ctx, volumeReq("v1", "FIN-01"))
	if err != nil || d2.Ref != d1.Ref {
		t.Fatalf("second create of v1 = %+v, %v; want %s again", d2, err, d1.Ref)
	}
	if n := len(liveOf(env, sim.KindVolume)); n != 1 {
		t.Fatalf("%d volumes, want 1", n)
	}
	r, _ := env.sim.Get("verda", d1.Ref)
	if !strings.HasPrefix(r.Name, "hoist-v1-1a2b3c4d?") || r.Extra["volume_type"] != volumeType || r.SizeGB != 1 || r.Region != "FIN-01" {
		t.Errorf("volume = name %q type %q size %d location %s", r.Name, r.Extra["volume_type"], r.SizeGB, r.Region)
	}
	got, err := p.GetVolume(ctx, d1.Ref)
	if err != nil || got.State != vm.DiskAvailable || got.Tags[backends.TagVolume] != "v1" || got.Tags[backends.TagProject] != "p" || got.SizeGB != 1 {
		t.Errorf("GetVolume = %+v, %v; want available with its tags", got, err)
	}
	other := volumeReq("v2", "FIN-01")
	other.Tags[backends.TagInstallation] = "inst-2"
	if _, err := p.CreateVolume(ctx, other); err != nil {
		t.Fatal(err)
	}
	// Volumes a user made in the console, one named like hoist's without
	// its tags.
	for _, name := range []string{"data", "hoist-data", "hoist-x?hoist.installation=inst-1"} {
		var id string
		if _, err := p.api.do(ctx, "POST", "/volumes", createVolume{Type: "HDD", Name: name, Size: 1, LocationCode: "FIN-01"}, &id); err != nil {
			t.Fatal(err)
		}
	}
	all, err := p.ListVolumes(ctx, nil)
	if err != nil || len(all) != 2 {
		t.Errorf("ListVolumes(no tags) = %+v, %v; want hoist's 2", all, err)
	}
	mine, err := p.ListVolumes(ctx, map[string]string{backends.TagInstallation: "inst-1"})
	if err != nil || len(mine) != 1 || mine[0].Ref != d1.Ref {
		t.Errorf("ListVolumes(installation inst-1) = %+v, %v; want only %s", mine, err, d1.Ref)
	}
	p2 := env.newTestProvider(t, func(o map[string]any) { o["regions"] = []string{"FIN-02"} })
	if got, err := p2.ListVolumes(ctx, nil); err != nil || len(got) != 0 {
		t.Errorf("ListVolumes in FIN-02 = %+v, %v; want none", got, err)
	}
}

func TestProvider_volumeAttachShowsDevice(t *testing.T) {
	env := startSim(t)
	p := env.newTestProvider(t, nil)
	ctx := t.Context()
	m, err := p.Launch(ctx, launchReq("i1", "CPU.4V.16G", "FIN-01", false))
	if err != nil {
		t.Fatal(err)
	}
	other, err := p.Launch(ctx, launchReq("i2", "CPU.4V.16G", "FIN-01", false))
	if err != nil {
		t.Fatal(err)
	}
	env.cloud.WaitRunning("verda", m.Ref, 30e9)
	d, err := p.CreateVolume(ctx, volumeReq("v1", "FIN-01"))
	if err != nil {
		t.Fatal(err)
	}
	dev, err := p.AttachVolume(ctx, d.Ref, m.Ref)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(dev, "/dev/vd") {
		t.Errorf("device path %q, want /dev/vd<x>", dev)
	}
	if target, err := os.Readlink(dev); err != nil || !strings.HasPrefix(target, "/dev/loop") {
		t.Errorf("%s links to %q, %v; want the volume's loop device", dev, target, err)
	}
	if again, err := p.AttachVolume(ctx, d.Ref, m.Ref); err != nil || again != dev {
		t.Errorf("second attach = %q, %v; want %s again", again, err, dev)
	}
	if got, err := p.GetVolume(ctx, d.Ref); err != nil || got.State != vm.DiskInUse || got.AttachedTo != m.Ref {
		t.Errorf("GetVolume attached = %+v, %v; want in-use on %s", got, err, m.Ref)
	}
	if _, err := p.AttachVolume(ctx, d.Ref, other.Ref); !backends.IsStalled(err) {
		t.Errorf("attach to another instance = %v (kind %v), want stalled", err, backends.KindOf(err))
	}
	// Not attached to the other instance: nothing to detach there.
	if err := p.DetachVolume(ctx, d.Ref, other.Ref, false); err != nil {
		t.Errorf("detach from an instance it is not on = %v", err)
	}
	for range 2 {
		if err := p.DetachVolume(ctx, d.Ref, m.Ref, false); err != nil {
			t.Fatalf("detach: %v", err)
		}
	}
	if _, err := os.Lstat(dev); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s still there after the detach: %v", dev, err)
	}
	// Deleting the instance detaches what it has.
	if _, err := p.AttachVolume(ctx, d.Ref, m.Ref); err != nil {
		t.Fatal(err)
	}
	if err := p.Delete(ctx, m.Ref); err != nil {
		t.Fatal(err)
	}
	if got, err := p.GetVolume(ctx, d.Ref); err != nil || got.State != vm.DiskAvailable || got.AttachedTo != "" {
		t.Errorf("GetVolume after its instance went = %+v, %v; want available", got, err)
	}
	for range 2 {
		if err := p.DeleteVolume(ctx, d.Ref); err != nil {
			t.Fatalf("delete: %v", err)
		}
	}
	if _, err := p.GetVolume(ctx, d.Ref); !errors.Is(err, backends.ErrNotFound) {
		t.Errorf("GetVolume after delete = %v, want ErrNotFound", err)
	}
	if got, err := p.ListVolumes(ctx, nil); err != nil || len(got) != 0 {
		t.Errorf("ListVolumes after delete = %+v, %v", got, err)
	}
}

func TestProvider_volumeErrors(t *testing.T) {
	env := startSim(t)
	ctx := t.Context()
	p := env.newTestProvider(t, nil)

	t.Run("no capacity", func(t *testing.T) {
		env.cloud.Faults(sim.Faults{Capacity: map[string]int{"volume": 0}})
		defer env.cloud.Faults(sim.Faults{})
		_, err := p.CreateVolume(ctx, volumeReq("cap", "FIN-01"))
		if !errors.Is(err, backends.ErrNoCapacity) {
			t.Errorf("CreateVolume out of capacity = %v, want ErrNoCapacity", err)
		}
	})

	t.Run("bad request", func(t *testing.T) {
		_, err := p.CreateVolume(ctx, volumeReq("bad", "MARS-01"))
		if !backends.IsStalled(err) || errors.Is(err, backends.ErrNoCapacity) {
			t.Errorf("CreateVolume in an unknown location = %v (kind %v), want stalled", err, backends.KindOf(err))
		}
	})

	t.Run("rate limit", func(t *testing.T) {
		if err := p.check(ctx); err != nil {
			t.Fatal(err)
		}
		env.cloud.Faults(sim.Faults{ErrorRate: 1})
		defer env.cloud.Faults(sim.Faults{})
		if _, err := p.ListVolumes(ctx, nil); backends.KindOf(err) != backends.KindTransient || !strings.Contains(err.Error(), "429") {
			t.Errorf("ListVolumes rate limited = %v (kind %v), want transient 429", err, backends.KindOf(err))
		}
		_, err := p.CreateVolume(ctx, volumeReq("rl", "FIN-01"))
		if backends.KindOf(err) != backends.KindTransient || errors.Is(err, backends.ErrNoCapacity) {
			t.Errorf("CreateVolume rate limited = %v (kind %v), want transient", err, backends.KindOf(err))
		}
	})

	t.Run("unknown volume", func(t *testing.T) {
		const unknown = "00000000-0000-4000-8000-000000000000"
		if _, err := p.GetVolume(ctx, unknown); !errors.Is(err, backends.ErrNotFound) {
			t.Errorf("GetVolume of an unknown id = %v, want ErrNotFound", err)
		}
		if _, err := p.AttachVolume(ctx, unknown, unknown); !errors.Is(err, backends.ErrNotFound) {
			t.Errorf("AttachVolume of an unknown id = %v, want ErrNotFound", err)
		}
		if err := p.DeleteVolume(ctx, unknown); err != nil {
			t.Errorf("DeleteVolume of an unknown id = %v, want nil", err)
		}
		if err := p.DetachVolume(ctx, unknown, unknown, false); !errors.Is(err, backends.ErrNotFound) {
			t.Errorf("DetachVolume of an unknown id = %v, want ErrNotFound", err)
		}
	})

	t.Run("bad credentials", func(t *testing.T) {
		bad := env.newTestProvider(t, func(o map[string]any) {
			o["creds"] = map[string]any{"type": "api_key", "client_id": "nobody", "client_secret": "x"}
		})
		if _, err := bad.ListVolumes(ctx, nil); !backends.IsStalled(err) {
			t.Errorf("ListVolumes with bad credentials = %v (kind %v), want stalled", err, backends.KindOf(err))
		}
	})
}
