package reconciler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"hoist/agents/api"
	"hoist/schema"
	"hoist/store"
)

// Workflows (schema.Workflow) run as one run whose jobs a provider
// generated: each job starts once the jobs it depends on are done, with
// their artifacts placed in its working directory; a failed job fails the
// jobs depending on it. A program provider's program runs first, as job 0,
// unless its output for the same input is kept (store.WorkflowOutput);
// its jobs are then numbered from 1.

// reasonDependencyFailed is hoist's termination reason for a workflow job
// whose dependency failed: it fails too, naming the dependency.
const reasonDependencyFailed = "dependency_failed"

// providerOutput is where a program provider's stdout is kept in its
// job's working directory, and kept as that job's artifact.
const providerOutput = ".hoist/provider-output"

// jobOffset is the number of a workflow's first generated job: 1 after a
// program provider's job 0, else 0.
func (s runSpec) jobOffset() int {
	if s.Program != nil {
		return 1
	}
	return 0
}

// isProviderJob reports whether jobNum of a workflow is its provider's
// program.
func (s runSpec) isProviderJob(jobNum int) bool {
	return schema.Kind(s.Type) == schema.KindWorkflow && s.Program != nil && jobNum == 0
}

// workflowJob returns the generated job jobNum runs.
func (s runSpec) workflowJob(jobNum int) (schema.WorkflowJob, bool) {
	k := jobNum - s.jobOffset()
	if schema.Kind(s.Type) != schema.KindWorkflow || k < 0 || k >= len(s.Jobs) || s.isProviderJob(jobNum) {
		return schema.WorkflowJob{}, false
	}
	return s.Jobs[k], true
}

// mastered reports whether workflow job jobNum has a master or is one:
// it runs with host networking, so that the two reach each other at their
// hosts' addresses as a multi-node run's nodes do.
func (s runSpec) mastered(jobNum int) bool {
	j, ok := s.workflowJob(jobNum)
	if !ok {
		return false
	}
	return j.Master != "" || slices.ContainsFunc(s.Jobs, func(o schema.WorkflowJob) bool { return o.Master == j.Name })
}

// jobNumOf returns the number of the generated job named name.
func (s runSpec) jobNumOf(name string) (int, bool) {
	for i, j := range s.Jobs {
		if j.Name == name {
			return i + s.jobOffset(), true
		}
	}
	return 0, false
}

// forWorkflowJob returns the spec job jobNum of a workflow runs: the
// provider's program (its commands wrapped to read the workflow on stdin
// and keep stdout, see providerScript), or a generated job's image,
// commands, environment, ports, working directory and resources.
func (s runSpec) forWorkflowJob(jobNum int) runSpec {
	if s.isProviderJob(jobNum) {
		s.Image, s.Commands, s.WorkingDir = s.Program.Image, providerScript(s.Program.Commands), workflowWorkingDir
		return s
	}
	j, ok := s.workflowJob(jobNum)
	if !ok {
		return s
	}
	s.Image, s.Commands, s.Env, s.Ports, s.WorkingDir, s.Resources = j.Image, j.Commands, j.Env, j.Ports, j.WorkingDir, j.Resources
	if s.WorkingDir == "" {
		s.WorkingDir = workflowWorkingDir
	}
	return s
}

// workflowWorkingDir is where a workflow's jobs run unless a job names
// its own working_dir: the spec repository is placed there, as dstack's
// workflows ran in /workflow with the repository checked out.
const workflowWorkingDir = "/workflow"

// artifactsOf returns the artifact folders job jobNum of spec keeps: a
// generated job's, and a program provider's output.
func (s runSpec) artifactsOf(jobNum int) []string {
	if s.isProviderJob(jobNum) {
		return []string{providerOutput}
	}
	j, _ := s.workflowJob(jobNum)
	return j.Artifacts
}

