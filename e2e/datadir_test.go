package e2e

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestServe_dataDirIsOwnerOnly checks that everything hoist serve keeps in
// its data directory is its owner's alone, under the usual 022 umask, and
// that modes loosened while it was down are restricted on the next start.
func TestServe_dataDirIsOwnerOnly(t *testing.T) {
	old := syscall.Umask(0o022) // inherited by hoist serve
	t.Cleanup(func() { syscall.Umask(old) })
	r := newRepo(t)
	r.write("hello.dstack.yml", task("hello", "  - echo hello\n"))
	sha := r.commit("add hello")
	s := startServer(t, r.dir)
	s.waitRun("hello", sha, "done", 60*time.Second)

	check := func() {
		t.Helper()
		n := 0
		err := filepath.WalkDir(s.dataDir, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(s.dataDir, p)
			if ok, _ := filepath.Match("backends/*/instances/*/shim/tasks/*/run", filepath.ToSlash(rel)); ok {
				return filepath.SkipDir // the runner's home belongs to the container's user
			}
			if ok, _ := filepath.Match("backends/*/instances/*/shim/code", filepath.ToSlash(rel)); ok {
				return filepath.SkipDir // the code cache is written by every job user, sticky like /tmp
			}
			if d.Type()&fs.ModeSymlink != 0 || filepath.Dir(rel) == "agents" {
				return nil
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			n++
			if perm := info.Mode().Perm(); perm&0o077 != 0 {
				t.Errorf("%s has mode %#o: others may read it", rel, perm)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"hoist.db", "secret.key"} {
			if _, err := os.Stat(filepath.Join(s.dataDir, want)); err != nil {
				t.Errorf("%s: %v", want, err)
			}
		}
		t.Logf("%d entries checked", n)
	}
	check()

	s.stop()
	for _, name := range []string{"", "hoist.db", "secret.key"} {
		mode := os.FileMode(0o644)
		if name == "" {
			mode = 0o755
		}
		if err := os.Chmod(filepath.Join(s.dataDir, name), mode); err != nil {
			t.Fatal(err)
		}
	}
	s.start()
	check()
	if log := s.logText(); !strings.Contains(log, "mode_restricted") || !strings.Contains(log, "secret.key") {
		t.Errorf("no warning about the restricted modes in the log")
	}
}
