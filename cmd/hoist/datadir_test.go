package main

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"testing/fstest"

	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/storage/filesystem"

	"hoist/store"
)

func TestRestrictDataDir_makesEveryEntryOwnerOnly(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	entries := []struct {
		path string
		mode os.FileMode
		dir  bool
		want os.FileMode
	}{
		{"", 0o755, true, 0o700},
		{"hoist.db", 0o644, false, 0o600},
		{"admin-token", 0o644, false, 0o600},
		{"secret.key", 0o640, false, 0o600},
		{"git", 0o755, true, 0o700},
		{"git/objects", 0o775, true, 0o700},
		{"git/objects/pack.idx", 0o444, false, 0o400},
		{"git/hooks/run.sh", 0o755, false, 0o700},
		{"backends/local/instances/i-1/instance.json", 0o644, false, 0o600},
		{"backends/local/instances/i-1/shim/tasks/t-1/state.json", 0o644, false, 0o600},
		{"backends/local/instances/i-1/shim/tasks/t-1", 0o755, true, 0o700},
		// Kept: the runner's home is the container user's, the agent
		// binaries are mounted into containers of any user.
		{"backends/local/instances/i-1/shim/tasks/t-1/run", 0o777, true, 0o777},
		{"backends/local/instances/i-1/shim/tasks/t-1/run/job.log", 0o666, false, 0o666},
		{"agents/hoist-runner", 0o755, false, 0o755},
		{"agents", 0o755, true, 0o700},
	}
	for _, e := range entries {
		p := filepath.Join(dir, e.path)
		if e.dir {
			if err := os.MkdirAll(p, 0o700); err != nil {
				t.Fatal(err)
			}
		} else {
			if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Modes last, deepest first, so that the directories stay writable.
	for i := len(entries) - 1; i >= 0; i-- {
		if err := os.Chmod(filepath.Join(dir, entries[i].path), entries[i].mode); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	var logs strings.Builder
	if err := restrictDataDir(dir, slog.New(slog.NewTextHandler(&logs, nil))); err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		fi, err := os.Stat(filepath.Join(dir, e.path))
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != e.want {
			t.Errorf("%q: mode %#o, want %#o", e.path, got, e.want)
		}
	}
	if fi, err := os.Stat("/etc/passwd"); err == nil && fi.Mode().Perm()&0o004 == 0 {
		t.Errorf("the symlink was followed: /etc/passwd is %#o", fi.Mode().Perm())
	}
	if !strings.Contains(logs.String(), "data_dir_mode_restricted") || !strings.Contains(logs.String(), "admin-token") {
		t.Errorf("no warning naming the fixed files:\n%s", logs.String())
	}
}

func TestRestrictDataDir_createsAMissingDirectory0700(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "state")
	var logs strings.Builder
	if err := restrictDataDir(dir, slog.New(slog.NewTextHandler(&logs, nil))); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o700 {
		t.Errorf("mode %#o, want 0700", fi.Mode().Perm())
	}
}

// gitCacheModes initialises a repository in dir with go-git's filesystem
// storage, as the remote source does in the data directory's git cache, and
// returns the modes of everything in it that others may read. (Objects,
// which go-git chmods to 0444 itself, are the source's to narrow: see
// reconciler/source.)
func gitCacheModes(t *testing.T, dir string) []string {
	t.Helper()
	st := filesystem.NewStorage(osfs.New(dir, osfs.WithBoundOS()), cache.NewObjectLRUDefault())
	defer st.Close()
	repo, err := git.Init(st, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := repo.CreateRemote(&config.RemoteConfig{Name: "origin", URLs: []string{"https://example.invalid/specs.git"}}); err != nil {
		t.Fatal(err)
	}
	var open []string
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if perm := info.Mode().Perm(); perm&0o077 != 0 {
			rel, _ := filepath.Rel(dir, p)
			open = append(open, fmt.Sprintf("%s %#o", rel, perm))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return open
}

func TestOwnerOnlyUmask_gitCacheEntriesAreOwnerOnly(t *testing.T) {
	old := syscall.Umask(0o022) // the usual umask, under which go-git makes 0644 files
	t.Cleanup(func() { syscall.Umask(old) })
	// Without it, go-git's files are readable by others (the test would
	// prove nothing otherwise).
	if open := gitCacheModes(t, filepath.Join(t.TempDir(), "git", "fetch-1")); len(open) == 0 {
		t.Fatal("under umask 022 go-git made only owner-only entries")
	}
	defer syscall.Umask(ownerOnlyUmask())
	if open := gitCacheModes(t, filepath.Join(t.TempDir(), "git", "fetch-2")); len(open) > 0 {
		t.Errorf("entries others may read: %v", open)
	}
}

// TestOwnerOnlyUmask_agentBinariesStayExecutable: the exception the umask
// must not narrow.
func TestOwnerOnlyUmask_agentBinariesStayExecutable(t *testing.T) {
	defer syscall.Umask(ownerOnlyUmask())
	dir := filepath.Join(t.TempDir(), "agents")
	emb := fstest.MapFS{"hoist-runner": {Data: []byte("\x7fELF")}, "hoist-shim": {Data: []byte("\x7fELF")}}
	if err := extractAgents(emb, dir); err != nil {
		t.Fatal(err)
	}
	for name := range emb {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != 0o755 {
			t.Errorf("%s: mode %#o, want 0755", name, got)
		}
	}
}

// TestClaimDataDir_oneServeAtATimeUnderANameThatOutlivesIt: a second
// claim of a data directory fails with store.ErrInUse while the first holds
// it, and a claim after the first let go gives the same lease owner.
func TestClaimDataDir_oneServeAtATimeUnderANameThatOutlivesIt(t *testing.T) {
	dir := t.TempDir()
	owner, unlock, err := claimDataDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	if !strings.HasPrefix(owner, host+"-") || len(owner) <= len(host)+1 {
		t.Errorf("owner = %q, want <hostname>-<id>", owner)
	}
	if _, _, err := claimDataDir(dir); !errors.Is(err, store.ErrInUse) {
		t.Errorf("second claim while the first holds the directory: %v, want ErrInUse", err)
	}
	if err := unlock(); err != nil {
		t.Fatal(err)
	}
	again, unlock, err := claimDataDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	if again != owner {
		t.Errorf("owner after a restart = %q, want %q", again, owner)
	}
}
