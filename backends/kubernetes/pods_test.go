package kubernetes

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"hoist/agents/api"
	"hoist/backends"
	"hoist/backends/offers"
)

var t0 = time.Date(2026, 11, 24, 1, 0, 0, 0, time.UTC)

func testRecord() instanceRecord {
	return instanceRecord{ID: "inst-1", Offer: offers.Offer{CPUs: 2, MemoryGB: 4},
		Tags: map[string]string{backends.TagInstallation: "test", backends.TagResource: "fleet/gpu", backends.TagInstance: "inst-1"}}
}

func TestPodName(t *testing.T) {
	tests := []struct {
		name string
		spec api.TaskSpec
		want string
	}{
		{"the task's name", api.TaskSpec{ID: "j1", Name: "hoist-train-0-abcdef12"}, "hoist-train-0-abcdef12"},
		{"hoist- and the id without a name", api.TaskSpec{ID: "J1"}, "hoist-j1"},
		{"invalid characters become dashes", api.TaskSpec{ID: "j1", Name: "hoist-My_Job.x-0"}, "hoist-my-job-x-0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := podName(tt.spec); got != tt.want {
				t.Errorf("podName = %q, want %q", got, tt.want)
			}
		})
	}
	t.Run("a long name is cut and ends in a digest of the id", func(t *testing.T) {
		long := "hoist-" + strings.Repeat("a", 80)
		a, b := podName(api.TaskSpec{ID: "j1", Name: long}), podName(api.TaskSpec{ID: "j2", Name: long})
		if len(a) != 63 || !strings.HasPrefix(a, "hoist-"+strings.Repeat("a", 48)+"-") || a == b {
			t.Errorf("podName = %q (%d chars) and %q for another id; want 63 chars, the name's start, distinct digests", a, len(a), b)
		}
	})
}

