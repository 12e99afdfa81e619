package kubernetes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"hoist/agents/api"
	"hoist/backends"
	"hoist/backends/internal/agentauth"
	"hoist/backends/internal/shimserver"
)

// podShimVersion is what the pod shim reports as its version.
const podShimVersion = "kubernetes-pod-shim"

// A podShim answers the shim HTTP API (agents/api, as agents/shim serves
// it) for one instance, inside the server: each task is a pod in the
// cluster, and the cluster is the only state, so that any server (or the
// same one after a restart) sees every task. It copies the runner into each
// task's pod once the init container runs; GetTask, WaitTask and ListTasks
// also do that for pods a previous server left waiting.
type podShim struct {
	c             *cluster
	rec           instanceRecord
	unschedulable time.Duration
	fwd           *forwarder
	log           *slog.Logger
	now           func() time.Time
	// runners reaches the tasks' runners (Terminate's stop request); the
	// Conn sets it.
	runners *http.Client

	ctx    context.Context // ends with the Conn
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu         sync.Mutex
	tokens     map[types.UID]string // runner tokens by pod
	delivering map[types.UID]bool
	delivered  map[types.UID]bool
	failures   map[types.UID]int // failed deliveries by pod
	arch       map[string]string // node architectures by node name
}

func newPodShim(c *cluster, rec instanceRecord, unschedulable time.Duration) *podShim {
	ctx, cancel := context.WithCancel(context.Background())
	now := c.now
	if now == nil {
		now = time.Now
	}
	log := c.log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &podShim{c: c, rec: rec, unschedulable: unschedulable, fwd: newForwarder(c), log: log.With("instance", rec.ID), now: now,
		ctx: ctx, cancel: cancel, tokens: map[types.UID]string{}, delivering: map[types.UID]bool{}, delivered: map[types.UID]bool{},
		failures: map[types.UID]int{}, arch: map[string]string{}}
}

// close stops the background work and the port-forwards.
func (s *podShim) close() {
	s.cancel()
	s.wg.Wait()
	s.fwd.Close()
}

// HostInfo describes the instance: its slice of a node, as reserved.
func (s *podShim) HostInfo() api.HostInfo {
	return shimserver.OfferHost(s.rec.ID, s.rec.Offer, podShimVersion)
}

