package source

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-billy/v5"
	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/storage"
	"github.com/go-git/go-git/v5/storage/filesystem"
	"github.com/go-git/go-git/v5/storage/memory"
)

// Time limits for network operations on a remote.
const (
	listTimeout  = 30 * time.Second
	fetchTimeout = 5 * time.Minute
	// remoteCacheSize is how many checked-out revisions stay in memory, so
	// that re-reading one (a retry, a re-plan) needs no network.
	remoteCacheSize = 4
)

// remoteGit follows a branch of a remote repository the Flux way: list the
// remote's refs (cheap), and only when the ref moved fetch that one commit
// with depth 1 into a fresh, throw-away repository. No shallow repository
// is ever fetched into twice, so force-pushes cannot trip go-git's shallow
// update bugs.
type remoteGit struct {
	nudger
	cfg    Config
	remote *remoteURL
	branch plumbing.ReferenceName

	fetchMu sync.Mutex // one fetch at a time; guards trees
	trees   treeReader

	mu    sync.Mutex
	cache map[string]cachedRev
	order []string
}

// cachedRev is a fetched commit: its files, or the error that makes its
// tree unusable (ErrPathNotFound, ErrTooLarge), which a refetch would only
// repeat.
type cachedRev struct {
	rev Revision
	fs  *memFS
	err error
}

var _ Source = (*remoteGit)(nil)

func openRemote(ctx context.Context, cfg Config) (*remoteGit, error) {
	r, err := parseRemote(cfg.Repo, cfg.Credentials, os.Getenv)
	if err != nil {
		return nil, fmt.Errorf("open remote: %w", err)
	}
	s := &remoteGit{nudger: newNudger(), cfg: cfg, remote: r, cache: map[string]cachedRev{}}
	s.removeStaleFetches()
	refs, err := s.listRefs(ctx)
	if err != nil {
		return nil, fmt.Errorf("open remote: %w", err)
	}
	if cfg.Branch != "" {
		s.branch = plumbing.NewBranchReferenceName(strings.TrimPrefix(cfg.Branch, "refs/heads/"))
		if _, ok := refs[s.branch]; !ok {
			return nil, fmt.Errorf("open remote %s: branch %q: %w", r.clean, s.branch.Short(), ErrBranchNotFound)
		}
		return s, nil
	}
	head, ok := refs[plumbing.HEAD]
	if !ok || head.Type() != plumbing.SymbolicReference || !head.Target().IsBranch() {
		return nil, fmt.Errorf("open remote %s: the remote does not say which branch HEAD is; pass a branch to track", r.clean)
	}
	s.branch = head.Target()
	return s, nil
}

// removeStaleFetches deletes temporary fetch directories that a killed
// process left in CacheDir. Ones younger than twice the fetch timeout may
// belong to another live process and are kept.
func (s *remoteGit) removeStaleFetches() {
	if s.cfg.CacheDir == "" {
		return
	}
	stale, _ := filepath.Glob(filepath.Join(s.cfg.CacheDir, "fetch-*"))
	for _, p := range stale {
		if info, err := os.Stat(p); err == nil && time.Since(info.ModTime()) > 2*fetchTimeout {
			if err := os.RemoveAll(p); err == nil {
				s.cfg.Logger.Info("source_stale_fetch_removed", "dir", p)
			}
		}
	}
}

// Describe implements Source.
func (s *remoteGit) Describe() string {
	return "git " + s.remote.clean + "@" + s.branch.Short() + describePath(s.cfg.Path)
}

