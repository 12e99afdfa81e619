package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	runpodsim "hoist/e2e/cloudsim/runpod"
	"hoist/e2e/cloudsim/sim"
	"hoist/e2e/testenv"
)

// TestClouds_runpod runs the container-cloud scenario (podCloud) on the
// simulated RunPod.
func TestClouds_runpod(t *testing.T) {
	t.Parallel() // mostly waits: runs beside the other slow tests (harness_test.go)
	newCloudEnv(t, "runpod", "2s").podCloud(t)
}

// TestClouds_vastai runs the container-cloud scenario (podCloud) on the
// simulated Vast.ai.
func TestClouds_vastai(t *testing.T) {
	t.Parallel() // mostly waits: runs beside the other slow tests (harness_test.go)
	newCloudEnv(t, "vastai", "2s").podCloud(t)
}

// podCloud is what a user of a container cloud does through Git: a task
// runs in a pod of its own image, with hoist's runner fetched from the
// server, and ends done with its output; a service in a pod answers
// through hoist's proxy (over SSH to the pod's runner); a pod of a spot
// fleet the provider reclaims ends its job as interrupted and the run is
// resubmitted on a new pod; removing the specs deletes every pod. It logs
// commit → done and commit → service answering.
func (e *cloudEnv) podCloud(t *testing.T) {
	r, s := e.r, e.s
	r.write("fleet.dstack.yml", e.podFleetSpec("pods", "on-demand"))
	r.write("hello.dstack.yml", e.taskOn("hello", "pods", "  - echo hello from "+e.provider+"\n"))
	start := time.Now()
	sha := r.commit("a task on a container cloud")
	s.waitRun("hello", sha, "done", cloudWithin)
	done := time.Since(start)
	if got := s.logs("hello"); got != "hello from "+e.provider+"\n" {
		t.Fatalf("hello logs: %q", got)
	}
	// The run is done once its job is; the job's pod goes right after.
	waitFor(t, 30*time.Second, func() string { return fmt.Sprintf("no pod left once the task is done (left: %d)", len(e.livePods())) }, func() bool {
		return len(e.livePods()) == 0
	})

	port := freePortOn(t, "127.0.0.1")
	r.write("web.dstack.yml", fmt.Sprintf("type: service\nname: web\nimage: %s\nport: %d\nfleets: [pods]\nresources:\n  cpu: 1..\ncommands:\n"+
		"  - mkdir -p /tmp/www && echo hello from a pod > /tmp/www/index.html\n  - busybox httpd -f -p %d -h /tmp/www\n",
		testenv.BusyboxImage, port, port))
	start = time.Now()
	sha = r.commit("a service on a container cloud")
	s.waitRun("web", sha, "running", cloudWithin)
	waitFor(t, cloudWithin, func() string { return "the service to answer through hoist's proxy" }, func() bool {
		code, body := s.proxyGet("/proxy/services/main/web/", s.token)
		return code == 200 && strings.Contains(body, "hello from a pod")
	})
	answering := time.Since(start)
	t.Logf("MEASURE %s task commit → done %s; service commit → answering through the proxy %s",
		e.provider, done.Round(time.Millisecond), answering.Round(time.Millisecond))

	r.write("spot.dstack.yml", e.podFleetSpec("spot", "spot"))
	r.write("long.dstack.yml", e.taskOn("long", "spot", "  - echo start\n  - sleep 600\n")+
		"retry:\n  on_events: [interruption]\n  duration: 10m\n")
	sha = r.commit("a long task on a spot fleet of the container cloud")
	s.waitRun("long", sha, "running", cloudWithin)
	first := s.sshRun("long").Jobs[0]
	pod := e.spotPod()
	e.sim.Interrupt(pod.ID)
	run := s.waitSSHRun("long", 2*cloudWithin, "resubmitted and running in a new pod", func(r sshRun) bool {
		return r.Status == "running" && slices.ContainsFunc(r.Jobs, func(j sshJob) bool {
			return j.SubmissionNum > 0 && j.Status == "running" && j.Instance != first.Instance
		})
	})
	for _, j := range run.Jobs {
		if j.SubmissionNum == 0 && (j.Status != "failed" || j.TerminationReason != "interrupted_by_no_capacity") {
			t.Errorf("first submission %+v, want failed with interrupted_by_no_capacity", j)
		}
	}

	for _, f := range []string{"hello", "web", "long", "spot", "fleet"} {
		r.remove(f + ".dstack.yml")
	}
	e.removeCommit("remove every spec")
	e.waitNothingLeft()
}

