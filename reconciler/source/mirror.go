package source

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"sync"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/storage"
	"github.com/go-git/go-git/v5/storage/memory"
)

// Mirrors keeps a bare mirror of each remote repository that runs bring
// with `repos[].url` (dstack's remote repos), one directory per URL under
// Dir: the first run fetches the history it needs, later runs fetch only
// new objects, and a pinned commit that is already there needs no network
// at all. Mirrors are written by one fetch at a time per URL; reading a
// Tree while another fetch adds objects is safe (go-git adds packs whole).
type Mirrors struct {
	dir string
	log *slog.Logger

	mu    sync.Mutex
	locks map[string]*sync.Mutex
}

// NewMirrors returns mirrors kept under dir; "" keeps each fetch in memory
// only (nothing is reused between runs).
func NewMirrors(dir string, log *slog.Logger) *Mirrors {
	if log == nil {
		log = slog.Default()
	}
	return &Mirrors{dir: dir, log: log, locks: map[string]*sync.Mutex{}}
}

func (m *Mirrors) lock(key string) func() {
	m.mu.Lock()
	l := m.locks[key]
	if l == nil {
		l = &sync.Mutex{}
		m.locks[key] = l
	}
	m.mu.Unlock()
	l.Lock()
	return l.Unlock
}

// MirrorRef says which commit of a remote to check out: Hash when set,
// else the tip of Branch when set, else the tip of the remote's default
// branch (its HEAD), as dstack's runner checks a repo out
// (dstack: runner/internal/runner/repo/manager.go).
type MirrorRef struct {
	Branch string
	Hash   string
}

// Tree is the file tree of one commit of a mirrored repository.
type Tree struct {
	// Commit is the full commit id checked out.
	Commit string
	tree   *object.Tree
	st     storer.EncodedObjectStorer
	closer storage.Storer
}

// Close releases the mirror's open files; call it once done reading.
func (t *Tree) Close() error { return closeStorer(t.closer) }

// TreeEntry is a directory or a regular file of a Tree.
type TreeEntry struct {
	// Path is slash-separated, relative to the root.
	Path string
	// Dir is set for a directory.
	Dir bool
	// Executable is set for a file of mode 100755.
	Executable bool
	// Size is a file's length.
	Size int64
	// Blob is a file's Git blob id (content-addressed: same id, same bytes).
	Blob string
}

// Fetch brings the mirror of rawURL up to date as far as ref needs and
// returns the tree of the commit ref names. Credentials come from creds
// only (never the environment or the server's SSH agent): an ssh URL needs
// creds.SSHKey and creds.KnownHosts.
func (m *Mirrors) Fetch(ctx context.Context, rawURL string, creds Credentials, ref MirrorRef) (*Tree, error) {
	r, err := parseRemote(rawURL, creds, func(string) string { return "" })
	if err != nil {
		return nil, err
	}
	if r.ep.Protocol == "file" {
		return nil, fmt.Errorf("%w: file:// names the server's own disk", ErrBadURL)
	}
	if r.ep.Protocol == "ssh" && (creds.SSHKey == "" || creds.KnownHosts == "") {
		return nil, errors.New("an ssh url needs a private key and known hosts")
	}
	sum := sha256.Sum256([]byte(r.clean))
	key := hex.EncodeToString(sum[:12])
	defer m.lock(key)()
	ctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	defer cancel()

	var st storage.Storer = memory.NewStorage()
	if m.dir != "" {
		dir := filepath.Join(m.dir, key)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
		st = cacheStorage(dir)
	}
	tr, err := m.fetch(ctx, r, st, ref)
	if err != nil {
		_ = closeStorer(st)
		return nil, err
	}
	return tr, nil
}

