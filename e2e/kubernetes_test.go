package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"hoist/e2e/testenv"
)

// Tests of the kubernetes backend through Git against the real single-node
// cluster of e2e/testenv/kubernetes.sh: `hoist serve` with one `kubernetes`
// backend entry in a namespace of the test's own; every job runs as a pod.

// kubeUnschedulable is the server's unschedulable_timeout: half dstack's
// 10 s, to show the setting is honoured (and to save time).
const kubeUnschedulable = "5s"

// kubeWithin bounds each wait for a run (a pod starts in about a second
// once its image is on the node).
const kubeWithin = 3 * time.Minute

// managedBy selects every object hoist creates in the cluster.
const managedBy = "app.kubernetes.io/managed-by=hoist"

// kubeEnv is a cluster, a namespace of the test's own, and `hoist serve`
// whose only backend is that namespace.
type kubeEnv struct {
	t *testing.T
	// top is the test that made the env: what outlives a step is
	// cleaned up with it.
	top *testing.T
	kc  *testenv.KubeCluster
	ns  string
	s   *server
	r   *repo
}

func newKubeEnv(t *testing.T) *kubeEnv {
	t.Helper()
	kc := testenv.Kubernetes(t)
	testenv.Docker(t)
	kc.ImportImage(t, testenv.BusyboxImage)
	ns := kc.Namespace(t, "hoist-e2e")
	cfg := filepath.Join(t.TempDir(), "hoist.yaml")
	writeTestFile(t, cfg, fmt.Sprintf("backends:\n  - type: kubernetes\n    kubeconfig:\n      filename: %s\n    namespace: %s\n    unschedulable_timeout: %s\n",
		kc.Kubeconfig, ns, kubeUnschedulable))
	r := newRepo(t)
	r.write("README.md", "specs\n")
	r.commit("empty")
	s := startServer(t, r.dir, "--config", cfg, "--resync-interval", "2s")
	return &kubeEnv{t: t, top: t, kc: kc, ns: ns, s: s, r: r}
}

// use points the env's helpers at subtest t.
func (e *kubeEnv) use(t *testing.T) { e.t, e.s.t, e.r.t = t, t, t }

// kubeFleet is an elastic fleet on the cluster: instances (slices of the
// node) are reserved for jobs and kept an hour idle.
const kubeFleet = "type: fleet\nname: k8s\nnodes: 0..4\nbackends: [kubernetes]\nidle_duration: 1h\n" + kubeResources + kubeDisk

// kubeResources keeps slices small: the node has two CPUs, shared with
// the other tests.
const kubeResources = "resources:\n  cpu: 1..\n  memory: 256MB..\n"

// kubeDisk is a fleet's: the node's ephemeral storage may be less than the
// default 100GB.. (runs are not matched by disk).
const kubeDisk = "  disk: 1GB..\n"

// kubeGPUFleet is a fleet of its own for GPU tasks, so that no CPU task
// lands on a slice with a GPU (once the fake GPU is gone, its pod would not
// fit the node).
const kubeGPUFleet = "type: fleet\nname: k8sgpu\nnodes: 0..2\nbackends: [kubernetes]\nidle_duration: 1h\n" + kubeResources + kubeDisk + "  gpu: 1..\n"

// kubeTask is a task of commands (one YAML list item per line) on the
// cluster's CPU fleet. The node's two CPUs are shared with the other tests
// on the machine, so a slice of it may not be free at once: the task
// retries on no capacity, as a user of a busy cluster would have it.
func kubeTask(name, cmds string) string {
	return kubeTaskOnce(name, cmds) + kubeRetry
}

// kubeRetry is kubeTask's retry policy.
const kubeRetry = "retry:\n  on_events: [no-capacity]\n  duration: 5m\n"

// kubeTaskOnce is kubeTask without retry.
func kubeTaskOnce(name, cmds string) string {
	return task(name, cmds) + "fleets: [k8s]\n" + kubeResources
}

// kubeRun is a run as GET /api/v1/runs/<name> returns it.
type kubeRun struct {
	Status string    `json:"status"`
	Jobs   []kubeJob `json:"jobs"`
}

type kubeJob struct {
	SubmissionNum      int    `json:"submission_num"`
	Status             string `json:"status"`
	ExitCode           *int   `json:"exit_code"`
	TerminationReason  string `json:"termination_reason"`
	TerminationMessage string `json:"termination_message"`
	Instance           string `json:"instance"`
}

