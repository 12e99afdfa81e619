package kubernetes

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"hoist/agents/api"
	"hoist/backends"
)

// A task's pod: an init container of the job's image waits until the pod
// shim has copied hoist-runner into the pod (exec.go), then the job
// container runs it, listening on loopback only; the server reaches it by a
// port-forward through the API server (portforward.go).
const (
	// initContainer is the name of the init container that waits for the
	// runner binary.
	initContainer = "hoist-init"
	// jobContainer is the name of the container that runs hoist-runner and
	// the job.
	jobContainer = "job"
	// binDir is the emptyDir the runner binary and its token are copied
	// into.
	binDir = "/hoist/bin"
	// runnerBinary is the runner binary in the pod.
	runnerBinary = binDir + "/hoist-runner"
	// runnerTokenFile hands the runner its token; the runner deletes it once
	// read.
	runnerTokenFile = binDir + "/.runner-token"
	// readyFile exists once the runner binary and its token are in place:
	// the init container waits for it.
	readyFile = binDir + "/.ready"
	// runnerHome is the runner's home (job log and state), an emptyDir.
	runnerHome = "/hoist/run"
	// runnerPort is the loopback port the runner API listens on in the pod
	// (dstack's runner port).
	runnerPort = 10999
	// terminationLog is where the runner writes its last job state when it
	// exits; the kubelet reports the file as the container's termination
	// message
	// (https://kubernetes.io/docs/tasks/debug/debug-application/determine-reason-pod-failure/).
	terminationLog = "/dev/termination-log"
	// podGrace is the pods' terminationGracePeriodSeconds: how long the
	// runner has between SIGTERM and SIGKILL when the pod is stopped.
	podGrace = 10
)

// Annotations on a task's pod, besides the ownership tags.
const (
	// taskAnnotation holds the task id verbatim (taskLabel may hold a
	// digest of it).
	taskAnnotation = "hoist.dev/task"
	// reasonAnnotation holds the termination reason the pod shim decided
	// (a terminate request, no capacity, an image that cannot be pulled);
	// it wins over what the pod's status says.
	reasonAnnotation = "hoist.dev/termination-reason"
	// messageAnnotation holds the termination message that goes with
	// reasonAnnotation.
	messageAnnotation = "hoist.dev/termination-message"
	// createdAnnotation holds when the pod shim created the pod
	// (RFC 3339 with nanoseconds: the pod's creationTimestamp has whole
	// seconds), from which the unschedulable limit counts.
	createdAnnotation = "hoist.dev/created-at"
)

// Keys of a task's secret.
const (
	// secretTokenKey holds the runner's bearer token.
	secretTokenKey = "runner-token"
	// secretEnvPrefix prefixes the keys that hold TaskSpec.Env values, in
	// the order of the sorted variable names ("env-0", "env-1", ...): the
	// container refers to each by secretKeyRef, so the token is never in
	// its environment and any variable name works.
	secretEnvPrefix = "env-"
)

// GPU resources and node labels
// (https://kubernetes.io/docs/tasks/manage-gpus/scheduling-gpus/).
const (
	nvidiaGPU     = corev1.ResourceName("nvidia.com/gpu")
	amdGPU        = corev1.ResourceName("amd.com/gpu")
	nvidiaProduct = "nvidia.com/gpu.product"
	// amdProduct is the AMD GPU operator's label (e.g.
	// AMD_Instinct_MI300X_OAM).
	amdProduct = "amd.com/gpu.product-name"
)

// dns1123 matches what may not be in a DNS-1123 label.
var notDNS1123 = regexp.MustCompile(`[^a-z0-9-]+`)

// podName returns the name of the pod of spec: its Name (or "hoist-<id>")
// made a DNS-1123 label; a longer one is cut and ends in a digest of the
// task id, so that two tasks never share a name.
func podName(spec api.TaskSpec) string {
	name := spec.Name
	if name == "" {
		name = "hoist-" + spec.ID
	}
	name = strings.Trim(notDNS1123.ReplaceAllString(strings.ToLower(name), "-"), "-")
	if name == "" {
		name = "hoist"
	}
	if len(name) <= validation.DNS1123LabelMaxLength {
		return name
	}
	sum := sha256.Sum256([]byte(spec.ID))
	return strings.TrimRight(name[:validation.DNS1123LabelMaxLength-9], "-") + "-" + hex.EncodeToString(sum[:4])
}

