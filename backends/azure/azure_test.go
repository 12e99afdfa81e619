package azure

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"

	"hoist/backends"
	"hoist/backends/conformance"
	"hoist/backends/internal/drivertest"
	"hoist/backends/offers"
	"hoist/backends/vm"
	"hoist/e2e/cloudsim/sim"
	"hoist/e2e/testenv"
)

func testLogger() *slog.Logger {
	if os.Getenv("HOIST_TEST_LOG") == "" {
		return nil
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// testCatalog is a catalog with a few azure rows the simulator sells
// whatever the embedded snapshot holds.
func testCatalog() *offers.Catalog {
	row := func(size string, cpus int, mem, price float64, spot bool) offers.Offer {
		return offers.Offer{Instance: size, Region: "eastus", CPUs: cpus, MemoryGB: mem, Price: price, Spot: spot, CPUArch: offers.ArchX86}
	}
	return offers.New("", &offers.Table{Provider: Type, Offers: []offers.Offer{
		row("Standard_D2s_v3", 2, 8, 0.096, false),
		row("Standard_D4s_v3", 4, 16, 0.192, false),
		row("Standard_D2s_v3", 2, 8, 0.0288, true),
	}})
}

// backend opens the driver (engine and provider) on the simulator, as a
// server on records recs would.
func (e *simEnv) backend(t *testing.T, recs backends.Records) backends.Backend {
	t.Helper()
	cat := testCatalog()
	deps := drivertest.Deps(t, recs)
	deps.Logger, deps.Catalog = testLogger(), func() *offers.Catalog { return cat }
	b, err := open(t.Context(), e.config(t, nil), deps, e.client())
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	if c, ok := b.(io.Closer); ok {
		t.Cleanup(func() { c.Close() })
	}
	return b
}

func TestMain(m *testing.M) { drivertest.Main(m) }

func TestConformance(t *testing.T) {
	testenv.Docker(t)
	e := startSim(t)
	recs := drivertest.Records(t)
	b := e.backend(t, recs)
	if _, ok := b.(backends.VolumeBackend); !ok {
		t.Error("the azure backend is not a VolumeBackend")
	}
	if _, ok := b.(backends.PlacementBackend); ok {
		t.Error("the azure backend has placement groups (dstack has none for Azure)")
	}
	conformance.Run(t, conformance.Options{
		Backend:  b,
		Capacity: 2,
		Timeout:  2 * time.Minute,
		Poll:     100 * time.Millisecond,
		Peer:     func(t *testing.T) backends.Backend { return e.backend(t, recs) },
		Interrupt: func(t *testing.T, inst backends.Instance) {
			for _, r := range simInstances(e) {
				if r.Tags[backends.TagInstance] == inst.ID && live(r) {
					e.cs.Interrupt(r.ID)
					return
				}
			}
			t.Fatalf("no simulated VM of instance %s", inst.ID)
		},
		// A disk made with the SDK, as the portal or the CLI would, named
		// by its Resource Manager id.
		ExternalVolume: func(t *testing.T, region string, sizeGB float64) string {
			p := e.provider(t, nil)
			size := int32(sizeGB)
			name := "external-" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))
			poller, err := p.disks.BeginCreateOrUpdate(t.Context(), p.rg, name, armcompute.Disk{
				Location: &region,
				Properties: &armcompute.DiskProperties{
					CreationData: &armcompute.CreationData{CreateOption: ptr(armcompute.DiskCreateOptionEmpty)},
					DiskSizeGB:   &size,
				},
			}, nil)
			if err != nil {
				t.Fatal(err)
			}
			res, err := poller.PollUntilDone(t.Context(), nil)
			if err != nil {
				t.Fatal(err)
			}
			return *res.ID
		},
	})
	st := e.cs.Stats()
	t.Logf("simulated Azure API calls: %v", st.Calls["azure"])
}

// TestCreate_allocationFailed: a size without capacity is accepted by the
// PUT and fails in the long-running operation (AllocationFailed); the
// engine's Create reports no capacity and the failed VM is deleted.
func TestCreate_allocationFailed(t *testing.T) {
	e := startSim(t)
	e.cs.Faults(sim.Faults{Capacity: map[string]int{"Standard_D2s_v3": 0}})
	p := e.provider(t, nil)
	ctx := context.Background()
	m, err := p.Launch(ctx, launchRequest("i-alloc", d2s))
	if err != nil {
		t.Fatalf("Launch: %v", err)
	}
	got, err := p.Get(ctx, m.Ref)
	if err != nil || got.State != vm.StateGone || !strings.Contains(got.Message, "AllocationFailed") {
		t.Fatalf("Get = %+v, %v; want gone with AllocationFailed", got, err)
	}

	b := e.backend(t, drivertest.Records(t))
	_, err = b.Create(ctx, backends.InstanceSpec{
		ID: "i-alloc-engine", Name: "fleet/alloc", Offer: d2s,
		Tags: map[string]string{backends.TagInstallation: "test"},
	})
	if !errors.Is(err, backends.ErrNoCapacity) {
		t.Fatalf("Create: %v, want ErrNoCapacity", err)
	}
	for _, r := range simInstances(e) {
		if r.Tags[backends.TagInstance] == "i-alloc-engine" && live(r) {
			t.Errorf("the failed VM %s is left: %s", r.Name, r.State)
		}
	}
}