// waitKubeRun waits until run name satisfies cond.
func (e *kubeEnv) waitKubeRun(name string, within time.Duration, what string, cond func(kubeRun) bool) kubeRun {
	e.t.Helper()
	var r kubeRun
	waitFor(e.t, within, func() string { return fmt.Sprintf("run %s %s (last: %+v)", name, what, r) }, func() bool {
		r = kubeRun{}
		return e.s.getJSON("/api/v1/runs/"+name, &r) == 200 && cond(r)
	})
	return r
}

// finished waits until run name has ended with status.
func (e *kubeEnv) finished(name, status string) kubeRun {
	e.t.Helper()
	return e.waitKubeRun(name, kubeWithin, "to be "+status, func(r kubeRun) bool { return r.Status == status && len(r.Jobs) > 0 })
}

// pods returns hoist's pods in the env's namespace.
func (e *kubeEnv) pods() []corev1.Pod {
	e.t.Helper()
	l, err := e.kc.Client.CoreV1().Pods(e.ns).List(e.t.Context(), metav1.ListOptions{LabelSelector: managedBy})
	if err != nil {
		e.t.Fatal(err)
	}
	return l.Items
}

// runningPod waits for a running pod of run name's in the namespace.
func (e *kubeEnv) runningPod(name string) corev1.Pod {
	e.t.Helper()
	var p corev1.Pod
	waitFor(e.t, kubeWithin, func() string { return "a running pod of run " + name + " in " + e.ns }, func() bool {
		for _, q := range e.pods() {
			if strings.HasPrefix(q.Name, "hoist-"+name+"-") && q.Status.Phase == corev1.PodRunning && q.DeletionTimestamp == nil {
				p = q
				return true
			}
		}
		return false
	})
	return p
}

// ours lists what hoist left in the namespace: pods, secrets and claims
// with its label.
func (e *kubeEnv) ours() []string {
	e.t.Helper()
	ctx, core := e.t.Context(), e.kc.Client.CoreV1()
	opts := metav1.ListOptions{LabelSelector: managedBy}
	var out []string
	if l, err := core.Pods(e.ns).List(ctx, opts); err == nil {
		for _, o := range l.Items {
			out = append(out, "pod/"+o.Name)
		}
	}
	if l, err := core.Secrets(e.ns).List(ctx, opts); err == nil {
		for _, o := range l.Items {
			out = append(out, "secret/"+o.Name)
		}
	}
	if l, err := core.PersistentVolumeClaims(e.ns).List(ctx, opts); err == nil {
		for _, o := range l.Items {
			out = append(out, "pvc/"+o.Name)
		}
	}
	return out
}

// TestKubernetes runs the cases in order on one server and one
// namespace: a task to done with its output, a failing command, a missing
// image, no capacity (no node big enough; a pod left unschedulable past the
// limit, retried on no-capacity once the node has room), a fake GPU, a
// PersistentVolumeClaim written by one task and read by another (and an
// existing claim mounted read-only), and, last, the specs removed: nothing
// with hoist's labels is left in the namespace.
func TestKubernetes(t *testing.T) {
	e := newKubeEnv(t)
	// Its pods take the node's CPUs: tests reading the node's offers wait.
	e.kc.LockNode(t)
	steps := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"a task runs to done with its output", e.taskDone},
		{"a failing command fails with its exit code", e.taskFails},
		{"an image that does not exist fails fast", e.missingImage},
		{"a task bigger than the node has no capacity", e.biggerThanTheNode},
		{"a fake GPU is requested as a limit; three do not fit", e.fakeGPU},
		{"a PVC volume is written by one task and read by the next", e.pvcVolume},
		{"removing the specs deletes every object with our labels", e.removeAll},
	}
	for _, st := range steps {
		if !t.Run(st.name, func(t *testing.T) { e.use(t); st.run(t) }) {
			return // the next steps build on this one
		}
	}
}

func (e *kubeEnv) taskDone(t *testing.T) {
	e.r.write("k8s.dstack.yml", kubeFleet)
	e.r.write("hello.dstack.yml", kubeTask("hello", "  - echo hello from $HOIST_RUN_NAME\n  - uname -m\n"))
	e.r.commit("a fleet on the cluster and a task")
	if st := e.s.sync(); len(st.Errors) > 0 {
		t.Fatalf("revision rejected: %v", st.Errors)
	}
	r := e.finished("hello", "done")
	if j := r.Jobs[0]; j.ExitCode == nil || *j.ExitCode != 0 || j.TerminationReason != "done_by_runner" {
		t.Errorf("job = %+v, want done_by_runner with exit 0", j)
	}
	if got := e.s.logs("hello"); !strings.HasPrefix(got, "hello from hello\n") {
		t.Errorf("logs %q, want the task's output", got)
	}
}

