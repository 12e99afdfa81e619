package runner

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"hoist/agents/api"
)

// IDE servers. A dev environment with an IDE `version` gets that IDE's
// remote server installed before its commands run, as dstack's dev
// environments install it with wget and tar (dstack:
// src/dstack/_internal/server/services/ides/vscode.py, cursor.py,
// windsurf.py): the tar.gz is downloaded, its top directory stripped, and
// the rest extracted into the job user's home at IDESpec.InstallDir.
const (
	// ideInstallTimeout bounds one installation, download included; an IDE
	// server is some 60 MB.
	ideInstallTimeout = 30 * time.Minute
	// maxIDEExtractedBytes and maxIDEEntries bound what an IDE server
	// archive may extract to.
	maxIDEExtractedBytes = 4 << 30
	maxIDEEntries        = 200_000
)

// ideClient downloads IDE servers: through the environment's proxy, like
// wget, and without an overall timeout (the installation's context has
// one).
var ideClient = &http.Client{Transport: &http.Transport{
	Proxy:                 http.ProxyFromEnvironment,
	DialContext:           (&net.Dialer{Timeout: 30 * time.Second}).DialContext,
	ResponseHeaderTimeout: time.Minute,
	TLSHandshakeTimeout:   30 * time.Second,
}}

// startWithIDELocked starts a job whose spec has an IDE: the job is running
// from now on, and its commands start once the IDE server is installed. A
// failed installation fails the job with executor_error and says why in the
// job's log and termination message; a stop during it ends the job with
// the stop's reason. Callers hold mu.
func (r *Runner) startWithIDELocked() {
	ide := *r.spec.IDE
	home := r.jobHomeLocked()
	ctx, cancel := context.WithTimeout(context.Background(), ideInstallTimeout)
	r.installing = cancel
	r.setStateLocked(api.JobState{State: api.JobRunning})
	r.startMaxTimerLocked()
	r.log.Info("ide_install_started", "ide", ide.Name, "version", ide.Version, "install_dir", ide.InstallDir)
	go func() {
		defer cancel()
		err := r.installIDE(ctx, ide, home)
		r.mu.Lock()
		defer r.mu.Unlock()
		r.installing = nil
		switch {
		case r.stopReason != "":
			r.log.Info("ide_install_stopped", "reason", r.stopReason)
			r.logs.close()
			r.finishLocked(api.JobState{State: api.JobTerminated, TerminationReason: r.stopReason, TerminationMessage: r.stopMessage})
		case err != nil:
			r.log.Error("ide_install_failed", "ide", ide.Name, "err", err)
			r.logLine(api.StreamStderr, err.Error())
			r.logs.close()
			r.finishLocked(api.JobState{State: api.JobFailed, TerminationReason: api.ReasonExecutorError, TerminationMessage: err.Error()})
		default:
			if err := r.startLocked(); err != nil {
				r.log.Error("job_start_failed", "err", err)
				r.logs.close()
				r.finishLocked(api.JobState{State: api.JobFailed, TerminationReason: api.ReasonExecutorError, TerminationMessage: err.Error()})
			}
		}
	}()
}

// installIDE installs the IDE server into home/ide.InstallDir, unless that
// directory is already there and not empty (an earlier job's, on a home
// that outlives jobs). The archive is extracted beside it and renamed into
// place, so a directory found there is always complete.
func (r *Runner) installIDE(ctx context.Context, ide api.IDESpec, home string) error {
	rel := filepath.Clean(filepath.FromSlash(ide.InstallDir))
	if ide.InstallDir == "" || filepath.IsAbs(rel) || rel == "." || rel == ".." || strings.HasPrefix(rel, "../") {
		return fmt.Errorf("install the %s server: install dir %q is not a directory under the home directory", ide.Name, ide.InstallDir)
	}
	target := filepath.Join(home, rel)
	shown := "~/" + filepath.ToSlash(rel)
	if ents, err := os.ReadDir(target); err == nil && len(ents) > 0 {
		r.logLine(api.StreamStdout, fmt.Sprintf("The %s server %s is already installed in %s", ide.Name, ide.Version, shown))
		return nil
	}
	r.logLine(api.StreamStdout, fmt.Sprintf("Installing the %s server %s into %s", ide.Name, ide.Version, shown))
	fail := func(err error) error {
		return fmt.Errorf("install the %s server %s from %s: %w", ide.Name, ide.Version, ide.DownloadURL, err)
	}
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return fail(err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(target), "."+filepath.Base(target)+".hoist-")
	if err != nil {
		return fail(err)
	}
	defer os.RemoveAll(tmp)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, ide.DownloadURL, nil)
	if err != nil {
		return fail(err)
	}
	resp, err := ideClient.Do(req)
	if err != nil {
		return fail(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fail(fmt.Errorf("download: %s", resp.Status))
	}
	if err := extractStripped(resp.Body, tmp); err != nil {
		return fail(err)
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return fail(err)
	}
	_ = os.Remove(target) // an empty directory in its place
	if err := os.Rename(tmp, target); err != nil {
		return fail(err)
	}
	r.logLine(api.StreamStdout, fmt.Sprintf("Installed the %s server %s", ide.Name, ide.Version))
	return nil
}

