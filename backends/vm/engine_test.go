package vm_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"hoist/backends"
	"hoist/backends/aws"
	"hoist/backends/internal/agentbin"
	"hoist/backends/internal/drivertest"
	"hoist/backends/offers"
	"hoist/e2e/cloudsim/ec2"
	"hoist/e2e/cloudsim/sim"
	"hoist/e2e/testenv"
)

// The engine is tested through a real driver (aws, over aws-sdk-go-v2)
// against the cloud simulator's EC2; what every driver must do is the
// conformance kit's, run by each driver package. These tests cover what is
// the engine's own: giving up a VM that does not boot in time, finding a VM
// whose record was lost, riding out injected API errors, a reclaimed spot VM,
// and registered volumes left at the provider.

func TestMain(m *testing.M) { drivertest.Main(m) }

// env is a simulator with EC2 and an aws backend over it.
type env struct {
	cs   *testenv.CloudSim
	b    backends.Backend
	recs backends.Records
	// skew is added to the backend's clock.
	skew atomic.Int64
}

// run makes this test binary's instance ids unique on the host: the
// simulated VMs log in as this machine's root, so each instance's directory
// (sshfleet's ~/.hoist/<id>) is on this host.
var run = fmt.Sprintf("vmtest-%d", os.Getpid())

func newEnv(t *testing.T, edit ...func(*backends.Deps)) *env {
	t.Helper()
	// Runs last (after the simulator halted the VMs): a VM halted without
	// a drain (reclaimed, or deleted without its record) leaves its
	// instance directory behind on this host, as on a real VM's disk.
	t.Cleanup(func() {
		home, err := os.UserHomeDir()
		if err != nil {
			return
		}
		dirs, _ := filepath.Glob(filepath.Join(home, ".hoist", run+"-*"))
		for _, d := range dirs {
			_ = os.RemoveAll(d)
		}
	})
	cs := testenv.StartCloudSim(t, ec2.New())
	st := drivertest.Records(t)
	e := &env{cs: cs, recs: st}
	deps := backends.Deps{
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})), Records: st, Agents: agentbin.Agents,
		Now: func() time.Time { return time.Now().Add(time.Duration(e.skew.Load())) },
	}
	for _, f := range edit {
		f(&deps)
	}
	b, err := aws.Factory(drivertest.Config(t, "aws", cs.Backend("aws"), nil), deps)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.(interface{ Close() error }).Close() })
	e.b = b
	return e
}

// spec is the spec of instance name (made unique with run).
func spec(name string) backends.InstanceSpec {
	id := run + "-" + name
	return backends.InstanceSpec{
		ID: id, Name: "engine-test",
		Offer: offers.Offer{Backend: "aws", Instance: "t3.micro", Region: "us-east-1", CPUs: 2, MemoryGB: 1, Price: 0.0104},
		Tags:  map[string]string{backends.TagInstallation: "engine-test", backends.TagInstance: id},
	}
}

// vms returns the simulator's instances by state.
func (e *env) vms() map[string]int {
	out := map[string]int{}
	for _, r := range e.cs.Sim().List("aws", sim.KindInstance) {
		out[r.State]++
	}
	return out
}