// CreateTask creates the task's secrets and pod and returns it pending; the
// pod shim copies the runner in once the init container runs.
func (s *podShim) CreateTask(ctx context.Context, spec api.TaskSpec) (api.TaskInfo, error) {
	if spec.ID == "" || spec.Image == "" {
		return api.TaskInfo{}, fmt.Errorf("a task needs an id and an image: %w", shimserver.ErrInvalid)
	}
	if _, err := s.findPod(ctx, spec.ID); err == nil {
		return api.TaskInfo{}, fmt.Errorf("task %s exists: %w", spec.ID, shimserver.ErrConflict)
	} else if !errors.Is(err, shimserver.ErrNotFound) {
		return api.TaskInfo{}, err
	}
	name, ns := podName(spec), s.c.namespace
	ps := podSpec{Name: name, Namespace: ns, Secret: name, CreatedAt: s.now()}
	if s.rec.Offer.GPUCount > 0 {
		label := nvidiaProduct
		if strings.EqualFold(s.rec.Offer.GPUVendor, "amd") {
			label = amdProduct
		}
		products, err := s.gpuProducts(ctx, label)
		if err != nil {
			return api.TaskInfo{}, err
		}
		ps.GPUProducts = products
	}
	pull := pullSecret(s.rec, spec, name+"-registry-auth", ns)
	if pull != nil {
		ps.PullSecret = pull.Name
	}
	pod, err := buildPod(s.rec, spec, ps)
	if err != nil {
		return api.TaskInfo{}, fmt.Errorf("task %s: %w: %w", spec.ID, err, shimserver.ErrInvalid)
	}
	token, err := agentauth.NewToken()
	if err != nil {
		return api.TaskInfo{}, err
	}
	secrets := []*corev1.Secret{taskSecret(s.rec, spec, name, ns, token)}
	if pull != nil {
		secrets = append(secrets, pull)
	}
	// The secrets first, so that the kubelet finds them; they get the pod
	// as their owner once it exists, and go with it.
	for _, sec := range secrets {
		if err := s.putSecret(ctx, sec); err != nil {
			s.deleteSecrets(spec.ID)
			return api.TaskInfo{}, err
		}
	}
	created, err := s.c.client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		s.deleteSecrets(spec.ID)
		if apierrors.IsAlreadyExists(err) {
			return api.TaskInfo{}, fmt.Errorf("task %s: pod %s exists: %w", spec.ID, name, shimserver.ErrConflict)
		}
		if apierrors.IsInvalid(err) || apierrors.IsForbidden(err) {
			return api.TaskInfo{}, fmt.Errorf("task %s: create pod: %w: %w", spec.ID, err, shimserver.ErrInvalid)
		}
		return api.TaskInfo{}, fmt.Errorf("task %s: create pod: %w", spec.ID, err)
	}
	s.mu.Lock()
	s.tokens[created.UID] = token
	s.mu.Unlock()
	owner := metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: created.Name, UID: created.UID}
	for _, sec := range secrets {
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"ownerReferences": []metav1.OwnerReference{owner}}})
		if _, err := s.c.client.CoreV1().Secrets(ns).Patch(ctx, sec.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			s.log.Warn("secret_owner_not_set", "secret", sec.Name, "pod", created.Name, "err", err)
		}
	}
	s.log.Info("task_pod_created", "task_id", spec.ID, "pod", created.Name, "namespace", ns, "image", spec.Image)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.follow(spec.ID)
	}()
	return podInfo(created, s.now(), s.unschedulable), nil
}

// putSecret creates sec, replacing one of the same name a failed creation
// left behind.
func (s *podShim) putSecret(ctx context.Context, sec *corev1.Secret) error {
	secrets := s.c.client.CoreV1().Secrets(sec.Namespace)
	_, err := secrets.Create(ctx, sec, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		_, err = secrets.Update(ctx, sec, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("create secret %s: %w", sec.Name, err)
	}
	return nil
}

// gpuProducts returns the values of the nodes' label.
func (s *podShim) gpuProducts(ctx context.Context, label string) ([]string, error) {
	nodes, err := s.c.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: label})
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	var out []string
	for _, n := range nodes.Items {
		if v := n.Labels[label]; v != "" && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out, nil
}

// findPod returns the pod of task id of this instance.
func (s *podShim) findPod(ctx context.Context, id string) (*corev1.Pod, error) {
	l, err := s.c.client.CoreV1().Pods(s.c.namespace).List(ctx, metav1.ListOptions{LabelSelector: taskSelector(s.rec.ID, id)})
	if err != nil {
		return nil, fmt.Errorf("task %s: list pods: %w", id, err)
	}
	var found *corev1.Pod
	for i := range l.Items {
		p := &l.Items[i]
		if tid := p.Annotations[taskAnnotation]; tid != "" && tid != id {
			continue // another task whose id has the same digest
		}
		if found == nil || p.CreationTimestamp.After(found.CreationTimestamp.Time) {
			found = p
		}
	}
	if found == nil {
		return nil, fmt.Errorf("task %s: %w", id, shimserver.ErrNotFound)
	}
	return found, nil
}

// GetTask returns task id as it is now.
func (s *podShim) GetTask(ctx context.Context, id string) (api.TaskInfo, error) {
	pod, err := s.findPod(ctx, id)
	if err != nil {
		return api.TaskInfo{}, err
	}
	return s.observe(ctx, pod), nil
}

// waitPoll is how often WaitTask and follow look at a pod.
const waitPoll = 200 * time.Millisecond

