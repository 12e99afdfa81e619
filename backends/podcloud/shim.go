package podcloud

import (
	"cmp"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"hoist/agents/api"
	"hoist/backends"
	"hoist/backends/internal/agentauth"
	"hoist/backends/internal/shimserver"
	"hoist/backends/offers"
	"hoist/backends/tunnel"
)

// A shim answers the shim API for one instance (shimserver.Tasks): each
// task is one pod of the provider, its state kept in the task's record, so
// that any server (or this one after a restart) sees every task.
type shim struct {
	b   *Backend
	rec instanceRecord
	log *slog.Logger
	tr  *http.Transport // dials runners and ports (conn.go)
	// runners is the Conn's client (agentauth adds each runner's token).
	runners *http.Client

	mu      sync.Mutex
	clients map[string]*tunnel.Client // SSH connections by task
	seen    map[string]seenTask       // the last observation by task
}

// A seenTask is an observation of a task, reused by ListTasks for a while
// so that listing does not ask the provider about every pod each time.
type seenTask struct {
	info api.TaskInfo
	at   time.Time
}

var _ shimserver.Tasks = (*shim)(nil)

// taskID is what a task id must look like: it becomes a host name label
// (runnerAddr) and part of the pod's name.
var taskID = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// HostInfo describes the instance: the offer it reserved.
func (s *shim) HostInfo() api.HostInfo {
	return shimserver.OfferHost(s.rec.ID, s.rec.Offer, shimVersion)
}

// refusal says why a pod of a container cloud cannot run spec, "" when it
// can: the provider runs the image as root in a container of its own, with
// no host paths, Docker volumes or privileges, and mounts only its own
// network volumes, as many as lim allows (none for a provider that is not
// a VolumeProvider).
func refusal(spec api.TaskSpec, lim VolumeLimits) string {
	if why := networkRefusal(spec.NetworkVolumes, lim); why != "" {
		return why
	}
	switch {
	case spec.Privileged:
		return "privileged containers are not available: the provider runs the container"
	case len(spec.InstanceMounts) > 0:
		return fmt.Sprintf("instance volume %s: pods have no host paths to mount", spec.InstanceMounts[0].InstancePath)
	case len(spec.VolumeMounts) > 0:
		return fmt.Sprintf("volume %q: pods mount no Docker volumes", spec.VolumeMounts[0].Name)
	case spec.User != "" && spec.User != "root" && spec.User != "0":
		return fmt.Sprintf("user %q: the provider runs the container as root", spec.User)
	case spec.ShmSizeBytes > 0:
		return "shm_size: the provider sets /dev/shm's size itself"
	case len(spec.GPUIDs) > 0:
		return "GPU ids: the pod gets the GPUs of its offer"
	}
	return ""
}

// networkRefusal says why a pod cannot mount nvs, "" when it can: each
// must be a volume of the provider (Claim, its id, as AttachVolume gave
// it), not a device, and read-write unless the provider mounts read-only.
func networkRefusal(nvs []api.NetworkVolume, lim VolumeLimits) string {
	switch {
	case len(nvs) == 0:
		return ""
	case lim.MaxPerPod == 0:
		return fmt.Sprintf("volume %q: this backend attaches no network volumes", nvs[0].Name)
	case len(nvs) > lim.MaxPerPod:
		return fmt.Sprintf("%d network volumes: a pod of this provider mounts at most %d", len(nvs), lim.MaxPerPod)
	}
	for _, nv := range nvs {
		switch {
		case nv.Claim == "" || nv.DevicePath != "":
			return fmt.Sprintf("volume %q: a pod mounts the provider's network volumes, not devices", nv.Name)
		case nv.ReadOnly && !lim.ReadOnly:
			return fmt.Sprintf("volume %q: the provider mounts network volumes read-write only", nv.Name)
		}
	}
	return ""
}

// volumeLimits are what a pod of the backend's provider mounts.
func (b *Backend) volumeLimits() VolumeLimits {
	if vp, ok := b.p.(VolumeProvider); ok {
		return vp.VolumeLimits()
	}
	return VolumeLimits{}
}

