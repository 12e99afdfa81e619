package reconciler

import (
	"slices"
	"strings"
	"testing"
	"time"

	"hoist/backends/fake"
	"hoist/store"
)

// Gang placement of multi-node runs against backends/fake: the jobs of a
// run with nodes above 1 are placed together or not at all, on one fleet
// with `placement: cluster`.

// gangTask is a task of n nodes on fleet cluster.
func gangTask(n string) string {
	return "type: task\nname: train\nimage: busybox\ncommands: [sleep 1h]\nfleets: [cluster]\nnodes: " + n + "\n"
}

// gangJobs returns the latest submission of each job of run name, in
// job order.
func (f *fixture) gangJobs(name string) []store.Job {
	f.t.Helper()
	js := latestSubmissions(f.jobs(f.run(name).ID))
	slices.SortFunc(js, func(a, b store.Job) int { return a.JobNum - b.JobNum })
	return js
}

// reconcileMaster runs the job worker once on job 0 of run name.
func (f *fixture) reconcileMaster(name string) {
	f.t.Helper()
	js := f.gangJobs(name)
	if _, err := f.c.reconcileJob(f.ctx, js[0].ID); err != nil {
		f.t.Fatalf("reconcile master: %v", err)
	}
}

// provisionGang drives the gang of run name, on a backend fleet, to
// provisioning: its master grows the fleet by the instances the gang
// lacks (or takes free ones), the instance worker creates them, and the
// master assigns every job; it returns the jobs' instances in job order.
func (f *fixture) provisionGang(name string) []store.Instance {
	f.t.Helper()
	for range 10 {
		f.reconcileMaster(name)
		js := f.gangJobs(name)
		if !slices.ContainsFunc(js, func(j store.Job) bool { return j.Status != store.JobProvisioning }) {
			out := make([]store.Instance, len(js))
			for k, j := range js {
				out[k] = f.instance(j.InstanceID)
			}
			return out
		}
		for _, j := range js {
			if j.InstanceID != "" {
				if i := f.instance(j.InstanceID); i.Status != store.InstanceIdle && i.Status != store.InstanceBusy {
					f.reconcileInstance(j.InstanceID)
				}
			}
		}
	}
	m := f.gangJobs(name)[0]
	f.t.Fatalf("gang of %s not provisioning: master %s (%q %s %q)", name, m.Status, m.StatusMessage, m.TerminationReason, m.TerminationMessage)
	return nil
}

// runGang runs the job worker on every job of run name's gang until each
// runs, and fails the test for one that does not.
func (f *fixture) runGang(name string) {
	f.t.Helper()
	for _, j := range f.gangJobs(name) {
		for range 200 {
			before, _ := f.st.GetJob(f.ctx, j.ID)
			if before.Status == store.JobRunning {
				break
			}
			if _, err := f.c.reconcileJob(f.ctx, j.ID); err != nil {
				f.t.Fatal(err)
			}
			if after, _ := f.st.GetJob(f.ctx, j.ID); after.Status == before.Status {
				time.Sleep(10 * time.Millisecond) // e.g. a runner not yet answering
			}
		}
		if cur, _ := f.st.GetJob(f.ctx, j.ID); cur.Status != store.JobRunning {
			f.t.Errorf("job %s = %s (%s %q), want running", cur.JobName, cur.Status, cur.TerminationReason, cur.TerminationMessage)
		}
	}
}

// noneStarted fails the test when a job of run name is placed on an
// instance past submitted.
func noneStarted(t *testing.T, js []store.Job) {
	t.Helper()
	for _, j := range js {
		if j.Status != store.JobSubmitted {
			t.Errorf("job %s = %s on %q (%s %q), want submitted: no partial cluster", j.JobName, j.Status, j.InstanceID, j.TerminationReason, j.TerminationMessage)
		}
	}
}

