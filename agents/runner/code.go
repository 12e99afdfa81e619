package runner

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"hoist/agents/api"
)

// maxCodeEntries bounds the number of entries of a code archive.
const maxCodeEntries = 200_000

// errCodeNotUploaded refuses Run while a job's code archive is missing.
var errCodeNotUploaded = errors.New("the job's code has not been uploaded")

// codeDest resolves a CodeSpec path against the working directory; "~" and
// "~/..." are under the job's home directory, as dstack expands them
// (dstack: runner/internal/common/utils.go, ExpandPath).
func (r *Runner) codeDest(p string) string {
	if p == "~" || strings.HasPrefix(p, "~/") {
		home := os.Getenv("HOME")
		if home == "" {
			home = "/root"
		}
		return filepath.Join(home, p[1:])
	}
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(r.workDir, p)
}

// repoDir is where the job's repository goes ("" = none). Callers hold mu.
func (r *Runner) repoDirLocked() string {
	if r.spec == nil || r.spec.Code == nil || r.spec.Code.Repo == "" {
		return ""
	}
	return r.codeDest(r.spec.Code.Repo)
}

// UploadCode places the job's code archive as its JobSpec.Code says, like
// dstack's runner (runner/internal/executor/repo.go): the repository
// directory goes to Code.Repo unless that is a non-empty directory, which
// fails the upload with if_exists "error" and is left alone with "skip";
// each file mapping goes to its path. Once placed, the code is not placed
// again (a retried start re-sends it). Entries that would leave their
// destination, and symbolic links pointing out of it, are refused.
func (r *Runner) UploadCode(archive io.Reader) error { return r.UploadCodeSum(archive, "") }

// errNotCached is returned by UseCachedCode when the cache lacks the archive.
var errNotCached = errors.New("code archive not cached")

// validSum matches a SHA-256 in lowercase hex.
func validSum(s string) bool {
	if len(s) != sha256.Size*2 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil && strings.ToLower(s) == s
}

// UploadCodeSum is UploadCode for an archive whose SHA-256 is sum (hex; ""
// = unknown): with Config.CodeCache set, the archive is checked against sum
// and kept in the cache for UseCachedCode.
func (r *Runner) UploadCodeSum(archive io.Reader, sum string) error {
	if sum == "" || r.cfg.CodeCache == "" {
		return r.placeCode(archive)
	}
	if !validSum(sum) {
		return fmt.Errorf("code upload: sha256 %q is not a SHA-256 in hex", sum)
	}
	tmp, err := os.CreateTemp(r.cfg.CodeCache, ".upload-*")
	if err != nil {
		// A job user that may not write the cache still gets its code.
		r.log.Warn("code_cache_unwritable", "dir", r.cfg.CodeCache, "err", err)
		return r.placeCode(archive)
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	h := sha256.New()
	if _, err := io.Copy(io.MultiWriter(tmp, h), io.LimitReader(archive, api.MaxCodeArchiveBytes+1)); err != nil {
		return fmt.Errorf("code upload: %w", err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != sum {
		return fmt.Errorf("code upload: the archive's sha256 is %s, not %s", got, sum)
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return err
	}
	if err := r.placeCode(tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), filepath.Join(r.cfg.CodeCache, sum+".tar.gz")); err != nil {
		r.log.Warn("code_cache_store_failed", "sha256", sum, "err", err)
	}
	r.trimCodeCache()
	return nil
}

// maxCachedCode bounds the archives an instance's code cache keeps (each at
// most api.MaxCodeArchiveBytes); the least recently used go first.
const maxCachedCode = 8

// trimCodeCache removes the least recently used archives beyond
// maxCachedCode.
func (r *Runner) trimCodeCache() {
	ents, err := os.ReadDir(r.cfg.CodeCache)
	if err != nil {
		return
	}
	type entry struct {
		name string
		used time.Time
	}
	var kept []entry
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".tar.gz") {
			continue
		}
		if info, err := e.Info(); err == nil {
			kept = append(kept, entry{e.Name(), info.ModTime()})
		}
	}
	if len(kept) <= maxCachedCode {
		return
	}
	sort.Slice(kept, func(i, j int) bool { return kept[i].used.After(kept[j].used) })
	for _, e := range kept[maxCachedCode:] {
		_ = os.Remove(filepath.Join(r.cfg.CodeCache, e.name))
	}
}

