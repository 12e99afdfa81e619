package runner

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"hoist/agents/api"
)

// Upload extracts a tar.gz archive into the submitted job's working
// directory. Entries that would land outside it are refused.
func (r *Runner) Upload(archive io.Reader) error {
	r.mu.Lock()
	if r.spec == nil || r.state.State != api.JobPending {
		st := r.state.State
		r.mu.Unlock()
		return fmt.Errorf("upload only after submit and before run (job is %s): %w", st, errConflict)
	}
	dir := r.workDir
	r.mu.Unlock()
	if err := extract(dir, archive); err != nil {
		return fmt.Errorf("upload: %w", err)
	}
	r.log.Info("upload_extracted", "dir", dir)
	return nil
}

var errUnsafePath = errors.New("path leaves the working dir")

func extract(dir string, archive io.Reader) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	zr, err := gzip.NewReader(archive)
	if err != nil {
		return fmt.Errorf("gunzip: %w", err)
	}
	defer zr.Close()
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read tar: %w", err)
		}
		name := filepath.Clean(h.Name)
		if filepath.IsAbs(name) || name == ".." || strings.HasPrefix(name, "../") {
			return fmt.Errorf("%q: %w", h.Name, errUnsafePath)
		}
		target := filepath.Join(dir, name)
		if err := noSymlinkBetween(dir, filepath.Dir(target)); err != nil {
			return fmt.Errorf("%q: %w", h.Name, err)
		}
		mode := os.FileMode(h.Mode) & os.ModePerm
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, mode|0o700); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return err
			}
			_ = os.Remove(target)
			f, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
			if err != nil {
				return err
			}
			_, err = io.Copy(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return fmt.Errorf("write %s: %w", h.Name, err)
			}
		case tar.TypeSymlink:
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return err
			}
			_ = os.Remove(target)
			if err := os.Symlink(h.Linkname, target); err != nil {
				return err
			}
		default:
			// Devices, fifos and hard links have no place in a code upload.
		}
	}
}

// noSymlinkBetween refuses a parent directory reached through a symlink, so
// that an archive cannot write through a link it planted itself.
func noSymlinkBetween(root, dir string) error {
	rel, err := filepath.Rel(root, dir)
	if err != nil || rel == "." {
		return nil
	}
	cur := root
	for _, part := range strings.Split(rel, string(filepath.Separator)) {
		cur = filepath.Join(cur, part)
		fi, err := os.Lstat(cur)
		if err != nil {
			return nil // not there yet: it will be created as a directory
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			return errUnsafePath
		}
	}
	return nil
}