// listRefs is ls-remote: one round trip, no objects.
func (s *remoteGit) listRefs(ctx context.Context) (map[plumbing.ReferenceName]*plumbing.Reference, error) {
	ctx, cancel := context.WithTimeout(ctx, listTimeout)
	defer cancel()
	rem := git.NewRemote(memory.NewStorage(), &config.RemoteConfig{Name: "origin", URLs: []string{s.remote.clean}})
	list, err := rem.ListContext(ctx, &git.ListOptions{Auth: s.remote.auth, PeelingOption: git.IgnorePeeled, CABundle: s.remote.caBundle})
	if errors.Is(err, transport.ErrEmptyRemoteRepository) {
		return map[plumbing.ReferenceName]*plumbing.Reference{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list refs of %s: %w", s.remote.clean, err)
	}
	refs := make(map[plumbing.ReferenceName]*plumbing.Reference, len(list))
	for _, r := range list {
		refs[r.Name()] = r
	}
	return refs, nil
}

// Latest implements Source with one ref listing when the tip is known.
func (s *remoteGit) Latest(ctx context.Context) (Revision, error) {
	refs, err := s.listRefs(ctx)
	if err != nil {
		return Revision{}, err
	}
	ref, ok := refs[s.branch]
	if !ok {
		return Revision{}, fmt.Errorf("branch %q of %s: %w", s.branch.Short(), s.remote.clean, ErrBranchNotFound)
	}
	rev := Revision{ID: ref.Hash().String(), Branch: s.branch.Short()}
	if c, ok := s.cached(rev.ID); ok {
		c.rev.Branch = rev.Branch
		return c.rev, nil
	}
	// A tip never seen before: fetch it now (depth 1) so that the revision
	// carries author, message and time. The Checkout that follows reuses
	// the fetch, so nothing is spent twice.
	if _, err := s.Checkout(ctx, rev); err != nil {
		// Checkout reports it again to the caller; a fetched commit whose
		// tree is unusable still has its metadata cached.
		s.cfg.Logger.Debug("source_prefetch_failed", "source", s.Describe(), "rev", rev.ID, "err", err)
	}
	if c, ok := s.cached(rev.ID); ok {
		c.rev.Branch = rev.Branch
		return c.rev, nil
	}
	return rev, nil
}

func (s *remoteGit) cached(id string) (cachedRev, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.cache[id]
	return c, ok
}

func (s *remoteGit) remember(c cachedRev) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.cache[c.rev.ID]; ok {
		return
	}
	s.cache[c.rev.ID] = c
	s.order = append(s.order, c.rev.ID)
	if len(s.order) > remoteCacheSize {
		delete(s.cache, s.order[0])
		s.order = s.order[1:]
	}
}

func (s *remoteGit) snapshot(c cachedRev, branch string) (*Snapshot, error) {
	if c.err != nil {
		return nil, c.err
	}
	rev := c.rev
	rev.Branch = branch
	return &Snapshot{Revision: rev, FS: c.fs}, nil
}

// Checkout implements Source: a depth-1 fetch of the branch. If the branch
// moved on since Latest, or rev is not from the tracked branch (its Branch
// differs), the exact commit is fetched as CheckoutAt does.
func (s *remoteGit) Checkout(ctx context.Context, rev Revision) (*Snapshot, error) {
	if c, ok := s.cached(rev.ID); ok {
		return s.snapshot(c, rev.Branch)
	}
	s.fetchMu.Lock()
	defer s.fetchMu.Unlock()
	if c, ok := s.cached(rev.ID); ok {
		return s.snapshot(c, rev.Branch)
	}
	if rev.Branch != s.branch.Short() {
		// Not a revision of the tracked branch from Latest: the branch tip
		// would not be it.
		snap, err := s.checkoutExact(ctx, rev.ID)
		if err != nil {
			return nil, err
		}
		snap.Revision.Branch = rev.Branch
		return snap, nil
	}
	tip := plumbing.ReferenceName("refs/hoist/tip")
	spec := config.RefSpec("+" + s.branch.String() + ":" + tip.String())
	c, err := s.fetchCommit(ctx, []config.RefSpec{spec}, 1, func(repo *git.Repository) (plumbing.Hash, error) {
		ref, err := repo.Reference(tip, true)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		return ref.Hash(), nil
	})
	if errors.Is(err, git.NoMatchingRefSpecError{}) {
		return nil, fmt.Errorf("branch %q of %s: %w", s.branch.Short(), s.remote.clean, ErrBranchNotFound)
	}
	if err != nil {
		return nil, err
	}
	s.remember(c)
	if c.rev.ID == rev.ID {
		return s.snapshot(c, rev.Branch)
	}
	s.cfg.Logger.Info("source_branch_moved", "source", s.Describe(), "want", rev.ID, "got", c.rev.ID)
	snap, err := s.checkoutExact(ctx, rev.ID)
	if err != nil {
		return nil, err
	}
	snap.Revision.Branch = rev.Branch
	return snap, nil
}

// CheckoutAt implements Source. id must be a full commit SHA. The commit is
// fetched alone if the server allows it (uploadpack.allowReachableSHA1InWant,
// as GitHub and GitLab do), otherwise every branch and pull/merge request
// head is fetched in full and searched.
func (s *remoteGit) CheckoutAt(ctx context.Context, id string) (*Snapshot, error) {
	if c, ok := s.cached(id); ok {
		return s.snapshot(c, "")
	}
	s.fetchMu.Lock()
	defer s.fetchMu.Unlock()
	return s.checkoutExact(ctx, id)
}