// TestProvider_throttling: throttled calls (429 with Retry-After) are
// retried by the SDK; a call throttled on every retry is transient.
func TestProvider_throttling(t *testing.T) {
	e := startSim(t)
	p := e.provider(t, nil)
	ctx := context.Background()
	m, err := p.Launch(ctx, launchRequest("i-throttle", d2s))
	if err != nil {
		t.Fatalf("Launch: %v", err)
	}
	waitRunning(t, p, m.Ref)
	e.cs.Faults(sim.Faults{ErrorRate: 1})
	_, err = p.Get(ctx, m.Ref)
	if backends.KindOf(err) != backends.KindTransient || backends.RetryAfter(err) != time.Second || !strings.Contains(err.Error(), "TooManyRequests") {
		t.Fatalf("Get while throttled: %v (kind %s, after %s), want transient after 1s", err, backends.KindOf(err), backends.RetryAfter(err))
	}
	// With 30 % throttled, the SDK's retries make almost every Get
	// succeed; one throttled on every retry (0.3⁴ of them) is transient,
	// for the caller to retry.
	e.cs.Faults(sim.Faults{ErrorRate: 0.3})
	for i := range 5 {
		_, err := p.Get(ctx, m.Ref)
		for try := 0; err != nil && try < 3; try++ {
			if backends.KindOf(err) != backends.KindTransient {
				t.Fatalf("Get %d with 30%% throttling: %v (kind %s), want transient", i, err, backends.KindOf(err))
			}
			_, err = p.Get(ctx, m.Ref)
		}
		if err != nil {
			t.Fatalf("Get %d with 30%% throttling, after retries: %v", i, err)
		}
	}
	e.cs.Faults(sim.Faults{})
	st := e.cs.Stats()
	t.Logf("calls %v, throttled %v", st.Calls["azure"], st.Failed["azure"])
}

