package gce_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	compute "cloud.google.com/go/compute/apiv1"
	"cloud.google.com/go/compute/apiv1/computepb"
	"github.com/googleapis/gax-go/v2"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"
	"google.golang.org/protobuf/proto"

	"hoist/e2e/cloudsim/gce"
	"hoist/e2e/cloudsim/sim"
	"hoist/e2e/testenv"
)

type env struct {
	c    *testenv.CloudSim
	s    *sim.Sim
	url  string
	opts []option.ClientOption
}

func start(t *testing.T) *env {
	t.Helper()
	c := testenv.StartCloudSim(t, gce.New())
	t.Cleanup(func() {
		if err := c.Sim().DetachAllDisks(); err != nil {
			t.Errorf("detach disks: %v", err)
		}
	})
	url := c.Endpoints[gce.Name]
	creds := c.Backend(gce.Name)["creds"].(map[string]any)["data"].(string)
	return &env{c: c, s: c.Sim(), url: url, opts: []option.ClientOption{
		option.WithEndpoint(url),
		option.WithAuthCredentialsJSON(option.ServiceAccount, []byte(creds)),
	}}
}

func (e *env) instances(t *testing.T) *compute.InstancesClient {
	c, err := compute.NewInstancesRESTClient(t.Context(), e.opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func instance(name string, labels map[string]string) *computepb.Instance {
	return &computepb.Instance{
		Name:        proto.String(name),
		MachineType: proto.String("zones/us-central1-a/machineTypes/e2-standard-4"),
		Labels:      labels,
		Disks: []*computepb.AttachedDisk{{
			Boot: proto.Bool(true), AutoDelete: proto.Bool(true),
			InitializeParams: &computepb.AttachedDiskInitializeParams{SourceImage: proto.String(gce.ImageCPU), DiskSizeGb: proto.Int64(50)},
		}},
		Metadata: &computepb.Metadata{Items: []*computepb.Items{
			{Key: proto.String("ssh-keys"), Value: proto.String("root:ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFake hoist")},
		}},
		Scheduling: &computepb.Scheduling{ProvisioningModel: proto.String("SPOT"), InstanceTerminationAction: proto.String("STOP")},
		NetworkInterfaces: []*computepb.NetworkInterface{{AccessConfigs: []*computepb.AccessConfig{{
			Name: proto.String("External NAT"), Type: proto.String("ONE_TO_ONE_NAT"),
		}}}},
	}
}

func TestInstanceLifecycleThroughOfficialClient(t *testing.T) {
	e := start(t)
	c := e.instances(t)
	ctx := t.Context()
	labels := map[string]string{"hoist_installation": "t1", "hoist_instance": "i-1"}
	op, err := c.Insert(ctx, &computepb.InsertInstanceRequest{
		Project: gce.Project, Zone: "us-central1-a", InstanceResource: instance("vm-1", labels),
		RequestId: proto.String("6b0b8d4e-1c1a-4b5e-9f0a-2a8c1f0e0d11"),
	})
	if err != nil {
		t.Fatalf("insert: %v", err)
	}
	if err := op.Wait(ctx); err != nil {
		t.Fatalf("wait: %v", err)
	}
	if op.Proto().GetError() != nil {
		t.Fatalf("operation error: %v", op.Proto().GetError())
	}
	// The same requestId answers the same operation, not a second VM.
	again, err := c.Insert(ctx, &computepb.InsertInstanceRequest{
		Project: gce.Project, Zone: "us-central1-a", InstanceResource: instance("vm-other", labels),
		RequestId: proto.String("6b0b8d4e-1c1a-4b5e-9f0a-2a8c1f0e0d11"),
	})
	if err != nil || again.Name() != op.Name() {
		t.Fatalf("retried insert: %v, op %s want %s", err, again.Name(), op.Name())
	}
	vms := e.s.List(gce.Name, sim.KindInstance)
	if len(vms) == 1 {
		e.c.WaitRunning(gce.Name, vms[0].ID, 30*time.Second)
	}
	in, err := c.Get(ctx, &computepb.GetInstanceRequest{Project: gce.Project, Zone: "us-central1-a", Instance: "vm-1"})
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	if in.GetStatus() != "RUNNING" || in.GetLabels()["hoist_instance"] != "i-1" || in.GetScheduling().GetProvisioningModel() != "SPOT" {
		t.Errorf("instance = %s %v %v", in.GetStatus(), in.GetLabels(), in.GetScheduling())
	}
	if in.GetNetworkInterfaces()[0].GetAccessConfigs()[0].GetNatIP() != vms[0].Address {
		t.Errorf("natIP = %v, VM at %s", in.GetNetworkInterfaces(), vms[0].Address)
	}
	if len(vms) != 1 || vms[0].User != "root" || len(vms[0].AuthorizedKeys) != 1 || !vms[0].Spot || vms[0].Price <= 0 {
		t.Fatalf("sim resources = %+v", vms)
	}
	// The serial console shows cloud-init's host keys once the VM runs.
	out, err := c.GetSerialPortOutput(ctx, &computepb.GetSerialPortOutputInstanceRequest{Project: gce.Project, Zone: "us-central1-a", Instance: "vm-1"})
	if err != nil || !strings.Contains(out.GetContents(), "-----BEGIN SSH HOST KEY KEYS-----\r\n"+strings.Join(strings.Fields(vms[0].HostKeys[0])[:2], " ")) {
		t.Fatalf("serial port: %v %q", err, out.GetContents())
	}

	it := c.AggregatedList(ctx, &computepb.AggregatedListInstancesRequest{Project: gce.Project,
		Filter: proto.String(`labels.hoist_installation = "t1"`)})
	var found []string
	for {
		pair, err := it.Next()
		if errors.Is(err, iterator.Done) {
			break
		}
		if err != nil {
			t.Fatalf("aggregated list: %v", err)
		}
		for _, in := range pair.Value.GetInstances() {
			found = append(found, pair.Key+"/"+in.GetName())
		}
	}
	if len(found) != 1 || found[0] != "zones/us-central1-a/vm-1" {
		t.Errorf("aggregated list = %v", found)
	}

	e.c.Interrupt(vms[0].ID)
	in, err = c.Get(ctx, &computepb.GetInstanceRequest{Project: gce.Project, Zone: "us-central1-a", Instance: "vm-1"})
	if err != nil || in.GetStatus() != "TERMINATED" {
		t.Fatalf("after preemption: %v %s", err, in.GetStatus())
	}

	del, err := c.Delete(ctx, &computepb.DeleteInstanceRequest{Project: gce.Project, Zone: "us-central1-a", Instance: "vm-1"})
	if err != nil {
		t.Fatalf("delete: %v", err)
	}
	if err := del.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = c.Get(ctx, &computepb.GetInstanceRequest{Project: gce.Project, Zone: "us-central1-a", Instance: "vm-1"})
	var ge *googleapi.Error
	if !errors.As(err, &ge) || ge.Code != http.StatusNotFound {
		t.Fatalf("get after delete: %v", err)
	}
	if r, _ := e.s.Get(gce.Name, vms[0].ID); r.State != sim.StateTerminated {
		t.Errorf("sim state after delete = %s", r.State)
	}
}

func TestRejectsBadCredentials(t *testing.T) {
	e := start(t)
	c, err := compute.NewInstancesRESTClient(t.Context(), option.WithEndpoint(e.url), option.WithoutAuthentication())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.Get(t.Context(), &computepb.GetInstanceRequest{Project: gce.Project, Zone: "us-central1-a", Instance: "x"})
	var ge *googleapi.Error
	if !errors.As(err, &ge) || ge.Code != http.StatusUnauthorized {
		t.Fatalf("get without token: %v", err)
	}
	// A key the simulator did not issue fails the token exchange.
	other := start(t)
	data := strings.ReplaceAll(other.c.Backend(gce.Name)["creds"].(map[string]any)["data"].(string), other.url, e.url)
	c2, err := compute.NewInstancesRESTClient(t.Context(), option.WithEndpoint(e.url),
		option.WithAuthCredentialsJSON(option.ServiceAccount, []byte(data)))
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, err = c2.Get(ctx, &computepb.GetInstanceRequest{Project: gce.Project, Zone: "us-central1-a", Instance: "x"})
	if err == nil || !strings.Contains(err.Error(), "invalid_grant") {
		t.Fatalf("get with a foreign key: %v", err)
	}
}

func TestDisksAndPolicies(t *testing.T) {
	e := start(t)
	ctx := t.Context()
	c := e.instances(t)
	disks, err := compute.NewDisksRESTClient(ctx, e.opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer disks.Close()
	pols, err := compute.NewResourcePoliciesRESTClient(ctx, e.opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer pols.Close()
	wait := func(op *compute.Operation, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		if err := op.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	wait(pols.Insert(ctx, &computepb.InsertResourcePolicyRequest{Project: gce.Project, Region: "us-central1",
		ResourcePolicyResource: &computepb.ResourcePolicy{Name: proto.String("pg-1"),
			GroupPlacementPolicy: &computepb.ResourcePolicyGroupPlacementPolicy{Collocation: proto.String("COLLOCATED")}}}))
	in := instance("vm-2", nil)
	in.ResourcePolicies = []string{"projects/hoist-sim/regions/us-central1/resourcePolicies/pg-1"}
	wait(c.Insert(ctx, &computepb.InsertInstanceRequest{Project: gce.Project, Zone: "us-central1-a", InstanceResource: in}))
	_, err = pols.Delete(ctx, &computepb.DeleteResourcePolicyRequest{Project: gce.Project, Region: "us-central1", ResourcePolicy: "pg-1"})
	var ge *googleapi.Error
	if !errors.As(err, &ge) || ge.Code != 400 || !strings.Contains(ge.Message, "is already being used by") {
		t.Fatalf("delete policy in use: %v", err)
	}
	wait(disks.Insert(ctx, &computepb.InsertDiskRequest{Project: gce.Project, Zone: "us-central1-a",
		DiskResource: &computepb.Disk{Name: proto.String("d-1"), SizeGb: proto.Int64(10), Labels: map[string]string{"hoist_volume": "v1"}}}))
	wait(c.AttachDisk(ctx, &computepb.AttachDiskInstanceRequest{Project: gce.Project, Zone: "us-central1-a", Instance: "vm-2",
		AttachedDiskResource: &computepb.AttachedDisk{Source: proto.String("projects/hoist-sim/zones/us-central1-a/disks/d-1"), DeviceName: proto.String("hoist-v1")}}))
	d, err := disks.Get(ctx, &computepb.GetDiskRequest{Project: gce.Project, Zone: "us-central1-a", Disk: "d-1"})
	if err != nil || len(d.GetUsers()) != 1 || d.GetSizeGb() != 10 {
		t.Fatalf("disk = %v, %v", d, err)
	}
	got, _ := c.Get(ctx, &computepb.GetInstanceRequest{Project: gce.Project, Zone: "us-central1-a", Instance: "vm-2"})
	if n := len(got.GetDisks()); n != 2 || got.GetDisks()[1].GetDeviceName() != "hoist-v1" {
		t.Fatalf("instance disks = %v", got.GetDisks())
	}
	wait(c.DetachDisk(ctx, &computepb.DetachDiskInstanceRequest{Project: gce.Project, Zone: "us-central1-a", Instance: "vm-2", DeviceName: "hoist-v1"}))
	wait(disks.Delete(ctx, &computepb.DeleteDiskRequest{Project: gce.Project, Zone: "us-central1-a", Disk: "d-1"}))
	wait(c.Delete(ctx, &computepb.DeleteInstanceRequest{Project: gce.Project, Zone: "us-central1-a", Instance: "vm-2"}))
	wait(pols.Delete(ctx, &computepb.DeleteResourcePolicyRequest{Project: gce.Project, Region: "us-central1", ResourcePolicy: "pg-1"}))
}

// once is a call option without the client's retries, so that a call shows
// the fault it met.
var once = gax.WithRetry(func() gax.Retryer { return nil })

// TestFaults_kinds: the injected kinds reach the official client as
// Compute Engine answers them: 429 rateLimitExceeded, 503 backendError, a
// stockout operation (ZONE_RESOURCE_POOL_EXHAUSTED) for instances.insert
// only, and a connection closed unanswered for lost answers, whose insert
// was made: the same requestId then answers its operation, not a second VM.
func TestFaults_kinds(t *testing.T) {
	e := start(t)
	c := e.instances(t)
	ctx := t.Context()
	get := func() error {
		_, err := c.Get(ctx, &computepb.GetInstanceRequest{Project: gce.Project, Zone: "us-central1-a", Instance: "none"}, once)
		return err
	}
	for _, tc := range []struct {
		kind   sim.Fault
		code   int
		reason string
	}{
		{sim.FaultThrottle, http.StatusTooManyRequests, "rateLimitExceeded"},
		{sim.FaultTransient, http.StatusServiceUnavailable, "backendError"},
	} {
		e.c.Faults(sim.Faults{ErrorRate: 1, ErrorKinds: map[sim.Fault]float64{tc.kind: 1}})
		var ge *googleapi.Error
		if err := get(); !errors.As(err, &ge) || ge.Code != tc.code || !strings.Contains(ge.Body, tc.reason) {
			t.Errorf("%s: Get = %v, want %d %s", tc.kind, err, tc.code, tc.reason)
		}
	}
	e.c.Faults(sim.Faults{ErrorRate: 1, ErrorKinds: map[sim.Fault]float64{sim.FaultCapacity: 1}})
	var ge *googleapi.Error
	if err := get(); !errors.As(err, &ge) || ge.Code != http.StatusNotFound {
		t.Errorf("Get with capacity faults = %v, want served (404)", err)
	}
	op, err := c.Insert(ctx, &computepb.InsertInstanceRequest{
		Project: gce.Project, Zone: "us-central1-a", InstanceResource: instance("vm-cap", nil),
		RequestId: proto.String("0c6a3c4e-8f7e-4d0e-9a57-3f3f5d7c1a01"),
	})
	if err != nil {
		t.Fatalf("insert with capacity faults: %v", err)
	}
	if err := op.Wait(ctx); err == nil || !strings.Contains(err.Error(), "ZONE_RESOURCE_POOL_EXHAUSTED") && op.Proto().GetError() == nil {
		t.Errorf("insert with capacity faults: wait %v, op error %v; want a stockout", err, op.Proto().GetError())
	}

	e.c.Faults(sim.Faults{ErrorRate: 1, ErrorKinds: map[sim.Fault]float64{sim.FaultLost: 1}, HoldMS: 100})
	req := &computepb.InsertInstanceRequest{
		Project: gce.Project, Zone: "us-central1-a", InstanceResource: instance("vm-lost", nil),
		RequestId: proto.String("0c6a3c4e-8f7e-4d0e-9a57-3f3f5d7c1a02"),
	}
	if _, err := c.Insert(ctx, req, once); err == nil {
		t.Fatal("insert with its answer lost succeeded")
	}
	e.c.Faults(sim.Faults{})
	if _, err := c.Insert(ctx, req); err != nil {
		t.Fatalf("insert retried with the same requestId: %v", err)
	}
	n := 0
	for _, r := range e.s.List(gce.Name, sim.KindInstance) {
		if r.Name == "vm-lost" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d VMs vm-lost after a lost answer and a retry, want 1", n)
	}
	if st := e.c.Stats().FailedByKind[gce.Name]; st["lost"] != 1 || st["capacity"] != 1 {
		t.Errorf("failed by kind %v, want 1 lost and 1 capacity", st)
	}
}