// taskLabels returns the labels of every object of a task of rec: the
// instance's ownership tags, the instance id and the task id.
func taskLabels(rec instanceRecord, taskID string) map[string]string {
	tags := maps.Clone(rec.Tags)
	if tags == nil {
		tags = map[string]string{}
	}
	tags[backends.TagInstance] = rec.ID
	out := tagLabels(tags)
	out[taskLabel] = labelValue(taskID)
	return out
}

// tasksSelector selects the objects (pods, secrets) of every task of
// instance id.
func tasksSelector(id string) string {
	return managedByLabel + "=" + managedByValue + "," + backends.TagInstance + "=" + labelValue(id)
}

// taskSelector selects the objects of task taskID of instance id.
func taskSelector(id, taskID string) string {
	return tasksSelector(id) + "," + taskLabel + "=" + labelValue(taskID)
}

// taskMeta returns the object metadata of a task's object called name.
func taskMeta(rec instanceRecord, spec api.TaskSpec, name, namespace string) metav1.ObjectMeta {
	tags := maps.Clone(rec.Tags)
	if tags == nil {
		tags = map[string]string{}
	}
	tags[backends.TagInstance] = rec.ID
	ann := tagAnnotations(tags)
	ann[taskAnnotation] = spec.ID
	return metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: taskLabels(rec, spec.ID), Annotations: ann}
}

// taskSecret returns the secret that holds the runner token and the
// task's environment.
func taskSecret(rec instanceRecord, spec api.TaskSpec, name, namespace, token string) *corev1.Secret {
	data := map[string][]byte{secretTokenKey: []byte(token)}
	for i, k := range slices.Sorted(maps.Keys(spec.Env)) {
		data[secretEnvPrefix+strconv.Itoa(i)] = []byte(spec.Env[k])
	}
	return &corev1.Secret{ObjectMeta: taskMeta(rec, spec, name, namespace), Type: corev1.SecretTypeOpaque, Data: data}
}

// dockerHubAuthKey is the key of Docker Hub in a docker config
// (dstack: core/backends/kubernetes/compute.py).
const dockerHubAuthKey = "https://index.docker.io/v1/"

// pullSecret returns the kubernetes.io/dockerconfigjson secret of spec's
// registry credentials
// (https://kubernetes.io/docs/tasks/configure-pod-container/pull-image-private-registry/),
// nil when it has none.
func pullSecret(rec instanceRecord, spec api.TaskSpec, name, namespace string) *corev1.Secret {
	ra := spec.RegistryAuth
	if ra == nil {
		return nil
	}
	server := ra.ServerAddress
	if server == "" {
		server = imageRegistry(spec.Image)
	}
	type entry struct {
		Username string `json:"username"`
		Password string `json:"password"`
		Auth     string `json:"auth"`
	}
	cfg := map[string]map[string]entry{"auths": {server: {
		Username: ra.Username, Password: ra.Password,
		Auth: base64.StdEncoding.EncodeToString([]byte(ra.Username + ":" + ra.Password)),
	}}}
	b, _ := json.Marshal(cfg) // maps of strings always marshal
	return &corev1.Secret{ObjectMeta: taskMeta(rec, spec, name, namespace), Type: corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: b}}
}

// imageRegistry returns the registry host of an image reference, Docker
// Hub's key when it names none: the first path component is a registry
// when it has a dot or a port, or is localhost.
func imageRegistry(image string) string {
	first, _, ok := strings.Cut(image, "/")
	if !ok || (!strings.ContainsAny(first, ".:") && first != "localhost") || first == "docker.io" || first == "index.docker.io" {
		return dockerHubAuthKey
	}
	return first
}

