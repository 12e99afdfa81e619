package reconciler

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strconv"

	"hoist/agents/api"
	"hoist/store"
)

// errCodeTooLarge is returned when a run's code exceeds the runner's limit.
var errCodeTooLarge = errors.New("the code archive is larger than the runner accepts")

// codeArchive builds what a run's `repos` (local paths) and `files` bring
// into its container, read from the spec repository at the revision the run
// was applied from (never a working tree): a tar.gz laid out as
// api.CodeSpec says, and the CodeSpec placing it. Local paths are relative
// to the directory of the spec file, as dstack resolves them against the
// configuration file's directory (dstack:
// src/dstack/_internal/core/models/configurations.py, RepoSpec and
// FilePathMapping). It returns nil, nil for a run that brings no code.
func (c *Controller) codeArchive(ctx context.Context, run *store.Run, spec runSpec) (*api.CodeSpec, []byte, error) {
	if len(spec.Repos) == 0 && len(spec.Files) == 0 {
		return nil, nil, nil
	}
	res, err := c.st.GetResource(ctx, run.Project, run.ResourceKind, run.ResourceName)
	if err != nil {
		return nil, nil, fmt.Errorf("find the spec file of %s/%s: %w", run.ResourceKind, run.ResourceName, err)
	}
	snap, err := c.src.CheckoutAt(ctx, run.Revision)
	if err != nil {
		return nil, nil, fmt.Errorf("check out %s: %w", run.Revision, err)
	}
	defer snap.Close()
	// The resource's file is the one of its latest revision; a run of an
	// older revision whose spec has moved since cannot say where its paths
	// start.
	if _, err := fs.Stat(snap.FS, res.File); err != nil {
		return nil, nil, fmt.Errorf("the spec file %s is not in revision %.12s: %w", res.File, run.Revision, err)
	}
	base := path.Dir(res.File)
	cs := &api.CodeSpec{}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, r := range spec.Repos {
		if r.LocalPath == "" {
			return nil, nil, errors.New("repos: only local paths are supported")
		}
		local, ok := specRepoPath(base, r.LocalPath)
		if !ok {
			return nil, nil, fmt.Errorf("repos: %s is outside the spec repository", r.LocalPath)
		}
		if err := addTree(tw, snap.FS, local, api.CodeRepoPrefix, &buf); err != nil {
			return nil, nil, fmt.Errorf("repos: %s: %w", r.LocalPath, err)
		}
		cs.Repo = r.Path
		if cs.Repo == "" {
			cs.Repo = "."
		}
		cs.RepoIfExists = r.IfExists
	}
	for i, f := range spec.Files {
		local, ok := specRepoPath(base, f.LocalPath)
		if !ok {
			return nil, nil, fmt.Errorf("files: %s is outside the spec repository", f.LocalPath)
		}
		if err := addTree(tw, snap.FS, local, api.CodeFilePrefix+strconv.Itoa(i), &buf); err != nil {
			return nil, nil, fmt.Errorf("files: %s: %w", f.LocalPath, err)
		}
		cs.Files = append(cs.Files, f.Path)
	}
	if err := tw.Close(); err != nil {
		return nil, nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, nil, err
	}
	if buf.Len() > api.MaxCodeArchiveBytes {
		return nil, nil, fmt.Errorf("%w: %d bytes, the limit is %d", errCodeTooLarge, buf.Len(), api.MaxCodeArchiveBytes)
	}
	return cs, buf.Bytes(), nil
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

// addTree writes the file or directory tree at p of fsys to tw under name.
// out is the archive being written, watched to stop early when too large.
func addTree(tw *tar.Writer, fsys fs.FS, p, name string, out *bytes.Buffer) error {
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
		info, err := d.Info()
		if err != nil {
			return err
		}
		if d.IsDir() {
			return tw.WriteHeader(&tar.Header{Name: rel + "/", Mode: 0o755, Typeflag: tar.TypeDir})
		}
		if !info.Mode().IsRegular() {
			return nil
		}
		data, err := fs.ReadFile(fsys, fp)
		if err != nil {
			return err
		}
		mode := int64(0o644)
		if info.Mode().Perm()&0o111 != 0 {
			mode = 0o755
		}
		if err := tw.WriteHeader(&tar.Header{Name: rel, Mode: mode, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		if _, err := tw.Write(data); err != nil {
			return err
		}
		if out.Len() > api.MaxCodeArchiveBytes {
			return errCodeTooLarge
		}
		return nil
	})
}

// uploadCode hands the runner a job's code archive, unless its instance's
// code cache holds that archive already (same SHA-256): then only the
// request to use it travels.
func (c *Controller) uploadCode(ctx context.Context, runner *api.RunnerClient, job *store.Job, run *store.Run, archive []byte) error {
	h := sha256.Sum256(archive)
	sum := hex.EncodeToString(h[:])
	cached, err := runner.UseCachedCode(ctx, sum)
	if err != nil {
		return err
	}
	if cached {
		c.log.Info("job_code_cached", "job_id", job.ID, "revision", run.Revision, "sha256", sum)
		return nil
	}
	if err := runner.UploadCode(ctx, bytes.NewReader(archive), sum); err != nil {
		return err
	}
	c.log.Info("job_code_uploaded", "job_id", job.ID, "revision", run.Revision, "sha256", sum, "bytes", len(archive))
	return nil
}
