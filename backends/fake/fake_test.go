package fake_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"hoist/agents/api"
	"hoist/backends"
	"hoist/backends/conformance"
	"hoist/backends/fake"
)

func TestConformance(t *testing.T) {
	// The default offers and a spot one, for the kit's spot interruption.
	offs := fake.DefaultOffers()
	spot := offs[0]
	spot.Spot, spot.Price = true, spot.Price/3
	b := fake.New(fake.Config{Capacity: 2, Offers: append(offs, spot)})
	t.Cleanup(func() { b.Close() })
	ext := 0
	conformance.Run(t, conformance.Options{
		Backend: b, Timeout: 10 * time.Second, Poll: 10 * time.Millisecond,
		Interrupt: func(t *testing.T, inst backends.Instance) {
			if !b.Interrupt(inst.ID) {
				t.Fatalf("Interrupt(%s): no such instance", inst.ID)
			}
		},
		ExternalVolume: func(t *testing.T, region string, sizeGB float64) string {
			ext++
			pid := fmt.Sprintf("external-%d", ext)
			b.AddExternalVolume(pid, region, sizeGB)
			return pid
		},
	})
}

// start creates an instance and connects to its shim.
func start(t *testing.T, b *fake.Backend, id string) (backends.Conn, *api.ShimClient) {
	t.Helper()
	inst, err := b.Create(t.Context(), backends.InstanceSpec{ID: id})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := b.Connect(t.Context(), inst)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn, api.NewShimClient(conn.ShimURL(), conn.HTTPClient())
}