// podSpec is what a task's pod is built from besides the task spec.
type podSpec struct {
	// Name and Namespace of the pod.
	Name, Namespace string
	// Secret is the task's secret (taskSecret); PullSecret the registry
	// credentials' secret, "" for none.
	Secret, PullSecret string
	// CreatedAt is when the pod is created (createdAnnotation).
	CreatedAt time.Time
	// GPUProducts are the values of the nodes' GPU product labels of the
	// offer's vendor (productLabel); those that name the offer's GPU go
	// into the pod's node affinity.
	GPUProducts []string
}

// buildPod returns the pod of a task of rec: the instance's slice of a
// node as requests, the job image with the runner as its command. A task
// asking for what a pod cannot do (a Docker volume, a block device, a user
// name) is an error.
//
// The pod is on the pod network whatever spec.NetworkMode says: the host
// networking the nodes of a cluster ask for is, on Kubernetes, the pod's
// own address, at which every port its job listens on is reachable from
// the other pods (dstack runs multi-node jobs on Kubernetes over pod IPs;
// the pod shim reports the IP as TaskInfo.InternalIP).
func buildPod(rec instanceRecord, spec api.TaskSpec, ps podSpec) (*corev1.Pod, error) {
	sc, err := securityContext(spec)
	if err != nil {
		return nil, err
	}
	if len(spec.VolumeMounts) > 0 {
		return nil, fmt.Errorf("docker volume %q: the kubernetes backend mounts persistent volume claims, not docker volumes", spec.VolumeMounts[0].Name)
	}
	pull := corev1.PullIfNotPresent
	if spec.PullPolicy == api.PullAlways {
		pull = corev1.PullAlways
	}
	bin := corev1.VolumeMount{Name: "hoist-bin", MountPath: binDir}
	volumes := []corev1.Volume{
		{Name: "hoist-bin", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "hoist-run", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	}
	mounts := []corev1.VolumeMount{bin, {Name: "hoist-run", MountPath: runnerHome}}
	if spec.ShmSizeBytes > 0 {
		volumes = append(volumes, corev1.Volume{Name: "hoist-shm", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
			Medium: corev1.StorageMediumMemory, SizeLimit: resource.NewQuantity(spec.ShmSizeBytes, resource.BinarySI)}}})
		mounts = append(mounts, corev1.VolumeMount{Name: "hoist-shm", MountPath: "/dev/shm"})
	}
	for i, v := range spec.NetworkVolumes {
		if v.Claim == "" {
			return nil, fmt.Errorf("volume %q: the kubernetes backend mounts persistent volume claims, not block devices", v.Name)
		}
		name := "vol-" + strconv.Itoa(i)
		volumes = append(volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: v.Claim, ReadOnly: v.ReadOnly}}})
		m := corev1.VolumeMount{Name: name, MountPath: v.Path, ReadOnly: v.ReadOnly}
		if v.ReadOnly {
			rro := corev1.RecursiveReadOnlyIfPossible
			m.RecursiveReadOnly = &rro
		}
		mounts = append(mounts, m)
	}
	for i, m := range spec.InstanceMounts {
		name := "host-" + strconv.Itoa(i)
		dirOrCreate := corev1.HostPathDirectoryOrCreate
		volumes = append(volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{
			HostPath: &corev1.HostPathVolumeSource{Path: m.InstancePath, Type: &dirOrCreate}}})
		mounts = append(mounts, corev1.VolumeMount{Name: name, MountPath: m.Path, ReadOnly: m.ReadOnly})
	}
	res, gpu, err := resources(rec, spec)
	if err != nil {
		return nil, err
	}
	var env []corev1.EnvVar
	for i, k := range slices.Sorted(maps.Keys(spec.Env)) {
		env = append(env, corev1.EnvVar{Name: k, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: ps.Secret}, Key: secretEnvPrefix + strconv.Itoa(i)}}})
	}
	if gpu == "" {
		// dstack: a pod without GPUs sees none of the node's.
		env = append(env, corev1.EnvVar{Name: "NVIDIA_VISIBLE_DEVICES", Value: "void"})
	}
	var ports []corev1.ContainerPort
	for _, p := range spec.Ports {
		ports = append(ports, corev1.ContainerPort{ContainerPort: int32(p.Container), Protocol: corev1.ProtocolTCP})
	}
	pod := &corev1.Pod{
		ObjectMeta: taskMetaFor(rec, spec, ps),
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			// The job gets no credentials for the API server.
			AutomountServiceAccountToken:  new(false),
			EnableServiceLinks:            new(false),
			TerminationGracePeriodSeconds: new(int64(podGrace)),
			InitContainers: []corev1.Container{{
				Name: initContainer, Image: spec.Image, ImagePullPolicy: pull,
				Command:         []string{"sh", "-c", "until [ -f " + readyFile + " ]; do sleep 0.1; done"},
				VolumeMounts:    []corev1.VolumeMount{bin},
				SecurityContext: sc,
			}},
			Containers: []corev1.Container{{
				Name: jobContainer, Image: spec.Image, ImagePullPolicy: pull,
				Command: []string{runnerBinary, "--listen", "127.0.0.1:" + strconv.Itoa(runnerPort), "--home", runnerHome,
					"--token-file", runnerTokenFile, "--termination-log", terminationLog},
				Env: env, Resources: res, VolumeMounts: mounts, Ports: ports, SecurityContext: sc,
				TerminationMessagePath: terminationLog, TerminationMessagePolicy: corev1.TerminationMessageReadFile,
			}},
			Volumes: volumes,
		},
	}
	if ps.PullSecret != "" {
		pod.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: ps.PullSecret}}
	}
	if gpu != "" {
		// Nodes with GPUs are often tainted for their resource.
		for _, effect := range []corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectNoExecute} {
			pod.Spec.Tolerations = append(pod.Spec.Tolerations, corev1.Toleration{Key: string(gpu), Operator: corev1.TolerationOpExists, Effect: effect})
		}
	}
	if gpu != "" && rec.Offer.GPUName != "" {
		label := productLabel(gpu)
		var values []string
		for _, p := range ps.GPUProducts {
			if productNames(gpu, p, rec.Offer.GPUName) && !slices.Contains(values, p) {
				values = append(values, p)
			}
		}
		if len(values) == 0 {
			return nil, fmt.Errorf("no node has a %s label naming the %s GPU", label, rec.Offer.GPUName)
		}
		slices.Sort(values)
		pod.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: label, Operator: corev1.NodeSelectorOpIn, Values: values}},
			}}},
		}}
	}
	return pod, nil
}