// UseCachedCode places the cached code archive whose SHA-256 is sum, as
// UploadCode would. It fails with errNotCached when the cache does not hold
// it, or holds a file of other content (the cache is shared by the
// instance's jobs, so what it holds is checked before use).
func (r *Runner) UseCachedCode(sum string) error {
	if r.cfg.CodeCache == "" || !validSum(sum) {
		return errNotCached
	}
	f, err := os.Open(filepath.Join(r.cfg.CodeCache, sum+".tar.gz"))
	if err != nil {
		return errNotCached
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, io.LimitReader(f, api.MaxCodeArchiveBytes+1)); err != nil || hex.EncodeToString(h.Sum(nil)) != sum {
		r.log.Warn("code_cache_entry_mismatch", "sha256", sum)
		return errNotCached
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	now := r.now()
	_ = os.Chtimes(f.Name(), now, now) // most recently used
	r.log.Info("code_cache_hit", "sha256", sum)
	return r.placeCode(f)
}

// placeCode places a code archive (see UploadCode).
func (r *Runner) placeCode(archive io.Reader) error {
	r.mu.Lock()
	if r.spec == nil || r.state.State != api.JobPending || r.spec.Code == nil {
		st := r.state.State
		r.mu.Unlock()
		return fmt.Errorf("code upload only after submitting a job with code and before run (job is %s): %w", st, errConflict)
	}
	if r.codeUploaded {
		// A server retrying its start of the job sends the code again.
		r.mu.Unlock()
		_, _ = io.Copy(io.Discard, archive)
		return nil
	}
	code := *r.spec.Code
	repo := r.repoDirLocked()
	files := make([]string, len(code.Files))
	for i, f := range code.Files {
		files[i] = r.codeDest(f)
	}
	r.mu.Unlock()
	skipRepo := false
	if repo != "" {
		ents, err := os.ReadDir(repo)
		switch {
		case err == nil && len(ents) > 0 && code.RepoIfExists == api.RepoIfExistsSkip:
			skipRepo = true
			r.log.Info("code_repo_skipped", "dir", repo)
		case err == nil && len(ents) > 0:
			return fmt.Errorf("repository directory %s exists and is not empty (if_exists: error)", repo)
		}
	}
	dest := func(name string) (root, rel string, ok bool) {
		if name == api.CodeRepoPrefix || strings.HasPrefix(name, api.CodeRepoPrefix+"/") {
			if repo == "" || skipRepo {
				return "", "", false
			}
			return repo, strings.TrimPrefix(strings.TrimPrefix(name, api.CodeRepoPrefix), "/"), true
		}
		rest, found := strings.CutPrefix(name, api.CodeFilePrefix)
		if !found {
			return "", "", false
		}
		idx, sub, _ := strings.Cut(rest, "/")
		i, err := strconv.Atoi(idx)
		if err != nil || i < 0 || i >= len(files) {
			return "", "", false
		}
		return files[i], sub, true
	}
	if err := extractCode(archive, dest); err != nil {
		return fmt.Errorf("code upload: %w", err)
	}
	r.mu.Lock()
	r.codeUploaded = true
	r.mu.Unlock()
	r.log.Info("code_extracted", "repo_dir", repo, "files", len(files))
	return nil
}

// extractCode extracts a tar.gz archive, each entry to where dest says
// (root, and the path under it; ok false drops the entry).
func extractCode(archive io.Reader, dest func(name string) (root, rel string, ok bool)) error {
	zr, err := gzip.NewReader(io.LimitReader(archive, api.MaxCodeArchiveBytes+1))
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
		if n >= maxCodeEntries {
			return fmt.Errorf("more than %d entries in the archive", maxCodeEntries)
		}
		name := path.Clean(h.Name)
		if path.IsAbs(name) || name == ".." || strings.HasPrefix(name, "../") {
			return fmt.Errorf("%q: %w", h.Name, errUnsafePath)
		}
		root, rel, ok := dest(name)
		if !ok {
			continue
		}
		target := root
		if rel != "" {
			target = filepath.Join(root, filepath.FromSlash(rel))
		}
		if err := noSymlinkBetween(root, filepath.Dir(target)); err != nil {
			return fmt.Errorf("%q: %w", h.Name, err)
		}
		mode := os.FileMode(h.Mode) & os.ModePerm
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, mode|0o700); err != nil {
				return err
			}
		case tar.TypeReg:
			if total += h.Size; total > api.MaxCodeExtractedBytes {
				return fmt.Errorf("the archive extracts to more than %d bytes", api.MaxCodeExtractedBytes)
			}
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return err
			}
			_ = os.Remove(target)
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
			// A link may point within its destination only.
			if filepath.IsAbs(h.Linkname) || !within(root, filepath.Join(filepath.Dir(target), h.Linkname)) {
				return fmt.Errorf("%q links out of its destination: %w", h.Name, errUnsafePath)
			}
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return err
			}
			_ = os.Remove(target)
			if err := os.Symlink(h.Linkname, target); err != nil {
				return err
			}
		default:
			// Devices, fifos and hard links have no place in code.
		}
	}
}

// within reports whether p is root or under it (both clean).
func within(root, p string) bool {
	rel, err := filepath.Rel(root, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}
