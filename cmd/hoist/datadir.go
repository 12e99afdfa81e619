package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"hoist/store"
)

// runnerHomePattern matches, relative to the data directory, the runner
// homes the local backend's shims keep: each is bind-mounted into a task
// container and written by the container's user, who need not be hoist's,
// so agents/shim makes it 0777. The directories above it are 0700.
const runnerHomePattern = "backends/*/instances/*/shim/tasks/*/run"

// codeCachePattern matches the local backend's shims' code caches, which
// every task of the instance mounts and its job user, whoever it is, writes
// (sticky and 0777, as agents/shim makes it). The directories above it are
// 0700.
const codeCachePattern = "backends/*/instances/*/shim/code"

// ownerOnlyUmask sets the process's umask to 077, so that every file and
// directory hoist serve creates from then on — in the data directory: the
// git cache's clones (go-git asks for 0644 and 0755), SQLite's journal
// files, backend and shim state — is its owner's alone, and returns the
// previous umask. The entries that must stay readable by containers' users
// get their modes with chmod, which the umask does not narrow: the agent
// binaries (extractAgents), the runner homes and the runner's token file
// (agents/shim).
func ownerOnlyUmask() int { return syscall.Umask(0o077) }

// maxModeWarnings bounds the per-path warnings of one restrictDataDir; a
// summary counts the rest.
const maxModeWarnings = 20

// restrictDataDir makes the data directory private to its owner, whatever
// the umask was when its entries were made: the directory, every directory
// and every file below it lose their group and other permissions (0700
// directories, 0600 files), each change logged as a warning. Three kinds of
// entries keep their modes: runner homes (runnerHomePattern), code caches
// (codeCachePattern) and the agent binaries in agents/, which are
// bind-mounted read-only into task containers of any user and hold nothing
// secret. Symbolic links are not followed.
func restrictDataDir(dir string, log *slog.Logger) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	fixed := 0
	// restrict changes path's permissions from perm to want.
	restrict := func(path string, perm, want fs.FileMode) error {
		if perm == want {
			return nil
		}
		if err := os.Chmod(path, want); err != nil {
			return err
		}
		if fixed++; fixed <= maxModeWarnings {
			log.Warn("data_dir_mode_restricted", "path", path, "was", fmt.Sprintf("%#o", perm), "now", fmt.Sprintf("%#o", want))
		}
		return nil
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("data dir %s is not a directory", dir)
	}
	if err := restrict(dir, fi.Mode().Perm(), 0o700); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	var failed []error
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			failed = append(failed, err)
			if d != nil && d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		rel, _ := filepath.Rel(dir, path)
		if rel == "." || d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			failed = append(failed, err)
			return nil
		}
		perm := info.Mode().Perm()
		switch {
		case d.IsDir():
			if containerOwned(rel) {
				return fs.SkipDir
			}
			err = restrict(path, perm, perm&^0o077)
		case !d.Type().IsRegular():
			return nil // sockets, fifos: their directory is private
		case filepath.Dir(rel) == "agents":
			return nil
		default:
			err = restrict(path, perm, perm&^0o077)
		}
		if err != nil {
			failed = append(failed, err)
		}
		return nil
	})
	if err != nil {
		failed = append(failed, err)
	}
	if fixed > maxModeWarnings {
		log.Warn("data_dir_modes_restricted", "dir", dir, "count", fixed)
	}
	if len(failed) > 0 {
		// The directory itself is private; an entry left as it was is
		// reported, not fatal.
		log.Warn("data_dir_mode_restrict_failed", "dir", dir, "count", len(failed), "error", errors.Join(failed...))
	}
	return nil
}

// containerOwned reports whether rel, relative to the data directory, is a
// directory containers' users write (a runner home, a code cache).
func containerOwned(rel string) bool {
	for _, p := range []string{runnerHomePattern, codeCachePattern} {
		if ok, _ := filepath.Match(p, filepath.ToSlash(rel)); ok {
			return true
		}
	}
	return false
}

// serverIDFile holds, in the data directory, the random name that
// identifies this server in leases across its restarts.
const serverIDFile = "server-id"

// claimDataDir locks the data directory for this process (a second hoist
// serve on it fails with store.ErrInUse, naming the holder's pid) and
// returns the server's lease owner: "<hostname>-<id>", id read from
// serverIDFile or made and written there on first start. The name outlives
// the process, and the lock makes this process its only holder, so leases
// found under it at start are a killed predecessor's (store.ReleaseLeasesOf).
func claimDataDir(dir string) (owner string, unlock func() error, err error) {
	unlock, err = store.LockFile(filepath.Join(dir, "serve.lock"))
	if err != nil {
		return "", nil, fmt.Errorf("data dir: %w", err)
	}
	path := filepath.Join(dir, serverIDFile)
	b, err := os.ReadFile(path)
	id := strings.TrimSpace(string(b))
	if errors.Is(err, fs.ErrNotExist) || (err == nil && id == "") {
		var raw [6]byte
		if _, err = rand.Read(raw[:]); err == nil {
			id = hex.EncodeToString(raw[:])
			err = os.WriteFile(path, []byte(id+"\n"), 0o600)
		}
	}
	if err != nil {
		_ = unlock()
		return "", nil, fmt.Errorf("data dir: server id: %w", err)
	}
	host, _ := os.Hostname()
	return host + "-" + id, unlock, nil
}
