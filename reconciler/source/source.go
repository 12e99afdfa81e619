package source

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/go-git/go-git/v5"
)

// Defaults applied by Open to zero Config fields.
const (
	// DefaultPollInterval is how often a source nudges its consumer even
	// when no watcher reported anything.
	DefaultPollInterval = time.Minute
	// DefaultDebounce is how long a directory watcher waits for a burst of
	// file system events (an editor's save, a checkout) to settle before it
	// nudges.
	DefaultDebounce = 75 * time.Millisecond
	// DefaultGitDebounce is the same for a local repository's refs: a ref
	// update is one atomic rename, so only bursts such as a fetch that
	// moves many refs need coalescing.
	DefaultGitDebounce = 25 * time.Millisecond
	// DefaultMaxSnapshotBytes caps the total size of the files in one
	// snapshot; spec repositories are small, and a bigger tree is a mistake.
	DefaultMaxSnapshotBytes = 256 << 20
)

// Sentinel errors that callers can test with errors.Is. Most need a user to
// act (fix the flags, push the branch). The exceptions: ErrBranchNotFound
// for a fresh repository's unborn branch ends with the first commit, and
// ErrRevisionNotFound for a dev-mode revision means the directory changed
// since Latest; call Latest again. Other errors (network, I/O) are
// transient.
var (
	// ErrRepoNotFound means Config.Repo names a local path that does not exist.
	ErrRepoNotFound = errors.New("repository not found")
	// ErrBranchNotFound means the tracked branch does not exist.
	ErrBranchNotFound = errors.New("branch not found")
	// ErrPathNotFound means Config.Path does not exist in a revision.
	ErrPathNotFound = errors.New("path not found")
	// ErrRevisionNotFound means the requested revision cannot be read: an
	// unknown commit, or a directory-mode revision that is no longer current.
	ErrRevisionNotFound = errors.New("revision not found")
	// ErrBadURL means Config.Repo looks like a URL but cannot be used as one.
	ErrBadURL = errors.New("bad repository url")
	// ErrTooLarge means a snapshot's files exceed Config.MaxSnapshotBytes.
	ErrTooLarge = errors.New("snapshot too large")
)

// Config says where the spec repository is and how to follow it.
type Config struct {
	// Repo is a local Git repository path, a Git URL (file://, http://,
	// https://, ssh:// or scp-like user@host:path), or a plain directory
	// that is not a Git repository (dev mode).
	Repo string
	// Branch is the tracked branch. Empty means the current HEAD branch of a
	// local repository, or the remote HEAD of a URL, resolved once by Open:
	// switching the work tree to another branch later changes nothing.
	// Unused in dev mode.
	Branch string
	// Path is the slash-separated subdirectory that holds the specs;
	// snapshots are rooted at it. Empty means the repository root.
	Path string
	// CacheDir, if set, is where remote clones are written (in a fresh
	// temporary directory each, removed once read). Empty means in memory.
	CacheDir string
	// PollInterval is how often Changes is nudged without any event;
	// zero means DefaultPollInterval.
	PollInterval time.Duration
	// Logger receives the source's logs; nil means slog.Default().
	Logger *slog.Logger

	// Credentials authenticate to a remote. User-info in an http(s) URL
	// wins; zero Credentials mean CredentialsFromEnv(os.Getenv).
	Credentials Credentials
	// Debounce is the quiet period after file system events before a
	// nudge; zero means DefaultDebounce (directories) or
	// DefaultGitDebounce (a local repository's refs).
	Debounce time.Duration
	// MaxSnapshotBytes caps a snapshot's total file size; zero means
	// DefaultMaxSnapshotBytes.
	MaxSnapshotBytes int64
}

// Revision identifies one state of the spec repository.
type Revision struct {
	// ID is the full commit SHA, or "dir-<hash>" in dev mode.
	ID string
	// Branch is the short name of the branch the revision was read from;
	// empty in dev mode and for revisions read by CheckoutAt.
	Branch string
	// Author is "Name <email>" of the commit's author; empty in dev mode.
	Author string
	// Message is the commit message without surrounding white space.
	Message string
	// Time is the commit's committer time, or the newest file modification
	// time in dev mode.
	Time time.Time
}

// Short returns ShortID(r.ID).
func (r Revision) Short() string { return ShortID(r.ID) }

// ShortID is the one short form of a revision ID that logs, events and
// pages show: the first 12 characters of a commit SHA (SHA-1 or SHA-256),
// a dev-mode ID whole.
func ShortID(id string) string {
	if (len(id) == 40 || len(id) == 64) && !strings.HasPrefix(id, "dir-") {
		return id[:12]
	}
	return id
}

// Snapshot is an immutable, in-memory copy of the files of one revision.
type Snapshot struct {
	// Revision is the revision the files belong to, with full metadata.
	Revision Revision
	// FS holds the files under Config.Path, rooted there. It implements
	// fs.ReadFileFS, fs.ReadDirFS and fs.StatFS and is safe for concurrent use.
	FS fs.FS
}

