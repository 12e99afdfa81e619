package kubernetes

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"hoist/agents/api"
	"hoist/backends"
	"hoist/backends/internal/agentbin"
	"hoist/backends/offers"
	"hoist/e2e/testenv"
)

// testImage is the image the cluster has imported (e2e/testenv/kubernetes.sh).
const testImage = "hoist-e2e/busybox:latest"

// testLogger logs to the test's output.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(b), "\n"))
	return len(b), nil
}

// testCluster returns a cluster of the real test cluster
// (testenv.Kubernetes) whose namespace is a fresh one of this test,
// deleted at its end.
func testCluster(t *testing.T) *cluster {
	t.Helper()
	kc := testenv.Kubernetes(t)
	return &cluster{backend: "kubernetes", namespace: kc.Namespace(t, "hoist-podshim"), client: kc.Client, rest: kc.Config,
		agents: agentbin.Agents, log: testLogger(t), now: time.Now}
}

// testInstance returns an instance record of a small slice of the node.
func testInstance(id string, o offers.Offer) instanceRecord {
	if o.CPUs == 0 {
		o.CPUs, o.MemoryGB = 1, 0.25
	}
	o.Backend = "kubernetes"
	return instanceRecord{ID: id, Offer: o, CreatedAt: time.Now(),
		Tags: map[string]string{backends.TagInstallation: "podshim-test", backends.TagResource: "fleet/test", backends.TagInstance: id}}
}

// connect returns a Conn of rec and a shim client through it.
func connect(t *testing.T, c *cluster, rec instanceRecord) (backends.Conn, *api.ShimClient) {
	t.Helper()
	cn, err := newConn(t.Context(), c, rec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cn.Close() })
	return cn, api.NewShimClient(cn.ShimURL(), cn.HTTPClient())
}

// waitFor waits until the task has reached status (or terminated).
func waitFor(t *testing.T, sc *api.ShimClient, id, status string, limit time.Duration) api.TaskInfo {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), limit)
	defer cancel()
	info, err := sc.WaitTask(ctx, id, status)
	if err != nil {
		t.Fatalf("WaitTask(%s, %s): %v (last: %+v)", id, status, err, info)
	}
	return info
}

// objectsLeft lists the pods and secrets of instance id in c's namespace.
func objectsLeft(t *testing.T, c *cluster, id string) []string {
	t.Helper()
	sel := metav1.ListOptions{LabelSelector: tasksSelector(id)}
	var out []string
	pods, err := c.client.CoreV1().Pods(c.namespace).List(t.Context(), sel)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		out = append(out, "pod/"+p.Name)
	}
	secrets, err := c.client.CoreV1().Secrets(c.namespace).List(t.Context(), sel)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range secrets.Items {
		out = append(out, "secret/"+s.Name)
	}
	return out
}

func TestPodShim_healthAndHost(t *testing.T) {
	c := testCluster(t)
	_, sc := connect(t, c, testInstance("inst-host", offers.Offer{CPUs: 2, MemoryGB: 1, CPUArch: "x86", GPUCount: 1, GPUName: "A100", GPUVendor: "nvidia"}))
	h, err := sc.Health(t.Context())
	if err != nil || h.Service != api.ShimService || h.APIVersion != api.ShimAPIVersion {
		t.Fatalf("Health = %+v, %v", h, err)
	}
	host, err := sc.HostInfo(t.Context())
	if err != nil || host.CPUs != 2 || host.MemoryBytes != 1<<30 || host.Arch != "amd64" || len(host.GPUs) != 1 || host.GPUs[0].Name != "A100" {
		t.Errorf("HostInfo = %+v, %v; want the instance's slice", host, err)
	}
	if _, err := sc.GetTask(t.Context(), "nope"); !errors.Is(err, api.ErrNotFound) {
		t.Errorf("GetTask(unknown) = %v, want not found", err)
	}
	if err := sc.RemoveTask(t.Context(), "nope"); !errors.Is(err, api.ErrNotFound) {
		t.Errorf("RemoveTask(unknown) = %v, want not found", err)
	}
}