// closeStorer closes st's open files, if it has any.
func closeStorer(st storage.Storer) error {
	if c, ok := st.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

func (m *Mirrors) fetch(ctx context.Context, r *remoteURL, st storage.Storer, ref MirrorRef) (*Tree, error) {
	repo, err := git.Open(st, nil)
	if errors.Is(err, git.ErrRepositoryNotExists) {
		repo, err = git.Init(st, nil)
	}
	if err != nil {
		return nil, fmt.Errorf("open the mirror of %s: %w", r.clean, err)
	}
	fetch := func(specs ...config.RefSpec) error {
		start := time.Now()
		rem := git.NewRemote(repo.Storer, &config.RemoteConfig{Name: "origin", URLs: []string{r.clean}})
		err := rem.FetchContext(ctx, &git.FetchOptions{RefSpecs: specs, Auth: r.auth, Tags: git.NoTags, Force: true, CABundle: r.caBundle})
		if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
			return fmt.Errorf("fetch %s: %w", r.clean, err)
		}
		m.log.Info("mirror_fetched", "url", r.clean, "refspecs", len(specs), "duration", time.Since(start))
		return nil
	}
	var want plumbing.Hash
	switch {
	case ref.Hash != "":
		if !plumbing.IsHash(ref.Hash) {
			return nil, fmt.Errorf("hash %q is not a full commit id", ref.Hash)
		}
		want = plumbing.NewHash(ref.Hash)
		if _, err := repo.CommitObject(want); err == nil {
			break // pinned and already here
		}
		// The commit alone if the server allows it, else every branch.
		if err := fetch(config.RefSpec(ref.Hash + ":refs/hoist/want")); err != nil {
			m.log.Debug("mirror_exact_fetch_refused", "url", r.clean, "hash", ref.Hash, "err", err)
			if err := fetch("+refs/heads/*:refs/remotes/origin/*"); err != nil {
				return nil, err
			}
		}
	default:
		branch := ref.Branch
		if branch == "" {
			if branch, err = defaultBranch(ctx, r); err != nil {
				return nil, err
			}
		}
		local := plumbing.NewRemoteReferenceName("origin", branch)
		err := fetch(config.RefSpec("+" + plumbing.NewBranchReferenceName(branch).String() + ":" + local.String()))
		if errors.Is(err, git.NoMatchingRefSpecError{}) {
			return nil, fmt.Errorf("branch %q of %s: %w", branch, r.clean, ErrBranchNotFound)
		}
		if err != nil {
			return nil, err
		}
		tip, err := repo.Reference(local, true)
		if err != nil {
			return nil, fmt.Errorf("branch %q of %s: %w", branch, r.clean, err)
		}
		want = tip.Hash()
	}
	c, err := repo.CommitObject(want)
	if err != nil {
		return nil, fmt.Errorf("commit %s of %s: %w", want, r.clean, ErrRevisionNotFound)
	}
	t, err := c.Tree()
	if err != nil {
		return nil, fmt.Errorf("tree of %s: %w", want, err)
	}
	return &Tree{Commit: c.Hash.String(), tree: t, st: repo.Storer, closer: st}, nil
}

// defaultBranch asks the remote which branch its HEAD is.
func defaultBranch(ctx context.Context, r *remoteURL) (string, error) {
	rem := git.NewRemote(memory.NewStorage(), &config.RemoteConfig{Name: "origin", URLs: []string{r.clean}})
	list, err := rem.ListContext(ctx, &git.ListOptions{Auth: r.auth, PeelingOption: git.IgnorePeeled, CABundle: r.caBundle})
	if err != nil {
		return "", fmt.Errorf("list refs of %s: %w", r.clean, err)
	}
	for _, ref := range list {
		if ref.Name() == plumbing.HEAD && ref.Type() == plumbing.SymbolicReference && ref.Target().IsBranch() {
			return ref.Target().Short(), nil
		}
	}
	return "", fmt.Errorf("%s does not say which branch HEAD is; name a `branch`", r.clean)
}

// Walk calls fn for every directory and regular file of the tree, a
// directory before what it holds, in Git's order. Symbolic links and
// submodules are skipped, as in spec snapshots.
func (t *Tree) Walk(fn func(TreeEntry) error) error { return t.walk(t.tree, "", fn) }

func (t *Tree) walk(tree *object.Tree, dir string, fn func(TreeEntry) error) error {
	for _, e := range tree.Entries {
		p := path.Join(dir, e.Name)
		switch e.Mode {
		case filemode.Dir:
			sub, err := object.GetTree(t.st, e.Hash)
			if err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
			if err := fn(TreeEntry{Path: p, Dir: true}); err != nil {
				return err
			}
			if err := t.walk(sub, p, fn); err != nil {
				return err
			}
		case filemode.Regular, filemode.Deprecated, filemode.Executable:
			size, err := t.st.EncodedObjectSize(e.Hash)
			if err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
			if err := fn(TreeEntry{Path: p, Executable: e.Mode == filemode.Executable, Size: size, Blob: e.Hash.String()}); err != nil {
				return err
			}
		}
	}
	return nil
}

// Open returns the content of the file whose Git blob id is blob.
func (t *Tree) Open(blob string) (io.ReadCloser, error) {
	b, err := object.GetBlob(t.st, plumbing.NewHash(blob))
	if err != nil {
		return nil, err
	}
	return b.Reader()
}

// ErrTreeTooLarge is returned by ReadFS for a tree over its limit.
var ErrTreeTooLarge = errors.New("the repository's files are larger than the limit")

// ReadFS reads the whole tree into memory as a file system (for a
// provider repository's few files), refusing a tree whose files add up to
// more than maxBytes.
func (t *Tree) ReadFS(maxBytes int64) (fs.FS, error) {
	m := newMemFS(time.Time{})
	var total int64
	err := t.Walk(func(e TreeEntry) error {
		if e.Dir {
			return nil
		}
		if total += e.Size; total > maxBytes {
			return fmt.Errorf("%w (%d bytes)", ErrTreeTooLarge, maxBytes)
		}
		r, err := t.Open(e.Blob)
		if err != nil {
			return fmt.Errorf("%s: %w", e.Path, err)
		}
		defer r.Close()
		b, err := io.ReadAll(r)
		if err != nil {
			return fmt.Errorf("%s: %w", e.Path, err)
		}
		mode := fs.FileMode(0o644)
		if e.Executable {
			mode = 0o755
		}
		m.add(e.Path, b, mode, time.Time{})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return m.seal(), nil
}
