package reconciler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"time"

	"hoist/agents/api"
	"hoist/backends"
	"hoist/store"
)

// Timeouts of the job lifecycle (dstack's server/background: JOB_DISCONNECTED_RETRY_TIMEOUT and
// the provisioning timeouts).
const (
	provisioningTimeout = 10 * time.Minute
	unreachableGrace    = 2 * time.Minute // default of Config.UnreachableGrace
	agentCallTimeout    = 9 * time.Second
)

// reconcileJob drives one job submission: submitted → provisioning →
// pulling → running → terminating → done, failed, terminated or aborted
// (dstack's JobStatus in src/dstack/_internal/core/models/runs.py). Running jobs are handed to a pump that copies their
// output into the store and notices when they finish.
func (c *Controller) reconcileJob(ctx context.Context, id string) (time.Duration, error) {
	if c.pumping(id) {
		return 0, nil
	}
	l, ok, err := c.claim(ctx, "jobs", id)
	if err != nil || !ok {
		return 0, err
	}
	handedOff := false
	defer func() {
		if !handedOff {
			c.release(l)
		}
	}()
	workerCtx := ctx // a pump outlives this call: it keeps the lease itself
	ctx, stopKeep := c.keepAlive(ctx, l)
	defer stopKeep()
	job, err := c.st.GetJob(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if store.IsJobFinished(job.Status) {
		return 0, nil
	}
	run, err := c.st.GetRun(ctx, job.RunID)
	if err != nil {
		return 0, err
	}
	spec, err := decodeRunSpec(job.Spec)
	if err != nil {
		return 0, err
	}
	// A node of a task with groups runs its group's commands, resources
	// and ports.
	spec = spec.forJob(job.JobNum)
	if run.Status == store.RunTerminating && job.Status != store.JobTerminating {
		return 0, c.setTerminating(ctx, l, &job, jobReasonForRun(run.TerminationReason), "run is terminating")
	}
	now := c.now()
	switch job.Status {
	case store.JobSubmitted:
		return c.placeJob(ctx, l, &job, &run, spec)
	case store.JobProvisioning:
		return c.createTask(ctx, l, &job, &run, spec)
	case store.JobPulling:
		return c.startJob(ctx, l, &job, &run, spec)
	case store.JobRunning:
		if c.startPump(workerCtx, l, job) {
			handedOff = true
		}
		return 0, nil
	case store.JobTerminating:
		if wait := job.RemoveAt.Sub(now); wait > 0 {
			return wait, nil // a retired replica drains (retireReplica)
		}
		return c.finishJob(ctx, l, &job, spec)
	}
	return 0, nil
}

// terminateJob moves a job to terminating from outside its worker.
func (c *Controller) terminateJob(ctx context.Context, id, reason, msg string) error {
	return c.terminateJobAfter(ctx, id, reason, msg, 0)
}

// defaultServiceDrain is Config.ServiceDrain's default: the in-server
// proxy's route TTL (1 s) and a grace for requests in flight.
const defaultServiceDrain = 5 * time.Second

// retireReplica moves a service replica to terminating and, if it is
// running, leaves it running for Config.ServiceDrain (RemoveAt): a
// terminating replica is out of the service's routes at once, and is
// stopped only once no proxy can still pick it and its requests in flight
// had time to finish (dstack delays a job's removal with remove_at).
func (c *Controller) retireReplica(ctx context.Context, id, reason, msg string) error {
	return c.terminateJobAfter(ctx, id, reason, msg, max(c.cfg.ServiceDrain, 0))
}

// terminateJobAfter moves a job to terminating; a running one is stopped
// after drain.
func (c *Controller) terminateJobAfter(ctx context.Context, id, reason, msg string, drain time.Duration) error {
	for attempt := 0; attempt < 5; attempt++ {
		job, err := c.st.GetJob(ctx, id)
		if err != nil {
			return err
		}
		if store.IsJobFinished(job.Status) || job.Status == store.JobTerminating {
			return nil
		}
		if drain > 0 && job.Status == store.JobRunning {
			job.RemoveAt = c.now().Add(drain)
		}
		job.Status, job.TerminationReason, job.TerminationMessage = store.JobTerminating, reason, msg
		err = c.st.UpdateJob(ctx, &job)
		if errors.Is(err, store.ErrConflict) {
			continue
		}
		if err != nil {
			return err
		}
		c.stopPump(id)
		c.jobs.Add(id)
		return nil
	}
	return fmt.Errorf("terminate job %s: %w", id, store.ErrConflict)
}

func (c *Controller) setTerminating(ctx context.Context, l store.Lease, job *store.Job, reason, msg string) error {
	job.Status, job.TerminationReason, job.TerminationMessage = store.JobTerminating, reason, msg
	if err := c.st.UpdateJobLeased(ctx, l, job); err != nil {
		return err
	}
	c.event(ctx, "job", job.JobName, job.ID, "terminating", "", fmt.Sprintf("job terminating: %s %s", reason, msg))
	c.jobs.Add(job.ID)
	c.runs.Add(job.RunID)
	return nil
}

// runtimeData is what a job keeps about where it runs.
type runtimeData = store.JobRuntime

// createTask asks the instance's shim for the job's container. The task id
// is the job id, so asking twice is harmless.
func (c *Controller) createTask(ctx context.Context, l store.Lease, job *store.Job, run *store.Run, spec runSpec) (time.Duration, error) {
	// A job's container must exist provisioningTimeout after its
	// assignment (provisioningSince); a node of a cluster's, after it
	// stopped waiting for the other nodes (no timeout while it waits:
	// their own timeouts or failures end the run).
	if !spec.multiNode() && c.now().Sub(provisioningSince(*job)) > provisioningTimeout {
		return 0, c.setTerminating(ctx, l, job, reasonWaitingInstance, "provisioning timed out")
	}
	// The nodes of a cluster start once all of them have instances, in
	// the run's startup_order.
	gate, err := c.clusterFor(ctx, job, run, spec, true)
	if err != nil {
		return 0, err
	}
	if gate.Fail != "" {
		return 0, c.setTerminating(ctx, l, job, reasonTerminatedByServer, gate.Fail)
	}
	if gate.Wait != "" {
		return c.holdJob(ctx, l, job, run, gate.Wait, clusterWaitPoll)
	}
	if spec.multiNode() {
		if job.StatusMessage != "" {
			job.StatusMessage = "" // waiting is over: the timeout counts from now
			if err := c.st.UpdateJobLeased(ctx, l, job); err != nil {
				return 0, err
			}
		}
		if c.now().Sub(job.UpdatedAt) > provisioningTimeout {
			return 0, c.setTerminating(ctx, l, job, reasonWaitingInstance, "provisioning timed out")
		}
	}
	shim, _, err := c.shimFor(ctx, job.InstanceID)
	if err != nil {
		return 0, err
	}
	image := spec.Image
	if image == "" {
		image = c.cfg.DefaultImage
	}
	if image == "" {
		return 0, c.setTerminating(ctx, l, job, reasonCreatingContainer, "the spec names no image and no default image is configured")
	}
	ts := api.TaskSpec{
		// The job id's random tail keeps names unique when the runs of a
		// rolling deployment overlap (same job name and submission number).
		ID: job.ID, Name: "hoist-" + job.JobName + "-" + strconv.Itoa(job.SubmissionNum) + "-" + job.ID[max(0, len(job.ID)-8):],
		Image: image, User: spec.User, Privileged: spec.Privileged,
		Labels: map[string]string{"hoist.run": run.Name, "hoist.job": job.ID},
	}
	sec, err := c.resolveJobSecrets(ctx, spec)
	if err != nil {
		return 0, c.failForSecrets(ctx, l, job, run, err)
	}
	ts.RegistryAuth = sec.registryAuth
	if g := taskGPUs(spec); g > 0 {
		ts.GPUCount, ts.GPUVendor = g, spec.Resources.GPU.Vendor
	}
	if spec.multiNode() || spec.mastered(job.JobNum) {
		// Nodes see each other on their hosts' interfaces (NCCL, Gloo,
		// MPI), as dstack runs multi-node jobs with host networking; so do
		// a workflow's job and its master.
		ts.NetworkMode = api.NetworkHost
	}
	part, shared, err := c.jobPart(ctx, *job)
	if err != nil {
		return 0, err
	}
	if shared {
		// A job on some of its instance's blocks is confined to its share:
		// the share's CPUs, memory and GPUs (the shim hands each task GPUs
		// no other task holds), on bridge networking (dstack's
		// _prepare_job_runtime_data for a shared offer).
		ts.CPUs, ts.MemoryBytes = float64(part.CPUs), int64(part.MemoryGB*(1<<30))
		ts.GPUCount, ts.GPUVendor = part.GPUCount, part.GPUVendor
		ts.NetworkMode = api.NetworkBridge
	}
	if s := spec.Resources.ShmSize; s != nil {
		ts.ShmSizeBytes = int64(*s * (1 << 30))
	}
	for _, p := range spec.Ports {
		ts.Ports = append(ts.Ports, api.PortMapping{Host: derefInt(p.LocalPort), Container: p.ContainerPort})
	}
	if spec.Port != nil && spec.Port.ContainerPort > 0 {
		// An ephemeral host port: replicas of a service (and the old and
		// new runs of a rolling deployment) share the host.
		ts.Ports = append(ts.Ports, api.PortMapping{Host: 0, Container: spec.Port.ContainerPort})
	}
	// A pod of a container cloud or Kubernetes runs the start command in
	// place of the image's entrypoint, which the server does not know
	// (dstack reads it from the registry): such a job must say what to run.
	if c.traitsOf(job.Backend).Runtime == backends.RuntimeRunner && len(spec.script()) == 0 && spec.Entrypoint == "" {
		return 0, c.setTerminating(ctx, l, job, reasonCreatingContainer, fmt.Sprintf(
			"backend %s runs the job's image without its entrypoint: the job must set commands (or entrypoint)", job.Backend))
	}
	// The policy checked every backend the run may use when its revision
	// was loaded; this is the backend the job actually got.
	if spec.Privileged && !c.pol.Privileged(job.Backend) {
		return 0, c.setTerminating(ctx, l, job, reasonCreatingContainer, c.pol.PrivilegedReason(job.Backend))
	}
	for _, m := range spec.Volumes {
		if m.InstancePath != "" {
			acc := c.pol.InstanceVolume(job.Backend, m.InstancePath)
			if !acc.Allowed {
				return 0, c.setTerminating(ctx, l, job, reasonCreatingContainer, acc.Reason)
			}
			ts.InstanceMounts = append(ts.InstanceMounts, api.InstanceMount{InstancePath: m.InstancePath, Path: m.Path, ReadOnly: !acc.ReadWrite})
		}
	}
	nvs, after, done, err := c.attachVolumes(ctx, l, job, run, spec)
	if done {
		return after, err
	}
	ts.NetworkVolumes = nvs
	cctx, cancel := context.WithTimeout(ctx, agentCallTimeout)
	defer cancel()
	if _, err := shim.CreateTask(cctx, ts); err != nil && !errors.Is(err, api.ErrConflict) {
		if msg, ok := refusedByAgent(err); ok {
			return 0, c.setTerminating(ctx, l, job, reasonCreatingContainer, "the shim refused the task: "+msg)
		}
		return 0, fmt.Errorf("create task: %w", err)
	}
	job.ShimTaskID, job.Status, job.StatusMessage = job.ID, store.JobPulling, ""
	if err := c.st.UpdateJobLeased(ctx, l, job); err != nil {
		return 0, err
	}
	c.runs.Add(run.ID)
	return time.Millisecond, nil
}

// taskReason maps a terminated shim task to a dstack job termination
// reason and message: the shim's reasons are dstack's, except
// container_lost (removed from outside), which dstack reports as the
// container exiting with an error.
func taskReason(info api.TaskInfo) (string, string) {
	switch info.TerminationReason {
	case api.ReasonContainerLost:
		return reasonContainerExitedErr, info.TerminationMessage
	case "":
		return reasonContainerExitedErr, "the container ended"
	}
	return info.TerminationReason, info.TerminationMessage
}

func derefInt(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}

// startJob waits for the container's runner and submits the job to it.
func (c *Controller) startJob(ctx context.Context, l store.Lease, job *store.Job, run *store.Run, spec runSpec) (time.Duration, error) {
	shim, conn, err := c.shimFor(ctx, job.InstanceID)
	if err != nil {
		return 0, err
	}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	info, err := shim.WaitTask(wctx, job.ShimTaskID, api.TaskRunning)
	cancel()
	if errors.Is(err, api.ErrNotFound) {
		return 0, c.setTerminating(ctx, l, job, reasonCreatingContainer, "the shim lost the task")
	}
	if err != nil {
		if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			return 100 * time.Millisecond, nil
		}
		return 0, fmt.Errorf("wait for task: %w", err)
	}
	if info.Terminated() {
		reason, msg := taskReason(info)
		if info.TerminationReason == "" {
			reason = reasonCreatingContainer
		}
		return 0, c.setTerminating(ctx, l, job, reason, msg)
	}
	if rt := job.Runtime(); info.InternalIP != "" && rt.InternalIP != info.InternalIP {
		// The container's own address (a pod's IP): the other nodes of
		// the cluster wait for it (clusterFor).
		rt.InternalIP = info.InternalIP
		job.RuntimeData, _ = json.Marshal(rt)
		if err := c.st.UpdateJobLeased(ctx, l, job); err != nil {
			return 0, err
		}
		c.wakeNodes(ctx, job)
	}
	if info.RunnerAddr == "" {
		return 100 * time.Millisecond, nil
	}
	runner := api.NewRunnerClient(info.RunnerAddr, conn.HTTPClient())
	rctx, cancel := context.WithTimeout(ctx, agentCallTimeout)
	defer cancel()
	st, err := runner.State(rctx)
	if err != nil {
		return 50 * time.Millisecond, nil // the runner is still starting
	}
	// workingDir is where the runner says the job runs, when this call
	// started it; a job found already started (a retried start) records
	// none, and its IDE link falls back to the spec's working_dir.
	var workingDir string
	if st.State == api.JobPending {
		sec, err := c.resolveJobSecrets(ctx, spec)
		if err != nil {
			return 0, c.failForSecrets(ctx, l, job, run, err)
		}
		entrypoint, err := entrypointArgv(spec.Entrypoint)
		if err != nil {
			return 0, c.setTerminating(ctx, l, job, reasonExecutorError, err.Error())
		}
		gate, err := c.clusterFor(ctx, job, run, spec, false)
		if err != nil {
			return 0, err
		}
		if gate.Hold {
			return c.holdJob(ctx, l, job, run, gate.Wait, clusterWaitPoll)
		}
		if gate.Info == nil {
			// A node lost its instance since this one's container was
			// created: the run retries or fails.
			return 0, c.setTerminating(ctx, l, job, reasonTerminatedByServer, "the cluster is incomplete: "+gate.Wait+gate.Fail)
		}
		// The nodes' IPs the commands name are known now: every node has
		// its instance.
		commands, err := spec.interpolateNodeIPs(spec.script(), gate.Info.NodesIPs)
		if err != nil {
			return 0, c.setTerminating(ctx, l, job, reasonTerminatedByServer, "groups IP interpolation error: "+err.Error())
		}
		env := c.jobEnv(run, job, spec, sec.env)
		if err := c.workflowEnv(ctx, run, job, spec, env); err != nil {
			return 0, err
		}
		js := api.JobSpec{
			RunName: run.Name, RunID: run.ID, JobID: job.ID, Cluster: gate.Info,
			Commands: commands, Entrypoint: entrypoint, Env: env,
			WorkingDir: spec.WorkingDir, Shell: spec.Shell,
			MaxDuration:    time.Duration(spec.MaxDuration) * time.Second,
			AuthorizedKeys: c.cfg.SSHAuthorizedKeys,
		}
		code, err := c.runCode(ctx, run, job, spec)
		if err != nil {
			return 0, c.setTerminating(ctx, l, job, reasonExecutorError, "the run's code: "+err.Error())
		}
		if code != nil {
			defer code.Close()
			js.Code = code.spec
		}
		if b, err := json.Marshal(js); err == nil && len(b) > api.MaxJobSpecBytes {
			return 0, c.setTerminating(ctx, l, job, reasonExecutorError,
				fmt.Sprintf("the job spec is %d bytes, more than the runner's limit of %d", len(b), api.MaxJobSpecBytes))
		}
		if spec.IDE != "" && spec.Version != "" {
			// The IDE server's download is the instance's architecture's.
			host, err := shim.HostInfo(rctx)
			if err != nil {
				return 0, fmt.Errorf("host info: %w", err)
			}
			if js.IDE, err = c.ideSpec(spec, host.Arch); err != nil {
				return 0, c.setTerminating(ctx, l, job, reasonExecutorError, err.Error())
			}
		}
		if err := runner.Submit(rctx, js); err != nil && !errors.Is(err, api.ErrConflict) {
			if msg, ok := refusedByAgent(err); ok {
				return 0, c.setTerminating(ctx, l, job, reasonExecutorError, "the runner refused the job: "+msg)
			}
			return 0, fmt.Errorf("submit job: %w", err)
		}
		if code != nil {
			if err := c.deliverCode(ctx, runner, job, run, code); err != nil {
				if msg, ok := refusedByAgent(err); ok {
					return 0, c.setTerminating(ctx, l, job, reasonExecutorError, "the runner refused the run's code: "+msg)
				}
				return 0, fmt.Errorf("deliver code: %w", err)
			}
		}
		resp, err := runner.Run(rctx)
		if err != nil && !errors.Is(err, api.ErrConflict) {
			if msg, ok := refusedByAgent(err); ok {
				return 0, c.setTerminating(ctx, l, job, reasonExecutorError, "the runner refused to run the job: "+msg)
			}
			return 0, fmt.Errorf("run job: %w", err)
		}
		workingDir = resp.WorkingDir
	}
	// The runner's address is its Unix socket on the instance (unix://path).
	job.RunnerAddr = info.RunnerAddr
	rt := job.Runtime()
	if workingDir != "" {
		rt.WorkingDir = workingDir
	}
	if spec.Port != nil {
		// Where the service answers through the instance's Conn, for the
		// probes: the docker shim publishes ports on the instance's
		// loopback, the Kubernetes pod shim names the pod's port (Addr).
		for _, p := range info.Ports {
			if p.Container != spec.Port.ContainerPort {
				continue
			}
			addr := p.Addr
			if addr == "" && p.Host > 0 {
				addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(p.Host))
			}
			if addr != "" {
				rt.ServiceAddr = addr
			}
		}
	}
	if rt != (runtimeData{}) {
		job.RuntimeData, _ = json.Marshal(rt)
	}
	job.Status, job.StartedAt = store.JobRunning, c.now().UTC()
	if err := c.st.UpdateJobLeased(ctx, l, job); err != nil {
		return 0, err
	}
	c.event(ctx, "job", job.JobName, job.ID, "running", run.Revision, "job running in container "+info.ContainerName)
	c.runs.Add(run.ID)
	c.wakeNodes(ctx, job)
	if spec.mastered(job.JobNum) {
		c.wakeDependents(ctx, job, spec) // a job waiting for its master
	}
	return time.Millisecond, nil
}