// TestWorkers_gangPlacesEveryNodeInOnePass: a two-node task on a
// two-instance cluster fleet has both jobs assigned, to distinct
// instances, by one pass of its master's worker; both then run.
func TestWorkers_gangPlacesEveryNodeInOnePass(t *testing.T) {
	f := newFixture(t, map[string]string{
		"fleet.dstack.yml": "type: fleet\nname: cluster\nnodes: 2\nplacement: cluster\n",
	})
	f.withFakeBackend(fake.Config{})
	f.sync()
	if up := ready(f.settle("cluster")); len(up) != 2 {
		t.Fatalf("%d idle instances, want 2", len(up))
	}
	f.write("task.dstack.yml", gangTask("2"))
	f.sync()
	js := f.gangJobs("train")
	if len(js) != 2 {
		t.Fatalf("%d jobs, want 2", len(js))
	}
	// The worker's job is not placed on its own.
	if _, err := f.c.reconcileJob(f.ctx, js[1].ID); err != nil {
		t.Fatal(err)
	}
	noneStarted(t, f.gangJobs("train"))
	f.reconcileMaster("train")
	js = f.gangJobs("train")
	seen := map[string]bool{}
	for _, j := range js {
		if j.Status != store.JobProvisioning || j.InstanceID == "" || seen[j.InstanceID] {
			t.Fatalf("job %s = %s on %q, want provisioning on an instance of its own", j.JobName, j.Status, j.InstanceID)
		}
		seen[j.InstanceID] = true
		if i := f.instance(j.InstanceID); i.Status != store.InstanceBusy {
			t.Errorf("instance %s = %s, want busy", i.Name, i.Status)
		}
	}
	f.runGang("train")
}

// TestWorkers_gangWaitsAndNeverStartsAPartialCluster: a gang whose fleet
// lacks free instances now — one is held by another run, or still
// provisioning — waits, the run saying why, with none of its jobs placed;
// it is placed whole once the instances are free.
func TestWorkers_gangWaitsAndNeverStartsAPartialCluster(t *testing.T) {
	t.Run("instance busy", func(t *testing.T) {
		f := newFixture(t, map[string]string{
			"fleet.dstack.yml": "type: fleet\nname: cluster\nnodes: 2\nplacement: cluster\n",
			"other.dstack.yml": "type: task\nname: other\nimage: busybox\ncommands: [sleep 1h]\nfleets: [cluster]\n",
		})
		f.withFakeBackend(fake.Config{})
		f.sync()
		f.settle("cluster")
		f.stepJob("other", store.JobProvisioning)
		f.write("task.dstack.yml", gangTask("2"))
		f.sync()
		for range 3 {
			f.reconcileJobs("train")
		}
		js := f.gangJobs("train")
		noneStarted(t, js)
		if !strings.Contains(js[0].StatusMessage, "waiting for 2 free instances of fleet cluster (1 free, 0 provisioning, 1 in use)") {
			t.Errorf("master says %q, want it waiting for free instances", js[0].StatusMessage)
		}
		f.reconcileRun("train")
		if r := f.run("train"); r.Status != store.RunSubmitted || r.StatusMessage != js[0].StatusMessage {
			t.Errorf("run = %s %q, want submitted saying what it waits for", r.Status, r.StatusMessage)
		}
		// The other run ends: its instance is free and the gang is placed.
		f.runnerReports("other", "done", 0)
		f.stepJob("other", store.JobDone)
		f.reconcileMaster("train")
		for _, j := range f.gangJobs("train") {
			if j.Status != store.JobProvisioning {
				t.Errorf("job %s = %s (%q), want provisioning once both instances are free", j.JobName, j.Status, j.StatusMessage)
			}
		}
	})
	t.Run("instance still provisioning", func(t *testing.T) {
		f := newFixture(t, map[string]string{
			"fleet.dstack.yml": "type: fleet\nname: cluster\nnodes: 3\nplacement: cluster\n",
			"task.dstack.yml":  gangTask("3"),
		})
		f.withFakeBackend(fake.Config{})
		f.sync()
		insts := f.fleetInstances("cluster")
		f.reconcileInstance(insts[0].ID)
		f.reconcileInstance(insts[1].ID) // two of three are up
		for range 3 {
			f.reconcileJobs("train")
		}
		js := f.gangJobs("train")
		noneStarted(t, js)
		if !strings.Contains(js[0].StatusMessage, "waiting for the cluster's instances: fleet cluster: 2 of 3 ready") {
			t.Errorf("master says %q, want it waiting for the third instance", js[0].StatusMessage)
		}
		// The gang holds the three: another job takes none of them.
		for _, j := range js {
			if j.InstanceID == "" {
				t.Errorf("job %s reserves no instance", j.JobName)
			}
		}
		// Another pass while nothing changed writes nothing.
		f.reconcileMaster("train")
		if m := f.gangJobs("train")[0]; m.Version != js[0].Version {
			t.Errorf("master rewritten (version %d → %d) while the gang only waits", js[0].Version, m.Version)
		}
		f.settle("cluster")
		f.reconcileMaster("train")
		for _, j := range f.gangJobs("train") {
			if j.Status != store.JobProvisioning {
				t.Errorf("job %s = %s (%q), want provisioning once all three are up", j.JobName, j.Status, j.StatusMessage)
			}
		}
	})
}

