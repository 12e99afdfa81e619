package reconciler

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strconv"
	"strings"
	"time"

	"hoist/agents/api"
	"hoist/schema"
	"hoist/store"
)

// codeDeliveryTimeout bounds sending a job's code to its runner: the
// manifest and every missing blob (up to api.MaxCodeExtractedBytes).
const codeDeliveryTimeout = 5 * time.Minute

// errCodeTooLarge is returned when a run's code exceeds the runner's limit.
var errCodeTooLarge = errors.New("the code is larger than the runner accepts")

// jobCode is what a run's `repos` and `files` bring into its container, as
// it travels to the runner (see api.CodePath): the CodeSpec placing it, the
// manifest of its directories and files, and how to read each file's
// content by its SHA-256.
type jobCode struct {
	spec     *api.CodeSpec
	manifest api.CodeManifest
	blobs    map[string]func() (io.ReadCloser, error)
	size     int64
	closers  []func() error
}

// addDir adds a directory entry.
func (j *jobCode) addDir(p string) {
	j.manifest.Entries = append(j.manifest.Entries, api.CodeEntry{Path: p, Type: api.CodeEntryDir, Mode: 0o755})
}

// addFile adds a file entry of the given size and content hash; open
// reads the content.
func (j *jobCode) addFile(p string, exec bool, size int64, sum string, open func() (io.ReadCloser, error)) error {
	if j.size += size; j.size > api.MaxCodeExtractedBytes {
		return fmt.Errorf("%w: more than %d bytes", errCodeTooLarge, api.MaxCodeExtractedBytes)
	}
	mode := uint32(0o644)
	if exec {
		mode = 0o755
	}
	j.manifest.Entries = append(j.manifest.Entries, api.CodeEntry{Path: p, Type: api.CodeEntryFile, Mode: mode, Size: size, SHA256: sum})
	if _, ok := j.blobs[sum]; !ok {
		j.blobs[sum] = open
	}
	return nil
}

// open reads the blob whose SHA-256 is sum (api.RunnerClient.SendCode).
func (j *jobCode) open(sum string) (io.ReadCloser, error) {
	o, ok := j.blobs[sum]
	if !ok {
		return nil, fmt.Errorf("no blob %s", sum)
	}
	return o()
}

// Close releases the repositories the code is read from.
func (j *jobCode) Close() {
	for _, c := range j.closers {
		_ = c()
	}
}