func taskMetaFor(rec instanceRecord, spec api.TaskSpec, ps podSpec) metav1.ObjectMeta {
	m := taskMeta(rec, spec, ps.Name, ps.Namespace)
	if !ps.CreatedAt.IsZero() {
		m.Annotations[createdAnnotation] = ps.CreatedAt.UTC().Format(time.RFC3339Nano)
	}
	for k, v := range spec.Labels {
		if _, taken := m.Labels[k]; !taken && len(validation.IsQualifiedName(k)) == 0 {
			m.Labels[k] = labelValue(v)
		}
	}
	return m
}

// securityContext returns the containers' security context: the task's
// user (numeric only: Kubernetes runs containers as a user id, not a name)
// and privileged mode; nil when the task sets neither.
func securityContext(spec api.TaskSpec) (*corev1.SecurityContext, error) {
	if spec.User == "" && !spec.Privileged {
		return nil, nil
	}
	sc := &corev1.SecurityContext{}
	if spec.Privileged {
		sc.Privileged = new(true)
	}
	if spec.User != "" {
		u, g, hasGroup := strings.Cut(spec.User, ":")
		uid, err := strconv.ParseInt(u, 10, 64)
		if err != nil || uid < 0 || uid > math.MaxInt32 {
			return nil, fmt.Errorf("user %q: the kubernetes backend runs a container as a numeric user id (uid or uid:gid)", spec.User)
		}
		sc.RunAsUser = &uid
		if hasGroup {
			gid, err := strconv.ParseInt(g, 10, 64)
			if err != nil || gid < 0 || gid > math.MaxInt32 {
				return nil, fmt.Errorf("user %q: the kubernetes backend runs a container as a numeric group id (uid:gid)", spec.User)
			}
			sc.RunAsGroup = &gid
		}
	}
	return sc, nil
}