func TestBuildPod(t *testing.T) {
	ps := podSpec{Name: "hoist-x", Namespace: "ns", Secret: "hoist-x", GPUProducts: []string{"NVIDIA-A100-SXM4-40GB", "NVIDIA-GeForce-RTX-4090", "Tesla-T4"}}
	gpuRec := testRecord()
	gpuRec.Offer.GPUCount, gpuRec.Offer.GPUName, gpuRec.Offer.GPUVendor = 1, "A100", "nvidia"
	tests := []struct {
		name    string
		rec     instanceRecord
		spec    api.TaskSpec
		ps      podSpec
		check   func(t *testing.T, p *corev1.Pod)
		wantErr string
	}{
		{name: "requests are the instance's slice; memory is limited to it", rec: testRecord(), spec: api.TaskSpec{ID: "j", Image: "busybox"}, ps: ps,
			check: func(t *testing.T, p *corev1.Pod) {
				r := p.Spec.Containers[0].Resources
				if q := r.Requests[corev1.ResourceCPU]; q.Cmp(resource.MustParse("2")) != 0 {
					t.Errorf("cpu request %v, want 2", q.String())
				}
				if q := r.Requests[corev1.ResourceMemory]; q.Cmp(resource.MustParse("4Gi")) != 0 {
					t.Errorf("memory request %v, want 4Gi", q.String())
				}
				if q := r.Limits[corev1.ResourceMemory]; q.Cmp(resource.MustParse("4Gi")) != 0 {
					t.Errorf("memory limit %v, want 4Gi", q.String())
				}
				if _, ok := r.Limits[corev1.ResourceCPU]; ok {
					t.Errorf("cpu limited (%v) although the task set none", r.Limits)
				}
				if p.Spec.Affinity != nil || len(p.Spec.Tolerations) > 0 {
					t.Errorf("a pod without GPUs has affinity %v, tolerations %v", p.Spec.Affinity, p.Spec.Tolerations)
				}
				if !hasEnv(p, "NVIDIA_VISIBLE_DEVICES", "void") {
					t.Error("a pod without GPUs lacks NVIDIA_VISIBLE_DEVICES=void")
				}
			}},
		{name: "the runner is the command, listening on loopback", rec: testRecord(), spec: api.TaskSpec{ID: "j", Image: "busybox"}, ps: ps,
			check: func(t *testing.T, p *corev1.Pod) {
				c := p.Spec.Containers[0]
				want := []string{runnerBinary, "--listen", "127.0.0.1:10999", "--home", runnerHome, "--token-file", runnerTokenFile, "--termination-log", terminationLog}
				if diff := cmp.Diff(want, c.Command); diff != "" {
					t.Errorf("command (-want +got):\n%s", diff)
				}
				if c.TerminationMessagePath != terminationLog {
					t.Errorf("termination message path %q", c.TerminationMessagePath)
				}
				ic := p.Spec.InitContainers[0]
				if ic.Image != "busybox" || !strings.Contains(strings.Join(ic.Command, " "), readyFile) {
					t.Errorf("init container %s %v: want the job's image waiting for %s", ic.Image, ic.Command, readyFile)
				}
				if p.Spec.RestartPolicy != corev1.RestartPolicyNever || *p.Spec.AutomountServiceAccountToken {
					t.Errorf("restart policy %s, automount %v", p.Spec.RestartPolicy, *p.Spec.AutomountServiceAccountToken)
				}
				if c.ImagePullPolicy != corev1.PullIfNotPresent || ic.ImagePullPolicy != corev1.PullIfNotPresent {
					t.Errorf("pull policies %s, %s; want IfNotPresent by default", c.ImagePullPolicy, ic.ImagePullPolicy)
				}
			}},
		{name: "labels carry the ownership tags, instance and task", rec: testRecord(),
			spec: api.TaskSpec{ID: "job-1", Image: "busybox", Labels: map[string]string{"hoist.run": "train"}}, ps: ps,
			check: func(t *testing.T, p *corev1.Pod) {
				want := map[string]string{managedByLabel: managedByValue, backends.TagInstallation: "test", backends.TagInstance: "inst-1",
					backends.TagResource: labelValue("fleet/gpu"), taskLabel: "job-1", "hoist.run": "train"}
				if diff := cmp.Diff(want, p.Labels); diff != "" {
					t.Errorf("labels (-want +got):\n%s", diff)
				}
				if p.Annotations[taskAnnotation] != "job-1" || !strings.Contains(p.Annotations[tagsAnnotation], "fleet/gpu") {
					t.Errorf("annotations %v", p.Annotations)
				}
			}},
		{name: "pull policy always", rec: testRecord(), spec: api.TaskSpec{ID: "j", Image: "busybox", PullPolicy: api.PullAlways}, ps: ps,
			check: func(t *testing.T, p *corev1.Pod) {
				if p.Spec.Containers[0].ImagePullPolicy != corev1.PullAlways || p.Spec.InitContainers[0].ImagePullPolicy != corev1.PullAlways {
					t.Error("pull policy always not Always")
				}
			}},
		{name: "env comes from the secret, by key", rec: testRecord(), spec: api.TaskSpec{ID: "j", Image: "busybox", Env: map[string]string{"B": "2", "A": "1"}}, ps: ps,
			check: func(t *testing.T, p *corev1.Pod) {
				env := p.Spec.Containers[0].Env
				if len(env) < 2 || env[0].Name != "A" || env[0].ValueFrom.SecretKeyRef.Key != "env-0" || env[1].Name != "B" ||
					env[1].ValueFrom.SecretKeyRef.Key != "env-1" || env[0].ValueFrom.SecretKeyRef.Name != "hoist-x" || env[0].Value != "" {
					t.Errorf("env %+v", env)
				}
			}},
		{name: "a GPU slice: limit, toleration and product affinity", rec: gpuRec, spec: api.TaskSpec{ID: "j", Image: "busybox"}, ps: ps,
			check: func(t *testing.T, p *corev1.Pod) {
				r := p.Spec.Containers[0].Resources
				if q := r.Limits[nvidiaGPU]; q.Value() != 1 {
					t.Errorf("gpu limit %v", r.Limits)
				}
				if q := r.Requests[nvidiaGPU]; q.Value() != 1 {
					t.Errorf("gpu request %v", r.Requests)
				}
				terms := p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
				if diff := cmp.Diff([]string{"NVIDIA-A100-SXM4-40GB"}, terms[0].MatchExpressions[0].Values); diff != "" {
					t.Errorf("product affinity (-want +got):\n%s", diff)
				}
				if len(p.Spec.Tolerations) != 2 || p.Spec.Tolerations[0].Key != "nvidia.com/gpu" {
					t.Errorf("tolerations %v", p.Spec.Tolerations)
				}
				if hasEnv(p, "NVIDIA_VISIBLE_DEVICES", "void") {
					t.Error("a GPU pod hides its GPUs")
				}
			}},
		{name: "an AMD GPU slice: its resource and product affinity", rec: func() instanceRecord {
			r := gpuRec
			r.Offer.GPUVendor, r.Offer.GPUName = "amd", "AMD Instinct MI300X OAM"
			return r
		}(), spec: api.TaskSpec{ID: "j", Image: "busybox"}, ps: podSpec{Name: "p", Namespace: "ns", Secret: "p", GPUProducts: []string{"AMD_Instinct_MI300X_OAM"}},
			check: func(t *testing.T, p *corev1.Pod) {
				if q := p.Spec.Containers[0].Resources.Limits[amdGPU]; q.Value() != 1 {
					t.Errorf("limits %v", p.Spec.Containers[0].Resources.Limits)
				}
				e := p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions[0]
				if e.Key != amdProduct || len(e.Values) != 1 || e.Values[0] != "AMD_Instinct_MI300X_OAM" {
					t.Errorf("affinity %+v", e)
				}
			}},
		{name: "a GPU no node has is an error", rec: func() instanceRecord { r := gpuRec; r.Offer.GPUName = "H100"; return r }(),
			spec: api.TaskSpec{ID: "j", Image: "busybox"}, ps: ps, wantErr: "naming the H100 GPU"},
		{name: "a claim is a persistent volume claim, read-only when asked", rec: testRecord(),
			spec: api.TaskSpec{ID: "j", Image: "busybox", NetworkVolumes: []api.NetworkVolume{{Name: "data", Claim: "data-pvc", Path: "/data", ReadOnly: true}}}, ps: ps,
			check: func(t *testing.T, p *corev1.Pod) {
				v := p.Spec.Volumes[len(p.Spec.Volumes)-1]
				if v.PersistentVolumeClaim == nil || v.PersistentVolumeClaim.ClaimName != "data-pvc" || !v.PersistentVolumeClaim.ReadOnly {
					t.Errorf("volume %+v", v)
				}
				m := p.Spec.Containers[0].VolumeMounts[len(p.Spec.Containers[0].VolumeMounts)-1]
				if m.MountPath != "/data" || !m.ReadOnly || m.RecursiveReadOnly == nil {
					t.Errorf("mount %+v", m)
				}
			}},
		{name: "a block device is refused", rec: testRecord(),
			spec: api.TaskSpec{ID: "j", Image: "busybox", NetworkVolumes: []api.NetworkVolume{{Name: "disk", DevicePath: "/dev/sdb", Path: "/data"}}}, ps: ps,
			wantErr: "not block devices"},
		{name: "a docker volume is refused", rec: testRecord(),
			spec: api.TaskSpec{ID: "j", Image: "busybox", VolumeMounts: []api.VolumeMount{{Name: "cache", Path: "/cache"}}}, ps: ps,
			wantErr: "not docker volumes"},
		{name: "a numeric user and privileged mode", rec: testRecord(), spec: api.TaskSpec{ID: "j", Image: "busybox", User: "1000:100", Privileged: true}, ps: ps,
			check: func(t *testing.T, p *corev1.Pod) {
				sc := p.Spec.Containers[0].SecurityContext
				if *sc.RunAsUser != 1000 || *sc.RunAsGroup != 100 || !*sc.Privileged || p.Spec.InitContainers[0].SecurityContext != sc {
					t.Errorf("security context %+v", sc)
				}
			}},
		{name: "a user name is refused", rec: testRecord(), spec: api.TaskSpec{ID: "j", Image: "busybox", User: "ubuntu"}, ps: ps, wantErr: "numeric user id"},
		{name: "shm size is a memory emptyDir at /dev/shm", rec: testRecord(), spec: api.TaskSpec{ID: "j", Image: "busybox", ShmSizeBytes: 1 << 30}, ps: ps,
			check: func(t *testing.T, p *corev1.Pod) {
				found := false
				for _, v := range p.Spec.Volumes {
					if v.EmptyDir != nil && v.EmptyDir.Medium == corev1.StorageMediumMemory && v.EmptyDir.SizeLimit.Value() == 1<<30 {
						found = true
					}
				}
				if !found {
					t.Errorf("no 1Gi memory emptyDir in %+v", p.Spec.Volumes)
				}
			}},
		{name: "registry credentials are an image pull secret", rec: testRecord(), spec: api.TaskSpec{ID: "j", Image: "busybox"},
			ps: podSpec{Name: "p", Namespace: "ns", Secret: "p", PullSecret: "p-registry-auth"},
			check: func(t *testing.T, p *corev1.Pod) {
				if len(p.Spec.ImagePullSecrets) != 1 || p.Spec.ImagePullSecrets[0].Name != "p-registry-auth" {
					t.Errorf("image pull secrets %v", p.Spec.ImagePullSecrets)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := buildPod(tt.rec, tt.spec, tt.ps)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("buildPod = %v, want an error with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, p)
		})
	}
}

func hasEnv(p *corev1.Pod, name, value string) bool {
	for _, e := range p.Spec.Containers[0].Env {
		if e.Name == name && e.Value == value {
			return true
		}
	}
	return false
}

func TestSecrets(t *testing.T) {
	rec := testRecord()
	s := taskSecret(rec, api.TaskSpec{ID: "j", Env: map[string]string{"B": "2", "A": "1"}}, "p", "ns", "tok")
	want := map[string][]byte{secretTokenKey: []byte("tok"), "env-0": []byte("1"), "env-1": []byte("2")}
	if diff := cmp.Diff(want, s.Data); diff != "" {
		t.Errorf("task secret data (-want +got):\n%s", diff)
	}
	if s.Labels[taskLabel] != "j" || s.Labels[backends.TagInstance] != "inst-1" {
		t.Errorf("task secret labels %v", s.Labels)
	}
	if pullSecret(rec, api.TaskSpec{ID: "j"}, "p", "ns") != nil {
		t.Error("a pull secret without registry credentials")
	}
	tests := []struct {
		name, image, server, wantKey string
	}{
		{"docker hub for a bare image", "busybox", "", dockerHubAuthKey},
		{"docker hub for a user's image", "me/app:1", "", dockerHubAuthKey},
		{"the image's registry", "ghcr.io/me/app", "", "ghcr.io"},
		{"a registry with a port", "localhost:5000/app", "", "localhost:5000"},
		{"the server address given", "me/app", "registry.example.com", "registry.example.com"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := pullSecret(rec, api.TaskSpec{ID: "j", Image: tt.image, RegistryAuth: &api.RegistryAuth{Username: "u", Password: "p", ServerAddress: tt.server}}, "p-auth", "ns")
			if s.Type != corev1.SecretTypeDockerConfigJson {
				t.Errorf("type %s", s.Type)
			}
			var cfg struct {
				Auths map[string]struct{ Username, Password, Auth string }
			}
			if err := json.Unmarshal(s.Data[corev1.DockerConfigJsonKey], &cfg); err != nil {
				t.Fatal(err)
			}
			a, ok := cfg.Auths[tt.wantKey]
			if !ok || a.Username != "u" || a.Password != "p" || a.Auth != "dTpw" {
				t.Errorf("auths %+v, want %s with u:p", cfg.Auths, tt.wantKey)
			}
		})
	}
}

func TestProductNames(t *testing.T) {
	tests := []struct {
		gpu           corev1.ResourceName
		product, name string
		want          bool
	}{
		{nvidiaGPU, "NVIDIA-A100-SXM4-40GB", "A100", true},
		{nvidiaGPU, "NVIDIA-A100-SXM4-40GB", "NVIDIA-A100-SXM4-40GB", true},
		{nvidiaGPU, "NVIDIA-GeForce-RTX-4090", "NVIDIA-GeForce-RTX 4090", true},
		{nvidiaGPU, "NVIDIA-GeForce-RTX-4090", "RTX4090", true},
		{nvidiaGPU, "Tesla-T4", "T4", true},
		{nvidiaGPU, "NVIDIA-H100-80GB-HBM3", "A100", false},
		{nvidiaGPU, "NVIDIA-A100-SXM4-40GB", "A10", false},
		{amdGPU, "AMD_Instinct_MI300X_OAM", "AMD Instinct MI300X OAM", true},
		{amdGPU, "AMD_Instinct_MI300X_OAM", "MI300X", false},
	}
	for _, tt := range tests {
		if got := productNames(tt.gpu, tt.product, tt.name); got != tt.want {
			t.Errorf("productNames(%s, %q, %q) = %v, want %v", tt.gpu, tt.product, tt.name, got, tt.want)
		}
	}
}

// pod returns a task's pod created at t0 with the given status.
func pod(st corev1.PodStatus, annotations ...string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "hoist-x", CreationTimestamp: metav1.NewTime(t0),
			Annotations: map[string]string{taskAnnotation: "job-1"}},
		Spec:   corev1.PodSpec{Containers: []corev1.Container{{Name: jobContainer, Image: "busybox"}}},
		Status: st,
	}
	for i := 0; i+1 < len(annotations); i += 2 {
		p.Annotations[annotations[i]] = annotations[i+1]
	}
	return p
}

