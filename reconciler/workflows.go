package reconciler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"hoist/agents/api"
	"hoist/reconciler/source"
	"hoist/schema"
	"hoist/store"
	"hoist/store/blob"
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

// providerRepoMaxBytes bounds the files of a provider repository read
// into memory.
const providerRepoMaxBytes = 64 << 20

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
	ip, _, err := c.masterAddress(ctx, run, spec, wj.Master)
	if err != nil {
		return err
	}
	env["DSTACK_MASTER_NODE_IP"] = ip
	return nil
}

// masterAddress returns the address of a workflow's running job named
// name: its container's own address, else its instance's internal IP,
// else its hostname; ok is false while it is not running.
func (c *Controller) masterAddress(ctx context.Context, run *store.Run, spec runSpec, name string) (addr string, ok bool, err error) {
	num, _ := spec.jobNumOf(name)
	jobs, err := c.st.ListJobs(ctx, run.ID)
	if err != nil {
		return "", false, err
	}
	for _, j := range latestSubmissions(jobs) {
		if j.JobNum != num || j.Status != store.JobRunning {
			continue
		}
		if ip := j.Runtime().InternalIP; ip != "" {
			return ip, true, nil
		}
		inst, err := c.st.GetInstance(ctx, j.InstanceID)
		if err != nil {
			return "", false, err
		}
		if inst.InternalIP != "" {
			return inst.InternalIP, true, nil
		}
		return inst.Hostname, inst.Hostname != "", nil
	}
	return "", false, nil
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
		if m, ok := byNum[num]; ok && (store.IsJobFinished(m.Status) || m.Status == store.JobTerminating) {
			return "", "master " + wj.Master + " ended (" + m.Status + ") before this job started", nil
		}
		_, ok, err := c.masterAddress(ctx, run, spec, wj.Master)
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

// readArtifact reads one artifact file of a run's job.
func (c *Controller) readArtifact(ctx context.Context, run *store.Run, jobNum int, file string) ([]byte, error) {
	if c.cfg.Artifacts == nil {
		return nil, errors.New("the server keeps no artifacts")
	}
	rc, _, err := c.cfg.Artifacts.Get(ctx, blob.Key(run.Project, run.ID, jobNum, file))
	if errors.Is(err, blob.ErrNotFound) {
		return nil, fmt.Errorf("%s was not kept (the provider's program printed nothing?)", file)
	}
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(io.LimitReader(rc, schema.MaxFileBytes+1))
}

// resolveWorkflows completes a revision's workflows before they are
// planned: a provider of another repository is fetched (once per commit)
// and read; a program provider's jobs are its kept output when it ran on
// the same input. Spec errors are returned as schema.Errors; a failed
// fetch is an error of the sync, which is tried again.
func (c *Controller) resolveWorkflows(ctx context.Context, fsys fs.FS, desired *schema.Desired) (schema.Errors, error) {
	var errs schema.Errors
	for i := range desired.Resources {
		r := &desired.Resources[i]
		if r.Kind != schema.KindWorkflow {
			continue
		}
		if r.NeedsProvider() {
			wf := r.Spec.(*schema.Workflow)
			remote, commit, err := c.providerRepo(ctx, wf.Provider.Repo, wf.Provider.Ref)
			if err != nil {
				var bad *badProviderRepo
				if errors.As(err, &bad) {
					errs = append(errs, &schema.Error{Pos: r.Pos, Path: "provider",
						Msg: fmt.Sprintf("provider: repository %s: %s", wf.Provider.Repo, bad.msg)})
					continue
				}
				return nil, fmt.Errorf("workflow %s: fetch provider repository %s: %w", r.Name, wf.Provider.Repo, err)
			}
			if e := schema.ResolveWorkflow(r, fsys, remote, commit); len(e) > 0 {
				errs = append(errs, e...)
				continue
			}
		}
		wf := r.Spec.(*schema.Workflow)
		if wf.Program == nil || len(wf.Jobs) > 0 {
			continue
		}
		out, err := c.st.GetWorkflowOutput(ctx, c.cfg.Project, wf.InputHash)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		var jobs []schema.WorkflowJob
		if err := json.Unmarshal(out, &jobs); err != nil {
			return nil, fmt.Errorf("workflow %s: decode kept output: %w", r.Name, err)
		}
		*r = schema.WithJobs(*r, jobs)
	}
	return errs, nil
}

// badProviderRepo is a provider repository that cannot be fetched for a
// reason the spec must fix (its URL, its credentials).
type badProviderRepo struct{ msg string }

func (e *badProviderRepo) Error() string { return e.msg }

// commitRE matches a full commit ID.
var commitRE = regexp.MustCompile(`^[0-9a-f]{40}$`)

// providerRepos keeps provider repositories' files by URL and commit.
type providerRepos struct {
	mu sync.Mutex
	m  map[string]fs.FS
}

// maxProviderRepos bounds providerRepos; past it the map starts over.
const maxProviderRepos = 64

// providerRepo fetches a provider repository at ref (a full commit ID, a
// branch, else the remote's default branch) with the spec repository's
// Git machinery and the project's Git secrets, and returns its files and
// commit; the files of a commit are read once.
func (c *Controller) providerRepo(ctx context.Context, url, ref string) (fs.FS, string, error) {
	mref := source.MirrorRef{Branch: ref}
	if commitRE.MatchString(ref) {
		mref = source.MirrorRef{Hash: ref}
	}
	tree, err := c.fetchMirror(ctx, url, mref)
	if err != nil {
		if errors.Is(err, source.ErrBadURL) || isAuthError(err) {
			return nil, "", &badProviderRepo{msg: err.Error()}
		}
		return nil, "", err
	}
	defer tree.Close()
	key := url + "@" + tree.Commit
	c.provRepos.mu.Lock()
	fsys, ok := c.provRepos.m[key]
	c.provRepos.mu.Unlock()
	if ok {
		return fsys, tree.Commit, nil
	}
	fsys, err = tree.ReadFS(providerRepoMaxBytes)
	if errors.Is(err, source.ErrTreeTooLarge) {
		return nil, "", &badProviderRepo{msg: err.Error()}
	}
	if err != nil {
		return nil, "", err
	}
	c.provRepos.mu.Lock()
	if c.provRepos.m == nil || len(c.provRepos.m) >= maxProviderRepos {
		c.provRepos.m = map[string]fs.FS{}
	}
	c.provRepos.m[key] = fsys
	c.provRepos.mu.Unlock()
	return fsys, tree.Commit, nil
}

// keepArtifacts copies a finished job's artifact folders from its runner
// into the artifact store, replacing an earlier submission's. A path the
// job did not create is noted in the log; a copy that fails is returned.
func (c *Controller) keepArtifacts(ctx context.Context, run *store.Run, job *store.Job, spec runSpec, fetch artifactFetcher) error {
	paths := spec.artifactsOf(job.JobNum)
	if len(paths) == 0 {
		return nil
	}
	if c.cfg.Artifacts == nil {
		return errors.New("the server keeps no artifacts")
	}
	start := c.now()
	prefix := blob.JobPrefix(run.Project, run.ID, job.JobNum)
	if err := c.cfg.Artifacts.DeletePrefix(ctx, prefix); err != nil {
		return err
	}
	var files, bytes int64
	for _, group := range artifactGroups(paths) {
		n, b, missing, err := fetch(ctx, group.paths, func(name string, size int64, r io.Reader) error {
			return c.cfg.Artifacts.Put(ctx, prefix+group.keyPrefix+name, r, size)
		})
		if err != nil {
			return err
		}
		files, bytes = files+n, bytes+b
		if len(missing) > 0 {
			c.log.Info("job_artifacts_missing", "job_id", job.ID, "paths", strings.Join(missing, ","))
		}
	}
	c.log.Info("job_artifacts_kept", "job_id", job.ID, "files", files, "bytes", bytes, "duration", c.now().Sub(start))
	return nil
}

// artifactFetcher streams a job's artifact files (paths relative to its
// working directory, or absolute) to put, and returns how many files and
// bytes there were and which paths did not exist.
type artifactFetcher func(ctx context.Context, paths []string, put func(name string, size int64, r io.Reader) error) (files, bytes int64, missing []string, err error)

// absoluteArtifacts is the key prefix of artifacts given by absolute
// paths: "/data" is kept as "_root/data", "data" as "data".
const absoluteArtifacts = "_root/"

// artifactGroup is artifact paths fetched together and the key prefix of
// their files.
type artifactGroup struct {
	paths     []string
	keyPrefix string
}

// artifactGroups splits artifact paths into the relative ones and the
// absolute ones, which are kept under absoluteArtifacts.
func artifactGroups(paths []string) []artifactGroup {
	var rel, abs artifactGroup
	abs.keyPrefix = absoluteArtifacts
	for _, p := range paths {
		if strings.HasPrefix(p, "/") {
			abs.paths = append(abs.paths, p)
		} else {
			rel.paths = append(rel.paths, p)
		}
	}
	var out []artifactGroup
	for _, g := range []artifactGroup{rel, abs} {
		if len(g.paths) > 0 {
			out = append(out, g)
		}
	}
	return out
}

// addDependencyArtifacts adds the artifacts of a workflow job's
// dependencies to its code: relative ones under its working directory,
// absolute ones at their paths. Artifacts that cannot be listed or read
// fail the job's start; a dependency that kept none (its folders did not
// exist) adds nothing.
func (c *Controller) addDependencyArtifacts(ctx context.Context, j *jobCode, run *store.Run, job *store.Job, spec runSpec) error {
	wj, ok := spec.workflowJob(job.JobNum)
	if !ok || len(wj.DependsOn) == 0 {
		return nil
	}
	for _, dep := range wj.DependsOn {
		num, _ := spec.jobNumOf(dep)
		dj, _ := spec.workflowJob(num)
		if len(dj.Artifacts) == 0 {
			continue
		}
		if c.cfg.Artifacts == nil {
			return errors.New("the server keeps no artifacts")
		}
		prefix := blob.JobPrefix(run.Project, run.ID, num)
		objs, err := c.cfg.Artifacts.List(ctx, prefix)
		if err != nil {
			return fmt.Errorf("list the artifacts of %s: %w", dep, err)
		}
		roots := map[string]string{"": ".", absoluteArtifacts: "/"}
		for _, kp := range []string{"", absoluteArtifacts} {
			name := ""
			for _, o := range objs {
				rel := strings.TrimPrefix(o.Key, prefix)
				if (kp == "") == strings.HasPrefix(rel, absoluteArtifacts) {
					continue
				}
				rel = strings.TrimPrefix(rel, kp)
				if name == "" {
					name = codeFileTree(len(j.spec.Files))
					j.spec.Files = append(j.spec.Files, roots[kp])
					j.addDir(name)
				}
				for _, d := range parentDirs(rel) {
					j.addDir(name + "/" + d)
				}
				key := o.Key
				sum, err := c.artifactSum(ctx, key, o)
				if err != nil {
					return fmt.Errorf("artifact %s of %s: %w", rel, dep, err)
				}
				open := func() (io.ReadCloser, error) {
					rc, _, err := c.cfg.Artifacts.Get(ctx, key)
					return rc, err
				}
				if err := j.addFile(name+"/"+rel, false, o.Size, sum, open); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// parentDirs lists the directories of a slash path, outermost first.
func parentDirs(p string) []string {
	var out []string
	for i := range len(p) {
		if p[i] == '/' {
			out = append(out, p[:i])
		}
	}
	return slices.Compact(out)
}

// codeFileTree names the manifest tree of a job's code's i-th file
// mapping (api.CodeFilePrefix).
func codeFileTree(i int) string { return api.CodeFilePrefix + strconv.Itoa(i) }

// artifactSum returns the SHA-256 of the artifact file o (under key),
// reading it the first time: a file is known by its key, size and time
// written (a resubmission's artifacts replace the key's file).
func (c *Controller) artifactSum(ctx context.Context, key string, o blob.Object) (string, error) {
	id := fmt.Sprintf("%s\x00%d\x00%d", key, o.Size, o.ModTime.UnixNano())
	return c.artSums.sum(id, func() (io.ReadCloser, error) {
		rc, _, err := c.cfg.Artifacts.Get(ctx, key)
		return rc, err
	})
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

// keepJobArtifacts keeps a finishing workflow job's artifacts from its
// runner. A job the runner reported done whose artifacts cannot be kept
// fails instead (its dependents would run without them); an unreachable
// runner is retried until the instance is given up on.
func (c *Controller) keepJobArtifacts(ctx context.Context, job *store.Job, spec runSpec, runner *api.RunnerClient) error {
	if schema.Kind(spec.Type) != schema.KindWorkflow || len(spec.artifactsOf(job.JobNum)) == 0 {
		return nil
	}
	run, err := c.st.GetRun(ctx, job.RunID)
	if err != nil {
		return err
	}
	fetch := func(ctx context.Context, paths []string, put func(string, int64, io.Reader) error) (files, bytes int64, missing []string, err error) {
		body, missing, err := runner.Artifacts(ctx, paths)
		if err != nil {
			return 0, 0, nil, err
		}
		defer body.Close()
		err = api.EachArtifact(body, func(name string, size int64, _ fs.FileMode, r io.Reader) error {
			files, bytes = files+1, bytes+size
			return put(name, size, r)
		})
		return files, bytes, missing, err
	}
	actx, cancel := context.WithTimeout(ctx, artifactsTimeout)
	defer cancel()
	if err := c.keepArtifacts(actx, &run, job, spec, fetch); err != nil {
		c.log.Warn("job_artifacts_failed", "job_id", job.ID, "error", err)
		if job.TerminationReason == reasonDoneByRunner {
			job.TerminationReason, job.TerminationMessage = reasonExecutorError, "keeping its artifacts failed: "+err.Error()
		}
	}
	return nil
}

// artifactsTimeout bounds copying one job's artifacts into the store.
const artifactsTimeout = 30 * time.Minute