func (e *kubeEnv) taskFails(t *testing.T) {
	e.r.write("fail.dstack.yml", kubeTask("fail", "  - echo about to fail\n  - exit 3\n"))
	e.r.commit("a failing task")
	r := e.finished("fail", "failed")
	if j := r.Jobs[0]; j.ExitCode == nil || *j.ExitCode != 3 || j.TerminationReason != "container_exited_with_error" {
		t.Errorf("job = %+v, want container_exited_with_error with exit 3", j)
	}
	if got := e.s.logs("fail"); got != "about to fail\n" {
		t.Errorf("logs %q", got)
	}
}

func (e *kubeEnv) missingImage(t *testing.T) {
	e.r.write("noimage.dstack.yml", strings.Replace(kubeTask("noimage", "  - echo never\n"),
		testenv.BusyboxImage, "hoist-e2e/no-such-image:latest", 1))
	start := time.Now()
	e.r.commit("a task whose image does not exist")
	r := e.finished("noimage", "failed")
	if j := r.Jobs[0]; j.TerminationReason != "image_pull_error" || j.TerminationMessage == "" {
		t.Errorf("job = %+v, want image_pull_error with the kubelet's message", j)
	}
	t.Logf("missing image → failed in %s", time.Since(start).Round(time.Millisecond))
}

func (e *kubeEnv) biggerThanTheNode(t *testing.T) {
	e.r.write("huge.dstack.yml", strings.Replace(kubeTaskOnce("huge", "  - echo never\n"), "cpu: 1..", "cpu: 64..", 1))
	e.r.commit("a task asking for more CPUs than the node has")
	r := e.finished("huge", "failed")
	if j := r.Jobs[0]; j.TerminationReason != "failed_to_start_due_to_no_capacity" {
		t.Errorf("job = %+v, want failed_to_start_due_to_no_capacity", j)
	}
}

// fakeGPU: with the node advertising two GPUs, a `gpu: 1` task's pod gets
// the nvidia.com/gpu limit and runs; a `gpu: 3` task has no capacity. Then,
// with both GPUs taken by a pod outside hoist, a `gpu: 1` task placed on the
// idle one-GPU slice stays unschedulable: past the limit it fails as no
// capacity, and its `retry: on_events: [no-capacity]` runs it again once
// the GPUs are free.
func (e *kubeEnv) fakeGPU(t *testing.T) {
	e.kc.FakeGPU(t, 2, "NVIDIA-A100-SXM4-40GB")
	gpuTask := func(name string, n int, cmds string) string {
		return strings.Replace(kubeTaskOnce(name, cmds), "fleets: [k8s]", "fleets: [k8sgpu]", 1) + fmt.Sprintf("  gpu: %d\n", n)
	}
	e.r.write("k8sgpu.dstack.yml", kubeGPUFleet)
	e.r.write("gpu1.dstack.yml", gpuTask("gpu1", 1, "  - sleep 2\n  - echo one gpu\n")+kubeRetry)
	e.r.write("gpu3.dstack.yml", gpuTask("gpu3", 3, "  - echo never\n"))
	e.r.commit("tasks asking for one and three GPUs")
	p := e.runningPod("gpu1")
	if lim := p.Spec.Containers[0].Resources.Limits[testenv.GPUResource]; lim.Value() != 1 {
		t.Errorf("pod %s: nvidia.com/gpu limit %s, want 1 (limits %v)", p.Name, lim.String(), p.Spec.Containers[0].Resources.Limits)
	}
	e.finished("gpu1", "done")
	if r := e.finished("gpu3", "failed"); r.Jobs[0].TerminationReason != "failed_to_start_due_to_no_capacity" {
		t.Errorf("gpu3 job = %+v, want failed_to_start_due_to_no_capacity", r.Jobs[0])
	}

	blocker := e.gpuBlocker(t, 2)
	e.r.write("gpuretry.dstack.yml", gpuTask("gpuretry", 1, "  - echo got a gpu\n")+kubeRetry)
	start := time.Now()
	e.r.commit("a GPU task while the GPUs are taken, retried on no capacity")
	// Its pod on the idle one-GPU slice is unschedulable (a submission
	// may also find no slice free at all, when other tests hold the CPUs).
	unschedulable := func(j kubeJob) bool {
		return j.TerminationReason == "failed_to_start_due_to_no_capacity" && j.Instance != "" && strings.Contains(j.TerminationMessage, "unschedulable")
	}
	r := e.waitKubeRun("gpuretry", kubeWithin, "to fail for no capacity with its pod unschedulable", func(r kubeRun) bool {
		return slices.ContainsFunc(r.Jobs, unschedulable)
	})
	j := r.Jobs[slices.IndexFunc(r.Jobs, unschedulable)]
	t.Logf("unschedulable pod → no capacity in %s: %q", time.Since(start).Round(time.Millisecond), j.TerminationMessage)
	if !strings.Contains(j.TerminationMessage, "for "+kubeUnschedulable) {
		t.Errorf("message %q, want the configured unschedulable_timeout %s", j.TerminationMessage, kubeUnschedulable)
	}
	blocker()
	r = e.finished("gpuretry", "done")
	if last := r.Jobs[0]; last.SubmissionNum == 0 {
		t.Errorf("jobs %+v, want a later submission done", r.Jobs)
	}
	if got := e.s.logs("gpuretry"); got != "got a gpu\n" {
		t.Errorf("logs %q", got)
	}
	for _, f := range []string{"gpu1", "gpu3", "gpuretry", "k8sgpu"} {
		e.r.remove(f + ".dstack.yml")
	}
	e.r.commit("remove the GPU tasks and their fleet")
}

