package storeview

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"hoist/store"
	"hoist/store/blob"
	"hoist/web"
)

// Artifacts implements web.Artifacts: it resolves run names in the store
// and reads their files from a blob.Store, under the keys blob.Key makes.
type Artifacts struct {
	st      *store.Store
	project string
	blobs   blob.Store
}

var _ web.Artifacts = (*Artifacts)(nil)

// NewArtifacts returns the artifacts of project's runs (store.DefaultProject
// when empty), kept in blobs.
func NewArtifacts(st *store.Store, project string, blobs blob.Store) *Artifacts {
	if project == "" {
		project = store.DefaultProject
	}
	return &Artifacts{st: st, project: project, blobs: blobs}
}

// ListArtifacts implements web.Artifacts.
func (a *Artifacts) ListArtifacts(ctx context.Context, name string, jobNum int) ([]web.Artifact, error) {
	r, err := a.st.GetRunByName(ctx, a.project, name)
	if err != nil {
		return nil, mapErr(err)
	}
	prefix := blob.RunPrefix(a.project, r.ID)
	if jobNum >= 0 {
		prefix = blob.JobPrefix(a.project, r.ID, jobNum)
	}
	objs, err := a.blobs.List(ctx, prefix)
	if err != nil {
		return nil, fmt.Errorf("list the artifacts of %s: %w", name, err)
	}
	names, err := a.jobNames(ctx, r.ID)
	if err != nil {
		return nil, err
	}
	out := []web.Artifact{}
	runPrefix := blob.RunPrefix(a.project, r.ID)
	for _, o := range objs {
		num, file, ok := strings.Cut(strings.TrimPrefix(o.Key, runPrefix), "/")
		n, err := strconv.Atoi(num)
		if !ok || err != nil || n < 0 || !web.ValidArtifactPath(file) {
			continue // not a key blob.Key makes
		}
		out = append(out, web.Artifact{JobNum: n, JobName: names[n], Path: file, Size: o.Size, ModifiedAt: o.ModTime.UTC()})
	}
	// Keys sort "10/" before "2/": order by number, then path.
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].JobNum != out[j].JobNum {
			return out[i].JobNum < out[j].JobNum
		}
		return out[i].Path < out[j].Path
	})
	return out, nil
}

// OpenArtifact implements web.Artifacts.
func (a *Artifacts) OpenArtifact(ctx context.Context, name string, jobNum int, file string) (io.ReadCloser, web.Artifact, error) {
	if jobNum < 0 || !web.ValidArtifactPath(file) {
		return nil, web.Artifact{}, fmt.Errorf("%w: no artifact %q of job %d", web.ErrNotFound, file, jobNum)
	}
	r, err := a.st.GetRunByName(ctx, a.project, name)
	if err != nil {
		return nil, web.Artifact{}, mapErr(err)
	}
	rc, size, err := a.blobs.Get(ctx, blob.Key(a.project, r.ID, jobNum, file))
	if errors.Is(err, blob.ErrNotFound) {
		return nil, web.Artifact{}, fmt.Errorf("%w: run %s has no artifact %q of job %d", web.ErrNotFound, name, file, jobNum)
	}
	if err != nil {
		return nil, web.Artifact{}, fmt.Errorf("open an artifact of %s: %w", name, err)
	}
	names, err := a.jobNames(ctx, r.ID)
	if err != nil {
		_ = rc.Close()
		return nil, web.Artifact{}, err
	}
	return rc, web.Artifact{JobNum: jobNum, JobName: names[jobNum], Path: file, Size: size}, nil
}

// jobNames maps the run's job numbers to the name of each one's latest
// submission (its first replica's, for services).
func (a *Artifacts) jobNames(ctx context.Context, runID string) (map[int]string, error) {
	jobs, err := a.st.ListJobs(ctx, runID)
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	names := map[int]string{}
	best := map[int]store.Job{}
	for _, j := range jobs {
		b, seen := best[j.JobNum]
		if !seen || j.ReplicaNum < b.ReplicaNum || (j.ReplicaNum == b.ReplicaNum && j.SubmissionNum > b.SubmissionNum) {
			best[j.JobNum] = j
			names[j.JobNum] = j.JobName
		}
	}
	return names, nil
}