// WaitTask waits up to timeout until task id has reached status (or
// terminated) and returns it as it is then.
func (s *podShim) WaitTask(ctx context.Context, id, status string, timeout time.Duration) (api.TaskInfo, error) {
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last api.TaskInfo
	for {
		info, err := s.GetTask(wctx, id)
		switch {
		case err == nil:
			last = info
			if info.Terminated() || api.TaskStatusRank(info.Status) >= api.TaskStatusRank(status) {
				return info, nil
			}
		case ctx.Err() != nil:
			return last, ctx.Err()
		case wctx.Err() != nil && last.ID != "":
			// The wait is over while asking: what was seen last.
			return last, nil
		default:
			return last, err
		}
		select {
		case <-ctx.Done():
			return last, ctx.Err()
		case <-wctx.Done():
			return last, nil
		case <-time.After(waitPoll):
		}
	}
}

// follow watches a new task's pod until its job container runs or it
// terminates, so that the runner is delivered and a pod that cannot start
// is stopped even when nobody asks (the reconciler polls, too).
func (s *podShim) follow(id string) {
	poll := waitPoll
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-time.After(poll):
		}
		ctx, cancel := context.WithTimeout(s.ctx, 30*time.Second)
		info, err := s.GetTask(ctx, id)
		cancel()
		if errors.Is(err, shimserver.ErrNotFound) || (err == nil && (info.Terminated() || info.Status == api.TaskRunning)) {
			return
		}
		poll = min(poll*3/2, 2*time.Second)
	}
}

// observe returns the task of pod and acts on it: it copies the runner into
// a pod whose init container waits for it, and stops a pod whose task
// podInfo found ended (no capacity, an image that cannot be pulled) so
// that it never starts later.
func (s *podShim) observe(ctx context.Context, pod *corev1.Pod) api.TaskInfo {
	info := podInfo(pod, s.now(), s.unschedulable)
	finished := pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
	if info.Terminated() && pod.Annotations[reasonAnnotation] == "" && !finished && pod.DeletionTimestamp == nil {
		if err := s.stopPod(ctx, pod, info.TerminationReason, info.TerminationMessage); err != nil {
			s.log.Warn("task_pod_not_stopped", "task_id", info.ID, "pod", pod.Name, "err", err)
		} else {
			s.log.Info("task_failed", "task_id", info.ID, "pod", pod.Name, "reason", info.TerminationReason, "message", info.TerminationMessage)
		}
	}
	if info.Terminated() {
		return info
	}
	if st := containerStatus(pod.Status.InitContainerStatuses, initContainer); pod.Spec.NodeName != "" && (st == nil || st.State.Terminated == nil) {
		// Bound to a node: the init container runs, or soon will (the
		// kubelet reports it a second or two late).
		s.startDelivery(pod)
	}
	if info.Status == api.TaskCreating && s.runnerStarting(pod) {
		// The kubelet reports the job container running a second late; a
		// runner that answers runs.
		if addr := runnerAddr(pod.Name); s.runnerAnswers(ctx, pod, addr) {
			info.Status, info.RunnerAddr = api.TaskRunning, addr
		}
	}
	if info.Status == api.TaskRunning {
		tok, err := s.token(ctx, pod)
		if err != nil {
			s.log.Warn("runner_token_unknown", "task_id", info.ID, "pod", pod.Name, "err", err)
			info.Status, info.RunnerAddr = api.TaskCreating, ""
		}
		info.RunnerToken = tok
	}
	return info
}

