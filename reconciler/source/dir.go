package source

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
)

// dirCacheSize is how many recent dev-mode snapshots stay readable by ID.
const dirCacheSize = 8

// ErrLinkOutside means a symbolic link in a dev-mode directory leads out of
// it: its target is not read (nor shown in any message), and the directory
// is refused until the link is removed.
var ErrLinkOutside = errors.New("symbolic link leads out of the directory")

// dirSource is dev mode: a plain directory, watched with fsnotify. Its
// revision is a hash of the content under Path, so saving a file without
// changing it makes no new revision.
type dirSource struct {
	nudger
	cfg  Config
	root string // absolute directory given as Repo
	spec string // root joined with Path: what is hashed and watched
	tree string // symbolic links may lead anywhere under it: root, or spec if outside root

	mu    sync.Mutex
	cache map[string]*memFS
	order []string // cache keys, oldest first

	readMu sync.Mutex           // serializes read; guards stats
	stats  map[string]statEntry // by slash path: what the last read found
}

// statEntry lets read skip a file whose size, modification time and mode
// are unchanged since the last read. A file modified within statTrustAge
// of a read is always read again: a second write in the same clock tick
// with the same size would otherwise go unseen (git's "racily clean").
type statEntry struct {
	size    int64
	mtime   time.Time
	mode    fs.FileMode
	data    []byte
	trusted bool
}

const statTrustAge = 2 * time.Second

var _ Source = (*dirSource)(nil)

func openDir(cfg Config) (*dirSource, error) {
	root, err := filepath.Abs(cfg.Repo)
	if err != nil {
		return nil, fmt.Errorf("open directory: %w", err)
	}
	spec := filepath.Join(root, filepath.FromSlash(cfg.Path))
	info, err := os.Stat(spec)
	if err == nil {
		// A symbolic link as the root would be walked as a single entry.
		spec, err = filepath.EvalSymlinks(spec)
	}
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("open directory %s: %s: %w", root, cfg.Path, ErrPathNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("open directory %s: %w", root, err)
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("open directory %s: %s is not a directory", root, cfg.Path)
	}
	if cfg.Branch != "" {
		cfg.Logger.Warn("source_branch_ignored", "repo", root, "branch", cfg.Branch,
			"reason", "not a git repository: the directory is read as it is")
	}
	tree := spec
	if r, err := filepath.EvalSymlinks(root); err == nil && within(r, spec) {
		tree = r
	}
	return &dirSource{nudger: newNudger(), cfg: cfg, root: root, spec: spec, tree: tree, cache: map[string]*memFS{}}, nil
}

// Describe implements Source.
func (s *dirSource) Describe() string {
	return "dir " + s.root + describePath(s.cfg.Path)
}

// skipDir reports whether a directory is left out of snapshots and watches.
func skipDirName(name string) bool {
	return name == ".git" || name == ".hg" || name == ".svn" || name == ".task"
}

