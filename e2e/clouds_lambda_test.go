package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	lambdasim "hoist/e2e/cloudsim/lambda"
	"hoist/e2e/cloudsim/sim"
)

// lambdaMarker is the suffix the lambda driver gives the names of an
// installation's instances and SSH keys: "-" and 6 hex digits of SHA-256
// of the installation's id.
func lambdaMarker(install string) string {
	sum := sha256.Sum256([]byte(install))
	return "-" + hex.EncodeToString(sum[:])[:6]
}

// TestClouds_lambda is TestClouds on the simulated Lambda Cloud, where
// instances have no tags: a fleet gets a VM named with the installation's
// marker and its own SSH key, a task on it ends done, removing the fleet
// terminates the VM and deletes its key. It logs commit → done of the task
// and commit → ready of the fleet.
func TestClouds_lambda(t *testing.T) {
	e := newCloudEnv(t, "lambda", "3s")
	r, s := e.r, e.s

	start := time.Now()
	r.write("fleet.dstack.yml", e.fleetSpec("cloud", "on-demand"))
	r.commit("a one-node fleet on lambda")
	inst := e.waitFleetReady("cloud")
	ready := time.Since(start)
	vm := e.liveVM()
	if vm.InstanceType != inst.InstanceType || !strings.HasPrefix(vm.Name, "hoist-") {
		t.Fatalf("simulator VM %+v, hoist instance %+v", vm, inst)
	}
	keys := e.liveKeys()
	if len(keys) != 1 || keys[0].Name != vm.Name || keys[0].Extra["public_key"] != vm.AuthorizedKeys[0] {
		t.Fatalf("SSH keys of the installation %+v, want one named %s with the VM's key", keys, vm.Name)
	}

	start = time.Now()
	r.write("hello.dstack.yml", e.taskOn("hello", "cloud", "  - echo hello from lambda\n"))
	sha := r.commit("a task on the lambda fleet")
	s.waitRun("hello", sha, "done", cloudWithin)
	done := time.Since(start)
	if got := s.logs("hello"); got != "hello from lambda\n" {
		t.Fatalf("hello logs: %q", got)
	}
	t.Logf("lambda: fleet commit → instance ready %s; task commit → done %s", ready.Round(time.Millisecond), done.Round(time.Millisecond))

	r.remove("hello.dstack.yml")
	r.remove("fleet.dstack.yml")
	e.removeCommit("remove the fleet")
	e.waitNothingLeft()
	if got := e.vm(vm.ID); got.State != sim.StateTerminated {
		t.Fatalf("VM %s is %s after the fleet was removed", vm.ID, got.State)
	}
	if keys := e.liveKeys(); len(keys) != 0 {
		t.Fatalf("SSH keys left after the fleet was removed: %+v", keys)
	}
}

// liveKeys returns the installation's SSH keys the simulated Lambda holds.
func (e *cloudEnv) liveKeys() []sim.Resource {
	var out []sim.Resource
	for _, r := range e.sim.Instances() {
		if r.Kind == lambdasim.KindSSHKey && e.ours(r) && !gone(r) {
			out = append(out, r)
		}
	}
	return out
}