func scheduled(phase corev1.PodPhase, init, job *corev1.ContainerState) corev1.PodStatus {
	st := corev1.PodStatus{Phase: phase, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}}
	if init != nil {
		st.InitContainerStatuses = []corev1.ContainerStatus{{Name: initContainer, State: *init}}
	}
	if job != nil {
		st.ContainerStatuses = []corev1.ContainerStatus{{Name: jobContainer, State: *job, ContainerID: "containerd://abc"}}
	}
	return st
}

func waiting(reason, msg string) *corev1.ContainerState {
	return &corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}
}

func runningState() *corev1.ContainerState {
	return &corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(t0.Add(time.Second))}}
}

func exited(code int32, reason, msg string) *corev1.ContainerState {
	return &corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason, Message: msg}}
}

func TestPodInfo(t *testing.T) {
	unschedulable := corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled,
		Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: "0/1 nodes are available: 1 Insufficient cpu."}}}
	done, _ := json.Marshal(api.JobState{State: api.JobDone, ExitCode: new(0)})
	failed, _ := json.Marshal(api.JobState{State: api.JobFailed, ExitCode: new(3), TerminationReason: api.ReasonContainerExitedWithError, TerminationMessage: "exit status 3"})
	stopped, _ := json.Marshal(api.JobState{State: api.JobTerminated, TerminationReason: api.ReasonMaxDurationExceeded, TerminationMessage: "ran for 1m"})
	tests := []struct {
		name         string
		pod          *corev1.Pod
		now          time.Time
		status       string
		reason       string
		message      string // a substring of the termination message
		exitCode     *int
		runner, port bool
	}{
		{name: "not yet scheduled is pending", pod: pod(corev1.PodStatus{Phase: corev1.PodPending}), now: t0, status: api.TaskPending},
		{name: "unschedulable within the limit is pending", pod: pod(unschedulable), now: t0.Add(9 * time.Second), status: api.TaskPending},
		{name: "the limit counts from the pod shim's creation time, finer than the pod's",
			pod: pod(unschedulable, createdAnnotation, t0.Add(900*time.Millisecond).Format(time.RFC3339Nano)), now: t0.Add(10 * time.Second), status: api.TaskPending},
		{name: "unschedulable past the limit is no capacity", pod: pod(unschedulable), now: t0.Add(10 * time.Second), status: api.TaskTerminated,
			reason: api.ReasonNoCapacity, message: "Insufficient cpu"},
		{name: "scheduled, the image not there yet, is pulling", pod: pod(scheduled(corev1.PodPending, waiting("PodInitializing", ""), waiting("PodInitializing", ""))),
			now: t0, status: api.TaskPulling},
		{name: "the init container running is creating", pod: pod(scheduled(corev1.PodPending, runningState(), waiting("PodInitializing", ""))),
			now: t0, status: api.TaskCreating},
		{name: "the job container running is running, with the runner's address", pod: pod(scheduled(corev1.PodRunning, exited(0, "Completed", ""), runningState())),
			now: t0, status: api.TaskRunning, runner: true},
		{name: "an image that cannot be pulled fails at once", pod: pod(scheduled(corev1.PodPending, waiting("ErrImagePull", "failed to resolve reference \"nope:latest\""), nil)),
			now: t0, status: api.TaskTerminated, reason: api.ReasonImagePullError, message: "failed to resolve reference"},
		{name: "image pull back-off fails", pod: pod(scheduled(corev1.PodPending, waiting("ImagePullBackOff", "Back-off pulling image"), nil)),
			now: t0, status: api.TaskTerminated, reason: api.ReasonImagePullError, message: "Back-off"},
		{name: "an invalid image name fails", pod: pod(scheduled(corev1.PodPending, waiting("InvalidImageName", "couldn't parse"), nil)),
			now: t0, status: api.TaskTerminated, reason: api.ReasonImagePullError},
		{name: "a job done is done by runner with its exit code", pod: pod(scheduled(corev1.PodSucceeded, exited(0, "Completed", ""), exited(0, "Completed", string(done)))),
			now: t0, status: api.TaskTerminated, reason: api.ReasonDoneByRunner, exitCode: new(0)},
		{name: "a failed job says why", pod: pod(scheduled(corev1.PodFailed, exited(0, "Completed", ""), exited(1, "Error", string(failed)))),
			now: t0, status: api.TaskTerminated, reason: api.ReasonContainerExitedWithError, message: "exit status 3", exitCode: new(1)},
		{name: "a job the runner stopped keeps the runner's reason", pod: pod(scheduled(corev1.PodFailed, exited(0, "Completed", ""), exited(1, "Error", string(stopped)))),
			now: t0, status: api.TaskTerminated, reason: api.ReasonMaxDurationExceeded, message: "ran for 1m", exitCode: new(1)},
		{name: "OOM killed is an error saying out of memory", pod: pod(scheduled(corev1.PodFailed, exited(0, "Completed", ""), exited(137, "OOMKilled", ""))),
			now: t0, status: api.TaskTerminated, reason: api.ReasonContainerExitedWithError, message: "out of memory", exitCode: new(137)},
		{name: "OOM killed is said after the reason a terminate request gave", pod: pod(scheduled(corev1.PodFailed, exited(0, "Completed", ""), exited(1, "OOMKilled", string(failed))),
			reasonAnnotation, api.ReasonContainerExitedWithError, messageAnnotation, "exit status 137"),
			now: t0, status: api.TaskTerminated, reason: api.ReasonContainerExitedWithError, message: "exit status 137; the container ran out of memory", exitCode: new(1)},
		{name: "a container killed without a job state", pod: pod(scheduled(corev1.PodFailed, exited(0, "Completed", ""), exited(137, "Error", ""))),
			now: t0, status: api.TaskTerminated, reason: api.ReasonContainerExitedWithError, message: "SIGKILL", exitCode: new(137)},
		{name: "a terminate request wins over the exit", pod: pod(scheduled(corev1.PodFailed, exited(0, "Completed", ""), exited(143, "Error", string(done))),
			reasonAnnotation, api.ReasonTerminatedByUser, messageAnnotation, "stopped by alice"),
			now: t0, status: api.TaskTerminated, reason: api.ReasonTerminatedByUser, message: "stopped by alice", exitCode: new(143)},
		{name: "a terminate request waits for the running container", pod: pod(scheduled(corev1.PodRunning, exited(0, "Completed", ""), runningState()),
			reasonAnnotation, api.ReasonTerminatedByServer), now: t0, status: api.TaskRunning, runner: true},
		{name: "a terminate request of a pod never scheduled ends it", pod: pod(corev1.PodStatus{Phase: corev1.PodPending},
			reasonAnnotation, api.ReasonTerminatedByServer, messageAnnotation, "bye"), now: t0, status: api.TaskTerminated, reason: api.ReasonTerminatedByServer, message: "bye"},
		{name: "an init container that failed is a creating error", pod: pod(scheduled(corev1.PodFailed, exited(127, "Error", "sh: not found"), waiting("PodInitializing", ""))),
			now: t0, status: api.TaskTerminated, reason: api.ReasonCreatingContainerError, message: "code 127"},
		{name: "a pod stopped at its deadline before the job ran is lost", pod: pod(func() corev1.PodStatus {
			s := scheduled(corev1.PodFailed, exited(137, "Error", ""), waiting("PodInitializing", ""))
			s.InitContainerStatuses[0].State.Terminated.ExitCode = 0
			s.Reason, s.Message = "DeadlineExceeded", "Pod was active on the node longer than the specified deadline"
			return s
		}()), now: t0, status: api.TaskTerminated, reason: api.ReasonContainerLost, message: "DeadlineExceeded"},
		{name: "a pod being deleted is lost", pod: func() *corev1.Pod {
			p := pod(scheduled(corev1.PodRunning, exited(0, "Completed", ""), waiting("ContainerCreating", "")))
			p.DeletionTimestamp = &metav1.Time{Time: t0}
			return p
		}(), now: t0, status: api.TaskTerminated, reason: api.ReasonContainerLost},
		{name: "a config error of the job container fails", pod: pod(scheduled(corev1.PodPending, exited(0, "Completed", ""), waiting("CreateContainerConfigError", "secret \"x\" not found"))),
			now: t0, status: api.TaskTerminated, reason: api.ReasonCreatingContainerError, message: "secret"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := podInfo(tt.pod, tt.now, 10*time.Second)
			if got.ID != "job-1" || got.ContainerName != "hoist-x" {
				t.Errorf("id %q, container name %q", got.ID, got.ContainerName)
			}
			if got.Status != tt.status || got.TerminationReason != tt.reason || !strings.Contains(got.TerminationMessage, tt.message) {
				t.Errorf("podInfo = %s %s %q, want %s %s with %q", got.Status, got.TerminationReason, got.TerminationMessage, tt.status, tt.reason, tt.message)
			}
			if diff := cmp.Diff(tt.exitCode, got.ExitCode); diff != "" {
				t.Errorf("exit code (-want +got):\n%s", diff)
			}
			if wantAddr := tt.runner; (got.RunnerAddr == runnerAddr("hoist-x")) != wantAddr || (!wantAddr && got.RunnerAddr != "") {
				t.Errorf("runner address %q, want one: %v", got.RunnerAddr, wantAddr)
			}
		})
	}
}