// TestWorkers_stoppedGangReleasesItsReservedInstances: a gang stopped
// while it holds instances that are still provisioning ends without a
// container, and another run then gets one of those instances.
func TestWorkers_stoppedGangReleasesItsReservedInstances(t *testing.T) {
	f := newFixture(t, map[string]string{
		"fleet.dstack.yml": "type: fleet\nname: cluster\nnodes: 0..2\nplacement: cluster\n",
		"task.dstack.yml":  gangTask("2"),
	})
	be := f.withFakeBackend(fake.Config{})
	f.sync()
	f.reconcileMaster("train")
	if n := len(f.fleetInstances("cluster")); n != 2 {
		t.Fatalf("fleet has %d instances, want the gang's 2", n)
	}
	if err := f.c.StopRun(f.ctx, "train", false); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		f.reconcileRun("train")
		f.reconcileJobs("train")
	}
	for _, j := range f.gangJobs("train") {
		if !store.IsJobFinished(j.Status) {
			t.Errorf("job %s = %s, want finished", j.JobName, j.Status)
		}
	}
	if r := f.run("train"); !store.IsRunFinished(r.Status) {
		t.Errorf("run = %s, want finished", r.Status)
	}
	for _, i := range f.settle("cluster") {
		if len(be.Tasks(i.ID)) != 0 {
			t.Errorf("instance %s has tasks %v", i.Name, be.Tasks(i.ID))
		}
	}
	f.write("other.dstack.yml", "type: task\nname: other\nimage: busybox\ncommands: [sleep 1h]\nfleets: [cluster]\n")
	f.sync()
	if j := f.stepJob("other", store.JobProvisioning); j.InstanceID == "" {
		t.Errorf("other run not placed")
	}
	if n := len(f.fleetInstances("cluster")); n != 2 {
		t.Errorf("fleet has %d instances, want the 2 reused", n)
	}
}

// TestWorkers_gangThatCanNeverFitFails: a gang no cluster fleet can ever
// hold — more nodes than a fixed fleet has, or only fleets without
// `placement: cluster` — fails for want of capacity with the reason, and
// no job is started nor instance added.
func TestWorkers_gangThatCanNeverFitFails(t *testing.T) {
	for _, tc := range []struct {
		name, fleet, want string
	}{
		{"more nodes than the fleet has", "type: fleet\nname: cluster\nnodes: 2\nplacement: cluster\n",
			"no fleet with `placement: cluster` can hold 3 nodes (cluster holds at most 2)"},
		{"fleet at nodes.max", "type: fleet\nname: cluster\nnodes: 1..2\nplacement: cluster\n",
			"no fleet with `placement: cluster` can hold 3 nodes (cluster holds at most 2)"},
		{"not a cluster fleet", "type: fleet\nname: cluster\nnodes: 0..5\n",
			"multi-node runs use only fleets with `placement: cluster` (as dstack does); fleet cluster is not"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, map[string]string{"fleet.dstack.yml": tc.fleet})
			be := f.withFakeBackend(fake.Config{})
			f.sync()
			f.settle("cluster")
			before := len(be.Instances())
			f.write("task.dstack.yml", gangTask("3"))
			f.sync()
			f.reconcileMaster("train")
			js := f.gangJobs("train")
			if m := js[0]; m.Status != store.JobTerminating || m.TerminationReason != reasonNoCapacity || !strings.Contains(m.TerminationMessage, tc.want) {
				t.Fatalf("master = %s %s %q, want terminating for %s: %q", m.Status, m.TerminationReason, m.TerminationMessage, reasonNoCapacity, tc.want)
			}
			for _, j := range js {
				if j.InstanceID != "" {
					t.Errorf("job %s was placed on %s", j.JobName, j.InstanceID)
				}
			}
			for range 4 {
				f.reconcileJobs("train")
				f.reconcileRun("train")
			}
			if r := f.run("train"); r.Status != store.RunFailed {
				t.Errorf("run = %s (%s), want failed", r.Status, r.TerminationReason)
			}
			for _, j := range f.gangJobs("train") {
				if !store.IsJobFinished(j.Status) || j.InstanceID != "" {
					t.Errorf("job %s = %s on %q, want finished unplaced", j.JobName, j.Status, j.InstanceID)
				}
			}
			if got := len(be.Instances()); got != before {
				t.Errorf("backend instances %d → %d, want none added", before, got)
			}
		})
	}
}