// CreateTask records the task and asks the provider for its pod. A pod
// the provider has no capacity for ends the task at once as
// api.ReasonNoCapacity (a run retrying on no-capacity is resubmitted).
func (s *shim) CreateTask(ctx context.Context, spec api.TaskSpec) (api.TaskInfo, error) {
	if spec.Image == "" || !taskID.MatchString(spec.ID) {
		return api.TaskInfo{}, fmt.Errorf("a task needs an image and an id of lower-case letters, digits and dashes (%q): %w", spec.ID, shimserver.ErrInvalid)
	}
	if why := refusal(spec, s.b.volumeLimits()); why != "" {
		return api.TaskInfo{}, fmt.Errorf("task %s: %s: %w", spec.ID, why, shimserver.ErrInvalid)
	}
	if s.b.download == nil {
		return api.TaskInfo{}, fmt.Errorf("task %s: this server serves no runner downloads for pods to fetch: %w", spec.ID, shimserver.ErrInvalid)
	}
	s.b.mu.Lock()
	if cur, ok, err := s.b.taskRecord(ctx, spec.ID); err != nil {
		s.b.mu.Unlock()
		return api.TaskInfo{}, err
	} else if ok && cur.Instance == s.rec.ID && cur.PodID == "" && cur.End == nil {
		// A create that failed before its pod (the caller retries it):
		// the pod is created now, with the spec's environment and login.
		s.b.mu.Unlock()
		if err := s.ensurePod(ctx, &cur, spec); err != nil {
			return api.TaskInfo{}, err
		}
		return s.observe(ctx, cur)
	} else if ok {
		s.b.mu.Unlock()
		return api.TaskInfo{}, fmt.Errorf("task %s exists: %w", spec.ID, shimserver.ErrConflict)
	}
	inst, _, err := s.b.instanceRecord(ctx, s.rec.ID)
	if err != nil {
		s.b.mu.Unlock()
		return api.TaskInfo{}, err
	}
	rec, err := s.newTaskRecord(spec)
	if err == nil {
		if inst.Interrupted {
			// The provider reclaimed the instance's last pod and its fleet
			// has not replaced it yet: the job goes elsewhere, as
			// interrupted.
			rec.End = &taskEnd{Reason: api.ReasonInterrupted, Message: "the instance was reclaimed: " + inst.Message, At: s.b.now().UTC()}
		}
		err = s.b.putTask(ctx, rec)
	}
	s.b.mu.Unlock()
	if err != nil {
		return api.TaskInfo{}, err
	}
	if rec.End != nil {
		return s.info(rec, api.TaskTerminated), nil
	}
	s.log.Info("task_recorded", "task_id", spec.ID, "image", spec.Image)
	if err := s.ensurePod(ctx, &rec, spec); err != nil {
		return api.TaskInfo{}, err
	}
	return s.observe(ctx, rec)
}

// newTaskRecord makes the task's record: its pod's name and the secrets
// its runner gets.
func (s *shim) newTaskRecord(spec api.TaskSpec) (taskRecord, error) {
	token, err := agentauth.NewToken()
	if err != nil {
		return taskRecord{}, err
	}
	hostKey, err := newPrivateKey("hoist-runner-" + spec.ID)
	if err != nil {
		return taskRecord{}, err
	}
	clientKey, err := newPrivateKey("hoist-server")
	if err != nil {
		return taskRecord{}, err
	}
	var ports []int
	for _, p := range spec.Ports {
		if p.Container != api.PodSSHPort && !slices.Contains(ports, p.Container) {
			ports = append(ports, p.Container)
		}
	}
	var vols []PodVolume
	for _, nv := range spec.NetworkVolumes {
		vols = append(vols, PodVolume{ID: nv.Claim, Path: nv.Path, ReadOnly: nv.ReadOnly})
	}
	return taskRecord{
		ID: spec.ID, Instance: s.rec.ID, PodName: "hoist-" + spec.ID, Image: spec.Image, Ports: ports, Volumes: vols,
		RunnerToken: token, HostKey: hostKey, ClientKey: clientKey, CreatedAt: s.b.now().UTC(),
	}, nil
}