func TestPodInfo_portsAreReachedThroughThePod(t *testing.T) {
	p := pod(scheduled(corev1.PodRunning, exited(0, "Completed", ""), runningState()))
	p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 8000}}
	got := podInfo(p, t0, 10*time.Second).Ports
	want := []api.PortMapping{{Container: 8000, Addr: "hoist-x.pod.hoist.invalid:8000"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ports (-want +got):\n%s", diff)
	}
}

func TestRunnerAddr(t *testing.T) {
	addr := runnerAddr("hoist-train-0")
	if addr != "http://hoist-train-0.pod.hoist.invalid:10999" {
		t.Errorf("runnerAddr = %q", addr)
	}
	name, port, ok := podOfHost("hoist-train-0.pod.hoist.invalid:10999")
	if !ok || name != "hoist-train-0" || port != 10999 {
		t.Errorf("podOfHost = %q %d %v", name, port, ok)
	}
	for _, h := range []string{"hoist-train-0.pod.hoist.invalid", "127.0.0.1:10999", "a.b.pod.hoist.invalid:1", ".pod.hoist.invalid:1"} {
		if _, _, ok := podOfHost(h); ok {
			t.Errorf("podOfHost(%q) names a pod", h)
		}
	}
}

func TestPodInfo_internalIPIsThePodIPUntilTheTaskEnds(t *testing.T) {
	tests := []struct {
		name   string
		status corev1.PodStatus
		want   string
	}{
		{name: "a pod without an address yet has none", status: scheduled(corev1.PodPending, waiting("PodInitializing", ""), waiting("PodInitializing", ""))},
		{name: "a creating pod has its address", status: scheduled(corev1.PodPending, runningState(), waiting("PodInitializing", "")), want: "10.244.0.7"},
		{name: "a running pod has its address", status: scheduled(corev1.PodRunning, exited(0, "Completed", ""), runningState()), want: "10.244.0.7"},
		{name: "an ended task has none", status: scheduled(corev1.PodFailed, exited(0, "Completed", ""), exited(1, "Error", ""))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := tt.status
			if tt.want != "" || st.Phase == corev1.PodFailed {
				st.PodIP = "10.244.0.7"
			}
			if got := podInfo(pod(st), t0, 10*time.Second).InternalIP; got != tt.want {
				t.Errorf("InternalIP = %q, want %q", got, tt.want)
			}
		})
	}
}