// extractStripped extracts a tar.gz into dir without the first component of
// each entry's name (tar --strip-components=1), keeping permission bits but
// not owners (--no-same-owner): the files belong to the job's user. Entries
// that would leave dir, and links pointing out of it, are refused.
func extractStripped(archive io.Reader, dir string) error {
	zr, err := gzip.NewReader(archive)
	if err != nil {
		return fmt.Errorf("gunzip: %w", err)
	}
	defer zr.Close()
	tr := tar.NewReader(zr)
	var total int64
	for n := 0; ; n++ {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read tar: %w", err)
		}
		if n >= maxIDEEntries {
			return fmt.Errorf("more than %d entries in the archive", maxIDEEntries)
		}
		rel, ok := stripFirst(h.Name)
		if !ok {
			continue // the top directory itself
		}
		if rel == "" {
			return fmt.Errorf("%q: %w", h.Name, errUnsafePath)
		}
		target := filepath.Join(dir, filepath.FromSlash(rel))
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
			if total += h.Size; total > maxIDEExtractedBytes {
				return fmt.Errorf("the archive extracts to more than %d bytes", int64(maxIDEExtractedBytes))
			}
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return err
			}
			f, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
			if err != nil {
				return err
			}
			_, err = io.Copy(f, io.LimitReader(tr, h.Size))
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return fmt.Errorf("write %s: %w", h.Name, err)
			}
		case tar.TypeSymlink:
			if filepath.IsAbs(h.Linkname) || !within(dir, filepath.Join(filepath.Dir(target), h.Linkname)) {
				return fmt.Errorf("%q links out of the install dir: %w", h.Name, errUnsafePath)
			}
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return err
			}
			if err := os.Symlink(h.Linkname, target); err != nil {
				return err
			}
		case tar.TypeLink:
			old, ok := stripFirst(h.Linkname)
			if !ok || old == "" {
				return fmt.Errorf("%q links out of the install dir: %w", h.Name, errUnsafePath)
			}
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return err
			}
			if err := os.Link(filepath.Join(dir, filepath.FromSlash(old)), target); err != nil {
				return err
			}
		default:
			// Devices and fifos have no place in an IDE server.
		}
	}
}

// stripFirst returns name without its first component, cleaned; ok is
// false for the first component alone. rel is "" for a name that would
// leave the archive's root.
func stripFirst(name string) (rel string, ok bool) {
	first, rest, found := strings.Cut(strings.TrimPrefix(name, "./"), "/")
	if rest = path.Clean(rest); !found || rest == "." {
		return "", false
	}
	if first == ".." || path.IsAbs(name) || rest == ".." || strings.HasPrefix(rest, "../") {
		return "", true
	}
	return rest, true
}

// jobHomeLocked is the job user's home directory: HOME of the job's
// environment. Callers hold mu.
func (r *Runner) jobHomeLocked() string {
	for _, kv := range r.env() {
		if v, ok := strings.CutPrefix(kv, "HOME="); ok {
			return v
		}
	}
	return "/root"
}

// logLine appends one line of the runner's own to the job's log, for the
// user to read beside the job's output.
func (r *Runner) logLine(stream, line string) {
	if _, err := r.logs.append(stream, []byte(line+"\n"), r.now()); err != nil {
		r.log.Error("log_append_failed", "err", err)
	}
}

// within reports whether p is root or below it (both cleaned, absolute).
func within(root, p string) bool {
	rel, err := filepath.Rel(root, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}