// ensurePod makes sure the task has its pod: it adopts one a previous
// attempt created (found by the task's tag), or asks the provider for one.
// spec is the task's spec when the caller has it (CreateTask; a later
// attempt, after a lost create, starts the pod without the job's
// environment and registry login, which the runner gets with the job); a
// pod that cannot be created for want of capacity ends the task.
func (s *shim) ensurePod(ctx context.Context, rec *taskRecord, spec api.TaskSpec) error {
	// One creation at a time in this server: CreateTask and an
	// observation of the task (a poll while CreatePod is still under way)
	// must not both create a pod. The record, read again under the lock,
	// says whether the other one did.
	s.b.podMu.Lock()
	defer s.b.podMu.Unlock()
	if cur, ok, err := s.b.taskRecord(ctx, rec.ID); err != nil {
		return err
	} else if ok && (cur.PodID != "" || cur.End != nil) {
		*rec = cur
		return nil
	}
	tags := backends.CopyTags(s.rec.Tags)
	tags[backends.TagInstance], tags[TagTask] = s.rec.ID, rec.ID
	pods, err := s.b.p.ListPods(ctx, map[string]string{backends.TagInstance: s.rec.ID, TagTask: rec.ID})
	if err != nil {
		return err
	}
	if len(pods) > 0 {
		rec.PodID = pods[0].ID
		return s.b.putTask(ctx, *rec)
	}
	clientPub, err := authorizedKey(rec.ClientKey)
	if err != nil {
		return fmt.Errorf("task %s: client key: %w", rec.ID, err)
	}
	url, auth, err := s.b.download(rec.ID, offers.GoArch(s.rec.Offer.CPUArch))
	if err != nil {
		return fmt.Errorf("task %s: runner download: %w", rec.ID, err)
	}
	env := maps.Clone(spec.Env)
	if env == nil {
		env = map[string]string{}
	}
	maps.Copy(env, map[string]string{
		api.RunnerEnvURL:            url,
		api.RunnerEnvAuth:           auth,
		api.RunnerEnvToken:          rec.RunnerToken,
		api.RunnerEnvHostKey:        base64.StdEncoding.EncodeToString([]byte(rec.HostKey)),
		api.RunnerEnvAuthorizedKeys: clientPub,
	})
	ps := PodSpec{
		Name: rec.PodName, Offer: s.rec.Offer, Image: rec.Image, Env: env,
		Command: api.StandaloneCommand(api.StandaloneOptions{}),
		Ports:   append([]int{api.PodSSHPort}, rec.Ports...), Tags: tags, Volumes: rec.Volumes,
	}
	if a := spec.RegistryAuth; a != nil {
		ps.RegistryUsername, ps.RegistryPassword = a.Username, a.Password
	}
	pod, err := s.b.p.CreatePod(ctx, ps)
	switch {
	case errors.Is(err, backends.ErrNoCapacity):
		s.log.Info("pod_no_capacity", "task_id", rec.ID, "offer", s.rec.Offer.Instance, "err", err)
		return s.end(ctx, rec, api.ReasonNoCapacity, err.Error(), nil, nil)
	case backends.IsStalled(err):
		return fmt.Errorf("task %s: create pod: %v: %w", rec.ID, err, shimserver.ErrInvalid)
	case err != nil:
		return fmt.Errorf("task %s: create pod: %w", rec.ID, err)
	}
	rec.PodID = pod.ID
	s.log.Info("pod_created", "task_id", rec.ID, "pod", pod.ID, "name", rec.PodName, "image", rec.Image, "offer", s.rec.Offer.Instance)
	return s.b.putTask(ctx, *rec)
}