// read copies the directory into memory and names it by content. The hash
// covers each file's slash path, executable bit and content, in path order.
func (s *dirSource) read() (Revision, *memFS, error) {
	s.readMu.Lock()
	defer s.readMu.Unlock()
	scanStart := time.Now()
	stats := make(map[string]statEntry, len(s.stats))
	type entry struct {
		name string
		data []byte
		mode fs.FileMode
		mod  time.Time
	}
	var (
		files  []entry
		total  int64
		newest time.Time
	)
	err := filepath.WalkDir(s.spec, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p != s.spec && errors.Is(err, fs.ErrNotExist) {
				return nil // removed while walking; the watcher nudges again
			}
			return err
		}
		if d.IsDir() {
			if p != s.spec && skipDirName(d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		if ignoredName(d.Name()) {
			return nil
		}
		rel, _ := filepath.Rel(s.spec, p)
		rel = filepath.ToSlash(rel)
		if d.Type()&fs.ModeSymlink != 0 {
			// Follow a link only within the tree; the message names the
			// link, never its target or what the target holds.
			target, err := filepath.EvalSymlinks(p)
			if errors.Is(err, fs.ErrNotExist) {
				return nil // dangling, as git would keep it: nothing to read
			}
			if err != nil {
				var pe *fs.PathError // its path may be the target's
				if errors.As(err, &pe) {
					err = pe.Err
				}
				return fmt.Errorf("%s: resolve symbolic link: %w", rel, err)
			}
			if !within(s.tree, target) {
				return fmt.Errorf("%s: %w %s", rel, ErrLinkOutside, s.tree)
			}
			p = target
		}
		info, err := os.Stat(p)
		if err != nil || !info.Mode().IsRegular() {
			return nil
		}
		total += info.Size()
		if total > s.cfg.MaxSnapshotBytes {
			return fmt.Errorf("%s: more than %d bytes: %w", s.spec, s.cfg.MaxSnapshotBytes, ErrTooLarge)
		}
		mode := fs.FileMode(0o444)
		if info.Mode()&0o111 != 0 {
			mode = 0o555
		}
		var data []byte
		if c, ok := s.stats[rel]; ok && c.trusted && c.size == info.Size() && c.mtime.Equal(info.ModTime()) && c.mode == mode {
			data = c.data
		} else {
			data, err = os.ReadFile(p)
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			if err != nil {
				return err
			}
		}
		stats[rel] = statEntry{size: int64(len(data)), mtime: info.ModTime(), mode: mode, data: data,
			trusted: info.ModTime().Before(scanStart.Add(-statTrustAge))}
		files = append(files, entry{rel, data, mode, info.ModTime()})
		if info.ModTime().After(newest) {
			newest = info.ModTime()
		}
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return Revision{}, nil, fmt.Errorf("read directory %s: %w", s.spec, ErrPathNotFound)
	}
	if err != nil {
		return Revision{}, nil, fmt.Errorf("read directory: %w", err)
	}
	s.stats = stats
	sort.Slice(files, func(i, j int) bool { return files[i].name < files[j].name })
	h := sha256.New()
	m := newMemFS(newest)
	var n [8]byte
	for _, f := range files {
		h.Write([]byte(f.name))
		h.Write([]byte{0, byte(f.mode >> 6 & 1)})
		binary.BigEndian.PutUint64(n[:], uint64(len(f.data)))
		h.Write(n[:])
		h.Write(f.data)
		m.add(f.name, f.data, f.mode, f.mod)
	}
	rev := Revision{ID: "dir-" + hex.EncodeToString(h.Sum(nil))[:16], Time: newest}
	return rev, m.seal(), nil
}

// within reports whether p is dir or lies under it; both are clean,
// absolute paths.
func within(dir, p string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// remember caches a snapshot by ID, evicting the oldest beyond dirCacheSize.
func (s *dirSource) remember(id string, m *memFS) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.cache[id]; ok {
		return
	}
	s.cache[id] = m
	s.order = append(s.order, id)
	if len(s.order) > dirCacheSize {
		delete(s.cache, s.order[0])
		s.order = s.order[1:]
	}
}

// Latest implements Source. It reads the whole tree to hash it; the result
// is cached, so the Checkout that usually follows costs nothing.
func (s *dirSource) Latest(ctx context.Context) (Revision, error) {
	rev, m, err := s.read()
	if err != nil {
		return Revision{}, err
	}
	s.remember(rev.ID, m)
	return rev, nil
}

// Checkout implements Source.
func (s *dirSource) Checkout(ctx context.Context, rev Revision) (*Snapshot, error) {
	snap, err := s.CheckoutAt(ctx, rev.ID)
	if err != nil {
		return nil, err
	}
	snap.Revision = rev
	return snap, nil
}

// CheckoutAt implements Source: id must be one of the last few revisions
// seen, or the current content.
func (s *dirSource) CheckoutAt(ctx context.Context, id string) (*Snapshot, error) {
	s.mu.Lock()
	m, ok := s.cache[id]
	s.mu.Unlock()
	if ok {
		return &Snapshot{Revision: Revision{ID: id, Time: m.root.modTime}, FS: m}, nil
	}
	rev, m, err := s.read()
	if err != nil {
		return nil, err
	}
	s.remember(rev.ID, m)
	if rev.ID != id {
		return nil, fmt.Errorf("directory %s is at %s: %s: %w", s.spec, rev.ID, id, ErrRevisionNotFound)
	}
	return &Snapshot{Revision: rev, FS: m}, nil
}

// Run implements Source: it watches every directory under Path.
func (s *dirSource) Run(ctx context.Context) error {
	spec := watchSpec{
		recursive: []string{s.spec},
		skipDir:   func(p string) bool { return skipDirName(filepath.Base(p)) },
		// A long copy into the directory should end before a nudge, so
		// that half-copied trees are rarely read (the hash makes a
		// later, complete read a new revision anyway).
		maxWait: 2 * time.Second,
		relevant: func(ev fsnotify.Event) bool {
			return ev.Op != fsnotify.Chmod && !ignoredName(filepath.Base(ev.Name))
		},
	}
	s.cfg.Logger.Info("source_watching", "source", s.Describe(), "poll_interval", s.cfg.PollInterval)
	return runLoop(ctx, s.cfg.Logger, s.cfg.PollInterval, s.nudger, func() (*watcher, error) {
		return newWatcher(s.cfg.Logger, spec, s.cfg.Debounce, s.nudge)
	})
}