// jobEnv is the job's environment: the spec's env with secrets resolved
// (resolveJobSecrets) and hoist's own variables. dstack's (DSTACK_RUN_NAME,
// the cluster's) the runner sets from JobSpec, as dstack's runner does.
func (c *Controller) jobEnv(run *store.Run, job *store.Job, spec runSpec, env map[string]string) map[string]string {
	out := map[string]string{
		"HOIST_RUN_NAME":  run.Name,
		"HOIST_JOB_ID":    job.ID,
		"HOIST_NODE_RANK": strconv.Itoa(job.JobNum),
		"HOIST_NODES_NUM": strconv.Itoa(spec.nodeCount()),
	}
	for k, v := range env {
		out[k] = v
	}
	return out
}

// finishJob stops what is left of a terminating job and records its final
// status: a graceful stop through the runner and the rest of its output
// first; the final status is written as soon as the job itself is over, and
// the container is terminated and removed after that (a removal that fails
// is retried by the instance's sweep of dangling tasks).
func (c *Controller) finishJob(ctx context.Context, l store.Lease, job *store.Job, spec runSpec) (time.Duration, error) {
	c.stopPump(job.ID)
	var cleanup func() error
	if job.InstanceID != "" && job.ShimTaskID != "" {
		shim, conn, err := c.shimFor(ctx, job.InstanceID)
		if err != nil {
			// An instance found gone (instanceGone) will not answer: its
			// jobs finish at once.
			gone := job.TerminationReason == reasonInterruptedCapacity || job.TerminationReason == reasonInstanceUnreachable
			if !gone && c.now().Sub(job.UpdatedAt) < c.cfg.UnreachableGrace {
				return 0, err
			}
			c.log.Warn("instance unreachable; finishing job without cleanup", "job", job.JobName, "error", err)
		} else {
			if job.RunnerAddr != "" {
				runner := api.NewRunnerClient(job.RunnerAddr, conn.HTTPClient())
				grace := stopGrace(*job, spec)
				sctx, cancel := context.WithTimeout(ctx, grace+agentCallTimeout)
				if st, err := runner.State(sctx); err == nil && !st.Finished() {
					_, _ = runner.StopWithReason(sctx, grace, job.TerminationReason, job.TerminationMessage)
				}
				cancel()
				c.drainLogs(ctx, job, runner)
				if err := c.keepJobArtifacts(ctx, job, spec, runner); err != nil {
					return 0, err
				}
				cleanup = func() error { return c.removeTask(ctx, shim, job) }
			} else {
				// No runner ever answered: terminating the task is the stop.
				c.removeTask(ctx, shim, job)
			}
		}
	}
	// Network volumes are detached once the task is gone (the shim
	// unmounted them), before the final status: the job stays terminating
	// while a detach is under way.
	if job.InstanceID != "" {
		atts, err := c.st.ListVolumeAttachments(ctx, "", job.InstanceID)
		if err != nil {
			return 0, err
		}
		if slices.ContainsFunc(atts, func(a store.VolumeAttachment) bool { return decodeAttachment(a).JobID == job.ID }) {
			if cleanup != nil {
				err := cleanup()
				cleanup = nil
				if errors.Is(err, api.ErrConflict) {
					// The shim could not free a volume's device yet: a
					// detach now could cut off a live file system.
					return volumeWaitPoll, nil
				}
			}
			if after, err := c.detachVolumes(ctx, job, spec); err != nil || after > 0 {
				return after, err
			}
		}
	}
	if err := c.st.DeleteProbeCounters(ctx, job.ID); err != nil { // they end with the job
		c.log.Warn("delete probe counters failed", "job", job.JobName, "error", err)
	}
	c.forgetPasses(job.ID)
	job.Status = jobFinalStatus(job.TerminationReason)
	job.StatusMessage = jobStatusMessage(*job)
	job.FinishedAt = c.now().UTC()
	if err := c.st.UpdateJobLeased(ctx, l, job); err != nil {
		return 0, err
	}
	if !job.StartedAt.IsZero() {
		c.obs.JobFinished(job.Backend, job.Status, job.FinishedAt.Sub(job.StartedAt))
	}
	c.event(ctx, "job", job.JobName, job.ID, job.Status, "", fmt.Sprintf("job %s: %s", job.Status, job.StatusMessage))
	c.runs.Add(job.RunID)
	c.wakeDependents(ctx, job, spec)
	if job.InstanceID != "" {
		c.markInstance(ctx, job.InstanceID)
	}
	if cleanup != nil {
		_ = cleanup() // logged; the sweep of dangling tasks tries again
	}
	return 0, nil
}