// end records how the task ended.
func (s *shim) end(ctx context.Context, rec *taskRecord, reason, message string, exitCode *int, job *api.JobState) error {
	rec.End = &taskEnd{Reason: reason, Message: message, ExitCode: exitCode, Job: job, At: s.b.now().UTC()}
	s.log.Info("task_ended", "task_id", rec.ID, "reason", reason, "message", message)
	return s.b.putTask(ctx, *rec)
}

// task returns the record of task id of this instance.
func (s *shim) task(ctx context.Context, id string) (taskRecord, error) {
	rec, ok, err := s.b.taskRecord(ctx, id)
	if err != nil {
		return taskRecord{}, err
	}
	if !ok || rec.Instance != s.rec.ID {
		return taskRecord{}, fmt.Errorf("task %s: %w", id, shimserver.ErrNotFound)
	}
	return rec, nil
}

// GetTask observes the task's pod.
func (s *shim) GetTask(ctx context.Context, id string) (api.TaskInfo, error) {
	rec, err := s.task(ctx, id)
	if err != nil {
		return api.TaskInfo{}, err
	}
	return s.observe(ctx, rec)
}

// info is the task's info as far as its record tells.
func (s *shim) info(rec taskRecord, status string) api.TaskInfo {
	info := api.TaskInfo{ID: rec.ID, Status: status, ContainerName: rec.PodName, ContainerID: rec.PodID, Updated: s.b.now().UTC()}
	if e := rec.End; e != nil {
		info.Status, info.TerminationReason, info.TerminationMessage = api.TaskTerminated, e.Reason, e.Message
		info.ExitCode, info.Job, info.Updated = e.ExitCode, e.Job, e.At
	}
	return info
}

// observe tells where the task is:
//   - terminated once it ended (End), or its pod exited or went away:
//     reclaimed pods as api.ReasonInterrupted, others as the container
//     exiting with the provider's message;
//   - pulling while the provider starts the pod;
//   - creating while the pod runs but its runner does not answer yet;
//   - running, with the runner's address and token and the job's ports,
//     once the runner answers over SSH.
//
// A pod that is not running startTimeout after the task was created ends
// the task.
func (s *shim) observe(ctx context.Context, rec taskRecord) (api.TaskInfo, error) {
	if rec.End != nil {
		return s.info(rec, api.TaskTerminated), nil
	}
	if rec.PodID == "" {
		// CreateTask is creating the pod (with the job's environment and
		// registry login); only a create lost long ago is made up for here.
		if s.b.now().Sub(rec.CreatedAt) < lostCreateAfter {
			return s.remember(rec, s.info(rec, api.TaskPending)), nil
		}
		if err := s.ensurePod(ctx, &rec, api.TaskSpec{}); err != nil {
			return api.TaskInfo{}, err
		}
		if rec.End != nil || rec.PodID == "" {
			if rec.End != nil {
				return s.info(rec, api.TaskTerminated), nil
			}
			return s.remember(rec, s.info(rec, api.TaskPending)), nil
		}
	}
	pod, err := s.b.p.GetPod(ctx, rec.PodID)
	switch {
	case isNotFound(err):
		reason, msg := api.ReasonContainerLost, "the provider no longer has the pod"
		if s.rec.Offer.Spot {
			reason, msg = api.ReasonInterrupted, "the provider reclaimed the interruptible pod"
			if err := s.b.markInterrupted(ctx, s.rec.ID, msg); err != nil {
				return api.TaskInfo{}, err
			}
		}
		if err := s.end(ctx, &rec, reason, msg, nil, nil); err != nil {
			return api.TaskInfo{}, err
		}
		return s.remember(rec, s.info(rec, api.TaskTerminated)), nil
	case err != nil:
		return api.TaskInfo{}, err
	}
	late := s.b.now().Sub(rec.CreatedAt) > startTimeout
	switch pod.Status {
	case PodExited:
		reason, msg := api.ReasonContainerExitedWithError, cmp.Or(pod.Message, "the pod exited")
		if pod.Interrupted {
			reason = api.ReasonInterrupted
			if err := s.b.markInterrupted(ctx, s.rec.ID, msg); err != nil {
				return api.TaskInfo{}, err
			}
		}
		if err := s.end(ctx, &rec, reason, msg, pod.ExitCode, nil); err != nil {
			return api.TaskInfo{}, err
		}
		return s.remember(rec, s.info(rec, api.TaskTerminated)), nil
	case PodRunning:
		if s.runnerAnswers(ctx, rec) {
			info := s.info(rec, api.TaskRunning)
			info.RunnerAddr, info.RunnerToken = runnerAddr(rec.ID), rec.RunnerToken
			for _, p := range rec.Ports {
				info.Ports = append(info.Ports, api.PortMapping{Container: p, Addr: portAddr(rec.ID, p)})
			}
			return s.remember(rec, info), nil
		}
		if late {
			return s.stopLate(ctx, rec, "the pod runs but its runner never answered")
		}
		return s.remember(rec, s.info(rec, api.TaskCreating)), nil
	default:
		if late {
			return s.stopLate(ctx, rec, "the pod did not start: "+cmp.Or(pod.Message, pod.Status))
		}
		return s.remember(rec, s.info(rec, api.TaskPulling)), nil
	}
}