// TestWorkers_gangGrowsTheFleetByTheMissingNodesFirst: an elastic cluster
// fleet with one idle instance grows by the two a three-node gang lacks,
// all reserved for the gang (no job placed meanwhile), and the gang is
// placed once they are up; a failed grown instance is replaced from the
// next offer, still in the cluster's region.
func TestWorkers_gangGrowsTheFleetByTheMissingNodesFirst(t *testing.T) {
	f := newFixture(t, map[string]string{
		"fleet.dstack.yml": "type: fleet\nname: cluster\nnodes: 1..4\nplacement: cluster\n",
	})
	be := f.withFakeBackend(fake.Config{Offers: threeOffers})
	f.sync()
	if up := ready(f.settle("cluster")); len(up) != 1 {
		t.Fatalf("%d idle instances, want 1", len(up))
	}
	f.write("task.dstack.yml", gangTask("3"))
	f.sync()
	f.reconcileMaster("train")
	insts := f.fleetInstances("cluster")
	if len(insts) != 3 {
		t.Fatalf("fleet has %d instances, want 3 (grown by the 2 missing)", len(insts))
	}
	js := f.gangJobs("train")
	noneStarted(t, js)
	held := map[string]bool{}
	for _, j := range js {
		held[j.InstanceID] = true
	}
	for _, i := range insts {
		if !held[i.ID] {
			t.Errorf("instance %s is not reserved for the gang", i.Name)
		}
	}
	// A second pass while they provision grows nothing more.
	f.reconcileMaster("train")
	if n := len(f.fleetInstances("cluster")); n != 3 {
		t.Errorf("fleet has %d instances after a second pass, want 3", n)
	}
	// One grown instance has no capacity: the next offer replaces it.
	be.SetNoCapacity("small", true)
	f.settle("cluster")
	f.reconcileMaster("train")
	f.settle("cluster")
	f.reconcileMaster("train")
	js = f.gangJobs("train")
	for _, j := range js {
		if j.Status != store.JobProvisioning {
			t.Fatalf("job %s = %s (%q %s %q), want provisioning", j.JobName, j.Status, j.StatusMessage, j.TerminationReason, j.TerminationMessage)
		}
	}
	live := 0
	for _, i := range f.fleetInstances("cluster") {
		if i.Status != store.InstanceTerminated {
			live++
		}
	}
	if live != 3 {
		t.Errorf("%d live instances, want 3", live)
	}
	if got, want := attempted(be), []string{"small", "small", "small", "medium", "medium"}; !slices.Equal(got, want) {
		t.Errorf("creates %v, want %v: the first instance, the two grown, then their replacements from the next offer", got, want)
	}
	for _, j := range js {
		if o := offerOf(f.instance(j.InstanceID)); o.Region != "loop" {
			t.Errorf("job %s on an instance in %s, want the cluster's region", j.JobName, o.Region)
		}
	}
}

// TestWorkers_twoGangsNeverSplitAFleet: of two three-node gangs on a
// cluster fleet with room for four instances, the first grows the fleet
// by its three and the second waits holding none (never two partial
// clusters waiting on each other).
func TestWorkers_twoGangsNeverSplitAFleet(t *testing.T) {
	f := newFixture(t, map[string]string{
		"fleet.dstack.yml": "type: fleet\nname: cluster\nnodes: 0..4\nplacement: cluster\n",
		"a.dstack.yml":     strings.Replace(gangTask("3"), "name: train", "name: alpha", 1),
		"b.dstack.yml":     strings.Replace(gangTask("3"), "name: train", "name: beta", 1),
	})
	f.withFakeBackend(fake.Config{})
	f.sync()
	f.reconcileMaster("alpha")
	f.reconcileMaster("beta")
	if n := len(f.fleetInstances("cluster")); n != 3 {
		t.Fatalf("fleet has %d instances, want the first gang's 3", n)
	}
	for _, j := range f.gangJobs("beta") {
		if j.InstanceID != "" || j.Status != store.JobSubmitted {
			t.Errorf("second gang's job %s = %s on %q, want submitted holding nothing", j.JobName, j.Status, j.InstanceID)
		}
	}
	if m := f.gangJobs("beta")[0]; !strings.Contains(m.StatusMessage, "waiting for 3 free instances of fleet cluster") {
		t.Errorf("second gang says %q, want it waiting for free instances", m.StatusMessage)
	}
	f.settle("cluster")
	f.reconcileMaster("alpha")
	for _, j := range f.gangJobs("alpha") {
		if j.Status != store.JobProvisioning {
			t.Errorf("first gang's job %s = %s, want provisioning", j.JobName, j.Status)
		}
	}
}