// runJob runs commands as task id and returns the runner's final state and
// its log.
func runJob(t *testing.T, conn backends.Conn, shim *api.ShimClient, id string, commands ...string) (api.JobState, string) {
	t.Helper()
	ctx := t.Context()
	if _, err := shim.CreateTask(ctx, api.TaskSpec{ID: id, Image: "busybox"}); err != nil {
		t.Fatal(err)
	}
	info, err := shim.WaitTask(ctx, id, api.TaskRunning)
	if err != nil {
		t.Fatal(err)
	}
	r := api.NewRunnerClient(info.RunnerAddr, conn.HTTPClient()).WithToken(info.RunnerToken)
	if err := r.Submit(ctx, api.JobSpec{JobID: id, Commands: commands, Env: map[string]string{"WHO": "world"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Run(ctx); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := r.Follow(ctx, 0, func(l api.LogLine) error { out.Write(l.Data); return nil }); err != nil {
		t.Fatal(err)
	}
	st, err := r.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return st, out.String()
}

func TestScript_runsThroughTheAgents(t *testing.T) {
	b := fake.New(fake.Config{})
	t.Cleanup(func() { b.Close() })
	conn, shim := start(t, b, "i1")
	tests := []struct {
		name     string
		commands []string
		state    string
		exit     int
		out      string
	}{
		{"echo prints with env expanded", []string{"echo hello $WHO", "true"}, api.JobDone, 0, "hello world\n"},
		{"exit ends the job with its code", []string{"echo before\nexit 3", "echo after"}, api.JobFailed, 3, "before\n"},
		{"sleep waits and goes on", []string{"sleep 10ms", "echo slept"}, api.JobDone, 0, "slept\n"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, out := runJob(t, conn, shim, "t"+string(rune('a'+i)), tt.commands...)
			if st.State != tt.state || st.ExitCode == nil || *st.ExitCode != tt.exit || out != tt.out {
				t.Errorf("state %+v (exit %v), output %q; want %s exit %d output %q", st, st.ExitCode, out, tt.state, tt.exit, tt.out)
			}
		})
	}
}

func TestShim_refusesRequestsWithoutToken(t *testing.T) {
	b := fake.New(fake.Config{})
	t.Cleanup(func() { b.Close() })
	conn, _ := start(t, b, "i1")
	_, err := api.NewShimClient(conn.ShimURL(), nil).ListTasks(t.Context())
	if !errors.Is(err, api.ErrUnauthorized) {
		t.Errorf("ListTasks without token = %v, want ErrUnauthorized", err)
	}
}

func TestTerminateTask_stopsARunningJob(t *testing.T) {
	b := fake.New(fake.Config{})
	t.Cleanup(func() { b.Close() })
	conn, shim := start(t, b, "i1")
	ctx := t.Context()
	if _, err := shim.CreateTask(ctx, api.TaskSpec{ID: "t", Image: "x"}); err != nil {
		t.Fatal(err)
	}
	info, _ := shim.WaitTask(ctx, "t", api.TaskRunning)
	r := api.NewRunnerClient(info.RunnerAddr, conn.HTTPClient()).WithToken(info.RunnerToken)
	_ = r.Submit(ctx, api.JobSpec{Commands: []string{"sleep 1h"}})
	_, _ = r.Run(ctx)
	info, err := shim.TerminateTask(ctx, "t", api.ReasonTerminatedByUser, "stop", 0)
	if err != nil || !info.Terminated() || info.Job == nil || info.Job.State != api.JobTerminated || info.Job.TerminationReason != api.ReasonTerminatedByUser {
		t.Fatalf("TerminateTask = %+v %+v, %v", info, info.Job, err)
	}
	if err := shim.RemoveTask(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	if _, err := shim.GetTask(ctx, "t"); !errors.Is(err, api.ErrNotFound) {
		t.Errorf("GetTask after remove = %v, want ErrNotFound", err)
	}
}

func TestFaults(t *testing.T) {
	ctx := t.Context()
	t.Run("create beyond capacity has no capacity", func(t *testing.T) {
		b := fake.New(fake.Config{Capacity: 1})
		t.Cleanup(func() { b.Close() })
		start(t, b, "i1")
		if _, err := b.Create(ctx, backends.InstanceSpec{ID: "i2"}); !errors.Is(err, backends.ErrNoCapacity) {
			t.Errorf("Create = %v, want ErrNoCapacity", err)
		}
	})
	t.Run("an instance provisions for the configured time", func(t *testing.T) {
		now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		b := fake.New(fake.Config{ProvisionFor: time.Minute, Now: func() time.Time { return now }})
		t.Cleanup(func() { b.Close() })
		inst, _ := b.Create(ctx, backends.InstanceSpec{ID: "i1"})
		if inst.Status != backends.StatusProvisioning {
			t.Errorf("status %s, want provisioning", inst.Status)
		}
		now = now.Add(time.Minute)
		if inst, _ = b.Describe(ctx, "i1"); inst.Status != backends.StatusRunning {
			t.Errorf("status %s after a minute, want running", inst.Status)
		}
	})
	t.Run("an unreachable instance fails every request", func(t *testing.T) {
		b := fake.New(fake.Config{})
		t.Cleanup(func() { b.Close() })
		_, shim := start(t, b, "i1")
		b.SetUnreachable("i1", true)
		if _, err := shim.ListTasks(ctx); !errors.Is(err, backends.ErrUnreachable) {
			t.Errorf("ListTasks = %v, want ErrUnreachable", err)
		}
		if inst, _ := b.Describe(ctx, "i1"); !inst.Unreachable {
			t.Error("Describe does not report the instance unreachable")
		}
	})
	t.Run("a silent runner holds requests", func(t *testing.T) {
		b := fake.New(fake.Config{})
		t.Cleanup(func() { b.Close() })
		conn, shim := start(t, b, "i1")
		_, _ = shim.CreateTask(ctx, api.TaskSpec{ID: "t", Image: "x"})
		info, _ := shim.GetTask(ctx, "t")
		b.SetRunnersSilent("i1", true)
		sctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		if _, err := api.NewRunnerClient(info.RunnerAddr, conn.HTTPClient()).State(sctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("State = %v, want the caller's deadline", err)
		}
	})
	t.Run("terminate fails while an error is set", func(t *testing.T) {
		b := fake.New(fake.Config{})
		t.Cleanup(func() { b.Close() })
		start(t, b, "i1")
		b.SetTerminateError("i1", backends.Wait(backends.ErrNotYetTerminated, time.Second))
		if err := b.Terminate(ctx, "i1"); backends.KindOf(err) != backends.KindWait {
			t.Errorf("Terminate = %v, want a wait", err)
		}
		b.SetTerminateError("i1", nil)
		if err := b.Terminate(ctx, "i1"); err != nil || len(b.Instances()) != 0 {
			t.Errorf("Terminate = %v, instances %v", err, b.Instances())
		}
	})
	t.Run("an instance type without capacity fails Create", func(t *testing.T) {
		b := fake.New(fake.Config{})
		t.Cleanup(func() { b.Close() })
		b.SetNoCapacity("fake-cpu", true)
		cpu, gpu := fake.DefaultOffers()[0], fake.DefaultOffers()[1]
		if _, err := b.Create(ctx, backends.InstanceSpec{ID: "i1", Offer: cpu}); !errors.Is(err, backends.ErrNoCapacity) {
			t.Errorf("Create fake-cpu = %v, want ErrNoCapacity", err)
		}
		if _, err := b.Create(ctx, backends.InstanceSpec{ID: "i2", Offer: gpu}); err != nil {
			t.Errorf("Create fake-gpu = %v", err)
		}
		if a := b.Attempts(); len(a) != 2 || a[0].Offer.Instance != "fake-cpu" || a[1].Offer.Instance != "fake-gpu" {
			t.Errorf("attempts = %+v, want fake-cpu then fake-gpu", a)
		}
	})
	t.Run("an instance that never boots stays provisioning", func(t *testing.T) {
		b := fake.New(fake.Config{})
		t.Cleanup(func() { b.Close() })
		b.SetNeverBoots("fake-cpu", true)
		if inst, _ := b.Create(ctx, backends.InstanceSpec{ID: "i1"}); inst.Status != backends.StatusProvisioning {
			t.Errorf("status %s, want provisioning", inst.Status)
		}
	})
	t.Run("an instance that fails to boot is deleted by the next Create", func(t *testing.T) {
		b := fake.New(fake.Config{})
		t.Cleanup(func() { b.Close() })
		b.SetBootFailure("fake-cpu", backends.Transient(errors.New("fake: did not boot in time: "+backends.ErrNoCapacity.Error())))
		_, _ = b.Create(ctx, backends.InstanceSpec{ID: "i1"})
		if _, err := b.Create(ctx, backends.InstanceSpec{ID: "i1"}); err == nil || len(b.Instances()) != 0 {
			t.Errorf("second Create = %v, instances %v; want the boot error and none", err, b.Instances())
		}
	})
	t.Run("an interrupted instance is terminated and interrupted", func(t *testing.T) {
		b := fake.New(fake.Config{})
		t.Cleanup(func() { b.Close() })
		_, shim := start(t, b, "i1")
		if !b.Interrupt("i1") {
			t.Fatal("Interrupt: no instance")
		}
		if inst, err := b.Describe(ctx, "i1"); err != nil || inst.Status != backends.StatusTerminated || !inst.Interrupted {
			t.Errorf("Describe = %+v, %v; want terminated and interrupted", inst, err)
		}
		if _, err := shim.ListTasks(ctx); err == nil {
			t.Error("the shim of an interrupted instance answers")
		}
		if err := b.Terminate(ctx, "i1"); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Describe(ctx, "i1"); !errors.Is(err, backends.ErrNotFound) {
			t.Errorf("Describe after Terminate = %v, want ErrNotFound", err)
		}
	})
	t.Run("a lost instance is terminated, not interrupted", func(t *testing.T) {
		b := fake.New(fake.Config{})
		t.Cleanup(func() { b.Close() })
		start(t, b, "i1")
		b.Lose("i1")
		if inst, err := b.Describe(ctx, "i1"); err != nil || inst.Status != backends.StatusTerminated || inst.Interrupted {
			t.Errorf("Describe = %+v, %v; want terminated, not interrupted", inst, err)
		}
	})
	t.Run("a placement group is deleted once no instance is in it", func(t *testing.T) {
		b := fake.New(fake.Config{})
		t.Cleanup(func() { b.Close() })
		g, err := b.CreatePlacementGroup(ctx, backends.PlacementGroupSpec{ID: "pg1", Region: "loop"})
		if err != nil || g.ProviderID == "" {
			t.Fatalf("CreatePlacementGroup = %+v, %v", g, err)
		}
		if again, _ := b.CreatePlacementGroup(ctx, backends.PlacementGroupSpec{ID: "pg1", Region: "loop"}); again.ProviderID != g.ProviderID || again.ID != g.ID {
			t.Errorf("second CreatePlacementGroup = %+v, want %+v", again, g)
		}
		if _, err := b.Create(ctx, backends.InstanceSpec{ID: "i0", PlacementGroup: "nope"}); !backends.IsStalled(err) {
			t.Errorf("Create in an unknown group = %v, want stalled", err)
		}
		if _, err := b.Create(ctx, backends.InstanceSpec{ID: "i1", PlacementGroup: "pg1"}); err != nil {
			t.Fatal(err)
		}
		if spec, _ := b.Spec("i1"); spec.PlacementGroup != "pg1" {
			t.Errorf("instance spec group %q, want pg1", spec.PlacementGroup)
		}
		if err := b.DeletePlacementGroup(ctx, "pg1"); backends.KindOf(err) != backends.KindWait {
			t.Errorf("DeletePlacementGroup in use = %v, want a wait", err)
		}
		_ = b.Terminate(ctx, "i1")
		if err := b.DeletePlacementGroup(ctx, "pg1"); err != nil || len(b.PlacementGroups()) != 0 {
			t.Errorf("DeletePlacementGroup = %v, groups %v", err, b.PlacementGroups())
		}
	})
}