// runnerStarting reports whether pod's runner was delivered (its init
// container completed, or this pod shim delivered it) while the job
// container is not reported running yet.
func (s *podShim) runnerStarting(pod *corev1.Pod) bool {
	if st := containerStatus(pod.Status.ContainerStatuses, jobContainer); st != nil && st.State.Waiting == nil {
		return false
	}
	if st := containerStatus(pod.Status.InitContainerStatuses, initContainer); st != nil && st.State.Terminated != nil {
		return st.State.Terminated.ExitCode == 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.delivered[pod.UID]
}

// runnerAnswers asks the health check of the runner of pod at addr, briefly.
func (s *podShim) runnerAnswers(ctx context.Context, pod *corev1.Pod, addr string) bool {
	if s.runners == nil {
		return false
	}
	tok, err := s.token(ctx, pod)
	if err != nil {
		return false
	}
	hctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_, err = api.NewRunnerClient(addr, s.runners).WithToken(tok).Health(hctx)
	return err == nil
}

// stopPod records why the task of pod ended and has the kubelet stop the
// pod, keeping it (and its status) until the task is removed: an active
// deadline of one second, which a running pod has passed
// (https://kubernetes.io/docs/concepts/workloads/pods/pod-lifecycle/, activeDeadlineSeconds;
// it may be set on a running pod, and lowered). The first reason stays.
func (s *podShim) stopPod(ctx context.Context, pod *corev1.Pod, reason, message string) error {
	meta := map[string]any{}
	if pod.Annotations[reasonAnnotation] == "" {
		meta["annotations"] = map[string]string{reasonAnnotation: reason, messageAnnotation: message}
	}
	patch, _ := json.Marshal(map[string]any{"metadata": meta, "spec": map[string]any{"activeDeadlineSeconds": 1}})
	_, err := s.c.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return fmt.Errorf("stop pod %s: %w", pod.Name, err)
	}
	return nil
}

// token returns the runner token of pod's task, from its secret.
func (s *podShim) token(ctx context.Context, pod *corev1.Pod) (string, error) {
	s.mu.Lock()
	tok, ok := s.tokens[pod.UID]
	s.mu.Unlock()
	if ok {
		return tok, nil
	}
	sec, err := s.c.client.CoreV1().Secrets(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("task secret %s: %w", pod.Name, err)
	}
	tok = string(sec.Data[secretTokenKey])
	if tok == "" {
		return "", fmt.Errorf("task secret %s holds no runner token", pod.Name)
	}
	s.mu.Lock()
	s.tokens[pod.UID] = tok
	s.mu.Unlock()
	return tok, nil
}

// maxDeliveryFailures is how many times copying the runner into a pod
// whose init container runs may fail before its task ends with an executor
// error.
const maxDeliveryFailures = 3

// startDelivery copies the runner into pod in the background, unless that
// is under way or done. It tries from the moment the pod is bound to a
// node, backing off, until the init container takes it: the kubelet
// reports a running container a second or two after it started.
func (s *podShim) startDelivery(pod *corev1.Pod) {
	s.mu.Lock()
	if s.delivering[pod.UID] || s.delivered[pod.UID] || s.ctx.Err() != nil {
		s.mu.Unlock()
		return
	}
	s.delivering[pod.UID] = true
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		ok := s.deliverLoop(pod)
		s.mu.Lock()
		delete(s.delivering, pod.UID)
		if ok {
			s.delivered[pod.UID] = true
		}
		s.mu.Unlock()
	}()
}

// deliverLoop tries to deliver the runner into pod until it succeeds (true),
// the init container is gone, or deliveries into the running init container
// failed maxDeliveryFailures times (the task then ends).
func (s *podShim) deliverLoop(pod *corev1.Pod) bool {
	wait, failures := 100*time.Millisecond, 0
	end := time.Now().Add(deliveryTimeout)
	for {
		err := s.deliver(pod)
		if err == nil {
			return true
		}
		if s.ctx.Err() != nil {
			return false
		}
		state := s.initState(pod)
		switch {
		case state == nil || state.Terminated != nil:
			// Gone, stopped, or another server delivered.
			return false
		case state.Running != nil:
			failures++
			s.log.Warn("runner_delivery_failed", "pod", pod.Name, "attempt", failures, "err", err)
			if failures >= maxDeliveryFailures {
				ctx, cancel := context.WithTimeout(s.ctx, 30*time.Second)
				defer cancel()
				if err := s.stopPod(ctx, pod, api.ReasonExecutorError, fmt.Sprintf("copy the runner into the pod: %v", err)); err != nil {
					s.log.Warn("task_pod_not_stopped", "pod", pod.Name, "err", err)
				}
				return false
			}
		case time.Now().After(end):
			// Still pulling, say: the next look at the pod tries again.
			return false
		}
		select {
		case <-s.ctx.Done():
			return false
		case <-time.After(wait):
		}
		wait = min(wait*3/2, time.Second)
	}
}