// sshClusterFleet is an SSH fleet of two hosts with `placement: cluster`
// and a task of nodes on it, committed together.
func sshClusterFleet(placement, nodes string) map[string]string {
	return map[string]string{
		"fleet.dstack.yml": "type: fleet\nname: gpu-hosts\n" + placement + "ssh_config:\n  user: ubuntu\n  identity_file: ~/.ssh/id\n  hosts: [127.0.0.201, 127.0.0.202]\n",
		"task.dstack.yml":  "type: task\nname: train\nimage: busybox\ncommands: [x]\nfleets: [gpu-hosts]\nnodes: " + nodes + "\n",
	}
}

// TestPlaceGang_sshFleet: on an SSH fleet of two hosts with `placement:
// cluster` committed with a two-node task, the gang holds both hosts while
// they are being set up and is placed on both, in one pass, once they are
// ready; a three-node task fails with the reason, and so does a two-node
// task on the same hosts without `placement: cluster`.
func TestPlaceGang_sshFleet(t *testing.T) {
	t.Run("placed on both hosts once ready", func(t *testing.T) {
		f := newFixture(t, sshClusterFleet("placement: cluster\n", "2")).withSSHBackend()
		f.sync()
		for range 2 {
			f.reconcileJobs("train")
		}
		js := f.gangJobs("train")
		noneStarted(t, js)
		if want := "waiting for the cluster's instances: fleet gpu-hosts: 0 of 2 ready"; js[0].StatusMessage != want {
			t.Errorf("master says %q, want %q", js[0].StatusMessage, want)
		}
		insts := f.setFleetInstances("gpu-hosts", store.InstanceIdle)
		f.reconcileMaster("train")
		hosts := map[string]bool{}
		for _, j := range f.gangJobs("train") {
			if j.Status != store.JobProvisioning {
				t.Fatalf("job %s = %s (%q), want provisioning", j.JobName, j.Status, j.StatusMessage)
			}
			hosts[j.InstanceID] = true
		}
		if !hosts[insts[0].ID] || !hosts[insts[1].ID] {
			t.Errorf("jobs on %v, want one on each host", hosts)
		}
	})
	for _, tc := range []struct {
		name, placement, nodes, want string
	}{
		{"more nodes than hosts", "placement: cluster\n", "3", "no fleet with `placement: cluster` can hold 3 nodes (gpu-hosts holds at most 2)"},
		{"hosts not a cluster", "", "2", "multi-node runs use only fleets with `placement: cluster` (as dstack does); fleet gpu-hosts is not"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, sshClusterFleet(tc.placement, tc.nodes)).withSSHBackend()
			f.sync()
			f.setFleetInstances("gpu-hosts", store.InstanceIdle)
			f.reconcileMaster("train")
			m := f.gangJobs("train")[0]
			if m.Status != store.JobTerminating || m.TerminationReason != reasonNoCapacity || !strings.Contains(m.TerminationMessage, tc.want) {
				t.Fatalf("master = %s %s %q, want terminating for %s: %q", m.Status, m.TerminationReason, m.TerminationMessage, reasonNoCapacity, tc.want)
			}
			for _, j := range f.gangJobs("train") {
				if j.InstanceID != "" {
					t.Errorf("job %s placed on %s", j.JobName, j.InstanceID)
				}
			}
		})
	}
}

// TestWorkers_gangOnAnEmptyElasticFleetRunsEveryNode: a two-node task on
// a cluster fleet of no instances gets both grown, then both jobs
// assigned to them at once, and both run.
func TestWorkers_gangOnAnEmptyElasticFleetRunsEveryNode(t *testing.T) {
	f := newFixture(t, map[string]string{
		"fleet.dstack.yml": "type: fleet\nname: cluster\nnodes: 0..2\nplacement: cluster\n",
		"task.dstack.yml":  gangTask("2"),
	})
	be := f.withFakeBackend(fake.Config{})
	f.sync()
	insts := f.provisionGang("train")
	if len(insts) != 2 || insts[0].ID == insts[1].ID || len(be.Instances()) != 2 {
		t.Fatalf("gang on %v, backend instances %v; want two distinct grown instances", insts, be.Instances())
	}
	f.runGang("train")
}