// providerScript wraps a program provider's commands: the workflow
// document (HOIST_WORKFLOW) is written to a file (HOIST_WORKFLOW_FILE)
// and is their stdin; their stdout goes to providerOutput
// (HOIST_PROVIDER_OUTPUT), which is printed to the job's log when they
// end, however they end; stderr goes to the log as it comes.
func providerScript(commands []string) []string {
	out := []string{
		`mkdir -p .hoist && printf '%s\n' "$HOIST_WORKFLOW" > .hoist/workflow.json && HOIST_WORKFLOW_FILE="$PWD/.hoist/workflow.json" && HOIST_PROVIDER_OUTPUT="$PWD/` + providerOutput + `" && export HOIST_WORKFLOW_FILE HOIST_PROVIDER_OUTPUT`,
		`trap 'exec 1>&3; cat "$HOIST_PROVIDER_OUTPUT"' EXIT; exec 3>&1 <"$HOIST_WORKFLOW_FILE" >"$HOIST_PROVIDER_OUTPUT"`,
	}
	return append(out, commands...)
}

// workflowDocument is what a program provider reads on stdin: the
// workflow's name, provider and parameters and the revision; the spec
// repository at that revision is its working directory.
type workflowDocument struct {
	Name       string          `json:"name"`
	Provider   string          `json:"provider"`
	Parameters json.RawMessage `json:"parameters"`
	Revision   string          `json:"revision"`
	Repository string          `json:"repository"`
}

// workflowEnv adds a workflow job's variables to env: the workflow
// document for the provider's program, the master's address for a job
// with a master.
func (c *Controller) workflowEnv(ctx context.Context, run *store.Run, job *store.Job, spec runSpec, env map[string]string) error {
	if schema.Kind(spec.Type) != schema.KindWorkflow {
		return nil
	}
	env["HOIST_WORKFLOW_NAME"] = run.Name
	if spec.isProviderJob(job.JobNum) {
		doc := workflowDocument{Name: run.Name, Parameters: spec.Params, Revision: run.Revision, Repository: "."}
		if spec.Provider != nil {
			doc.Provider = spec.Provider.Name
		}
		b, err := json.Marshal(doc)
		if err != nil {
			return err
		}
		env["HOIST_WORKFLOW"] = string(b)
		return nil
	}
	wj, _ := spec.workflowJob(job.JobNum)
	env["HOIST_JOB_NAME"] = wj.Name
	if wj.Master == "" {
		return nil
	}
	jobs, err := c.st.ListJobs(ctx, run.ID)
	if err != nil {
		return err
	}
	num, _ := spec.jobNumOf(wj.Master)
	for _, m := range latestSubmissions(jobs) {
		if m.JobNum == num {
			ip, _, err := c.masterAddress(ctx, m)
			if err != nil {
				return err
			}
			env["DSTACK_MASTER_NODE_IP"] = ip
		}
	}
	return nil
}

// masterAddress returns the address of a workflow's master job m (its
// latest submission): its container's own address, else its instance's
// internal IP, else its hostname; ok is false while it is not running.
func (c *Controller) masterAddress(ctx context.Context, m store.Job) (addr string, ok bool, err error) {
	if m.Status != store.JobRunning {
		return "", false, nil
	}
	if ip := m.Runtime().InternalIP; ip != "" {
		return ip, true, nil
	}
	inst, err := c.st.GetInstance(ctx, m.InstanceID)
	if err != nil {
		return "", false, err
	}
	if inst.InternalIP != "" {
		return inst.InternalIP, true, nil
	}
	return inst.Hostname, inst.Hostname != "", nil
}

