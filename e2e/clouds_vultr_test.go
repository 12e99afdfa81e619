package e2e

import (
	"testing"
	"time"

	"hoist/e2e/cloudsim/sim"
)

// TestClouds_vultr drives the vultr driver through `hoist serve` and Git
// against the simulated Vultr API: a one-node fleet `backends: [vultr]`
// gets an instance (the cheapest live plan offer) in hoist's VPC of its
// region, taken over like an SSH host; a task on it ends done with its
// output; the price is the plan's, in the API, the plan and the dashboard;
// removing the specs deletes the instance and leaves nothing with the
// installation's tags. It logs the commit → ready and commit → done times.
func TestClouds_vultr(t *testing.T) {
	e := newCloudEnv(t, "vultr", "3s")
	s, r := e.s, e.r

	began := time.Now()
	r.write("fleet.dstack.yml", e.fleetSpec("cloud", "on-demand"))
	r.commit("a one-node fleet on vultr")
	inst := e.waitFleetReady("cloud")
	ready := time.Since(began)
	vm := e.liveVM()
	if vm.InstanceType != inst.InstanceType || vm.Extra["vpc"] == "" || vm.Image != "docker" {
		t.Fatalf("simulator VM %+v, hoist instance %+v: want the same plan, in a VPC, from the Docker image", vm, inst)
	}
	if want := e.catalogPrice(inst); inst.Price != want || inst.Price <= 0 {
		t.Fatalf("instance %s costs %v, the offer says %v", inst.Name, inst.Price, want)
	}
	if p := e.plan(); p.CostBefore != inst.Price {
		t.Fatalf("plan cost_before = %v, want the instance's %v", p.CostBefore, inst.Price)
	}

	began = time.Now()
	r.write("hello.dstack.yml", e.taskOn("hello", "cloud", "  - echo hello from vultr\n"))
	sha := r.commit("a task on the vultr fleet")
	s.waitRun("hello", sha, "done", cloudWithin)
	done := time.Since(began)
	if got := s.logs("hello"); got != "hello from vultr\n" {
		t.Fatalf("hello logs: %q", got)
	}

	r.remove("hello.dstack.yml")
	r.remove("fleet.dstack.yml")
	e.removeCommit("remove the fleet")
	e.waitNothingLeft()
	if got := e.vm(vm.ID); got.State != sim.StateTerminated {
		t.Fatalf("VM %s is %s after the fleet was removed", vm.ID, got.State)
	}
	t.Logf("vultr: fleet commit → instance ready %s; task commit → done %s (%s in %s at $%.4f/h)",
		ready.Round(time.Millisecond), done.Round(time.Millisecond), inst.InstanceType, inst.Region, inst.Price)
}

// TestClouds_vultrMultiNode runs TestClouds_multiNode's two-node task on
// the simulated Vultr: the gang grows a `placement: cluster` fleet by two
// instances in hoist's VPC (Vultr has no placement groups), and rank 1
// reaches rank 0 at its VPC address, $DSTACK_MASTER_NODE_IP.
func TestClouds_vultrMultiNode(t *testing.T) {
	e := newCloudEnv(t, "vultr", "2s")
	e.twoNodeTask()
}

// TestClouds_vultrCapacity: the two plans a 2-CPU fleet takes first
// (vhf-2c-4gb: vc2-2c-4gb's 80 GB disk is under the default 100 GB; then
// the cloud GPU plan vcg-a16-6c-64g-16vram) sold out in every region: the
// regions' live availability leaves them out of the offers (a create would
// answer 400 "out of stock", no capacity: TestErrors in backends/vultr), and
// the fleet gets the bare-metal plan vbm-8c-132gb, attached to hoist's VPC
// after its create; a task on it ends done.
func TestClouds_vultrCapacity(t *testing.T) {
	e := newCloudEnv(t, "vultr", "2s")
	e.sim.Faults(sim.Faults{Capacity: map[string]int{"vhf-2c-4gb": 0, "vcg-a16-6c-64g-16vram": 0}})
	defer e.sim.Faults(sim.Faults{})
	e.r.write("cap.dstack.yml", e.fleetSpec("cap", "on-demand"))
	e.r.commit("a fleet whose first plan is sold out")
	inst := e.waitFleetReady("cap")
	if inst.InstanceType != "vbm-8c-132gb" || inst.Region != "ewr" {
		t.Fatalf("instance %+v, want the next offer vbm-8c-132gb in ewr", inst)
	}
	vm := e.liveVM()
	if vm.Extra["plan_type"] != "bare_metal" || vm.Extra["vpc"] == "" {
		t.Fatalf("simulator VM %+v: want a bare-metal server in a VPC", vm)
	}
	for _, r := range e.sim.Instances() {
		if r.Kind == sim.KindInstance && (r.InstanceType == "vhf-2c-4gb" || r.InstanceType == "vcg-a16-6c-64g-16vram") {
			t.Errorf("a VM of a sold-out plan exists: %+v", r)
		}
	}
	e.r.write("metal.dstack.yml", e.taskOn("metal", "cap", "  - echo on bare metal\n"))
	sha := e.r.commit("a task on the bare-metal fleet")
	e.s.waitRun("metal", sha, "done", cloudWithin)
	if got := e.s.logs("metal"); got != "on bare metal\n" {
		t.Fatalf("metal logs: %q", got)
	}
	e.r.remove("metal.dstack.yml")
	e.r.remove("cap.dstack.yml")
	e.removeCommit("remove the bare-metal fleet")
	e.waitNothingLeft()
}

// TestClouds_vultrErrors: with 30 % of the Vultr API calls answered 429, a
// 3-node fleet still comes up, a task on it ends done and removing the
// specs leaves nothing (govultr retries reads and deletes; creates are
// not retried by the client but by the reconciler, after looking for the
// instance by its tag).
func TestClouds_vultrErrors(t *testing.T) {
	e := newCloudEnv(t, "vultr", "2s")
	e.errorRate(t)
}