// stopGrace is how long a terminating job may take to exit after SIGTERM:
// its stop_duration, at most 10 s (10 s when unset or off), and none for a
// job aborted by its user, which is killed at once as dstack's `stop
// --abort` does (src/dstack/_internal/server/background/pipeline_tasks/
// runs/terminating.py gives aborted jobs no graceful termination).
func stopGrace(job store.Job, spec runSpec) time.Duration {
	if job.TerminationReason == reasonAbortedByUser {
		return 0
	}
	grace := time.Duration(spec.StopDuration) * time.Second
	if grace <= 0 || grace > 10*time.Second {
		grace = 10 * time.Second
	}
	return grace
}

// holdJob keeps a job where it is, its status message (and so its run's)
// saying what it waits for: a changed message is stored, recorded as a
// "waiting" event and wakes the run. It returns poll, when to look again.
func (c *Controller) holdJob(ctx context.Context, l store.Lease, job *store.Job, run *store.Run, msg string, poll time.Duration) (time.Duration, error) {
	if job.StatusMessage != msg {
		job.StatusMessage = msg
		if err := c.st.UpdateJobLeased(ctx, l, job); err != nil {
			return 0, err
		}
		c.event(ctx, "job", job.JobName, job.ID, "waiting", run.Revision, msg)
		c.runs.Add(run.ID)
	}
	return poll, nil
}