// TestBootTimeout checks that a VM that has not come up within the boot
// timeout is deleted and reported as no capacity (so that the reconciler
// tries the next offer), and that nothing of it is left.
func TestBootTimeout(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	if _, err := e.b.Create(ctx, spec("slow-1")); err != nil {
		t.Fatalf("Create: %v", err)
	}
	e.skew.Store(int64(11 * time.Minute)) // past the default boot timeout
	_, err := e.b.Create(ctx, spec("slow-1"))
	if !errors.Is(err, backends.ErrNoCapacity) {
		t.Fatalf("Create past the boot timeout = %v, want an error wrapping ErrNoCapacity", err)
	}
	if _, err := e.b.Describe(ctx, run+"-slow-1"); !errors.Is(err, backends.ErrNotFound) {
		t.Errorf("Describe after giving the VM up = %v, want ErrNotFound", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for e.vms()[sim.StateTerminated] != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("simulator VMs = %v, want one terminated", e.vms())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestLostRecordAndFaults brings a VM up with 30 % of the API calls
// failing (every error must be transient, and Create converges), then
// loses the engine's record of it (as a store restored from a backup
// would): List still shows it (the leak audit) and Terminate finds it by
// its tag and deletes it.
func TestLostRecordAndFaults(t *testing.T) {
	testenv.Docker(t)
	e := newEnv(t)
	ctx := t.Context()
	e.cs.Faults(sim.Faults{ErrorRate: 0.3})
	start := time.Now()
	var inst backends.Instance
	failures := 0
	for inst.Status != backends.StatusRunning {
		i, err := e.b.Create(ctx, spec("flaky-1"))
		switch {
		case err != nil && (backends.IsStalled(err) || errors.Is(err, backends.ErrNoCapacity)):
			t.Fatalf("Create with injected errors: %v (%s); want transient errors only", err, backends.KindOf(err))
		case err != nil:
			failures++
		default:
			inst = i
		}
		if time.Since(start) > 3*time.Minute {
			t.Fatalf("not running after %s: %+v", time.Since(start), inst)
		}
		time.Sleep(100 * time.Millisecond)
	}
	e.cs.Faults(sim.Faults{})
	t.Logf("running after %s, %d failed Create calls; simulator calls %v, failed %v", time.Since(start).Round(time.Millisecond), failures, e.cs.Stats().Calls, e.cs.Stats().Failed)
	if inst.Hostname == "" || inst.Price != 0.0104 || inst.Offer.Instance != "t3.micro" || inst.ProviderID == "" {
		t.Errorf("running instance = %+v", inst)
	}

	if err := e.recs.DeleteBackendRecord(ctx, "aws", inst.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.b.Describe(ctx, inst.ID); !errors.Is(err, backends.ErrNotFound) {
		t.Errorf("Describe without a record = %v, want ErrNotFound", err)
	}
	listed, err := e.b.List(ctx, map[string]string{backends.TagInstallation: "engine-test"})
	if err != nil || len(listed) != 1 || listed[0].ID != inst.ID || listed[0].CreatedAt.IsZero() {
		t.Fatalf("List = %+v, %v; want the instance, with its creation time", listed, err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		err := e.b.Terminate(ctx, inst.ID)
		if err == nil {
			break
		}
		if backends.KindOf(err) != backends.KindWait || time.Now().After(deadline) {
			t.Fatalf("Terminate of a VM without a record: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if listed, err := e.b.List(ctx, nil); err != nil || len(listed) != 0 {
		t.Errorf("List after Terminate = %+v, %v; want none", listed, err)
	}
	if got := e.vms(); got[sim.StateRunning] != 0 || got[sim.StatePending] != 0 {
		t.Errorf("simulator VMs = %v, want all terminated", got)
	}
}

// waitRunning calls Create, as the reconciler does while an instance
// provisions, until it runs.
func (e *env) waitRunning(t *testing.T, s backends.InstanceSpec) backends.Instance {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		inst, err := e.b.Create(t.Context(), s)
		if err != nil && (backends.IsStalled(err) || errors.Is(err, backends.ErrNoCapacity)) {
			t.Fatalf("Create(%s): %v", s.ID, err)
		}
		if err == nil && inst.Status == backends.StatusRunning {
			return inst
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not running: %+v, %v", s.ID, inst, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// terminate calls Terminate until the instance is gone.
func (e *env) terminate(t *testing.T, id string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		// Not t.Context(): it is cancelled before a test's cleanups run.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := e.b.Terminate(ctx, id)
		cancel()
		if err == nil {
			return
		}
		if backends.KindOf(err) == backends.KindStalled || time.Now().After(deadline) {
			t.Fatalf("Terminate(%s): %v", id, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestSpotInterruption checks that a spot VM the provider reclaims is
// described, once it is gone, as terminated and Interrupted (the reconciler's cue to end its
// jobs as interrupted and resubmit), and still terminates cleanly.
func TestSpotInterruption(t *testing.T) {
	testenv.Docker(t)
	e := newEnv(t)
	s := spec("spot-1")
	s.Offer.Spot = true
	inst := e.waitRunning(t, s)
	if !inst.Offer.Spot || inst.Interrupted {
		t.Errorf("running spot instance = %+v", inst)
	}
	_, simID, _ := strings.Cut(inst.ProviderID, "/")
	if r := e.cs.Interrupt(simID); !r.Spot || !r.Interrupted {
		t.Fatalf("simulator interrupt of %s = %+v", simID, r)
	}
	// The VM shuts down (its shim may answer a little longer), then is
	// gone.
	deadline := time.Now().Add(30 * time.Second)
	var got backends.Instance
	for got.Status != backends.StatusTerminated {
		var err error
		if got, err = e.b.Describe(t.Context(), s.ID); err != nil || time.Now().After(deadline) {
			t.Fatalf("Describe after the interruption = %+v, %v; want terminated", got, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !got.Interrupted {
		t.Errorf("Describe after the interruption = %+v; want Interrupted", got)
	}
	t.Logf("interrupted: %s", got.Message)
	e.terminate(t, s.ID)
	if _, err := e.b.Describe(t.Context(), s.ID); !errors.Is(err, backends.ErrNotFound) {
		t.Errorf("Describe after Terminate = %v, want ErrNotFound", err)
	}
}

// TestRegisteredVolumeStays checks that deleting a registered volume
// (dstack's volume_id) forgets it without deleting it at the provider,
// while deleting an owned one deletes it.
func TestRegisteredVolumeStays(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	vb := e.b.(backends.VolumeBackend)
	owned, err := vb.CreateVolume(ctx, backends.VolumeSpec{ID: "vol-owned", Name: "data", Region: "us-east-1", SizeGB: 1.5, Tags: map[string]string{backends.TagInstallation: "engine-test"}})
	if err != nil || !owned.Owned || owned.SizeGB != 2 {
		t.Fatalf("CreateVolume = %+v, %v; want an owned 2 GB volume (sizes round up)", owned, err)
	}
	_, external, _ := strings.Cut(owned.ProviderID, "/")
	reg, err := vb.RegisterVolume(ctx, backends.VolumeSpec{ID: "vol-registered", Name: "theirs", Region: "us-east-1", ExternalID: external})
	if err != nil || reg.Owned || reg.ProviderID != owned.ProviderID {
		t.Fatalf("RegisterVolume(%s) = %+v, %v; want it, not owned", external, reg, err)
	}
	if err := vb.DeleteVolume(ctx, "vol-registered"); err != nil {
		t.Fatalf("DeleteVolume(registered) = %v", err)
	}
	if _, err := vb.DescribeVolume(ctx, "vol-registered"); !errors.Is(err, backends.ErrNotFound) {
		t.Errorf("DescribeVolume(registered) after DeleteVolume = %v, want ErrNotFound", err)
	}
	if v, err := vb.DescribeVolume(ctx, "vol-owned"); err != nil || v.Status != "available" {
		t.Errorf("the volume after its registration was deleted = %+v, %v; want it still there", v, err)
	}
	if _, err := vb.RegisterVolume(ctx, backends.VolumeSpec{ID: "vol-missing", Region: "us-east-1", ExternalID: "vol-0000000000000000"}); !backends.IsStalled(err) || !errors.Is(err, backends.ErrNotFound) {
		t.Errorf("RegisterVolume(no such volume) = %v, want a stalled ErrNotFound", err)
	}
	if err := vb.DeleteVolume(ctx, "vol-owned"); err != nil {
		t.Fatalf("DeleteVolume(owned) = %v", err)
	}
	for _, r := range e.cs.Sim().List("aws", sim.KindVolume) {
		if r.State != sim.StateDeleted {
			t.Errorf("simulator volume %s is %s after DeleteVolume", r.ID, r.State)
		}
	}
}
