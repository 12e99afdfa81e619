package reconciler

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
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
	if !ok {
		return nil
	}
	for _, dep := range wj.DependsOn {
		num, _ := spec.jobNumOf(dep)
		if dj, _ := spec.workflowJob(num); len(dj.Artifacts) == 0 {
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
		trees := map[string]string{} // where a file mapping goes ("." or "/") → its manifest tree
		dirs := map[string]bool{}
		for _, o := range objs {
			rel, root := strings.TrimPrefix(o.Key, prefix), "."
			if r, abs := strings.CutPrefix(rel, absoluteArtifacts); abs {
				rel, root = r, "/"
			}
			tree, ok := trees[root]
			if !ok {
				tree = codeFileTree(len(j.spec.Files))
				trees[root] = tree
				j.spec.Files = append(j.spec.Files, root)
				j.addDir(tree)
			}
			for i := range len(rel) {
				if d := tree + "/" + rel[:i]; rel[i] == '/' && !dirs[d] {
					dirs[d] = true
					j.addDir(d)
				}
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
			if err := j.addFile(tree+"/"+rel, false, o.Size, sum, open); err != nil {
				return err
			}
		}
	}
	return nil
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

// keepJobArtifacts copies a finishing workflow job's artifact folders
// from its runner into the artifact store, replacing an earlier
// submission's; a path the job did not create is noted in the log. A job
// the runner reported done whose artifacts cannot be kept fails instead
// (its dependents would run without them). Only reading the job's run can
// fail it.
func (c *Controller) keepJobArtifacts(ctx context.Context, job *store.Job, spec runSpec, runner *api.RunnerClient) error {
	paths := spec.artifactsOf(job.JobNum)
	if schema.Kind(spec.Type) != schema.KindWorkflow || len(paths) == 0 {
		return nil
	}
	run, err := c.st.GetRun(ctx, job.RunID)
	if err != nil {
		return err
	}
	actx, cancel := context.WithTimeout(ctx, artifactsTimeout)
	defer cancel()
	if err := c.keepArtifacts(actx, &run, job, paths, runner); err != nil {
		c.log.Warn("job_artifacts_failed", "job_id", job.ID, "error", err)
		if job.TerminationReason == reasonDoneByRunner {
			job.TerminationReason, job.TerminationMessage = reasonExecutorError, "keeping its artifacts failed: "+err.Error()
		}
	}
	return nil
}

// keepArtifacts streams the files of paths from the job's runner into the
// store, absolute paths under absoluteArtifacts.
func (c *Controller) keepArtifacts(ctx context.Context, run *store.Run, job *store.Job, paths []string, runner *api.RunnerClient) error {
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
		body, missing, err := runner.Artifacts(ctx, group.paths)
		if err != nil {
			return err
		}
		err = api.EachArtifact(body, func(name string, size int64, _ fs.FileMode, r io.Reader) error {
			files, bytes = files+1, bytes+size
			return c.cfg.Artifacts.Put(ctx, prefix+group.keyPrefix+name, r, size)
		})
		body.Close()
		if err != nil {
			return err
		}
		if len(missing) > 0 {
			c.log.Info("job_artifacts_missing", "job_id", job.ID, "paths", strings.Join(missing, ","))
		}
	}
	c.log.Info("job_artifacts_kept", "job_id", job.ID, "files", files, "bytes", bytes, "duration", c.now().Sub(start))
	return nil
}

// artifactsTimeout bounds copying one job's artifacts into the store.
const artifactsTimeout = 30 * time.Minute