// stopLate ends a task whose pod missed startTimeout and deletes the pod.
func (s *shim) stopLate(ctx context.Context, rec taskRecord, msg string) (api.TaskInfo, error) {
	msg = fmt.Sprintf("%s within %s", msg, startTimeout)
	if err := s.b.p.TerminatePod(ctx, rec.PodID); err != nil {
		return api.TaskInfo{}, err
	}
	rec.PodDeleted = true
	if err := s.end(ctx, &rec, api.ReasonCreatingContainerError, msg, nil, nil); err != nil {
		return api.TaskInfo{}, err
	}
	return s.remember(rec, s.info(rec, api.TaskTerminated)), nil
}

// seen_ remembers info as the task's last observation and returns it.
func (s *shim) remember(rec taskRecord, info api.TaskInfo) api.TaskInfo {
	s.mu.Lock()
	s.seen[rec.ID] = seenTask{info: info, at: s.b.now()}
	s.mu.Unlock()
	return info
}

// runnerAnswers says whether the task's runner answers its health check
// over SSH.
func (s *shim) runnerAnswers(ctx context.Context, rec taskRecord) bool {
	hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	rc := api.NewRunnerClient(runnerAddr(rec.ID), &http.Client{Transport: s.tr}).WithToken(rec.RunnerToken)
	if _, err := rc.Health(hctx); err != nil {
		s.log.Debug("runner_not_answering", "task_id", rec.ID, "err", err)
		return false
	}
	return true
}

// lostCreateAfter is how long after CreateTask recorded a task without a
// pod an observation takes the create as lost (a server that stopped in
// the middle) and creates the pod itself.
const lostCreateAfter = time.Minute

// firstPoll is WaitTask's first interval; it doubles up to pollEvery, so that a
// pod that starts at once is seen at once, and a slow one costs few calls.
const firstPoll = 200 * time.Millisecond

// WaitTask observes the task until it has reached status or timeout has
// passed.
func (s *shim) WaitTask(ctx context.Context, id, status string, timeout time.Duration) (api.TaskInfo, error) {
	deadline := s.b.now().Add(timeout)
	every := firstPoll
	for {
		info, err := s.GetTask(ctx, id)
		if err != nil || api.TaskStatusRank(info.Status) >= api.TaskStatusRank(status) || !s.b.now().Before(deadline) {
			return info, err
		}
		select {
		case <-ctx.Done():
			return info, ctx.Err()
		case <-time.After(min(every, deadline.Sub(s.b.now()))):
		}
		every = min(2*every, pollEvery)
	}
}

