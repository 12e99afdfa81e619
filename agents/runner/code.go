package runner

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"hoist/agents/api"
)

// maxCodeEntries bounds the number of entries of a code manifest.
const maxCodeEntries = 200_000

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

// errCodeNotUploaded refuses Run while a job's code is not in place.
var errCodeNotUploaded = errors.New("the job's code has not been placed")

// pendingCodeLocked returns the job's CodeSpec while the job waits for its
// code; placed reports that its code is in place already. Callers hold mu.
func (r *Runner) pendingCodeLocked() (code api.CodeSpec, placed bool, err error) {
	if r.spec == nil || r.state.State != api.JobPending || r.spec.Code == nil {
		return api.CodeSpec{}, false, fmt.Errorf("code only after submitting a job with code and before run (job is %s): %w", r.state.State, errConflict)
	}
	return *r.spec.Code, r.codePlaced, nil
}

// ReceiveCodeManifest takes the job's code manifest (see api.CodePath) and
// answers which blobs are missing, or, when none is, places the code as
// the JobSpec's CodeSpec says, like dstack's runner
// (runner/internal/executor/repo.go): the repository directory goes to
// Code.Repo unless that is a non-empty directory, which fails with
// if_exists "error" and is left alone with "skip"; each file mapping goes
// to its path. Once placed, the code is not placed again (a retried start
// re-sends the manifest and is answered Placed). A manifest received
// before replaces the earlier one.
func (r *Runner) ReceiveCodeManifest(m api.CodeManifest) (api.CodeStatus, error) {
	r.codeMu.Lock()
	defer r.codeMu.Unlock()
	r.mu.Lock()
	code, placed, err := r.pendingCodeLocked()
	r.mu.Unlock()
	if err != nil {
		return api.CodeStatus{}, err
	}
	if placed {
		return api.CodeStatus{Placed: true}, nil
	}
	if err := checkManifest(m, len(code.Files)); err != nil {
		return api.CodeStatus{}, fmt.Errorf("code manifest: %w", err)
	}
	if r.blobs == nil {
		if r.blobs, err = r.openBlobCache(); err != nil {
			return api.CodeStatus{}, fmt.Errorf("code: %w", err)
		}
	}
	r.manifest = &m
	return r.advanceCode(code)
}

// ReceiveCodeBlobs stores blobs the runner said were missing (a tar.gz of
// entries named by their SHA-256; see api.CodeBlobsPath), each checked
// against its name and size, and answers what is still missing, or places
// the code as ReceiveCodeManifest does once nothing is.
func (r *Runner) ReceiveCodeBlobs(body io.Reader) (api.CodeStatus, error) {
	r.codeMu.Lock()
	defer r.codeMu.Unlock()
	r.mu.Lock()
	code, placed, err := r.pendingCodeLocked()
	r.mu.Unlock()
	if err != nil {
		return api.CodeStatus{}, err
	}
	if placed {
		_, _ = io.Copy(io.Discard, body)
		return api.CodeStatus{Placed: true}, nil
	}
	if r.manifest == nil {
		return api.CodeStatus{}, fmt.Errorf("code blobs before the code manifest: %w", errConflict)
	}
	need := r.neededBlobs()
	zr, err := gzip.NewReader(io.LimitReader(body, api.MaxCodeArchiveBytes+1))
	if err != nil {
		return api.CodeStatus{}, fmt.Errorf("code blobs: gunzip: %w", err)
	}
	defer zr.Close()
	tr := tar.NewReader(zr)
	var n int
	var total int64
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return api.CodeStatus{}, fmt.Errorf("code blobs: read tar: %w", err)
		}
		e, ok := need[h.Name]
		if !ok {
			return api.CodeStatus{}, fmt.Errorf("code blobs: %q is not a blob of the manifest", h.Name)
		}
		if total += h.Size; total > api.MaxCodeExtractedBytes {
			return api.CodeStatus{}, fmt.Errorf("code blobs: more than %d bytes", api.MaxCodeExtractedBytes)
		}
		if err := r.blobs.put(h.Name, e.Size, tr); err != nil {
			return api.CodeStatus{}, fmt.Errorf("code blob %s of %s: %w", h.Name, e.Path, err)
		}
		n++
	}
	r.log.Info("code_blobs_received", "blobs", n, "bytes", total)
	return r.advanceCode(code)
}

// neededBlobs maps each blob of the manifest to its first file entry.
func (r *Runner) neededBlobs() map[string]api.CodeEntry {
	need := map[string]api.CodeEntry{}
	for _, e := range r.manifest.Entries {
		if _, ok := need[e.SHA256]; e.Type == api.CodeEntryFile && !ok {
			need[e.SHA256] = e
		}
	}
	return need
}