// runJob submits commands to the runner of a running task through the
// Conn and waits for the job to finish; it returns its state and output.
func runJob(t *testing.T, cn backends.Conn, info api.TaskInfo, commands ...string) (api.JobState, string) {
	t.Helper()
	rc := api.NewRunnerClient(info.RunnerAddr, cn.HTTPClient())
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	// The runner may take a moment to listen after its container started.
	var err error
	for range 100 {
		if _, err = rc.State(ctx); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("runner at %s never answered: %v", info.RunnerAddr, err)
	}
	if err := rc.Submit(ctx, api.JobSpec{RunName: "test", JobID: info.ID, Commands: commands}); err != nil {
		t.Fatalf("Submit: %v", err)
	}
	if _, err := rc.Run(ctx); err != nil {
		t.Fatalf("Run: %v", err)
	}
	var out strings.Builder
	if err := rc.Follow(ctx, 0, func(l api.LogLine) error { out.Write(l.Data); return nil }); err != nil {
		t.Fatalf("Follow: %v", err)
	}
	st, err := rc.Wait(ctx)
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	return st, out.String()
}

func TestPodShim_runsAJobThroughTheRunner(t *testing.T) {
	c := testCluster(t)
	rec := testInstance("inst-run", offers.Offer{})
	cn, sc := connect(t, c, rec)
	start := time.Now()
	created, err := sc.CreateTask(t.Context(), api.TaskSpec{ID: "job-run", Name: "hoist-echo-0-jobrun", Image: testImage,
		Env: map[string]string{"GREETING": "hello from the secret"}, Labels: map[string]string{"hoist.run": "echo"}})
	if err != nil {
		t.Fatalf("CreateTask: %v", err)
	}
	if created.Status != api.TaskPending || created.ID != "job-run" {
		t.Errorf("CreateTask = %+v, want pending", created)
	}
	if _, err := sc.CreateTask(t.Context(), api.TaskSpec{ID: "job-run", Image: testImage}); !errors.Is(err, api.ErrConflict) {
		t.Errorf("CreateTask of an existing id = %v, want conflict", err)
	}
	info := waitFor(t, sc, "job-run", api.TaskRunning, 2*time.Minute)
	if info.Status != api.TaskRunning || info.RunnerAddr == "" || info.RunnerToken == "" {
		t.Fatalf("task %+v, want running with a runner", info)
	}
	t.Logf("create → running: %s", time.Since(start))
	logPodTimes(t, c, rec, "job-run")
	st, out := runJob(t, cn, info, `echo "$GREETING"`, "echo to stderr >&2", "exit 3")
	t.Logf("create → job done: %s", time.Since(start))
	if st.State != api.JobFailed || st.ExitCode == nil || *st.ExitCode != 3 {
		t.Errorf("job state %+v, want failed with exit code 3", st)
	}
	if !strings.Contains(out, "hello from the secret") || !strings.Contains(out, "to stderr") {
		t.Errorf("job output %q, want the env and stderr lines", out)
	}
	sec, err := c.client.CoreV1().Secrets(c.namespace).Get(t.Context(), info.ContainerName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(sec.OwnerReferences) != 1 || sec.OwnerReferences[0].Kind != "Pod" || sec.OwnerReferences[0].Name != info.ContainerName {
		t.Errorf("the task's secret is owned by %+v, want its pod", sec.OwnerReferences)
	}
	if l, err := sc.ListTasks(t.Context()); err != nil || len(l) != 1 || l[0].ID != "job-run" || l[0].RunnerToken == "" {
		t.Errorf("ListTasks = %+v, %v; want the task with its runner token", l, err)
	}
	if err := sc.RemoveTask(t.Context(), "job-run"); !errors.Is(err, api.ErrConflict) {
		t.Errorf("RemoveTask of a running task = %v, want conflict", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	term, err := sc.TerminateTask(ctx, "job-run", api.ReasonContainerExitedWithError, "exit status 3", 0)
	if err != nil || !term.Terminated() {
		t.Fatalf("TerminateTask = %+v, %v; want terminated", term, err)
	}
	if term.ExitCode == nil || term.Job == nil || term.Job.State != api.JobFailed || term.TerminationReason != api.ReasonContainerExitedWithError {
		t.Errorf("terminated task %+v (job %+v), want the runner's exit and job state", term, term.Job)
	}
	if err := sc.RemoveTask(t.Context(), "job-run"); err != nil {
		t.Fatalf("RemoveTask: %v", err)
	}
	waitGone(t, c, rec.ID)
}

// waitGone waits until no pod or secret of instance id is left.
func waitGone(t *testing.T, c *cluster, id string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		left := objectsLeft(t, c, id)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("left after removal: %v", left)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func TestPodShim_aJobDoneEndsTheTaskWithTheRunnersState(t *testing.T) {
	c := testCluster(t)
	rec := testInstance("inst-done", offers.Offer{})
	cn, sc := connect(t, c, rec)
	if _, err := sc.CreateTask(t.Context(), api.TaskSpec{ID: "job-done", Image: testImage}); err != nil {
		t.Fatal(err)
	}
	info := waitFor(t, sc, "job-done", api.TaskRunning, 2*time.Minute)
	st, out := runJob(t, cn, info, "echo done")
	if st.State != api.JobDone || strings.TrimSpace(out) != "done" {
		t.Fatalf("job %+v output %q", st, out)
	}
	// The runner lingers after its job; stopping the pod ends it and the
	// kubelet reports its termination log.
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	term, err := sc.TerminateTask(ctx, "job-done", api.ReasonDoneByRunner, "", 0)
	if err != nil || !term.Terminated() || term.TerminationReason != api.ReasonDoneByRunner || term.Job == nil || term.Job.State != api.JobDone {
		t.Fatalf("TerminateTask = %+v, %v; want done by runner with the job state", term, err)
	}
	if err := sc.RemoveTask(t.Context(), "job-done"); err != nil {
		t.Fatal(err)
	}
	waitGone(t, c, rec.ID)
}

func TestPodShim_anImageThatDoesNotExistFailsFast(t *testing.T) {
	c := testCluster(t)
	rec := testInstance("inst-pull", offers.Offer{})
	_, sc := connect(t, c, rec)
	start := time.Now()
	if _, err := sc.CreateTask(t.Context(), api.TaskSpec{ID: "job-pull", Image: "hoist-e2e/does-not-exist:1"}); err != nil {
		t.Fatal(err)
	}
	info := waitFor(t, sc, "job-pull", api.TaskTerminated, time.Minute)
	t.Logf("create → image pull error: %s: %s", time.Since(start), info.TerminationMessage)
	if info.TerminationReason != api.ReasonImagePullError || !strings.Contains(info.TerminationMessage, "does-not-exist") {
		t.Errorf("task %+v, want an image pull error naming the image", info)
	}
	if err := sc.RemoveTask(t.Context(), "job-pull"); err != nil {
		t.Fatal(err)
	}
	waitGone(t, c, rec.ID)
}

func TestPodShim_unschedulableForLongerThanTheLimitIsNoCapacity(t *testing.T) {
	c := testCluster(t)
	rec := testInstance("inst-big", offers.Offer{CPUs: 4096, MemoryGB: 0.25})
	_, sc := connect(t, c, rec)
	start := time.Now()
	if _, err := sc.CreateTask(t.Context(), api.TaskSpec{ID: "job-big", Image: testImage}); err != nil {
		t.Fatal(err)
	}
	info := waitFor(t, sc, "job-big", api.TaskTerminated, time.Minute)
	took := time.Since(start)
	t.Logf("create → no capacity: %s: %s", took, info.TerminationMessage)
	if info.TerminationReason != api.ReasonNoCapacity || !strings.Contains(info.TerminationMessage, "Insufficient cpu") {
		t.Errorf("task %+v, want no capacity for cpu", info)
	}
	if took < DefaultUnschedulableTimeout {
		t.Errorf("no capacity after %s, before the limit of %s", took, DefaultUnschedulableTimeout)
	}
	if err := sc.RemoveTask(t.Context(), "job-big"); err != nil {
		t.Fatal(err)
	}
	waitGone(t, c, rec.ID)
}

func TestPodShim_terminateStopsARunningJob(t *testing.T) {
	c := testCluster(t)
	rec := testInstance("inst-stop", offers.Offer{})
	cn, sc := connect(t, c, rec)
	if _, err := sc.CreateTask(t.Context(), api.TaskSpec{ID: "job-stop", Image: testImage}); err != nil {
		t.Fatal(err)
	}
	info := waitFor(t, sc, "job-stop", api.TaskRunning, 2*time.Minute)
	rc := api.NewRunnerClient(info.RunnerAddr, cn.HTTPClient())
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for range 100 {
		if _, err := rc.State(ctx); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := rc.Submit(ctx, api.JobSpec{RunName: "test", JobID: "job-stop", Commands: []string{"sleep 600"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := rc.Run(ctx); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	term, err := sc.TerminateTask(ctx, "job-stop", api.ReasonTerminatedByUser, "stopped by the test", 2*time.Second)
	t.Logf("terminate took %s", time.Since(start))
	if err != nil || !term.Terminated() || term.TerminationReason != api.ReasonTerminatedByUser || term.TerminationMessage != "stopped by the test" {
		t.Fatalf("TerminateTask = %+v, %v; want terminated by user", term, err)
	}
	if again, err := sc.TerminateTask(ctx, "job-stop", api.ReasonTerminatedByServer, "", 0); err != nil || again.TerminationReason != api.ReasonTerminatedByUser {
		t.Errorf("second TerminateTask = %+v, %v; want the first reason kept", again, err)
	}
	if err := sc.RemoveTask(t.Context(), "job-stop"); err != nil {
		t.Fatal(err)
	}
	waitGone(t, c, rec.ID)
}

func TestPodShim_deleteTasksDeletesEveryPodAndSecret(t *testing.T) {
	c := testCluster(t)
	rec := testInstance("inst-del", offers.Offer{})
	_, sc := connect(t, c, rec)
	for _, id := range []string{"job-a", "job-b"} {
		if _, err := sc.CreateTask(t.Context(), api.TaskSpec{ID: id, Image: testImage,
			RegistryAuth: &api.RegistryAuth{Username: "u", Password: "p"}}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, sc, "job-a", api.TaskCreating, 2*time.Minute)
	if left := objectsLeft(t, c, rec.ID); len(left) != 6 {
		t.Errorf("objects of the instance: %v, want 2 pods and 4 secrets", left)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for {
		err := deleteTasks(ctx, c, rec.ID)
		if err == nil {
			break
		}
		if !errors.Is(err, backends.ErrNotYetTerminated) || backends.KindOf(err) != backends.KindWait {
			t.Fatalf("deleteTasks = %v, want nil or a wait", err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	if left := objectsLeft(t, c, rec.ID); len(left) != 0 {
		t.Errorf("left after deleteTasks: %v", left)
	}
}

func TestPodShim_aJobOutOfMemorySaysSo(t *testing.T) {
	c := testCluster(t)
	// 64 MiB for the runner and the job: dd's 256 MiB buffer is too much.
	rec := testInstance("inst-oom", offers.Offer{CPUs: 1, MemoryGB: 0.0625})
	cn, sc := connect(t, c, rec)
	if _, err := sc.CreateTask(t.Context(), api.TaskSpec{ID: "job-oom", Image: testImage}); err != nil {
		t.Fatal(err)
	}
	info := waitFor(t, sc, "job-oom", api.TaskRunning, 2*time.Minute)
	st, _ := runJob(t, cn, info, "dd if=/dev/zero of=/dev/null bs=256M count=1")
	if st.State != api.JobFailed || st.ExitCode == nil || *st.ExitCode != 137 {
		t.Errorf("job state %+v, want failed with 137 (SIGKILL by the OOM killer)", st)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	term, err := sc.TerminateTask(ctx, "job-oom", api.ReasonContainerExitedWithError, "exit status 137", 0)
	if err != nil || term.TerminationReason != api.ReasonContainerExitedWithError || !strings.Contains(term.TerminationMessage, "out of memory") {
		t.Errorf("TerminateTask = %+v, %v; want an error saying out of memory", term, err)
	}
	if err := sc.RemoveTask(t.Context(), "job-oom"); err != nil {
		t.Fatal(err)
	}
	waitGone(t, c, rec.ID)
}

// logPodTimes logs when the pod of task id was created, scheduled, and its
// containers started, relative to its creation.
func logPodTimes(t *testing.T, c *cluster, rec instanceRecord, id string) {
	t.Helper()
	l, err := c.client.CoreV1().Pods(c.namespace).List(t.Context(), metav1.ListOptions{LabelSelector: taskSelector(rec.ID, id)})
	if err != nil || len(l.Items) == 0 {
		return
	}
	p := l.Items[0]
	t0 := p.CreationTimestamp.Time
	var parts []string
	for _, cnd := range p.Status.Conditions {
		parts = append(parts, string(cnd.Type)+"="+cnd.LastTransitionTime.Sub(t0).String())
	}
	for _, st := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
		if r := st.State.Running; r != nil {
			parts = append(parts, st.Name+" running="+r.StartedAt.Sub(t0).String())
		}
		if x := st.State.Terminated; x != nil {
			parts = append(parts, st.Name+" started="+x.StartedAt.Sub(t0).String()+" finished="+x.FinishedAt.Sub(t0).String())
		}
	}
	t.Logf("pod %s (second resolution): %s", p.Name, strings.Join(parts, " "))
}

func TestPodShim_aGPUSliceIsScheduledWithItsLimitAndTooManyAreNoCapacity(t *testing.T) {
	c := testCluster(t)
	kc := testenv.Kubernetes(t)
	const product = "NVIDIA-A100-SXM4-40GB"
	kc.FakeGPU(t, 2, product)
	// The driver's offers name the GPU by its product label.
	one := testInstance("inst-gpu1", offers.Offer{CPUs: 1, MemoryGB: 0.25, GPUVendor: "nvidia", GPUName: product, GPUCount: 1})
	cn, sc := connect(t, c, one)
	if _, err := sc.CreateTask(t.Context(), api.TaskSpec{ID: "job-gpu1", Image: testImage, GPUCount: 1}); err != nil {
		t.Fatal(err)
	}
	info := waitFor(t, sc, "job-gpu1", api.TaskRunning, 2*time.Minute)
	if info.Status != api.TaskRunning {
		t.Fatalf("a 1-GPU task on a node of 2: %+v", info)
	}
	p, err := c.client.CoreV1().Pods(c.namespace).Get(t.Context(), info.ContainerName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if q := p.Spec.Containers[0].Resources.Limits[nvidiaGPU]; q.Value() != 1 {
		t.Errorf("gpu limit %v, want 1", p.Spec.Containers[0].Resources.Limits)
	}
	st, _ := runJob(t, cn, info, "true")
	if st.State != api.JobDone {
		t.Errorf("job %+v", st)
	}

	three := testInstance("inst-gpu3", offers.Offer{CPUs: 1, MemoryGB: 0.25, GPUVendor: "nvidia", GPUName: "A100", GPUCount: 3})
	_, sc3 := connect(t, c, three)
	if _, err := sc3.CreateTask(t.Context(), api.TaskSpec{ID: "job-gpu3", Image: testImage, GPUCount: 3}); err != nil {
		t.Fatal(err)
	}
	info3 := waitFor(t, sc3, "job-gpu3", api.TaskTerminated, time.Minute)
	if info3.TerminationReason != api.ReasonNoCapacity || !strings.Contains(info3.TerminationMessage, "nvidia.com/gpu") {
		t.Errorf("a 3-GPU task on a node of 2: %+v, want no capacity for nvidia.com/gpu", info3)
	}
	for _, x := range []struct {
		sc *api.ShimClient
		id string
	}{{sc, "job-gpu1"}, {sc3, "job-gpu3"}} {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		if _, err := x.sc.TerminateTask(ctx, x.id, api.ReasonTerminatedByServer, "", 0); err != nil {
			t.Error(err)
		}
		if err := x.sc.RemoveTask(ctx, x.id); err != nil {
			t.Error(err)
		}
		cancel()
	}
	waitGone(t, c, one.ID)
	waitGone(t, c, three.ID)
}

func TestPodShim_aJobsPortAnswersThroughTheConn(t *testing.T) {
	c := testCluster(t)
	rec := testInstance("inst-port", offers.Offer{})
	cn, sc := connect(t, c, rec)
	if _, err := sc.CreateTask(t.Context(), api.TaskSpec{ID: "job-port", Image: testImage, Ports: []api.PortMapping{{Container: 8000}}}); err != nil {
		t.Fatal(err)
	}
	info := waitFor(t, sc, "job-port", api.TaskRunning, 2*time.Minute)
	if len(info.Ports) != 1 || info.Ports[0].Addr == "" {
		t.Fatalf("ports %+v, want the port's address", info.Ports)
	}
	rc := api.NewRunnerClient(info.RunnerAddr, cn.HTTPClient())
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for range 100 {
		if _, err := rc.State(ctx); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := rc.Submit(ctx, api.JobSpec{RunName: "test", JobID: "job-port",
		Commands: []string{"mkdir -p /tmp/www && echo served > /tmp/www/index.html && exec httpd -f -p 8000 -h /tmp/www"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := rc.Run(ctx); err != nil {
		t.Fatal(err)
	}
	var body string
	for range 50 {
		resp, err := cn.HTTPClient().Get("http://" + info.Ports[0].Addr + "/index.html")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if body = string(b); resp.StatusCode == 200 {
				break
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	if strings.TrimSpace(body) != "served" {
		t.Errorf("GET through the Conn: %q, want the job's page", body)
	}
	if _, err := sc.TerminateTask(ctx, "job-port", api.ReasonTerminatedByUser, "", time.Second); err != nil {
		t.Fatal(err)
	}
	if err := sc.RemoveTask(ctx, "job-port"); err != nil {
		t.Fatal(err)
	}
	waitGone(t, c, rec.ID)
}

func TestPodShim_anotherServerPicksUpATaskWhereTheFirstLeftIt(t *testing.T) {
	c := testCluster(t)
	rec := testInstance("inst-peer", offers.Offer{})
	tests := []struct {
		name       string
		closeFirst bool
		id         string
	}{
		{"the first server is gone right after creating the pod", true, "job-peer-a"},
		{"both servers look at once", false, "job-peer-b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			first, err := newConn(t.Context(), c, rec)
			if err != nil {
				t.Fatal(err)
			}
			defer first.Close()
			if _, err := api.NewShimClient(first.ShimURL(), first.HTTPClient()).CreateTask(t.Context(), api.TaskSpec{ID: tt.id, Image: testImage}); err != nil {
				t.Fatal(err)
			}
			if tt.closeFirst {
				first.Close()
			}
			second, sc := connect(t, c, rec)
			info := waitFor(t, sc, tt.id, api.TaskRunning, 2*time.Minute)
			st, out := runJob(t, second, info, "echo picked up")
			if st.State != api.JobDone || strings.TrimSpace(out) != "picked up" {
				t.Errorf("job %+v output %q", st, out)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			if _, err := sc.TerminateTask(ctx, tt.id, api.ReasonDoneByRunner, "", 0); err != nil {
				t.Fatal(err)
			}
			if err := sc.RemoveTask(ctx, tt.id); err != nil {
				t.Fatal(err)
			}
		})
	}
	waitGone(t, c, rec.ID)
}
