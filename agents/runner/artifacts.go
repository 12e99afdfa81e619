package runner

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"hoist/agents/api"
)

// artifactCopyBuffer is the size of the buffer a file's content is copied
// through into the tar.
const artifactCopyBuffer = 1 << 20

// artifactEntry is one entry of an artifacts tar.
type artifactEntry struct {
	// name is the entry's slash path, without a trailing slash.
	name string
	// path is where the entry is on this machine.
	path string
	// dir is set for a directory.
	dir bool
}

// artifactPlan is what one artifacts request archives: the entries, in
// order, and what is missing (see api.ArtifactsMissingHeader).
type artifactPlan struct {
	entries []artifactEntry
	missing []string
	seen    map[string]bool
	// missingSeen keeps missing free of duplicates.
	missingSeen map[string]bool
}

// add appends an entry unless one of its name is there already.
func (p *artifactPlan) add(e artifactEntry) {
	if e.name == "." || p.seen[e.name] {
		return
	}
	p.seen[e.name] = true
	p.entries = append(p.entries, e)
}

// miss records a missing path or entry once.
func (p *artifactPlan) miss(name string) {
	if !p.missingSeen[name] {
		p.missingSeen[name] = true
		p.missing = append(p.missing, name)
	}
}

// artifactRoot resolves an artifact path asked for: the directory it is
// taken relative to (the working dir, or "/" for an absolute path), the
// path on this machine, and the name of its entry (see api.ArtifactsPath).
// It refuses an empty path, a NUL, and a relative path that leaves the
// working dir through "..".
func artifactRoot(workDir, p string) (root, target, name string, err error) {
	switch {
	case p == "":
		return "", "", "", errors.New("artifact path is empty")
	case strings.ContainsRune(p, 0):
		return "", "", "", fmt.Errorf("artifact path %q holds a NUL", p)
	case filepath.IsAbs(p):
		target = filepath.Clean(p)
		name = strings.TrimPrefix(filepath.ToSlash(target), "/")
		if name == "" {
			name = "."
		}
		return "/", target, name, nil
	}
	rel := filepath.Clean(p)
	if rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", "", "", fmt.Errorf("artifact path %q: %w", p, errUnsafePath)
	}
	return workDir, filepath.Join(workDir, rel), filepath.ToSlash(rel), nil
}

// joinName names an entry under the entry named base ("." = the root).
func joinName(base, rel string) string {
	if base == "." {
		return rel
	}
	return path.Join(base, rel)
}

// readable reports whether the runner may read path (and, for a
// directory, list and enter it), with its own, the job's user's,
// permissions.
func readable(path string, dir bool) bool {
	mode := uint32(unix.R_OK)
	if dir {
		mode |= unix.X_OK
	}
	return unix.Access(path, mode) == nil
}

// planArtifacts resolves the paths asked for (see api.ArtifactsPath) and
// walks them, without following a symlink. It fails without a submitted
// job, which has no working dir yet, and for a path artifactRoot refuses.
func (r *Runner) planArtifacts(paths []string) (*artifactPlan, error) {
	r.mu.Lock()
	submitted, workDir := r.spec != nil, r.workDir
	r.mu.Unlock()
	if !submitted {
		return nil, fmt.Errorf("artifacts: no job submitted: %w", errConflict)
	}
	type asked struct{ p, root, target, name string }
	var todo []asked
	for _, p := range paths {
		root, target, name, err := artifactRoot(workDir, p)
		if err != nil {
			return nil, err
		}
		todo = append(todo, asked{p, root, target, name})
	}
	plan := &artifactPlan{seen: map[string]bool{}, missingSeen: map[string]bool{}}
	for _, a := range todo {
		if a.target != a.root {
			if err := noSymlinkBetween(a.root, filepath.Dir(a.target)); err != nil {
				plan.miss(a.p)
				continue
			}
		}
		fi, err := os.Lstat(a.target)
		switch {
		case err != nil:
			plan.miss(a.p)
		case fi.Mode().IsRegular():
			if !readable(a.target, false) {
				plan.miss(a.p)
				continue
			}
			plan.add(artifactEntry{name: a.name, path: a.target})
		case fi.IsDir():
			if !readable(a.target, true) {
				plan.miss(a.p)
				continue
			}
			r.walkArtifacts(plan, a.target, a.name)
		default:
			plan.miss(a.p)
		}
	}
	return plan, nil
}