// resources returns the job container's resources: the instance's slice of
// its node as requests (dstack's offer cut to the spec's minimums); memory
// and GPUs limited to it, as a machine of that size would be; CPU limited
// only when the task says so. gpu is the GPU resource, "" for none.
func resources(rec instanceRecord, spec api.TaskSpec) (corev1.ResourceRequirements, corev1.ResourceName, error) {
	o := rec.Offer
	req, lim := corev1.ResourceList{}, corev1.ResourceList{}
	if o.CPUs > 0 {
		req[corev1.ResourceCPU] = *resource.NewQuantity(int64(o.CPUs), resource.DecimalSI)
	}
	if spec.CPUs > 0 {
		lim[corev1.ResourceCPU] = *resource.NewMilliQuantity(int64(math.Ceil(spec.CPUs*1000)), resource.DecimalSI)
	}
	if o.MemoryGB > 0 {
		mem := *resource.NewQuantity(int64(o.MemoryGB*(1<<30)), resource.BinarySI)
		req[corev1.ResourceMemory], lim[corev1.ResourceMemory] = mem, mem
	}
	if spec.MemoryBytes > 0 {
		lim[corev1.ResourceMemory] = *resource.NewQuantity(spec.MemoryBytes, resource.BinarySI)
		if m, ok := req[corev1.ResourceMemory]; ok && m.Value() > spec.MemoryBytes {
			req[corev1.ResourceMemory] = lim[corev1.ResourceMemory]
		}
	}
	var gpu corev1.ResourceName
	if n := o.GPUCount; n > 0 {
		switch vendor := strings.ToLower(o.GPUVendor); vendor {
		case "", "nvidia":
			gpu = nvidiaGPU
		case "amd":
			gpu = amdGPU
		default:
			return corev1.ResourceRequirements{}, "", fmt.Errorf("gpu vendor %q: the kubernetes backend schedules nvidia.com/gpu and amd.com/gpu", o.GPUVendor)
		}
		// Extended resources: the limit is the request
		// (https://kubernetes.io/docs/concepts/configuration/manage-resources-containers/#extended-resources).
		q := *resource.NewQuantity(int64(n), resource.DecimalSI)
		req[gpu], lim[gpu] = q, q
	}
	out := corev1.ResourceRequirements{}
	if len(req) > 0 {
		out.Requests = req
	}
	if len(lim) > 0 {
		out.Limits = lim
	}
	return out, gpu, nil
}

// productLabel returns the node label naming the model of GPU resource gpu.
func productLabel(gpu corev1.ResourceName) string {
	if gpu == amdGPU {
		return amdProduct
	}
	return nvidiaProduct
}

// productNames reports whether product, the value of a node's product label
// of GPU resource gpu, names the GPU called name in an offer: the label as
// the driver's offers spell it (NVIDIA's with "RTX-" as "RTX ", AMD's with
// spaces for underscores), or, for NVIDIA, one of its dash-separated words
// as dstack reads GPU feature discovery's label (A100 in
// "NVIDIA-A100-SXM4-40GB", RTX4090 in "NVIDIA-GeForce-RTX-4090":
// core/backends/kubernetes/resources.py), case aside.
func productNames(gpu corev1.ResourceName, product, name string) bool {
	if gpu == amdGPU {
		return strings.EqualFold(product, name) || strings.EqualFold(strings.ReplaceAll(product, "_", " "), name)
	}
	if strings.EqualFold(product, name) || strings.EqualFold(strings.ReplaceAll(product, "RTX-", "RTX "), name) {
		return true
	}
	p := strings.ReplaceAll(strings.ToUpper(product), "RTX-", "RTX")
	for _, w := range strings.Split(p, "-") {
		if w != "" && strings.EqualFold(w, name) {
			return true
		}
	}
	return false
}

