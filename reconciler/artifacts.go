package reconciler

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"time"

	"hoist/agents/api"
	"hoist/schema"
	"hoist/store"
	"hoist/store/blob"
)

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