// walkArtifacts adds the directory dir, named name, and its tree to plan:
// directories and regular files the runner may read; unreadable ones are
// missing; symlinks and special files are skipped.
func (r *Runner) walkArtifacts(plan *artifactPlan, dir, name string) {
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		entry := name
		if p != dir {
			rel, rerr := filepath.Rel(dir, p)
			if rerr != nil {
				return rerr
			}
			entry = joinName(name, filepath.ToSlash(rel))
		}
		if err != nil {
			// The directory could not be listed (or vanished): what
			// it held is missing.
			plan.miss(entry)
			if d != nil && d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		switch {
		case d.IsDir():
			if p != dir && !readable(p, true) {
				plan.miss(entry)
				return fs.SkipDir
			}
			plan.add(artifactEntry{name: entry, path: p, dir: true})
		case d.Type().IsRegular():
			if !readable(p, false) {
				plan.miss(entry)
				return nil
			}
			plan.add(artifactEntry{name: entry, path: p})
		default:
			r.log.Debug("artifact_skipped", "entry", entry, "type", d.Type().String())
		}
		return nil
	})
}

// artifactStats counts what writeArtifacts archived.
type artifactStats struct {
	files, dirs, skipped int
	bytes                int64
}

// writeArtifacts writes the plan's entries to w as a tar and ends it. An
// entry that vanished or changed type since it was planned is skipped; a
// file that shrank while it was read fails.
func (r *Runner) writeArtifacts(w io.Writer, plan *artifactPlan) (artifactStats, error) {
	var st artifactStats
	tw := tar.NewWriter(w)
	buf := make([]byte, artifactCopyBuffer)
	for _, e := range plan.entries {
		if e.dir {
			fi, err := os.Lstat(e.path)
			if err != nil || !fi.IsDir() {
				r.log.Warn("artifact_vanished", "entry", e.name, "err", err)
				st.skipped++
				continue
			}
			h := &tar.Header{Typeflag: tar.TypeDir, Name: e.name + "/", Mode: int64(fi.Mode().Perm()), ModTime: fi.ModTime()}
			if err := tw.WriteHeader(h); err != nil {
				return st, fmt.Errorf("artifact %s: %w", e.name, err)
			}
			st.dirs++
			continue
		}
		n, ok, err := writeArtifactFile(tw, e, buf)
		if err != nil {
			return st, err
		}
		if !ok {
			r.log.Warn("artifact_vanished", "entry", e.name)
			st.skipped++
			continue
		}
		st.files++
		st.bytes += n
	}
	if err := tw.Close(); err != nil {
		return st, fmt.Errorf("artifacts: end tar: %w", err)
	}
	return st, nil
}

// writeArtifactFile writes one regular file's entry and content, opened
// without following a symlink (and without blocking, should it have become
// a pipe). ok is false when it is no longer a regular file the runner may
// open.
func writeArtifactFile(tw *tar.Writer, e artifactEntry, buf []byte) (n int64, ok bool, err error) {
	f, err := os.OpenFile(e.path, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if err != nil {
		return 0, false, nil
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return 0, false, nil
	}
	size := fi.Size()
	h := &tar.Header{Typeflag: tar.TypeReg, Name: e.name, Size: size, Mode: int64(fi.Mode().Perm()), ModTime: fi.ModTime()}
	if err := tw.WriteHeader(h); err != nil {
		return 0, true, fmt.Errorf("artifact %s: %w", e.name, err)
	}
	// A file that grows while it is read is cut at the size it had.
	n, err = io.CopyBuffer(tw, io.LimitReader(f, size), buf)
	if err != nil {
		return n, true, fmt.Errorf("artifact %s: %w", e.name, err)
	}
	if n < size {
		return n, true, fmt.Errorf("artifact %s: shrank from %d to %d bytes while it was read", e.name, size, n)
	}
	return n, true, nil
}

// handleArtifacts streams the job's artifacts (see api.ArtifactsPath). An
// error once the tar has begun aborts the connection, so that the reader
// sees a truncated archive.
func (r *Runner) handleArtifacts(w http.ResponseWriter, req *http.Request) {
	paths := req.URL.Query()["path"]
	plan, err := r.planArtifacts(paths)
	if err != nil {
		writeError(w, err)
		return
	}
	if len(plan.missing) > 0 {
		w.Header().Set(api.ArtifactsMissingHeader, api.FormatArtifactsMissing(plan.missing))
	}
	w.Header().Set("Content-Type", api.ArtifactsContentType)
	w.WriteHeader(http.StatusOK)
	// The answer begins now: the client learns what is missing, and an
	// error below truncates the tar rather than failing the request.
	_ = http.NewResponseController(w).Flush()
	st, err := r.writeArtifacts(w, plan)
	if err != nil {
		if req.Context().Err() != nil {
			r.log.Warn("artifacts_request_ended", "files", st.files, "bytes", st.bytes, "err", err)
			return
		}
		r.log.Error("artifacts_failed", "files", st.files, "bytes", st.bytes, "err", err)
		panic(http.ErrAbortHandler)
	}
	r.log.Info("artifacts_sent", "paths", len(paths), "files", st.files, "dirs", st.dirs, "bytes", st.bytes,
		"missing", len(plan.missing), "skipped", st.skipped)
}