// workflowGate decides whether a submitted workflow job may be placed: its
// dependencies all done, and its master running. It returns what the job
// waits for, or why it fails (a dependency that did not end done).
func (c *Controller) workflowGate(ctx context.Context, run *store.Run, job *store.Job, spec runSpec) (wait, fail string, err error) {
	wj, ok := spec.workflowJob(job.JobNum)
	if !ok || (len(wj.DependsOn) == 0 && wj.Master == "") {
		return "", "", nil
	}
	jobs, err := c.st.ListJobs(ctx, run.ID)
	if err != nil {
		return "", "", err
	}
	byNum := map[int]store.Job{}
	for _, j := range latestSubmissions(jobs) {
		byNum[j.JobNum] = j
	}
	var waiting []string
	for _, dep := range wj.DependsOn {
		num, _ := spec.jobNumOf(dep)
		d, ok := byNum[num]
		if why, failed := jobFailure(d); ok && failed {
			return "", "dependency " + dep + " " + why, nil
		}
		if !ok || d.Status != store.JobDone {
			waiting = append(waiting, dep)
		}
	}
	if len(waiting) > 0 {
		return "waiting for " + strings.Join(waiting, ", "), "", nil
	}
	if wj.Master != "" {
		num, _ := spec.jobNumOf(wj.Master)
		m := byNum[num]
		if store.IsJobFinished(m.Status) || m.Status == store.JobTerminating {
			return "", "master " + wj.Master + " ended (" + m.Status + ") before this job started", nil
		}
		_, ok, err := c.masterAddress(ctx, m)
		if err != nil {
			return "", "", err
		}
		if !ok {
			return "waiting for master " + wj.Master + " to run", "", nil
		}
	}
	return "", "", nil
}

// workflowDependencyPoll is how often a workflow job waiting for its
// dependencies looks again; a dependency that finishes wakes it at once.
const workflowDependencyPoll = 5 * time.Second

// wakeDependents wakes a workflow run's submitted jobs when one of its
// jobs finished or started running.
func (c *Controller) wakeDependents(ctx context.Context, job *store.Job, spec runSpec) {
	if schema.Kind(spec.Type) != schema.KindWorkflow {
		return
	}
	jobs, err := c.st.ListJobs(ctx, job.RunID)
	if err != nil {
		return
	}
	for _, j := range latestSubmissions(jobs) {
		if j.Status == store.JobSubmitted {
			c.jobs.Add(j.ID)
		}
	}
}

// reconcileWorkflow does a workflow run's own part before its status is
// derived: once a program provider's job is done, its output becomes the
// run's jobs; a job whose dependency failed fails, naming it. again is
// set when the run's status is not to be derived now (it changed, or its
// provider's job is still finishing) but looked at again shortly.
func (c *Controller) reconcileWorkflow(ctx context.Context, l store.Lease, run *store.Run, spec *runSpec, latest []store.Job) (again bool, err error) {
	if spec.Program != nil && len(spec.Jobs) == 0 {
		for _, j := range latest {
			switch {
			case j.JobNum != 0:
			case j.Status == store.JobDone:
				return true, c.expandProgram(ctx, l, run, spec, j)
			case j.Status == store.JobTerminating && j.TerminationReason == reasonDoneByRunner:
				// Its output is kept as it finishes; the run is not
				// done, its jobs are to come.
				return true, nil
			}
		}
		return false, nil
	}
	// A failed job fails the jobs depending on it, and theirs in turn,
	// each naming the dependency that failed.
	failed := map[string]string{} // job name → what its dependents say
	for _, j := range latest {
		if why, ok := jobFailure(j); ok {
			if wj, ok := spec.workflowJob(j.JobNum); ok {
				failed[wj.Name] = wj.Name + " " + why
			}
		}
	}
	terminated := false
	for more := len(failed) > 0; more; {
		more = false
		for _, j := range latest {
			wj, ok := spec.workflowJob(j.JobNum)
			if !ok || j.Status != store.JobSubmitted || failed[wj.Name] != "" {
				continue
			}
			for _, dep := range wj.DependsOn {
				if why := failed[dep]; why != "" {
					msg := "dependency " + why
					if err := c.terminateJob(ctx, j.ID, reasonDependencyFailed, msg); err != nil {
						return false, err
					}
					failed[wj.Name], more, terminated = wj.Name+" failed: "+msg, true, true
					break
				}
			}
		}
	}
	// The run is looked at again with its jobs as they are now.
	return terminated, nil
}

// jobFailure says how a job that did not end done ended ("failed:
// exited (1)"), also while it is still terminating; ok is false for a
// job done, or not ended yet.
func jobFailure(j store.Job) (why string, ok bool) {
	ending := j.Status == store.JobTerminating && j.TerminationReason != reasonDoneByRunner
	if !ending && (!store.IsJobFinished(j.Status) || j.Status == store.JobDone) {
		return "", false
	}
	status := j.Status
	if ending {
		status = jobFinalStatus(j.TerminationReason)
	}
	detail := j.TerminationMessage
	if detail == "" {
		detail = j.StatusMessage
	}
	if detail == "" || detail == status {
		detail = j.TerminationReason
	}
	return status + ": " + detail, true
}