// podFleetSpec is a one-node fleet on the env's container cloud.
func (e *cloudEnv) podFleetSpec(name, spot string) string {
	return fmt.Sprintf("type: fleet\nname: %s\nnodes: 0..1\nbackends: [%s]\nspot_policy: %s\nresources:\n  cpu: 1..\n  memory: 1GB..\n",
		name, e.provider, spot)
}

// livePods returns the installation's pods the simulator runs.
func (e *cloudEnv) livePods() []sim.Resource {
	var out []sim.Resource
	for _, r := range e.sim.Instances() {
		if r.Kind == sim.KindPod && e.ours(r) && !gone(r) {
			out = append(out, r)
		}
	}
	return out
}

// spotPod returns the one live interruptible pod of the installation.
func (e *cloudEnv) spotPod() sim.Resource {
	e.t.Helper()
	var pods []sim.Resource
	waitFor(e.t, cloudWithin, func() string { return fmt.Sprintf("one live spot pod (have %+v)", e.livePods()) }, func() bool {
		pods = slices.DeleteFunc(e.livePods(), func(r sim.Resource) bool { return !r.Spot })
		return len(pods) == 1
	})
	return pods[0]
}

// TestClouds_runpodVolume is a RunPod network volume through Git: a
// `type: volume` in a secure datacenter, a task whose pod mounts it
// writing a file, a second task (a new pod) reading it back; removing the
// specs deletes the pods and the volume.
func TestClouds_runpodVolume(t *testing.T) {
	e := newCloudEnv(t, "runpod", "2s")
	const dc = "US-TX-3"
	e.r.write("data.dstack.yml", "type: volume\nname: data\nbackend: runpod\nregion: "+dc+"\nsize: 10\n")
	e.r.write("fleet.dstack.yml", strings.Replace(e.podFleetSpec("pods", "on-demand"), "backends: [runpod]\n", "backends: [runpod]\nregions: ["+dc+"]\n", 1))
	e.r.write("write.dstack.yml", e.taskOn("write", "pods", "  - echo written in the first pod > /data/note\n")+"volumes: [data:/data]\n")
	sha := e.r.commit("a runpod volume and a task writing to it")
	e.s.waitRun("write", sha, "done", 2*cloudWithin)
	vols := e.runpodVolumes()
	if len(vols) != 1 || vols[0].SizeGB != 10 || vols[0].Region != dc || !strings.HasPrefix(vols[0].Name, "hoist-data-") {
		t.Fatalf("network volumes in the simulator: %+v, want hoist-data-… of 10 GB in %s", vols, dc)
	}
	e.r.write("read.dstack.yml", e.taskOn("read", "pods", "  - cat /data/note\n")+"volumes: [data:/data]\n")
	sha = e.r.commit("a task reading the volume")
	e.s.waitRun("read", sha, "done", 2*cloudWithin)
	if got := e.s.logs("read"); got != "written in the first pod\n" {
		t.Fatalf("read logs %q, want the file the first task wrote", got)
	}
	for _, f := range []string{"write", "read", "fleet", "data"} {
		e.r.remove(f + ".dstack.yml")
	}
	e.removeCommit("remove everything")
	e.waitNothingLeft()
	waitFor(t, cloudWithin, func() string { return fmt.Sprintf("the network volume deleted (left: %+v)", e.runpodVolumes()) }, func() bool {
		return len(e.runpodVolumes()) == 0
	})
}

// runpodVolumes returns the simulated RunPod's network volumes not deleted.
func (e *cloudEnv) runpodVolumes() []sim.Resource {
	var out []sim.Resource
	for _, r := range e.sim.Instances() {
		if r.Kind == runpodsim.KindNetworkVolume && !gone(r) {
			out = append(out, r)
		}
	}
	return out
}