// Waiting reasons of a container that end its task at once: the kubelet
// would retry, but the task cannot start (dstack fails fast on them too).
var (
	pullFailures = map[string]bool{"ErrImagePull": true, "ImagePullBackOff": true, "InvalidImageName": true,
		"ErrImageNeverPull": true, "RegistryUnavailable": true}
	createFailures = map[string]bool{"CreateContainerConfigError": true, "CreateContainerError": true, "RunContainerError": true}
)

// podInfo returns the task of pod as the shim API reports it, at now:
//   - pending until the pod is scheduled; an unschedulable pod older than
//     unschedulable is terminated with api.ReasonNoCapacity (dstack:
//     "not scheduled within 10 s" is no capacity);
//   - pulling while the init container (the job's image) is being created;
//   - creating while the runner is copied in and the job container starts;
//   - running once the job container runs, with RunnerAddr;
//   - with InternalIP, the pod's IP, from the moment it has one until the
//     task ends;
//   - terminated once the job container has terminated (its exit code, the
//     job state the runner left in its termination log), the pod has
//     failed or is being deleted, the image cannot be pulled, or the pod
//     shim stopped it (reasonAnnotation).
func podInfo(pod *corev1.Pod, now time.Time, unschedulable time.Duration) api.TaskInfo {
	info := api.TaskInfo{ID: pod.Annotations[taskAnnotation], Status: api.TaskPending, ContainerName: pod.Name,
		Updated: pod.CreationTimestamp.Time}
	if info.ID == "" {
		info.ID = pod.Labels[taskLabel]
	}
	for _, p := range pod.Spec.Containers[0].Ports {
		info.Ports = append(info.Ports, api.PortMapping{Container: int(p.ContainerPort), Addr: podAddr(pod.Name, int(p.ContainerPort))})
	}
	for _, c := range pod.Status.Conditions {
		info.Updated = laterOf(info.Updated, c.LastTransitionTime.Time)
	}
	initSt, jobSt := containerStatus(pod.Status.InitContainerStatuses, initContainer), containerStatus(pod.Status.ContainerStatuses, jobContainer)
	for _, st := range []*corev1.ContainerStatus{initSt, jobSt} {
		if st == nil {
			continue
		}
		if r := st.State.Running; r != nil {
			info.Updated = laterOf(info.Updated, r.StartedAt.Time)
		}
		if t := st.State.Terminated; t != nil {
			info.Updated = laterOf(info.Updated, t.FinishedAt.Time)
		}
	}
	if jobSt != nil {
		info.ContainerID = jobSt.ContainerID
	}
	// The pod's own address on the pod network, where the other nodes of
	// a cluster reach it (dstack: internal_ip is the pod IP).
	info.InternalIP = pod.Status.PodIP
	terminate := func(reason, message string) api.TaskInfo {
		if r := pod.Annotations[reasonAnnotation]; r != "" {
			reason, message = r, pod.Annotations[messageAnnotation]
		}
		info.Status, info.TerminationReason, info.TerminationMessage, info.RunnerAddr, info.Ports = api.TaskTerminated, reason, message, "", nil
		info.InternalIP = ""
		return info
	}
	running := (initSt != nil && initSt.State.Running != nil) || (jobSt != nil && jobSt.State.Running != nil)

	// The job container has terminated: the task has.
	if jobSt != nil && jobSt.State.Terminated != nil {
		t := jobSt.State.Terminated
		code := int(t.ExitCode)
		info.ExitCode = &code
		var job *api.JobState
		var st api.JobState
		if json.Unmarshal([]byte(t.Message), &st) == nil && st.State != "" {
			job = &st
		}
		info.Job = job
		oom := t.Reason == "OOMKilled"
		info = terminate(api.TaskEnd(&code, oom, job))
		if oom && !strings.Contains(info.TerminationMessage, "out of memory") {
			// A process of the job was OOM killed, whatever else ended it.
			info.TerminationMessage = strings.TrimPrefix(info.TerminationMessage+"; the container ran out of memory (OOM killed)", "; ")
		}
		return info
	}
	// The pod shim stopped the task, and nothing runs any more.
	if pod.Annotations[reasonAnnotation] != "" && !running {
		return terminate("", "")
	}
	if pod.DeletionTimestamp != nil {
		return terminate(api.ReasonContainerLost, "the pod was deleted from outside")
	}
	if initSt != nil && initSt.State.Terminated != nil && initSt.State.Terminated.ExitCode != 0 {
		t := initSt.State.Terminated
		return terminate(api.ReasonCreatingContainerError, fmt.Sprintf("the init container exited with code %d (%s): %s", t.ExitCode, t.Reason, t.Message))
	}
	switch pod.Status.Phase {
	case corev1.PodFailed, corev1.PodSucceeded:
		msg := "the pod ended before its job container ran"
		if pod.Status.Reason != "" || pod.Status.Message != "" {
			msg = strings.TrimSpace(pod.Status.Reason + ": " + pod.Status.Message)
		}
		return terminate(api.ReasonContainerLost, msg)
	}
	for _, st := range []*corev1.ContainerStatus{initSt, jobSt} {
		if st == nil || st.State.Waiting == nil {
			continue
		}
		w := st.State.Waiting
		switch {
		case pullFailures[w.Reason]:
			return terminate(api.ReasonImagePullError, fmt.Sprintf("image %s: %s: %s", pod.Spec.Containers[0].Image, w.Reason, w.Message))
		case createFailures[w.Reason]:
			return terminate(api.ReasonCreatingContainerError, w.Reason+": "+w.Message)
		}
	}
	sched := podCondition(pod, corev1.PodScheduled)
	if sched == nil || sched.Status != corev1.ConditionTrue {
		created := pod.CreationTimestamp.Time
		if t, err := time.Parse(time.RFC3339Nano, pod.Annotations[createdAnnotation]); err == nil {
			created = t
		}
		if sched != nil && sched.Reason == corev1.PodReasonUnschedulable && now.Sub(created) >= unschedulable {
			return terminate(api.ReasonNoCapacity, fmt.Sprintf("no node can take the pod (unschedulable for %s): %s", unschedulable, sched.Message))
		}
		return info
	}
	switch {
	case jobSt != nil && jobSt.State.Running != nil:
		info.Status = api.TaskRunning
		info.RunnerAddr = runnerAddr(pod.Name)
	case initSt != nil && (initSt.State.Running != nil || initSt.State.Terminated != nil):
		info.Status = api.TaskCreating
	default:
		info.Status = api.TaskPulling
	}
	return info
}

