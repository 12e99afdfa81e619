package shim

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// socketLinkRoot holds, for root shims, the short links through which the
// runners' sockets are named (see runnerSocket).
const socketLinkRoot = "/run/hoist-shim"

// runnerSocket returns the path on the host by which the task's runner
// socket is reached, making sure it leads there. A socket's path must fit
// connect(2)'s 107 bytes (unix(7)), which the runner's directory deep in
// StateDir may not, and sshd opens the path as given. So the path goes
// through a symlink to the runner's directory, in a short directory of this
// shim's own (0700, named by a hash of StateDir): /run/hoist-shim for root,
// else hoist-shim-<uid> in the temporary directory. Only the shim's user
// and root can follow it, as only they can enter StateDir.
func (s *Shim) runnerSocket(id string) (string, error) {
	dir, err := s.socketLinkDir()
	if err != nil {
		return "", err
	}
	h := sha256.Sum256([]byte(id))
	link := filepath.Join(dir, hex.EncodeToString(h[:8]))
	target := s.RunnerDir(id)
	if got, err := os.Readlink(link); err != nil || got != target {
		_ = os.Remove(link)
		err := os.Symlink(target, link)
		if errors.Is(err, os.ErrNotExist) {
			// Another shim's prune took the directory while it was empty.
			if dir, err = s.socketLinkDir(); err != nil {
				return "", err
			}
			err = os.Symlink(target, link)
		}
		if err != nil {
			return "", fmt.Errorf("runner socket link: %w", err)
		}
	}
	return filepath.Join(link, RunnerSocketFile), nil
}

// removeSocketLink removes the task's link made by runnerSocket.
func (s *Shim) removeSocketLink(id string) {
	dir, err := s.socketLinkDir()
	if err != nil {
		return
	}
	h := sha256.Sum256([]byte(id))
	_ = os.Remove(filepath.Join(dir, hex.EncodeToString(h[:8])))
	_ = os.Remove(dir) // once empty
}

// socketLinkDir returns this shim's directory of socket links, creating it
// 0700. It refuses a directory on the way that is a symlink or belongs to
// another user.
func (s *Shim) socketLinkDir() (string, error) {
	root := socketLinkRoot
	if os.Geteuid() != 0 {
		root = filepath.Join(os.TempDir(), fmt.Sprintf("hoist-shim-%d", os.Geteuid()))
	}
	state, err := filepath.Abs(s.cfg.StateDir)
	if err != nil {
		return "", fmt.Errorf("runner socket links: %w", err)
	}
	h := sha256.Sum256([]byte(state))
	dir := filepath.Join(root, hex.EncodeToString(h[:8]))
	for _, d := range []string{root, dir} {
		if err := os.Mkdir(d, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
			return "", fmt.Errorf("runner socket links: %w", err)
		}
		fi, err := os.Lstat(d)
		if err != nil {
			return "", fmt.Errorf("runner socket links: %w", err)
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !fi.IsDir() || !ok || int(st.Uid) != os.Geteuid() {
			return "", fmt.Errorf("runner socket links: %s is not a directory of this user", d)
		}
		if fi.Mode().Perm() != 0o700 {
			if err := os.Chmod(d, 0o700); err != nil {
				return "", fmt.Errorf("runner socket links: %w", err)
			}
		}
	}
	return dir, nil
}

// pruneSocketLinks removes, in every shim's link directory of this user,
// the links whose runner directory is gone (tasks removed while no shim ran,
// state directories deleted), and the directories left empty. A shim whose
// directory goes meanwhile makes it again (runnerSocket).
func (s *Shim) pruneSocketLinks() {
	own, err := s.socketLinkDir()
	if err != nil {
		s.log.Warn("socket_links_unusable", "err", err)
		return
	}
	dirs, err := os.ReadDir(filepath.Dir(own))
	if err != nil {
		return
	}
	for _, d := range dirs {
		if !d.IsDir() {
			continue
		}
		dir := filepath.Join(filepath.Dir(own), d.Name())
		entries, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range entries {
			p := filepath.Join(dir, e.Name())
			if _, err := os.Stat(p); errors.Is(err, os.ErrNotExist) {
				_ = os.Remove(p)
			}
		}
		_ = os.Remove(dir) // once empty
	}
}
