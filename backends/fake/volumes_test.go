package fake_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"hoist/agents/api"
	"hoist/backends"
	"hoist/backends/fake"
	"hoist/backends/offers"
)

// TestVolumes walks a fake volume through create, attach (one instance of
// its region at a time), a task that mounts it, detach and delete; a
// registered external volume survives its deletion.
func TestVolumes(t *testing.T) {
	b := fake.New(fake.Config{Offers: []offers.Offer{
		{Instance: "a", Region: "east", CPUs: 2, MemoryGB: 8, Price: 0.1},
		{Instance: "b", Region: "west", CPUs: 2, MemoryGB: 8, Price: 0.1},
	}})
	t.Cleanup(func() { b.Close() })
	ctx := t.Context()
	conn, shim := start(t, b, "i-east")
	if _, err := b.Create(ctx, backends.InstanceSpec{ID: "i-west", Offer: offers.Offer{Instance: "b", Region: "west"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Create(ctx, backends.InstanceSpec{ID: "i-east2", Offer: offers.Offer{Instance: "a", Region: "east"}}); err != nil {
		t.Fatal(err)
	}

	spec := backends.VolumeSpec{ID: "v1", Name: "data", Region: "east", SizeGB: 10, Tags: map[string]string{"k": "v"}}
	v, err := b.CreateVolume(ctx, spec)
	if err != nil || !v.Owned || v.ProviderID == "" || v.Status != "available" {
		t.Fatalf("CreateVolume = %+v, %v", v, err)
	}
	if again, err := b.CreateVolume(ctx, spec); err != nil || again.ProviderID != v.ProviderID {
		t.Fatalf("CreateVolume again = %+v, %v; want the same volume", again, err)
	}
	if _, err := b.CreateVolume(ctx, backends.VolumeSpec{ID: "v2", Region: "mars", SizeGB: 1}); !backends.IsStalled(err) {
		t.Errorf("CreateVolume in an unknown region: %v, want stalled", err)
	}
	if _, err := b.AttachVolume(ctx, "v1", "i-west"); err == nil {
		t.Errorf("attach to an instance of another region: nil error")
	}
	att, err := b.AttachVolume(ctx, "v1", "i-east")
	if err != nil || att.DevicePath != fake.DevicePrefix+v.ProviderID {
		t.Fatalf("AttachVolume = %+v, %v", att, err)
	}
	if _, err := b.AttachVolume(ctx, "v1", "i-east"); err != nil {
		t.Errorf("attach again to the same instance: %v", err)
	}
	if _, err := b.AttachVolume(ctx, "v1", "i-east2"); err == nil {
		t.Errorf("attach while attached elsewhere: nil error")
	}
	if err := b.DeleteVolume(ctx, "v1"); err == nil {
		t.Errorf("delete while attached: nil error")
	}

	// The fake shim mounts an attached volume and refuses one that is not.
	nv := api.NetworkVolume{Name: "data", DevicePath: att.DevicePath, Path: "/data", InitFS: true}
	st, _ := runJobWith(t, conn, shim, api.TaskSpec{ID: "t1", Image: "busybox", NetworkVolumes: []api.NetworkVolume{nv}}, "echo ok")
	if st.State != api.JobDone {
		t.Errorf("job with an attached volume = %+v", st)
	}
	nv.DevicePath = fake.DevicePrefix + "nope"
	if _, err := shim.CreateTask(ctx, api.TaskSpec{ID: "t2", Image: "busybox", NetworkVolumes: []api.NetworkVolume{nv}}); err != nil {
		t.Fatal(err)
	}
	info, err := shim.WaitTask(ctx, "t2", api.TaskRunning)
	if err != nil || info.TerminationReason != api.ReasonExecutorError || !strings.Contains(info.TerminationMessage, "did not appear") {
		t.Errorf("task with a volume not attached = %+v, %v", info, err)
	}

	if err := b.DetachVolume(ctx, "v1", "i-east", false); err != nil {
		t.Fatal(err)
	}
	if got := b.Volumes()[v.ProviderID]; got.AttachedTo != "" {
		t.Errorf("after detach: %+v", got)
	}
	if err := b.DeleteVolume(ctx, "v1"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.DescribeVolume(ctx, "v1"); !errors.Is(err, backends.ErrNotFound) {
		t.Errorf("describe a deleted volume: %v, want ErrNotFound", err)
	}
	if err := b.DeleteVolume(ctx, "v1"); err != nil {
		t.Errorf("delete twice: %v", err)
	}

	b.AddExternalVolume("ext-1", "east", 5)
	if _, err := b.RegisterVolume(ctx, backends.VolumeSpec{ID: "v3", Region: "east", ExternalID: "nope"}); !errors.Is(err, backends.ErrNotFound) {
		t.Errorf("register an unknown volume: %v", err)
	}
	r, err := b.RegisterVolume(ctx, backends.VolumeSpec{ID: "v3", Region: "east", ExternalID: "ext-1"})
	if err != nil || r.Owned || r.SizeGB != 5 {
		t.Fatalf("RegisterVolume = %+v, %v", r, err)
	}
	if err := b.DeleteVolume(ctx, "v3"); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.Volumes()["ext-1"]; !ok {
		t.Errorf("deleting a registered volume deleted it at the provider")
	}
}

// runJobWith runs commands in a task made from spec.
func runJobWith(t *testing.T, conn backends.Conn, shim *api.ShimClient, spec api.TaskSpec, commands ...string) (api.JobState, error) {
	t.Helper()
	ctx := t.Context()
	if _, err := shim.CreateTask(ctx, spec); err != nil {
		t.Fatal(err)
	}
	info, err := shim.WaitTask(ctx, spec.ID, api.TaskRunning)
	if err != nil || info.Terminated() {
		t.Fatalf("task %s: %+v, %v", spec.ID, info, err)
	}
	r := api.NewRunnerClient(info.RunnerAddr, conn.HTTPClient()).WithToken(info.RunnerToken)
	if err := r.Submit(ctx, api.JobSpec{JobID: spec.ID, Commands: commands}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Run(ctx); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return r.Wait(wctx)
}