func (s *remoteGit) checkoutExact(ctx context.Context, id string) (*Snapshot, error) {
	if c, ok := s.cached(id); ok {
		return s.snapshot(c, "")
	}
	if !plumbing.IsHash(id) {
		return nil, fmt.Errorf("%q is not a full commit id: %w", id, ErrRevisionNotFound)
	}
	want := plumbing.NewHash(id)
	found := func(*git.Repository) (plumbing.Hash, error) { return want, nil }
	c, err := s.fetchCommit(ctx, []config.RefSpec{config.RefSpec(id + ":refs/hoist/want")}, 1, found)
	if err != nil {
		s.cfg.Logger.Debug("source_exact_fetch_refused", "source", s.Describe(), "rev", id, "err", err)
		c, err = s.fetchCommit(ctx, []config.RefSpec{
			"+refs/heads/*:refs/hoist/heads/*",
			"+refs/pull/*/head:refs/hoist/pull/*",
			"+refs/merge-requests/*/head:refs/hoist/mr/*",
		}, 0, found)
	}
	if errors.Is(err, plumbing.ErrObjectNotFound) {
		return nil, fmt.Errorf("commit %s in %s: %w", id, s.remote.clean, ErrRevisionNotFound)
	}
	if err != nil {
		return nil, err
	}
	s.remember(c)
	return s.snapshot(c, "")
}

// cacheStorage is go-git's storage of a repository in dir, a directory in
// the git cache, whose entries stay their owner's alone: the cache lies in
// hoist's data directory.
func cacheStorage(dir string) *filesystem.Storage {
	return filesystem.NewStorageWithOptions(ownerOnlyFS{osfs.New(dir, osfs.WithBoundOS())}, cache.NewObjectLRUDefault(),
		filesystem.Options{KeepDescriptors: true})
}

// ownerOnlyFS is a billy file system whose Chmod drops the group and other
// bits: go-git makes objects and packs read-only with Chmod(0444), which the
// process's umask does not narrow.
type ownerOnlyFS struct{ billy.Filesystem }

// Chmod changes name's mode to mode without group and other permissions.
func (f ownerOnlyFS) Chmod(name string, mode os.FileMode) error {
	c, ok := f.Filesystem.(billy.Chmod)
	if !ok {
		return nil
	}
	return c.Chmod(name, mode&^0o077)
}

// fetchCommit fetches specs into a fresh repository (in memory, or in a
// temporary directory under CacheDir that is removed before returning),
// picks a commit with pick, and copies its files into memory.
func (s *remoteGit) fetchCommit(ctx context.Context, specs []config.RefSpec, depth int,
	pick func(*git.Repository) (plumbing.Hash, error),
) (cachedRev, error) {
	ctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	defer cancel()
	start := time.Now()

	var st storage.Storer = memory.NewStorage()
	if s.cfg.CacheDir != "" {
		if err := os.MkdirAll(s.cfg.CacheDir, 0o700); err != nil {
			return cachedRev{}, fmt.Errorf("fetch %s: %w", s.remote.clean, err)
		}
		tmp, err := os.MkdirTemp(s.cfg.CacheDir, "fetch-*")
		if err != nil {
			return cachedRev{}, fmt.Errorf("fetch %s: %w", s.remote.clean, err)
		}
		defer os.RemoveAll(tmp)
		fst := cacheStorage(tmp)
		defer fst.Close() // before RemoveAll
		st = fst
	}
	repo, err := git.Init(st, nil)
	if err != nil {
		return cachedRev{}, fmt.Errorf("fetch %s: %w", s.remote.clean, err)
	}
	rem, err := repo.CreateRemote(&config.RemoteConfig{Name: "origin", URLs: []string{s.remote.clean}})
	if err != nil {
		return cachedRev{}, fmt.Errorf("fetch %s: %w", s.remote.clean, err)
	}
	err = rem.FetchContext(ctx, &git.FetchOptions{
		RefSpecs: specs, Depth: depth, Auth: s.remote.auth, Tags: git.NoTags, Force: true,
		CABundle: s.remote.caBundle,
	})
	if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
		return cachedRev{}, fmt.Errorf("fetch %s: %w", s.remote.clean, err)
	}
	h, err := pick(repo)
	if err != nil {
		return cachedRev{}, fmt.Errorf("fetch %s: %w", s.remote.clean, err)
	}
	commit, err := repo.CommitObject(h)
	if err != nil {
		return cachedRev{}, fmt.Errorf("fetch %s: commit %s: %w", s.remote.clean, h, err)
	}
	rev := commitRevision(commit, "")
	m, err := s.trees.snapshot(repo.Storer, commit, s.cfg.Path, s.cfg.MaxSnapshotBytes)
	if isUserError(err) {
		return cachedRev{rev: rev, err: err}, nil
	}
	if err != nil {
		return cachedRev{}, err
	}
	s.cfg.Logger.Info("source_fetched", "source", s.Describe(), "rev", rev.Short(),
		"depth", depth, "duration", time.Since(start))
	return cachedRev{rev: rev, fs: m}, nil
}

// Run implements Source: a remote is polled; webhooks call Trigger.
func (s *remoteGit) Run(ctx context.Context) error {
	s.cfg.Logger.Info("source_polling", "source", s.Describe(), "poll_interval", s.cfg.PollInterval)
	return runLoop(ctx, s.cfg.Logger, s.cfg.PollInterval, s.nudger, nil)
}