// wakeJobsOn wakes the submitted jobs waiting for an instance.
func (c *Controller) wakeJobsOn(ctx context.Context, instanceID string) {
	jobs, err := c.st.ListJobsFiltered(ctx, store.JobFilter{InstanceID: instanceID, Status: []string{store.JobSubmitted}})
	if err != nil {
		return
	}
	for _, j := range jobs {
		c.jobs.Add(j.ID)
	}
}

// wakeWaitingJobs wakes the submitted jobs that wait for a fleet's
// instances (those not waiting for one instance of their own).
func (c *Controller) wakeWaitingJobs(ctx context.Context) {
	jobs, err := c.st.ListJobsFiltered(ctx, store.JobFilter{Project: c.cfg.Project, Status: []string{store.JobSubmitted}})
	if err != nil {
		return
	}
	for _, j := range jobs {
		if j.InstanceID == "" {
			c.jobs.Add(j.ID)
		}
	}
}

// removeTask terminates and removes a job's task on its shim. Failures are
// logged and left to the sweep of dangling tasks; the error is returned for
// callers that must not go on without the task gone.
func (c *Controller) removeTask(ctx context.Context, shim *api.ShimClient, job *store.Job) error {
	tctx, cancel := context.WithTimeout(ctx, agentCallTimeout)
	defer cancel()
	info, err := shim.TerminateTask(tctx, job.ShimTaskID, job.TerminationReason, job.TerminationMessage, 0)
	if err == nil && info.ExitCode != nil && job.ExitCode == nil && job.TerminationReason != reasonDoneByRunner {
		job.ExitCode = info.ExitCode
	}
	if err != nil && !errors.Is(err, api.ErrNotFound) {
		c.log.Warn("terminate task failed", "job", job.JobName, "error", err)
		return err
	}
	if err := shim.RemoveTask(tctx, job.ShimTaskID); err != nil && !errors.Is(err, api.ErrNotFound) {
		c.log.Warn("remove task failed", "job", job.JobName, "error", err)
		return err
	}
	return nil
}