// runCode builds a run's code from the spec repository at the revision the
// run was applied from (never a working tree), for `repos` with a local
// path and for `files`, and from the mirror of a remote repository for a
// `repos` entry with a `url` (repoFromURL). Local paths are relative to
// the directory of the spec file, as dstack resolves them against the
// configuration file's directory (dstack:
// src/dstack/_internal/core/models/configurations.py, RepoSpec and
// FilePathMapping). It returns nil, nil for a run that brings no code: a
// task without `repos` gets none, as in dstack 0.20. A workflow's jobs get
// the spec repository and their dependencies' artifacts (workflowCode).
func (c *Controller) runCode(ctx context.Context, run *store.Run, job *store.Job, spec runSpec) (*jobCode, error) {
	if schema.Kind(spec.Type) == schema.KindWorkflow {
		return c.workflowCode(ctx, run, job, spec)
	}
	if len(spec.Repos) == 0 && len(spec.Files) == 0 {
		return nil, nil
	}
	j := &jobCode{spec: &api.CodeSpec{}, blobs: map[string]func() (io.ReadCloser, error){}}
	ok := false
	defer func() {
		if !ok {
			j.Close()
		}
	}()
	local := len(spec.Files) > 0
	for _, r := range spec.Repos {
		local = local || r.URL == ""
	}
	var fsys fs.FS
	base := "."
	if local {
		res, err := c.st.GetResource(ctx, run.Project, run.ResourceKind, run.ResourceName)
		if err != nil {
			return nil, fmt.Errorf("find the spec file of %s/%s: %w", run.ResourceKind, run.ResourceName, err)
		}
		snap, err := c.src.CheckoutAt(ctx, run.Revision)
		if err != nil {
			return nil, fmt.Errorf("check out %s: %w", run.Revision, err)
		}
		j.closers = append(j.closers, snap.Close)
		// The resource's file is the one of its latest revision; a run of
		// an older revision whose spec has moved since cannot say where its
		// paths start.
		if _, err := fs.Stat(snap.FS, res.File); err != nil {
			return nil, fmt.Errorf("the spec file %s is not in revision %.12s: %w", res.File, run.Revision, err)
		}
		fsys, base = snap.FS, path.Dir(res.File)
	}
	for i, r := range spec.Repos {
		if r.URL != "" {
			if err := c.repoFromURL(ctx, j, r); err != nil {
				// go-git ends some errors with an empty detail (": ") or
				// with the server's answer and its newline: one line.
				msg := strings.Join(strings.Fields(strings.TrimSuffix(err.Error(), ": ")), " ")
				return nil, fmt.Errorf("repos[%d].url %s: %s", i, r.URL, strings.TrimSuffix(msg, ":"))
			}
		} else {
			p, ok := specRepoPath(base, r.LocalPath)
			if !ok {
				return nil, fmt.Errorf("repos: %s is outside the spec repository", r.LocalPath)
			}
			if err := addTree(j, fsys, p, api.CodeRepoPrefix); err != nil {
				return nil, fmt.Errorf("repos: %s: %w", r.LocalPath, err)
			}
		}
		j.spec.Repo = r.Path
		if j.spec.Repo == "" {
			j.spec.Repo = "."
		}
		j.spec.RepoIfExists = r.IfExists
	}
	for i, f := range spec.Files {
		p, ok := specRepoPath(base, f.LocalPath)
		if !ok {
			return nil, fmt.Errorf("files: %s is outside the spec repository", f.LocalPath)
		}
		if err := addTree(j, fsys, p, api.CodeFilePrefix+strconv.Itoa(i)); err != nil {
			return nil, fmt.Errorf("files: %s: %w", f.LocalPath, err)
		}
		j.spec.Files = append(j.spec.Files, f.Path)
	}
	ok = true
	return j, nil
}

// specRepoPath resolves a local path of a spec file in directory base to a
// path of the spec repository (fs.FS form); ok is false when it leaves the
// repository or is absolute.
func specRepoPath(base, local string) (string, bool) {
	if path.IsAbs(local) {
		return "", false
	}
	p := path.Join(base, local)
	if !fs.ValidPath(p) {
		return "", false
	}
	return p, true
}

// addTree adds the file or directory tree at p of fsys (an in-memory
// snapshot) to j under name.
func addTree(j *jobCode, fsys fs.FS, p, name string) error {
	return fs.WalkDir(fsys, p, func(fp string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel := name
		if fp != p {
			rel = name + "/" + fp[len(p)+1:]
			if p == "." {
				rel = name + "/" + fp
			}
		}
		if d.IsDir() {
			j.addDir(rel)
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if !info.Mode().IsRegular() {
			return nil
		}
		data, err := fs.ReadFile(fsys, fp)
		if err != nil {
			return err
		}
		h := sha256.Sum256(data)
		open := func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }
		return j.addFile(rel, info.Mode().Perm()&0o111 != 0, int64(len(data)), hex.EncodeToString(h[:]), open)
	})
}

// deliverCode sends a job's code to its runner: the manifest, then only
// the blobs the instance's cache lacks (after a one-file commit, that
// file).
func (c *Controller) deliverCode(ctx context.Context, runner *api.RunnerClient, job *store.Job, run *store.Run, j *jobCode) error {
	ctx, cancel := context.WithTimeout(ctx, codeDeliveryTimeout)
	defer cancel()
	start := c.now()
	d, err := runner.SendCode(ctx, j.manifest, j.open)
	if err != nil {
		return err
	}
	c.log.Info("job_code_delivered", "job_id", job.ID, "revision", run.Revision, "entries", len(j.manifest.Entries),
		"blobs", len(j.blobs), "blobs_sent", d.Blobs, "bytes", j.size, "bytes_sent", d.Bytes, "wire_bytes", d.Sent,
		"duration", c.now().Sub(start))
	return nil
}