// initState returns the state of pod's init container now, nil when the
// pod is gone (or is another pod by now).
func (s *podShim) initState(pod *corev1.Pod) *corev1.ContainerState {
	ctx, cancel := context.WithTimeout(s.ctx, 30*time.Second)
	defer cancel()
	p, err := s.c.client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil || p.UID != pod.UID {
		return nil
	}
	if st := containerStatus(p.Status.InitContainerStatuses, initContainer); st != nil {
		return &st.State
	}
	return &corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{}}
}

// deliveryTimeout bounds one copy of the runner into a pod.
const deliveryTimeout = 2 * time.Minute

// deliver copies the runner for the pod's node's architecture and the
// task's token into the pod.
func (s *podShim) deliver(pod *corev1.Pod) error {
	ctx, cancel := context.WithTimeout(s.ctx, deliveryTimeout)
	defer cancel()
	arch, err := s.nodeArch(ctx, pod.Spec.NodeName)
	if err != nil {
		return err
	}
	if s.c.agents == nil {
		return errors.New("the server has no hoist-runner binaries")
	}
	_, runner, err := s.c.agents(arch)
	if err != nil {
		return fmt.Errorf("hoist-runner for %s: %w", arch, err)
	}
	tok, err := s.token(ctx, pod)
	if err != nil {
		return err
	}
	start := time.Now()
	if err := deliverRunner(ctx, s.c, pod.Name, runner, tok); err != nil {
		return err
	}
	s.log.Info("runner_delivered", "pod", pod.Name, "arch", arch, "duration", time.Since(start))
	return nil
}

// nodeArch returns the architecture of node name (Go's spelling).
func (s *podShim) nodeArch(ctx context.Context, name string) (string, error) {
	s.mu.Lock()
	a, ok := s.arch[name]
	s.mu.Unlock()
	if ok {
		return a, nil
	}
	n, err := s.c.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("node %s: %w", name, err)
	}
	a = n.Status.NodeInfo.Architecture
	if a == "" {
		a = "amd64"
	}
	s.mu.Lock()
	s.arch[name] = a
	s.mu.Unlock()
	return a, nil
}