// sweepTasks removes the tasks an instance's shim still keeps for jobs that
// are finished or unknown: the leftovers of a crash between recording a
// job's end and removing its container (dstack's dangling task removal).
func (c *Controller) sweepTasks(ctx context.Context, instanceID string) {
	shim, _, err := c.shimFor(ctx, instanceID)
	if err != nil {
		return
	}
	lctx, cancel := context.WithTimeout(ctx, agentCallTimeout)
	tasks, err := shim.ListTasks(lctx)
	cancel()
	if err != nil {
		return
	}
	for _, t := range tasks {
		job, err := c.st.GetJob(ctx, t.ID)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err == nil && !store.IsJobFinished(job.Status) {
			continue
		}
		if errors.Is(err, store.ErrNotFound) {
			job = store.Job{ID: t.ID, JobName: t.ID, ShimTaskID: t.ID, TerminationReason: reasonTerminatedByServer}
		}
		c.log.Info("removing dangling task", "job", job.JobName, "task", t.ID)
		c.removeTask(ctx, shim, &job)
	}
}

// refusedByAgent reports an agent's 4xx answer to a request it will never
// accept (a malformed or oversized body): retrying cannot help, so the job
// fails with the agent's reason. Unknown task, conflict, timeout, rate
// limit and authentication answers describe states that can change, and
// stay retried.
func refusedByAgent(err error) (string, bool) {
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Status < 400 || ae.Status >= 500 {
		return "", false
	}
	switch ae.Status {
	case http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound, http.StatusRequestTimeout,
		http.StatusConflict, http.StatusTooManyRequests:
		return "", false
	}
	return ae.Message, true
}

// jobPumped reports whether the job's pump follows it: the pump holds its
// lease and records its end, so a resync has nothing to do.
func (c *Controller) jobPumped(_ context.Context, id string) bool {
	return c.pumping(id)
}
