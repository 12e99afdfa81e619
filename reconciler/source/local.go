package source

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/fsnotify/fsnotify"
	"github.com/go-git/go-billy/v5"
	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/storage/filesystem"
	"github.com/go-git/go-git/v5/storage/filesystem/dotgit"
)

// localGit reads a Git repository on this machine straight from its object
// store: no clone, no work tree. Uncommitted changes are invisible.
type localGit struct {
	nudger
	cfg       Config
	dir       string // absolute repository path as given (work tree or bare)
	gitDir    string // where HEAD lives
	commonDir string // where refs and objects live (differs in linked work trees)
	branch    plumbing.ReferenceName

	mu      sync.Mutex // guards repo, storage and trees; go-git repositories are not safe for concurrent use
	repo    *git.Repository
	storage *filesystem.Storage
	trees   treeReader
}

var _ Source = (*localGit)(nil)

func openLocal(cfg Config) (*localGit, error) {
	dir, err := filepath.Abs(cfg.Repo)
	if err != nil {
		return nil, fmt.Errorf("open git repository: %w", err)
	}
	gitDir, commonDir, err := findGitDirs(dir)
	if err != nil {
		return nil, fmt.Errorf("open git repository %s: %w", dir, err)
	}
	s := &localGit{nudger: newNudger(), cfg: cfg, dir: dir, gitDir: gitDir, commonDir: commonDir}
	if err := s.reopen(); err != nil {
		return nil, fmt.Errorf("open git repository %s: %w", dir, err)
	}
	repo := s.repo

	if cfg.Branch != "" {
		s.branch = plumbing.NewBranchReferenceName(strings.TrimPrefix(cfg.Branch, "refs/heads/"))
		if _, err := repo.Reference(s.branch, true); err != nil {
			if errors.Is(err, plumbing.ErrReferenceNotFound) {
				return nil, fmt.Errorf("open git repository %s: branch %q: %w", dir, s.branch.Short(), ErrBranchNotFound)
			}
			return nil, fmt.Errorf("open git repository %s: %w", dir, err)
		}
	} else {
		head, err := repo.Storer.Reference(plumbing.HEAD)
		if err != nil {
			return nil, fmt.Errorf("open git repository %s: read HEAD: %w", dir, err)
		}
		if head.Type() != plumbing.SymbolicReference || !head.Target().IsBranch() {
			return nil, fmt.Errorf("open git repository %s: HEAD is detached; pass a branch to track", dir)
		}
		s.branch = head.Target()
	}
	// An unborn branch (a fresh repository) is fine: Latest reports
	// ErrBranchNotFound until the first commit, which the watcher sees.
	// Otherwise a Path missing from the tip is most likely a typo.
	if ref, err := repo.Reference(s.branch, true); err == nil && cfg.Path != "" {
		c, err := repo.CommitObject(ref.Hash())
		if err != nil {
			return nil, fmt.Errorf("open git repository %s: %w", dir, err)
		}
		tree, err := c.Tree()
		if err != nil {
			return nil, fmt.Errorf("open git repository %s: %w", dir, err)
		}
		if _, err := tree.Tree(cfg.Path); err != nil {
			return nil, fmt.Errorf("open git repository %s: %s not in %s at %s: %w",
				dir, cfg.Path, s.branch.Short(), ref.Hash().String()[:12], ErrPathNotFound)
		}
	}
	return s, nil
}

// findGitDirs returns the directory holding HEAD and the one holding refs
// and objects for a work tree, a linked work tree (.git is a file), or a
// bare repository.
func findGitDirs(dir string) (gitDir, commonDir string, err error) {
	dotGit := filepath.Join(dir, ".git")
	info, err := os.Stat(dotGit)
	switch {
	case err == nil && info.IsDir():
		gitDir = dotGit
	case err == nil:
		b, err := os.ReadFile(dotGit)
		if err != nil {
			return "", "", err
		}
		line, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir:")
		if !ok {
			return "", "", fmt.Errorf("%s: not a gitdir file", dotGit)
		}
		gitDir = strings.TrimSpace(line)
		if !filepath.IsAbs(gitDir) {
			gitDir = filepath.Join(dir, gitDir)
		}
	default:
		gitDir = dir // bare
	}
	commonDir = gitDir
	if b, err := os.ReadFile(filepath.Join(gitDir, "commondir")); err == nil {
		commonDir = strings.TrimSpace(string(b))
		if !filepath.IsAbs(commonDir) {
			commonDir = filepath.Join(gitDir, commonDir)
		}
	}
	return filepath.Clean(gitDir), filepath.Clean(commonDir), nil
}

// Describe implements Source.
func (s *localGit) Describe() string {
	return "git " + s.dir + "@" + s.branch.Short() + describePath(s.cfg.Path)
}