// ListTasks lists the instance's tasks, each as last observed when that
// was recent, else observed now.
func (s *shim) ListTasks(ctx context.Context) (api.TaskList, error) {
	_, tasks, err := s.b.allRecords(ctx)
	if err != nil {
		return api.TaskList{}, err
	}
	sort.Slice(tasks, func(i, j int) bool { return tasks[i].CreatedAt.Before(tasks[j].CreatedAt) })
	out := api.TaskList{Tasks: []api.TaskInfo{}}
	for _, rec := range tasks {
		if rec.Instance != s.rec.ID {
			continue
		}
		s.mu.Lock()
		seen, ok := s.seen[rec.ID]
		s.mu.Unlock()
		if ok && rec.End == nil && s.b.now().Sub(seen.at) < pollEvery {
			out.Tasks = append(out.Tasks, seen.info)
			continue
		}
		info, err := s.observe(ctx, rec)
		if err != nil {
			return api.TaskList{}, err
		}
		out.Tasks = append(out.Tasks, info)
	}
	return out, nil
}

// TerminateTask stops the task: its runner stops the job with grace (and
// records why), its final job state is kept, and the pod is deleted.
func (s *shim) TerminateTask(ctx context.Context, id, reason, message string, grace time.Duration) (api.TaskInfo, error) {
	reason = cmp.Or(reason, api.ReasonTerminatedByServer)
	rec, err := s.task(ctx, id)
	if err != nil {
		return api.TaskInfo{}, err
	}
	info, err := s.observe(ctx, rec)
	if err != nil {
		return api.TaskInfo{}, err
	}
	if info.Terminated() {
		return info, nil
	}
	s.log.Info("task_terminating", "task_id", id, "pod", rec.PodID, "reason", reason, "grace", grace)
	var job *api.JobState
	var exit *int
	if info.RunnerAddr != "" {
		rc := api.NewRunnerClient(info.RunnerAddr, &http.Client{Transport: s.tr}).WithToken(rec.RunnerToken)
		if grace > 0 {
			sctx, cancel := context.WithTimeout(ctx, grace+5*time.Second)
			if _, err := rc.StopWithReason(sctx, grace, reason, message); err != nil {
				s.log.Warn("runner_stop_failed", "task_id", id, "err", err)
			}
			cancel()
		}
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		if st, err := rc.State(sctx); err == nil {
			job, exit = &st, st.ExitCode
		}
		cancel()
	}
	s.forget(id)
	if rec.PodID != "" {
		if err := s.b.p.TerminatePod(ctx, rec.PodID); err != nil {
			return info, err
		}
		rec.PodDeleted = true
	}
	if err := s.end(ctx, &rec, reason, message, exit, job); err != nil {
		return info, err
	}
	return s.info(rec, api.TaskTerminated), nil
}

// RemoveTask deletes a terminated task's pod (and any pod a lost create
// left with its tag) and forgets the task.
func (s *shim) RemoveTask(ctx context.Context, id string) error {
	rec, err := s.task(ctx, id)
	if err != nil {
		return err
	}
	if rec.End == nil {
		info, err := s.observe(ctx, rec)
		if err != nil {
			return err
		}
		if !info.Terminated() {
			return fmt.Errorf("task %s is %s, not terminated: %w", id, info.Status, shimserver.ErrConflict)
		}
	}
	s.forget(id)
	pods, err := s.b.p.ListPods(ctx, map[string]string{backends.TagInstance: s.rec.ID, TagTask: id})
	if err != nil {
		return err
	}
	ids := []string{}
	if rec.PodID != "" && !rec.PodDeleted {
		ids = append(ids, rec.PodID)
	}
	for _, p := range pods {
		if !slices.Contains(ids, p.ID) {
			ids = append(ids, p.ID)
		}
	}
	for _, pid := range ids {
		if err := s.b.p.TerminatePod(ctx, pid); err != nil {
			return err
		}
	}
	s.log.Info("task_removed", "task_id", id, "pods", strings.Join(ids, ","))
	return s.b.deleteRecord(ctx, taskRecordPrefix+id)
}