// Close releases the snapshot. Reading FS after Close is undefined. Close is
// idempotent and returns nil today (snapshots live in memory); callers should
// still call it so that a disk-backed snapshot can be added later.
func (s *Snapshot) Close() error { return nil }

// Source follows the spec repository. Implementations are safe for
// concurrent use.
type Source interface {
	// Describe returns a one-line description without secrets, e.g.
	// "git /srv/specs@main (specs/)".
	Describe() string
	// Latest resolves the tracked ref to a revision with its metadata. It
	// is cheap when nothing moved: a ref lookup (local), one ref listing
	// (remote) or a stat walk (dev mode). When a remote tip is new, Latest
	// fetches it right away, and the Checkout that follows reuses it; only
	// if that fetch fails are Author, Message and Time left empty (Checkout
	// then reports the error).
	Latest(ctx context.Context) (Revision, error)
	// Checkout reads the files of rev (as returned by Latest). The result's
	// Revision.ID always equals rev.ID, or an error is returned.
	Checkout(ctx context.Context, rev Revision) (*Snapshot, error)
	// CheckoutAt reads the files of an arbitrary revision ID: a commit SHA
	// (local repositories also accept anything git rev-parse would), or a
	// dev-mode ID that is still current or recently seen.
	CheckoutAt(ctx context.Context, id string) (*Snapshot, error)
	// Changes delivers a nudge whenever something may have changed: file
	// system events (debounced), poll ticks, Trigger calls, and once when
	// Run has set up its watchers. Nudges coalesce; the channel is never
	// closed. A nudge is a hint: call Latest and compare.
	Changes() <-chan struct{}
	// Trigger asks for a check now (webhooks, "sync now"); it never blocks.
	Trigger()
	// Run runs the watchers and the poll until ctx is done, then returns
	// nil once they have stopped. A watcher that cannot start is logged,
	// and polling goes on. Call it once.
	Run(ctx context.Context) error
}

var scpLike = regexp.MustCompile(`^[A-Za-z0-9._-]+@[A-Za-z0-9._-]+:`)

// isURL reports whether repo should be treated as a remote URL.
func isURL(repo string) bool {
	return strings.Contains(repo, "://") || scpLike.MatchString(repo)
}

// Open picks the kind of source from cfg.Repo and checks that it is usable:
// the path exists, the URL parses and answers, the branch exists, and Path
// exists (in the branch tip of a local repository, or in a directory; a
// remote's Path is checked by Checkout). For a remote, Open lists the
// remote's refs once.
func Open(ctx context.Context, cfg Config) (Source, error) {
	if cfg.Repo == "" {
		return nil, errors.New("open source: no repository given")
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	if cfg.MaxSnapshotBytes <= 0 {
		cfg.MaxSnapshotBytes = DefaultMaxSnapshotBytes
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	p, err := cleanSubPath(cfg.Path)
	if err != nil {
		return nil, err
	}
	cfg.Path = p

	if isURL(cfg.Repo) {
		return openRemote(ctx, cfg)
	}
	if rest, ok := strings.CutPrefix(cfg.Repo, "~/"); ok {
		// Not expanded by a shell when it comes from HOIST_REPO.
		if home, err := os.UserHomeDir(); err == nil {
			cfg.Repo = filepath.Join(home, rest)
		}
	}
	info, err := os.Stat(cfg.Repo)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("open source %s: %w", cfg.Repo, ErrRepoNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("open source: %w", err)
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("open source %s: not a directory", cfg.Repo)
	}
	_, err = git.PlainOpenWithOptions(cfg.Repo, &git.PlainOpenOptions{EnableDotGitCommonDir: true})
	if errors.Is(err, git.ErrRepositoryNotExists) {
		if cfg.Debounce <= 0 {
			cfg.Debounce = DefaultDebounce
		}
		return openDir(cfg)
	}
	if cfg.Debounce <= 0 {
		cfg.Debounce = DefaultGitDebounce
	}
	if err != nil {
		return nil, fmt.Errorf("open git repository %s: %w", cfg.Repo, err)
	}
	return openLocal(cfg)
}

// cleanSubPath normalizes Config.Path to a clean relative slash path, ""
// for the root.
func cleanSubPath(p string) (string, error) {
	p = strings.Trim(strings.ReplaceAll(p, "\\", "/"), "/")
	if p == "" || p == "." {
		return "", nil
	}
	p = path.Clean(p)
	if !fs.ValidPath(p) {
		return "", fmt.Errorf("open source: invalid path %q: must stay inside the repository", p)
	}
	return p, nil
}

// describePath renders Config.Path for Describe.
func describePath(p string) string {
	if p == "" {
		return ""
	}
	return " (" + p + "/)"
}

// nudger is the buffered, coalescing Changes channel shared by all sources.
type nudger struct{ ch chan struct{} }

func newNudger() nudger { return nudger{ch: make(chan struct{}, 1)} }

func (n nudger) nudge() {
	select {
	case n.ch <- struct{}{}:
	default:
	}
}

// Changes implements Source.
func (n nudger) Changes() <-chan struct{} { return n.ch }

// Trigger implements Source.
func (n nudger) Trigger() { n.nudge() }