// expandProgram reads a program provider's output (its job's artifact),
// keeps it under the workflow's input hash, and adds the jobs it names to
// the run. Output that is not a valid list of jobs fails the run, naming
// the output's line and the job's field.
func (c *Controller) expandProgram(ctx context.Context, l store.Lease, run *store.Run, spec *runSpec, pj store.Job) error {
	out, err := c.readArtifact(ctx, run, 0, providerOutput)
	var jobs []schema.WorkflowJob
	if err == nil {
		jobs, err = schema.ParseProviderOutput(out)
	}
	if err != nil {
		msg := "the provider's output: " + strings.ReplaceAll(err.Error(), "\n", "; ")
		c.event(ctx, "run", run.Name, run.ID, "failed", run.Revision, msg)
		// Not a job's failure: the run fails with the reason kept as its
		// message, as for the server's other errors.
		run.Status, run.StatusMessage = store.RunTerminating, msg
		run.TerminationReason = runReasonServerError
		if uerr := c.st.UpdateRunLeased(ctx, l, run); uerr != nil {
			return uerr
		}
		c.runs.Add(run.ID)
		return nil
	}
	b, err := json.Marshal(jobs)
	if err != nil {
		return err
	}
	if err := c.st.PutWorkflowOutput(ctx, run.Project, spec.InputHash, b); err != nil {
		return err
	}
	var wf schema.Workflow
	if err := json.Unmarshal(run.Spec, &wf); err != nil {
		return fmt.Errorf("decode workflow spec: %w", err)
	}
	wf.Jobs = jobs
	oldHash := run.SpecHash
	run.Spec = schema.WorkflowJSON(&wf)
	run.SpecHash = specHash(run.Spec)
	ns, err := decodeRunSpec(run.Spec)
	if err != nil {
		return err
	}
	*spec = ns
	if err := c.st.UpdateRunLeased(ctx, l, run); err != nil {
		return err
	}
	// The resource's applied spec is the run's: the next revision's
	// workflow, its jobs taken from the kept output, then matches it.
	res, err := c.st.GetResource(ctx, run.Project, run.ResourceKind, run.ResourceName)
	if err == nil && res.SpecHash == oldHash {
		res.Spec, res.SpecHash = run.Spec, run.SpecHash
		err = c.st.UpdateResource(ctx, &res)
	}
	if err != nil && !errors.Is(err, store.ErrNotFound) && !errors.Is(err, store.ErrConflict) {
		return err
	}
	c.event(ctx, "run", run.Name, run.ID, "expanded", run.Revision,
		fmt.Sprintf("provider %s generated %d jobs", spec.Provider.Name, len(jobs)))
	return c.createJobs(ctx, run, ns, pj.SubmissionNum)
}

// workflowCode is a workflow job's code: the spec repository at the run's
// revision in its working directory (as dstack's workflows had the
// repository checked out), then its dependencies' artifacts over it. A
// working directory that is not empty fails the job's start: it would run
// without the repository.
func (c *Controller) workflowCode(ctx context.Context, run *store.Run, job *store.Job, spec runSpec) (*jobCode, error) {
	j := &jobCode{spec: &api.CodeSpec{Repo: ".", RepoIfExists: api.RepoIfExistsError}, blobs: map[string]func() (io.ReadCloser, error){}}
	ok := false
	defer func() {
		if !ok {
			j.Close()
		}
	}()
	snap, err := c.src.CheckoutAt(ctx, run.Revision)
	if err != nil {
		return nil, fmt.Errorf("check out %s: %w", run.Revision, err)
	}
	j.closers = append(j.closers, snap.Close)
	if err := addTree(j, snap.FS, ".", api.CodeRepoPrefix); err != nil {
		return nil, fmt.Errorf("the spec repository: %w", err)
	}
	if err := c.addDependencyArtifacts(ctx, j, run, job, spec); err != nil {
		return nil, err
	}
	ok = true
	return j, nil
}