// gpuBlocker starts a pod outside hoist that takes n GPUs and returns a
// func deleting it.
func (e *kubeEnv) gpuBlocker(t *testing.T, n int) func() {
	t.Helper()
	pods := e.kc.Client.CoreV1().Pods(e.ns)
	gpus := *resource.NewQuantity(int64(n), resource.DecimalSI)
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu-blocker", Labels: map[string]string{testenv.TestLabel: "gpu-blocker"}},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name: "sleep", Image: testenv.BusyboxImage, ImagePullPolicy: corev1.PullIfNotPresent,
				Command: []string{"sleep", "3600"},
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), testenv.GPUResource: gpus},
					Limits:   corev1.ResourceList{testenv.GPUResource: gpus},
				},
			}},
			TerminationGracePeriodSeconds: new(int64),
		},
	}
	if _, err := pods.Create(t.Context(), p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	del := func() {
		if err := pods.Delete(context.Background(), p.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete %s: %v", p.Name, err)
		}
	}
	t.Cleanup(del)
	waitFor(t, kubeWithin, func() string { return "the GPU blocker pod to be scheduled" }, func() bool {
		got, err := pods.Get(t.Context(), p.Name, metav1.GetOptions{})
		return err == nil && got.Spec.NodeName != ""
	})
	return del
}

// pvcVolume: a volume hoist creates as a claim of a storage class (bound to
// a hostPath PersistentVolume the test made) is written by one task and
// read by the next; a claim made outside hoist, registered by claim_name
// with read_only, is mounted read-only.
func (e *kubeEnv) pvcVolume(t *testing.T) {
	// The volumes outlive the step: the last one checks what removing the
	// specs deletes.
	class := e.kc.HostPathVolumes(e.top, 2, "2Gi")
	ext := e.userClaim(t, class)
	e.r.write("data.dstack.yml", fmt.Sprintf("type: volume\nname: data\nbackend: kubernetes\nsize: 1GB\nstorage_class_name: %s\n"+
		"access_modes: [ReadWriteOnce]\nhoist: {prune: true}\n", class))
	e.r.write("shared.dstack.yml", fmt.Sprintf("type: volume\nname: shared\nbackend: kubernetes\nclaim_name: %s\nread_only: true\n", ext))
	e.r.write("write.dstack.yml", kubeTask("write", "  - echo written by the first task > /data/note\n  - echo wrote\n")+"volumes: [data:/data]\n")
	e.r.commit("a PVC volume and a task writing to it")
	e.finished("write", "done")
	e.r.write("read.dstack.yml", kubeTask("read", "  - cat /data/note\n  - if touch /shared/x 2>/dev/null; then echo shared writable; else echo shared read-only; fi\n")+
		"volumes: [data:/data, shared:/shared]\n")
	e.r.commit("a task reading the volume")
	e.finished("read", "done")
	if got := e.s.logs("read"); got != "written by the first task\nshared read-only\n" {
		t.Errorf("read logs %q, want the first task's note and the registered claim read-only", got)
	}
}

// userClaim makes a claim of class outside hoist (as a user would) and
// returns its name.
func (e *kubeEnv) userClaim(t *testing.T, class string) string {
	t.Helper()
	c := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "team-data"},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: &class,
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	if _, err := e.kc.Client.CoreV1().PersistentVolumeClaims(e.ns).Create(t.Context(), c, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return c.Name
}

