package shim

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunnerSocket_shortLinkIntoADeepStateDir names the socket of a task
// whose runner directory is far deeper than connect(2) takes through a
// short link, and drops the link once the task's directory is gone.
func TestRunnerSocket_shortLinkIntoADeepStateDir(t *testing.T) {
	state := filepath.Join(t.TempDir(), strings.Repeat("s", 100))
	s := &Shim{cfg: Config{StateDir: state}, log: slog.New(slog.DiscardHandler)}
	id := "01a20a57-6c47-7662-84f0-59f535ca5614"
	if err := os.MkdirAll(s.RunnerDir(id), 0o700); err != nil {
		t.Fatal(err)
	}
	sock, err := s.runnerSocket(id)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(filepath.Dir(filepath.Dir(sock))) })
	if len(sock) > maxSocketPathForTest {
		t.Errorf("socket path %s has %d bytes, more than connect(2) takes", sock, len(sock))
	}
	if got, err := filepath.EvalSymlinks(filepath.Dir(sock)); err != nil || got != s.RunnerDir(id) {
		t.Errorf("%s leads to %q (%v), want %s", sock, got, err, s.RunnerDir(id))
	}
	fi, err := os.Stat(filepath.Dir(filepath.Dir(sock)))
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("link directory: %v, %v; want mode 0700", fi, err)
	}
	if again, err := s.runnerSocket(id); err != nil || again != sock {
		t.Errorf("second call = %q, %v; want the same %s", again, err, sock)
	}
	if err := os.RemoveAll(state); err != nil {
		t.Fatal(err)
	}
	s.pruneSocketLinks()
	if _, err := os.Lstat(filepath.Dir(sock)); !os.IsNotExist(err) {
		t.Errorf("the link of a task whose directory is gone is still there: %v", err)
	}
}

// maxSocketPathForTest is sun_path's size less its NUL (unix(7)).
const maxSocketPathForTest = 107