// TestMeasure_provision logs the figures of one provisioned instance: the
// API calls (by operation) and the time from the first Create to running
// (SSH up, agent answering), and the calls of its termination. The first
// instance pays the resource group and network; the second is measured.
func TestMeasure_provision(t *testing.T) {
	testenv.Docker(t)
	e := startSim(t)
	b := e.backend(t, drivertest.Records(t))
	ctx := t.Context()
	tags := map[string]string{backends.TagInstallation: "measure"}
	total := func() (n int, by map[string]int) {
		by = e.cs.Stats().Calls["azure"]
		for _, c := range by {
			n += c
		}
		return n, by
	}
	run := func(id string) (time.Duration, int, map[string]int) {
		before, byBefore := total()
		start := time.Now()
		for {
			inst, err := b.Create(ctx, backends.InstanceSpec{ID: id, Name: "fleet/measure", Offer: d2s, Tags: tags})
			if err != nil && backends.KindOf(err) != backends.KindTransient {
				t.Fatalf("Create %s: %v", id, err)
			}
			if inst.Status == backends.StatusRunning {
				break
			}
			if time.Since(start) > 2*time.Minute {
				t.Fatalf("instance %s not running: %+v", id, inst)
			}
			time.Sleep(200 * time.Millisecond)
		}
		elapsed := time.Since(start)
		after, byAfter := total()
		diff := map[string]int{}
		for op, n := range byAfter {
			if d := n - byBefore[op]; d > 0 {
				diff[op] = d
			}
		}
		return elapsed, after - before, diff
	}
	d1, n1, _ := run("measure-1")
	d2, n2, by2 := run("measure-2")
	t.Logf("first instance: running after %s, %d API calls (with resource group and network)", d1.Round(time.Millisecond), n1)
	t.Logf("second instance: running after %s, %d API calls: %v", d2.Round(time.Millisecond), n2, by2)
	before, _ := total()
	for _, id := range []string{"measure-1", "measure-2"} {
		for {
			err := b.Terminate(ctx, id)
			if err == nil {
				break
			}
			if backends.KindOf(err) == backends.KindStalled {
				t.Fatalf("Terminate %s: %v", id, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	after, _ := total()
	t.Logf("terminating both: %d API calls", after-before)
}

// waitCreated calls Create until the instance runs.
func waitCreated(t *testing.T, b backends.Backend, spec backends.InstanceSpec) backends.Instance {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		inst, err := b.Create(t.Context(), spec)
		if err != nil && backends.KindOf(err) != backends.KindTransient {
			t.Fatalf("Create %s: %v", spec.ID, err)
		}
		if inst.Status == backends.StatusRunning {
			return inst
		}
		if time.Now().After(deadline) {
			t.Fatalf("instance %s not running: %+v, %v", spec.ID, inst, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestDescribe_spotEvicted: a running spot instance Azure evicts
// (evictionPolicy Delete: the VM is gone) is terminated and interrupted,
// also for a server started after the eviction.
func TestDescribe_spotEvicted(t *testing.T) {
	testenv.Docker(t)
	e := startSim(t)
	recs := drivertest.Records(t)
	b := e.backend(t, recs)
	spot := d2s
	spot.Spot, spot.Price = true, 0.0288
	inst := waitCreated(t, b, backends.InstanceSpec{ID: "spot-1", Name: "fleet/spot", Offer: spot,
		Tags: map[string]string{backends.TagInstallation: "spot"}})
	var simID string
	for _, r := range simInstances(e) {
		if r.Tags[backends.TagInstance] == inst.ID {
			simID = r.ID
		}
	}
	got := e.cs.Interrupt(simID)
	if !got.Interrupted || got.State != sim.StateTerminated {
		t.Fatalf("sim after interrupt: %+v", got)
	}
	for name, b := range map[string]backends.Backend{"server": b, "restarted_server": e.backend(t, recs)} {
		d, err := b.Describe(t.Context(), inst.ID)
		if err != nil || d.Status != backends.StatusTerminated || !d.Interrupted {
			t.Errorf("%s: Describe after eviction = %+v, %v; want terminated and interrupted", name, d, err)
		}
	}
	if err := b.Terminate(t.Context(), inst.ID); err != nil {
		t.Fatalf("Terminate of an evicted instance: %v", err)
	}
}

// TestSimRestart: the simulated Azure keeps its VMs, disks and network
// across a simulator restart; a running instance runs on.
func TestSimRestart(t *testing.T) {
	testenv.Docker(t)
	e := startSim(t)
	recs := drivertest.Records(t)
	b := e.backend(t, recs)
	inst := waitCreated(t, b, backends.InstanceSpec{ID: "restart-1", Name: "fleet/restart", Offer: d2s,
		Tags: map[string]string{backends.TagInstallation: "restart"}})
	e.cs.Restart()
	e.s = e.cs.Sim()
	b2 := e.backend(t, recs)
	deadline := time.Now().Add(time.Minute)
	for {
		d, err := b2.Describe(t.Context(), inst.ID)
		if err == nil && d.Status == backends.StatusRunning && d.Hostname == inst.Hostname {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Describe after a simulator restart = %+v, %v; want running at %s", d, err, inst.Hostname)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if list, err := b2.List(t.Context(), map[string]string{backends.TagInstallation: "restart"}); err != nil || len(list) != 1 {
		t.Fatalf("List after restart = %+v, %v", list, err)
	}
}

// TestMeasure_faults provisions instances at once while 30 % of the API
// calls are throttled, and logs how long until all run and the calls made:
// the SDK retries throttled calls and the engine's Create is called again
// on what still fails, as the reconciler does.
func TestMeasure_faults(t *testing.T) {
	if testing.Short() {
		t.Skip("SKIP: provisions 10 VMs (-short)")
	}
	testenv.Docker(t)
	const n = 10
	e := startSim(t)
	b := e.backend(t, drivertest.Records(t))
	e.cs.Faults(sim.Faults{ErrorRate: 0.3})
	start := time.Now()
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			spec := backends.InstanceSpec{ID: fmt.Sprintf("fault-%d", i), Name: "fleet/faults", Offer: d2s,
				Tags: map[string]string{backends.TagInstallation: "faults"}}
			for {
				inst, err := b.Create(t.Context(), spec)
				if err != nil && backends.KindOf(err) != backends.KindTransient {
					t.Errorf("Create %s: %v", spec.ID, err)
					return
				}
				if inst.Status == backends.StatusRunning {
					return
				}
				if time.Since(start) > 5*time.Minute {
					t.Errorf("instance %s not running: %+v, %v", spec.ID, inst, err)
					return
				}
				time.Sleep(200 * time.Millisecond)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	st := e.cs.Stats()
	calls, failed := 0, 0
	for _, c := range st.Calls["azure"] {
		calls += c
	}
	for _, c := range st.Failed["azure"] {
		failed += c
	}
	t.Logf("%d instances running after %s with 30%% throttling: %d API calls, %d throttled", n, elapsed.Round(time.Millisecond), calls, failed)
	e.cs.Faults(sim.Faults{})
	for i := range n {
		for {
			err := b.Terminate(t.Context(), fmt.Sprintf("fault-%d", i))
			if err == nil {
				break
			}
			if backends.KindOf(err) == backends.KindStalled {
				t.Fatalf("Terminate: %v", err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}
