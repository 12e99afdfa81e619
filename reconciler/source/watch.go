package source

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"
)

// watcher turns fsnotify events into debounced nudges. fsnotify has no
// recursive watch, so every directory of a recursive root is added, and a
// directory created later is added (with its subdirectories) when its Create
// event arrives. Events are triggers, never data: the consumer re-reads.
type watcher struct {
	fsw       *fsnotify.Watcher
	log       *slog.Logger
	recursive map[string]bool // directories whose new subdirectories get watched
	roots     []string        // the recursive roots, re-added if removed
	skipDir   func(path string) bool
	relevant  func(ev fsnotify.Event) bool
	debounce  time.Duration
	maxWait   time.Duration
	nudge     func()
}

type watchSpec struct {
	recursive []string // roots watched with every subdirectory
	flat      []string // directories watched alone
	skipDir   func(path string) bool
	relevant  func(ev fsnotify.Event) bool
	// maxWait bounds how long a stream of events can postpone the nudge;
	// zero means 10 debounce periods.
	maxWait time.Duration
}

// newWatcher sets up all watches before returning, so that a change made
// after it returns is seen.
func newWatcher(log *slog.Logger, spec watchSpec, debounce time.Duration, nudge func()) (*watcher, error) {
	fsw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	w := &watcher{
		fsw: fsw, log: log, recursive: map[string]bool{}, roots: spec.recursive,
		skipDir: spec.skipDir, relevant: spec.relevant,
		debounce: debounce, maxWait: spec.maxWait, nudge: nudge,
	}
	if w.maxWait <= 0 {
		w.maxWait = 10 * debounce
	}
	if w.skipDir == nil {
		w.skipDir = func(string) bool { return false }
	}
	for _, dir := range spec.flat {
		if err := fsw.Add(dir); err != nil {
			fsw.Close()
			return nil, err
		}
	}
	for _, root := range spec.recursive {
		if err := w.addTree(root); err != nil {
			fsw.Close()
			return nil, err
		}
	}
	return w, nil
}

// addTree watches dir and every directory below it that is not skipped.
func (w *watcher) addTree(dir string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed while walking
			}
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if p != dir && w.skipDir(p) {
			return filepath.SkipDir
		}
		if err := w.fsw.Add(p); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		w.recursive[p] = true
		return nil
	})
}

// run delivers nudges until ctx is done, then closes the watcher.
func (w *watcher) run(ctx context.Context) {
	defer w.fsw.Close()
	var (
		timer   = time.NewTimer(time.Hour)
		pending bool
		first   time.Time
		// A removed root loses its watch, and nothing reports its return:
		// look for it until it is back. The ticker runs only meanwhile.
		rootGone = time.NewTicker(rootRetry)
		missing  = map[string]bool{}
		retry    <-chan time.Time
	)
	timer.Stop()
	rootGone.Stop()
	defer rootGone.Stop()
	for {
		if len(missing) == 0 {
			retry = nil
		}
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-retry:
			for root := range missing {
				if info, err := os.Stat(root); err == nil && info.IsDir() {
					if err := w.addTree(root); err == nil {
						delete(missing, root)
						w.log.Info("watch_root_back", "dir", root)
						w.nudge()
					}
				}
			}
		case ev, ok := <-w.fsw.Events:
			if !ok {
				return
			}
			if ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename) {
				delete(w.recursive, ev.Name)
				if slices.Contains(w.roots, ev.Name) {
					missing[ev.Name] = true
					rootGone.Reset(rootRetry)
					retry = rootGone.C
				}
			}
			if ev.Has(fsnotify.Create) && w.recursive[filepath.Dir(ev.Name)] {
				if info, err := os.Lstat(ev.Name); err == nil && info.IsDir() && !w.skipDir(ev.Name) {
					// Files created in it before the watch existed made no
					// events; the nudge below makes the consumer rescan.
					if err := w.addTree(ev.Name); err != nil {
						w.log.Warn("watch_add_failed", "dir", ev.Name, "err", err)
					}
				}
			}
			if !w.relevant(ev) {
				continue
			}
			now := time.Now()
			if !pending {
				pending, first = true, now
			}
			delay := min(w.debounce, w.maxWait-now.Sub(first))
			timer.Reset(max(delay, 0))
		case err, ok := <-w.fsw.Errors:
			if !ok {
				return
			}
			w.log.Warn("watch_error", "err", err)
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				w.nudge()
			}
		case <-timer.C:
			pending = false
			w.nudge()
		}
	}
}

// rootRetry is how often a removed watch root is looked for.
const rootRetry = 250 * time.Millisecond

// runLoop is the body of every Source.Run: it starts the watcher (if any),
// nudges once, then nudges on every poll tick until ctx is done.
func runLoop(ctx context.Context, log *slog.Logger, poll time.Duration, n nudger, setup func() (*watcher, error)) error {
	if setup != nil {
		w, err := setup()
		if err != nil {
			hint := "file system events unsupported here (NFS, FUSE?)"
			switch {
			case errors.Is(err, syscall.ENOSPC):
				hint = "raise sysctl fs.inotify.max_user_watches"
			case errors.Is(err, syscall.EMFILE):
				hint = "raise sysctl fs.inotify.max_user_instances"
			}
			log.Warn("watch_unavailable_polling_only", "err", err, "hint", hint, "poll_interval", poll)
		} else {
			done := make(chan struct{})
			go func() { defer close(done); w.run(ctx) }()
			defer func() { <-done }() // Run returns once the watcher is closed
		}
	}
	n.nudge()
	for {
		// ±10% jitter keeps many servers from polling a remote in step.
		jitter := time.Duration((rand.Float64()*0.2 - 0.1) * float64(poll))
		t := time.NewTimer(poll + jitter)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
			n.nudge()
		}
	}
}

// ignoredName reports whether a file name is editor or tool noise that is
// neither watched for nor part of a snapshot: swap, backup, lock and
// temporary files of common editors.
func ignoredName(base string) bool {
	switch {
	case base == "4913", // vim's write test file
		strings.HasSuffix(base, "~"),
		strings.HasPrefix(base, ".#"), // emacs lock
		strings.HasPrefix(base, "#") && strings.HasSuffix(base, "#"),
		strings.HasPrefix(base, ".goutputstream-"),
		strings.HasSuffix(base, "___jb_tmp___"), strings.HasSuffix(base, "___jb_old___"),
		strings.HasSuffix(base, ".tmp"), strings.HasSuffix(base, ".bak"),
		strings.HasSuffix(base, ".DS_Store"):
		return true
	}
	ext := filepath.Ext(base)
	// .swp, .swo, .swn … .swa, .swx, .swpx: vim swap files.
	return ext == ".swx" || ext == ".swpx" ||
		len(ext) == 4 && strings.HasPrefix(ext, ".sw") && ext[3] >= 'a' && ext[3] <= 'p'
}