// reopen opens the repository afresh, closing the previous one. Pack files
// stay open between reads (KeepDescriptors): without it go-git opens the
// pack once per object, which was 40% of reading a 10,000-file tree.
func (s *localGit) reopen() error {
	var dot billy.Filesystem = osfs.New(s.gitDir, osfs.WithBoundOS())
	if s.commonDir != s.gitDir {
		dot = dotgit.NewRepositoryFilesystem(dot, osfs.New(s.commonDir, osfs.WithBoundOS()))
	}
	st := filesystem.NewStorageWithOptions(dot, cache.NewObjectLRUDefault(), filesystem.Options{KeepDescriptors: true})
	repo, err := git.Open(st, nil)
	if err != nil {
		st.Close()
		return err
	}
	if s.storage != nil {
		s.storage.Close()
	}
	s.repo, s.storage = repo, st
	return nil
}

// withRepo runs fn under the lock. Pack files can change under an open
// repository (git gc, a large push) and go-git caches the pack index, so a
// failure other than a user error is retried once on a freshly opened
// repository.
func (s *localGit) withRepo(fn func(*git.Repository) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	err := fn(s.repo)
	// An unknown revision may be in a pack the open repository has not
	// indexed yet: retried too.
	if err == nil || isUserError(err) && !errors.Is(err, ErrRevisionNotFound) {
		return err
	}
	if oerr := s.reopen(); oerr != nil {
		return err
	}
	return fn(s.repo)
}

func isUserError(err error) bool {
	for _, e := range []error{ErrBranchNotFound, ErrPathNotFound, ErrRevisionNotFound, ErrTooLarge} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// Latest implements Source.
func (s *localGit) Latest(ctx context.Context) (Revision, error) {
	var rev Revision
	err := s.withRepo(func(repo *git.Repository) error {
		ref, err := repo.Reference(s.branch, true)
		if errors.Is(err, plumbing.ErrReferenceNotFound) {
			return fmt.Errorf("branch %q in %s: %w", s.branch.Short(), s.dir, ErrBranchNotFound)
		}
		if err != nil {
			return fmt.Errorf("resolve %s in %s: %w", s.branch.Short(), s.dir, err)
		}
		c, err := repo.CommitObject(ref.Hash())
		if err != nil {
			return fmt.Errorf("read commit %s in %s: %w", ref.Hash(), s.dir, err)
		}
		rev = commitRevision(c, s.branch.Short())
		return nil
	})
	return rev, err
}

// Checkout implements Source.
func (s *localGit) Checkout(ctx context.Context, rev Revision) (*Snapshot, error) {
	snap, err := s.CheckoutAt(ctx, rev.ID)
	if err != nil {
		return nil, err
	}
	if snap.Revision.ID != rev.ID {
		return nil, fmt.Errorf("checkout %s: %q is not a full commit id: %w", s.dir, rev.ID, ErrRevisionNotFound)
	}
	snap.Revision.Branch = rev.Branch
	return snap, nil
}

// CheckoutAt implements Source. id may be anything git rev-parse accepts
// that names a commit (full or short SHA, branch, tag).
func (s *localGit) CheckoutAt(ctx context.Context, id string) (*Snapshot, error) {
	var snap *Snapshot
	err := s.withRepo(func(repo *git.Repository) error {
		h, err := repo.ResolveRevision(plumbing.Revision(id))
		if err != nil {
			return fmt.Errorf("resolve %q in %s: %w (%v)", id, s.dir, ErrRevisionNotFound, err)
		}
		c, err := repo.CommitObject(*h)
		if err != nil {
			return fmt.Errorf("read commit %s in %s: %w", h, s.dir, err)
		}
		m, err := s.trees.snapshot(repo.Storer, c, s.cfg.Path, s.cfg.MaxSnapshotBytes)
		if err != nil {
			return err
		}
		snap = &Snapshot{Revision: commitRevision(c, ""), FS: m}
		return nil
	})
	return snap, err
}

// Run implements Source: it watches the refs and polls.
func (s *localGit) Run(ctx context.Context) error {
	flat := []string{s.commonDir}
	if s.gitDir != s.commonDir {
		flat = append(flat, s.gitDir)
	}
	spec := watchSpec{
		flat:      flat,
		recursive: []string{filepath.Join(s.commonDir, "refs", "heads")},
		relevant: func(ev fsnotify.Event) bool {
			if ev.Op == fsnotify.Chmod {
				return false
			}
			base := filepath.Base(ev.Name)
			if strings.HasSuffix(base, ".lock") {
				return false
			}
			if d := filepath.Dir(ev.Name); d == s.commonDir || d == s.gitDir {
				return base == "HEAD" || base == "packed-refs"
			}
			return true // under refs/heads
		},
	}
	s.cfg.Logger.Info("source_watching", "source", s.Describe(), "poll_interval", s.cfg.PollInterval)
	return runLoop(ctx, s.cfg.Logger, s.cfg.PollInterval, s.nudger, func() (*watcher, error) {
		return newWatcher(s.cfg.Logger, spec, s.cfg.Debounce, s.nudge)
	})
}