func containerStatus(sts []corev1.ContainerStatus, name string) *corev1.ContainerStatus {
	for i := range sts {
		if sts[i].Name == name {
			return &sts[i]
		}
	}
	return nil
}

func podCondition(pod *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == t {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

func laterOf(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// runnerHostSuffix ends the host name under which requests for a pod's
// runner (or another port of the pod) travel: the pod's name, then this
// suffix. The Conn's transport dials such a host through a port-forward to
// the pod (portforward.go).
const runnerHostSuffix = ".pod.hoist.invalid"

// runnerAddr returns the runner address (TaskInfo.RunnerAddr) of the pod
// called name.
func runnerAddr(name string) string { return "http://" + podAddr(name, runnerPort) }

// podAddr returns host:port of port of the pod called name, as the Conn's
// transport dials it (PortMapping.Addr).
func podAddr(name string, port int) string {
	return name + runnerHostSuffix + ":" + strconv.Itoa(port)
}

// podOfHost returns the pod name and port a host:port of a runnerAddr
// names, if it names one.
func podOfHost(hostport string) (string, int, bool) {
	host, p, ok := strings.Cut(hostport, ":")
	if !ok {
		return "", 0, false
	}
	name, ok := strings.CutSuffix(host, runnerHostSuffix)
	port, err := strconv.Atoi(p)
	if !ok || name == "" || err != nil || len(validation.IsDNS1123Label(name)) > 0 {
		return "", 0, false
	}
	return name, port, true
}