func (e *kubeEnv) removeAll(t *testing.T) {
	if before := e.ours(); !slices.ContainsFunc(before, func(o string) bool { return strings.HasPrefix(o, "pvc/") }) {
		t.Fatalf("hoist's objects before the removal: %v; want at least the volume's claim", before)
	}
	entries, err := os.ReadDir(e.r.dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range entries {
		if strings.HasSuffix(f.Name(), ".dstack.yml") {
			e.r.remove(f.Name())
		}
	}
	// Removing every live resource is held by the prune guard until
	// confirmed.
	sha := e.r.commit("remove every spec")
	var st apiSync
	waitFor(t, kubeWithin, func() string { return fmt.Sprintf("revision %.8s applied or held (last: %+v)", sha, st) }, func() bool {
		st = e.s.sync()
		return st.Revision == sha || st.LatestRevision == sha && st.Held
	})
	if st.Revision != sha {
		if code, body := e.s.do("POST", "/api/v1/sync/confirm", strings.NewReader(`{"revision":"`+sha+`"}`)); code != 200 {
			t.Fatalf("POST /api/v1/sync/confirm = %d %s", code, body)
		}
	}
	var left []string
	waitFor(t, kubeWithin, func() string { return fmt.Sprintf("nothing of hoist's in %s (left: %v)", e.ns, left) }, func() bool {
		left = e.ours()
		var is []cloudInstance
		e.s.getJSON("/api/v1/instances", &is)
		for _, i := range is {
			if i.Status != "terminated" {
				left = append(left, "hoist instance "+i.Name+" "+i.Status)
			}
		}
		return len(left) == 0
	})
	// The registered claim stays the user's.
	if _, err := e.kc.Client.CoreV1().PersistentVolumeClaims(e.ns).Get(t.Context(), "team-data", metav1.GetOptions{}); err != nil {
		t.Errorf("the registered claim: %v; want it kept", err)
	}
}

// TestMeasure_kubernetes measures, on the real cluster, a one-line task's
// commit → its pod created → running → the run done, five times, next to `kubectl
// run --rm` of the same image on the same cluster. It runs only with
// HOIST_MEASURE=1 (task measure:kubernetes).
func TestMeasure_kubernetes(t *testing.T) {
	if os.Getenv("HOIST_MEASURE") == "" {
		t.Skip("set HOIST_MEASURE=1 to measure")
	}
	e := newKubeEnv(t)
	e.use(t)
	e.r.write("k8s.dstack.yml", kubeFleet)
	var created, running, done []time.Duration
	for i := range 5 {
		name := fmt.Sprintf("meas%d", i)
		e.r.write(name+".dstack.yml", kubeTask(name, "  - echo hi\n"))
		start := time.Now()
		e.r.commit(name)
		var made, seen time.Duration
		e.waitKubeRun(name, kubeWithin, "to be done", func(r kubeRun) bool {
			for _, p := range e.pods() {
				if !strings.HasPrefix(p.Name, "hoist-"+name+"-") {
					continue
				}
				if made == 0 {
					made = time.Since(start)
				}
				if seen == 0 && p.Status.Phase == corev1.PodRunning {
					seen = time.Since(start)
				}
			}
			return r.Status == "done"
		})
		created, running, done = append(created, made), append(running, seen), append(done, time.Since(start))
	}
	// The cluster's own kubectl, next to its kubeconfig (the one on PATH
	// may be of another version).
	kubectl := "kubectl"
	if real, err := filepath.EvalSymlinks(e.kc.Kubeconfig); err == nil {
		if p := filepath.Join(filepath.Dir(real), "bin", "kubectl"); fileExists(p) {
			kubectl = p
		}
	}
	var plain []time.Duration
	for i := range 5 {
		start := time.Now()
		out, err := exec.Command(kubectl, "--kubeconfig", e.kc.Kubeconfig, "-n", e.ns, "run", fmt.Sprintf("plain%d", i), "--rm", "-i",
			"--restart=Never", "--image="+testenv.BusyboxImage, "--image-pull-policy=IfNotPresent", "--", "echo", "hi").CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl run: %v: %s", err, out)
		}
		plain = append(plain, time.Since(start))
	}
	t.Logf("MEASURE kubernetes task commit → pod created: %v (median %s)", rounded(created), median(created).Round(time.Millisecond))
	t.Logf("MEASURE kubernetes task commit → pod running (runner copied in, job started): %v (median %s)", rounded(running), median(running).Round(time.Millisecond))
	t.Logf("MEASURE kubernetes task commit → run done: %v (median %s)", rounded(done), median(done).Round(time.Millisecond))
	t.Logf("MEASURE kubernetes kubectl run --rm of the same image: %v (median %s)", rounded(plain), median(plain).Round(time.Millisecond))
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