// ListTasks returns every task of the instance.
func (s *podShim) ListTasks(ctx context.Context) (api.TaskList, error) {
	l, err := s.c.client.CoreV1().Pods(s.c.namespace).List(ctx, metav1.ListOptions{LabelSelector: tasksSelector(s.rec.ID)})
	if err != nil {
		return api.TaskList{}, fmt.Errorf("list pods: %w", err)
	}
	out := api.TaskList{Tasks: []api.TaskInfo{}}
	for i := range l.Items {
		out.Tasks = append(out.Tasks, s.observe(ctx, &l.Items[i]))
	}
	slices.SortFunc(out.Tasks, func(a, b api.TaskInfo) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// TerminateTask stops task id: the runner stops the job with grace when it
// answers, then the kubelet stops the pod (stopPod). It returns once the
// pod's containers have stopped, or ctx ends.
func (s *podShim) TerminateTask(ctx context.Context, id, reason, message string, grace time.Duration) (api.TaskInfo, error) {
	if reason == "" {
		reason = api.ReasonTerminatedByServer
	}
	pod, err := s.findPod(ctx, id)
	if err != nil {
		return api.TaskInfo{}, err
	}
	info := s.observe(ctx, pod)
	if info.Terminated() {
		return info, nil
	}
	s.log.Info("task_terminating", "task_id", id, "pod", pod.Name, "reason", reason, "grace", grace)
	if info.RunnerAddr != "" && grace > 0 && s.runners != nil {
		// The runner stops the job's process group with the full grace
		// and records why (the docker shim does the same).
		sctx, cancel := context.WithTimeout(ctx, grace+5*time.Second)
		rc := api.NewRunnerClient(info.RunnerAddr, s.runners).WithToken(info.RunnerToken)
		if _, err := rc.StopWithReason(sctx, grace, reason, message); err != nil {
			s.log.Warn("runner_stop_failed", "task_id", id, "err", err)
		}
		cancel()
	}
	if err := s.stopPod(ctx, pod, reason, message); err != nil {
		return info, err
	}
	for {
		pod, err := s.findPod(ctx, id)
		if err != nil {
			if ctx.Err() != nil {
				return info, nil
			}
			return info, err
		}
		if info = s.observe(ctx, pod); info.Terminated() {
			return info, nil
		}
		select {
		case <-ctx.Done():
			return info, nil
		case <-time.After(waitPoll):
		}
	}
}

// RemoveTask deletes a terminated task's pod and secrets.
func (s *podShim) RemoveTask(ctx context.Context, id string) error {
	pod, err := s.findPod(ctx, id)
	if errors.Is(err, shimserver.ErrNotFound) {
		// Secrets a lost pod left behind go too.
		if err := s.deleteTaskSecrets(ctx, id); err != nil {
			return err
		}
		return fmt.Errorf("task %s: %w", id, shimserver.ErrNotFound)
	}
	if err != nil {
		return err
	}
	if info := podInfo(pod, s.now(), s.unschedulable); !info.Terminated() {
		return fmt.Errorf("task %s is %s, not terminated: %w", id, info.Status, shimserver.ErrConflict)
	}
	// Its containers have stopped: nothing is left to wait for.
	err = s.c.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: new(int64(1)), Preconditions: &metav1.Preconditions{UID: &pod.UID}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("task %s: delete pod %s: %w", id, pod.Name, err)
	}
	if err := s.deleteTaskSecrets(ctx, id); err != nil {
		return err
	}
	s.mu.Lock()
	delete(s.tokens, pod.UID)
	delete(s.failures, pod.UID)
	delete(s.delivered, pod.UID)
	s.mu.Unlock()
	s.log.Info("task_removed", "task_id", id, "pod", pod.Name)
	return nil
}

// deleteTaskSecrets deletes the secrets of task id.
func (s *podShim) deleteTaskSecrets(ctx context.Context, id string) error {
	err := s.c.client.CoreV1().Secrets(s.c.namespace).DeleteCollection(ctx, metav1.DeleteOptions{},
		metav1.ListOptions{LabelSelector: taskSelector(s.rec.ID, id)})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("task %s: delete secrets: %w", id, err)
	}
	return nil
}

// deleteSecrets deletes the secrets of task id after a failed creation,
// with a context of its own: the request's may have ended.
func (s *podShim) deleteSecrets(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.deleteTaskSecrets(ctx, id); err != nil {
		s.log.Warn("task_secrets_not_deleted", "task_id", id, "err", err)
	}
}

// deleteTasks deletes every pod and secret of instance id's tasks. Pods
// still stopping make it a wait (backends.ErrNotYetTerminated); gone is
// success.
func deleteTasks(ctx context.Context, c *cluster, id string) error {
	sel := metav1.ListOptions{LabelSelector: tasksSelector(id)}
	pods := c.client.CoreV1().Pods(c.namespace)
	if err := pods.DeleteCollection(ctx, metav1.DeleteOptions{}, sel); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("instance %s: delete pods: %w", id, err)
	}
	if err := c.client.CoreV1().Secrets(c.namespace).DeleteCollection(ctx, metav1.DeleteOptions{}, sel); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("instance %s: delete secrets: %w", id, err)
	}
	left, err := pods.List(ctx, sel)
	if err != nil {
		return fmt.Errorf("instance %s: list pods: %w", id, err)
	}
	if n := len(left.Items); n > 0 {
		return backends.Wait(fmt.Errorf("instance %s: %d pods still stopping: %w", id, n, backends.ErrNotYetTerminated), time.Second)
	}
	return nil
}