// advanceCode answers the blobs still missing; when none is, it checks
// every blob (one whose content is not what its name says counts as
// missing: the server sends it again) and places the code. Callers hold
// codeMu.
func (r *Runner) advanceCode(code api.CodeSpec) (api.CodeStatus, error) {
	need := r.neededBlobs()
	var missing []string
	for sum, e := range need {
		if !r.blobs.has(sum, e.Size) {
			missing = append(missing, sum)
		}
	}
	if len(missing) == 0 {
		for sum, e := range need {
			if err := r.blobs.verify(sum); err != nil {
				r.log.Warn("code_blob_refused", "sha256", sum, "path", e.Path, "err", err)
				missing = append(missing, sum)
			}
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return api.CodeStatus{Missing: missing}, nil
	}
	if err := r.placeCode(code); err != nil {
		return api.CodeStatus{}, err
	}
	r.mu.Lock()
	r.codePlaced = true
	r.mu.Unlock()
	keep := make(map[string]bool, len(need))
	for sum := range need {
		keep[sum] = true
	}
	if r.blobs.private {
		_ = os.RemoveAll(r.blobs.dir)
	} else {
		r.blobs.evict(keep)
	}
	return api.CodeStatus{Placed: true}, nil
}

// privateBlobDir is where a runner without a writable instance code cache
// keeps the blobs of its job's code, under its home, until they are placed.
const privateBlobDir = "code-blobs"

// openBlobCache returns the instance's blob cache (Config.CodeCache), or,
// without one or when this job's user may not write it, a directory of the
// job's own under the runner's home: then every blob travels.
func (r *Runner) openBlobCache() (*blobCache, error) {
	limit := r.cfg.CodeCacheBytes
	if limit <= 0 {
		limit = defaultCodeCacheBytes
	}
	c := &blobCache{dir: r.cfg.CodeCache, maxBytes: limit, now: r.now, log: r.log}
	if c.dir != "" {
		f, err := os.CreateTemp(c.dir, tempPrefix+"probe-*")
		if err == nil {
			f.Close()
			_ = os.Remove(f.Name())
			return c, nil
		}
		r.log.Warn("code_cache_unwritable", "dir", c.dir, "err", err)
	}
	c.dir, c.private = filepath.Join(r.cfg.Home, privateBlobDir), true
	if err := os.MkdirAll(c.dir, 0o700); err != nil {
		return nil, err
	}
	return c, nil
}

// checkManifest refuses a manifest whose entries are not where CodeSpec
// puts code (nfiles file mappings), unsafe, or too many or too large.
func checkManifest(m api.CodeManifest, nfiles int) error {
	if len(m.Entries) > maxCodeEntries {
		return fmt.Errorf("more than %d entries", maxCodeEntries)
	}
	var total int64
	for _, e := range m.Entries {
		if e.Path != path.Clean(e.Path) || path.IsAbs(e.Path) || e.Path == ".." || strings.HasPrefix(e.Path, "../") || strings.Contains(e.Path, "/../") {
			return fmt.Errorf("%q: %w", e.Path, errUnsafePath)
		}
		if _, _, ok := codeRoot(e.Path, nfiles); !ok {
			return fmt.Errorf("%q is neither the repository nor a file mapping", e.Path)
		}
		if e.Mode&^0o777 != 0 {
			return fmt.Errorf("%q: mode %o is more than permission bits", e.Path, e.Mode)
		}
		switch e.Type {
		case api.CodeEntryDir:
		case api.CodeEntryFile:
			if !validSum(e.SHA256) {
				return fmt.Errorf("%q: sha256 %q is not a SHA-256 in lowercase hex", e.Path, e.SHA256)
			}
			if e.Size < 0 {
				return fmt.Errorf("%q: negative size", e.Path)
			}
			if total += e.Size; total > api.MaxCodeExtractedBytes {
				return fmt.Errorf("the code is more than %d bytes", api.MaxCodeExtractedBytes)
			}
		default:
			return fmt.Errorf("%q: unknown type %q", e.Path, e.Type)
		}
	}
	return nil
}

// codeRoot splits a manifest path into its part (-1 for the repository,
// else the file mapping's index) and the path under it.
func codeRoot(name string, nfiles int) (part int, rel string, ok bool) {
	if name == api.CodeRepoPrefix || strings.HasPrefix(name, api.CodeRepoPrefix+"/") {
		return -1, strings.TrimPrefix(strings.TrimPrefix(name, api.CodeRepoPrefix), "/"), true
	}
	rest, found := strings.CutPrefix(name, api.CodeFilePrefix)
	if !found {
		return 0, "", false
	}
	idx, sub, _ := strings.Cut(rest, "/")
	i, err := strconv.Atoi(idx)
	if err != nil || i < 0 || i >= nfiles || strconv.Itoa(i) != idx {
		return 0, "", false
	}
	return i, sub, true
}

// placeCode writes the manifest's directories and files from the blob
// cache (see ReceiveCodeManifest). Callers hold codeMu.
func (r *Runner) placeCode(code api.CodeSpec) error {
	r.mu.Lock()
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
	var placed int64
	for _, e := range r.manifest.Entries {
		part, rel, _ := codeRoot(e.Path, len(files))
		root := repo
		if part >= 0 {
			root = files[part]
		} else if repo == "" || skipRepo {
			continue
		}
		target := root
		if rel != "" {
			target = filepath.Join(root, filepath.FromSlash(rel))
		}
		if err := noSymlinkBetween(root, filepath.Dir(target)); err != nil {
			return fmt.Errorf("%s: %w", e.Path, err)
		}
		mode := os.FileMode(e.Mode) & os.ModePerm
		if e.Type == api.CodeEntryDir {
			if err := os.MkdirAll(target, mode|0o700); err != nil {
				return fmt.Errorf("%s: %w", e.Path, err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return fmt.Errorf("%s: %w", e.Path, err)
		}
		if err := r.blobs.copyTo(e.SHA256, target, mode); err != nil {
			return fmt.Errorf("place %s (blob %s): %w", e.Path, e.SHA256, err)
		}
		placed += e.Size
	}
	r.log.Info("code_placed", "repo_dir", repo, "files", len(files), "entries", len(r.manifest.Entries), "bytes", placed)
	return nil
}
