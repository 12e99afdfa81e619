package runpod

import (
	"context"
	"strings"
	"testing"
	"time"

	"hoist/agents/api"
	"hoist/backends"
	"hoist/backends/internal/drivertest"
	"hoist/e2e/testenv"
)

// TestBackend_volumeTasks runs two tasks, each its own pod, on one network
// volume through the engine as the reconciler drives it: the volume is
// attached (its claim is RunPod's volume id), the first task's job writes
// a file on it, the second's reads it back. Tasks the provider cannot
// mount are refused.
func TestBackend_volumeTasks(t *testing.T) {
	testenv.Docker(t)
	e := startSim(t)
	deps := drivertest.Deps(t, drivertest.Records(t))
	deps.RunnerDownload = drivertest.RunnerDownloads(t)
	b, err := Factory(e.config(t, nil), deps)
	if err != nil {
		t.Fatal(err)
	}
	vb := b.(backends.VolumeBackend)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	tags := map[string]string{backends.TagInstallation: "voltest", backends.TagProject: "p"}

	inst, err := b.Create(ctx, backends.InstanceSpec{ID: "i-vol", Offer: datacenterOffer(t, b, "US-TX-3"), Tags: tags})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Terminate(context.Background(), inst.ID) })
	vol, err := vb.CreateVolume(ctx, backends.VolumeSpec{ID: "v-data", Name: "data", Region: "US-TX-3", SizeGB: 10, Tags: tags})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = vb.DeleteVolume(context.Background(), vol.ID) })
	att, err := vb.AttachVolume(ctx, vol.ID, inst.ID)
	if err != nil || att.Claim != vol.ProviderID || att.DevicePath != "" {
		t.Fatalf("AttachVolume = %+v, %v; want claim %s", att, err, vol.ProviderID)
	}
	conn, err := b.(backends.Connector).Connect(ctx, inst)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	sc := api.NewShimClient(conn.ShimURL(), conn.HTTPClient())
	nv := api.NetworkVolume{Name: "data", Claim: att.Claim, Path: "/data"}

	t.Run("refused mounts", func(t *testing.T) {
		other := nv
		other.Path = "/other"
		ro := nv
		ro.ReadOnly = true
		dev := api.NetworkVolume{Name: "disk", DevicePath: "/dev/sdb", Path: "/data"}
		for name, nvs := range map[string][]api.NetworkVolume{
			"two volumes": {nv, other},
			"read-only":   {ro},
			"a device":    {dev},
		} {
			_, err := sc.CreateTask(ctx, api.TaskSpec{ID: "refused", Image: testenv.BusyboxImage, NetworkVolumes: nvs})
			if err == nil {
				t.Errorf("%s: CreateTask succeeded, want refused", name)
				_, _ = sc.TerminateTask(ctx, "refused", "", "", 0)
				_ = sc.RemoveTask(ctx, "refused")
			}
		}
	})

	run := func(id string, commands ...string) (api.JobState, string) {
		t.Helper()
		if _, err := sc.CreateTask(ctx, api.TaskSpec{ID: id, Image: testenv.BusyboxImage, NetworkVolumes: []api.NetworkVolume{nv}}); err != nil {
			t.Fatalf("CreateTask(%s): %v", id, err)
		}
		defer func() {
			_, _ = sc.TerminateTask(ctx, id, api.ReasonDoneByRunner, "", 0)
			_ = sc.RemoveTask(ctx, id)
		}()
		info, err := sc.WaitTask(ctx, id, api.TaskRunning)
		if err != nil || info.Status != api.TaskRunning {
			t.Fatalf("task %s: %+v, %v", id, info, err)
		}
		return runJob(ctx, t, conn, info, commands...)
	}
	if st, out := run("writer", "echo hello-from-writer > /data/greeting", "ls /data"); st.State != api.JobDone {
		t.Fatalf("writer job %+v: %s", st, out)
	}
	st, out := run("reader", "cat /data/greeting")
	if st.State != api.JobDone || !strings.Contains(out, "hello-from-writer") {
		t.Errorf("reader job %+v, output %q; want the writer's file", st, out)
	}
}

// runJob runs commands through the runner of a running task and returns
// its final state and output.
func runJob(ctx context.Context, t *testing.T, conn backends.Conn, info api.TaskInfo, commands ...string) (api.JobState, string) {
	t.Helper()
	rc := api.NewRunnerClient(info.RunnerAddr, conn.HTTPClient())
	var err error
	for {
		if _, err = rc.State(ctx); err == nil || ctx.Err() != nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("runner of %s: %v", info.ID, err)
	}
	if err := rc.Submit(ctx, api.JobSpec{RunName: "voltest", JobID: info.ID, Commands: commands}); err != nil {
		t.Fatal(err)
	}
	if _, err := rc.Run(ctx); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := rc.Follow(ctx, 0, func(l api.LogLine) error { out.Write(l.Data); return nil }); err != nil {
		t.Fatal(err)
	}
	st, err := rc.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return st, out.String()
}
