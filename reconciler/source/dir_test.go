package source

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestDirRevisionIsAContentHash(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"specs/a.yml": "v1", "specs/sub/b.yml": "b",
		"specs/.a.yml.swp": "swap", "specs/a.yml~": "backup", "specs/.git/HEAD": "ref: x",
		"outside.yml": "not under Path",
	})
	src := open(t, Config{Repo: dir, Path: "specs"})
	if got, want := src.Describe(), "dir "+dir+" (specs/)"; got != want {
		t.Errorf("Describe() = %q, want %q", got, want)
	}
	rev := latest(t, src)
	if !strings.HasPrefix(rev.ID, "dir-") || len(rev.ID) != len("dir-")+16 {
		t.Fatalf("Latest().ID = %q, want dir-<16 hex>", rev.ID)
	}
	if diff := cmp.Diff(map[string]string{"a.yml": "v1", "sub/b.yml": "b"}, checkout(t, src, rev)); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}

	// Touching a file, editing noise or files outside Path: same revision.
	now := time.Now().Add(time.Hour)
	os.Chtimes(filepath.Join(dir, "specs/a.yml"), now, now)
	writeFiles(t, dir, map[string]string{"specs/.a.yml.swp": "other", "outside.yml": "changed"})
	if again := latest(t, src); again.ID != rev.ID {
		t.Errorf("ID changed without a content change: %s → %s", rev.ID, again.ID)
	}

	writeFiles(t, dir, map[string]string{"specs/a.yml": "v2"})
	changed := latest(t, src)
	if changed.ID == rev.ID {
		t.Fatal("ID did not change with the content")
	}
	// The previous revision is still readable (re-applying it), the
	// current one is, an unknown one is not.
	if got := checkout(t, src, rev)["a.yml"]; got != "v1" {
		t.Errorf("old revision a.yml = %q, want v1", got)
	}
	if got := checkout(t, src, changed)["a.yml"]; got != "v2" {
		t.Errorf("new revision a.yml = %q, want v2", got)
	}
	if _, err := src.CheckoutAt(context.Background(), "dir-0000000000000000"); !errors.Is(err, ErrRevisionNotFound) {
		t.Errorf("CheckoutAt(unknown) error = %v, want ErrRevisionNotFound", err)
	}
	// Renaming a file is a new revision too.
	if err := os.Rename(filepath.Join(dir, "specs/a.yml"), filepath.Join(dir, "specs/c.yml")); err != nil {
		t.Fatal(err)
	}
	if renamed := latest(t, src); renamed.ID == changed.ID {
		t.Error("ID did not change with a rename")
	}
}

func TestDirWatchSeesEditorSavesAndNewDirectories(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"a.yml": "v1"})
	src := open(t, Config{Repo: dir, Debounce: 30 * time.Millisecond, PollInterval: time.Hour})
	runSource(t, src)
	prev := latest(t, src).ID

	expectChange := func(t *testing.T, what string, want map[string]string) {
		t.Helper()
		if !waitNudge(src, 5*time.Second) {
			t.Fatalf("%s: no nudge", what)
		}
		rev := latest(t, src)
		if rev.ID == prev {
			t.Fatalf("%s: revision did not change", what)
		}
		prev = rev.ID
		got := checkout(t, src, rev)
		for name, content := range want {
			if got[name] != content {
				t.Errorf("%s: %s = %q, want %q", what, name, got[name], content)
			}
		}
	}

	// vim-style save: write a swap/backup file, rename over the original.
	tmp := filepath.Join(dir, ".a.yml.swp")
	writeFiles(t, dir, map[string]string{".a.yml.swp": "v2"})
	if err := os.Rename(tmp, filepath.Join(dir, "a.yml")); err != nil {
		t.Fatal(err)
	}
	expectChange(t, "rename save", map[string]string{"a.yml": "v2"})

	// A new directory with a file written right after mkdir, before the
	// watcher could add it: the nudge makes the consumer rescan.
	writeFiles(t, dir, map[string]string{"new/deep/b.yml": "b1"})
	expectChange(t, "new nested directory", map[string]string{"new/deep/b.yml": "b1"})

	// The new directory is watched from now on.
	writeFiles(t, dir, map[string]string{"new/deep/b.yml": "b2"})
	expectChange(t, "write in the new directory", map[string]string{"new/deep/b.yml": "b2"})

	// Renaming a watched directory, then writing inside it.
	if err := os.Rename(filepath.Join(dir, "new"), filepath.Join(dir, "moved")); err != nil {
		t.Fatal(err)
	}
	expectChange(t, "directory rename", map[string]string{"moved/deep/b.yml": "b2"})
	writeFiles(t, dir, map[string]string{"moved/deep/b.yml": "b3"})
	expectChange(t, "write in the renamed directory", map[string]string{"moved/deep/b.yml": "b3"})

	// Deleting a file, then a whole directory.
	writeFiles(t, dir, map[string]string{"moved/deep/b.yml": ""})
	expectChange(t, "delete", map[string]string{"a.yml": "v2"})
	writeFiles(t, dir, map[string]string{"gone/c.yml": "c"})
	expectChange(t, "another new directory", map[string]string{"gone/c.yml": "c"})
	if err := os.RemoveAll(filepath.Join(dir, "gone")); err != nil {
		t.Fatal(err)
	}
	expectChange(t, "directory removal", map[string]string{"a.yml": "v2", "gone/c.yml": ""})
}

func TestDirWatchIgnoresSwapFiles(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"a.yml": "v1"})
	src := open(t, Config{Repo: dir, Debounce: 20 * time.Millisecond, PollInterval: time.Hour})
	runSource(t, src)
	writeFiles(t, dir, map[string]string{".a.yml.swp": "x", "4913": "x", "#a.yml#": "x"})
	if waitNudge(src, 300*time.Millisecond) {
		t.Error("nudged for editor swap files")
	}
	// The watcher is alive: a real edit still nudges.
	writeFiles(t, dir, map[string]string{"a.yml": "v2"})
	if !waitNudge(src, 5*time.Second) {
		t.Error("no nudge for a real edit")
	}
}

func TestDirWatchDebouncesABurstIntoOneNudge(t *testing.T) {
	dir := t.TempDir()
	// A long debounce keeps the test meaningful on a loaded 2-core CI box.
	src := open(t, Config{Repo: dir, Debounce: 300 * time.Millisecond, PollInterval: time.Hour})
	runSource(t, src)

	// 50 files written as fast as possible, well inside one debounce window.
	start := time.Now()
	for i := range 50 {
		writeFiles(t, dir, map[string]string{fmt.Sprintf("f%02d.yml", i): "x"})
	}
	if took := time.Since(start); took > 250*time.Millisecond {
		t.Skipf("SKIP: the burst took %v, longer than the debounce; the machine is too slow to tell", took)
	}
	nudges := 0
	deadline := time.After(1500 * time.Millisecond)
loop:
	for {
		select {
		case <-src.Changes():
			nudges++
		case <-deadline:
			break loop
		}
	}
	if nudges != 1 {
		t.Errorf("got %d nudges for one burst, want 1", nudges)
	}
	if got := len(checkout(t, src, latest(t, src))); got != 50 {
		t.Errorf("snapshot has %d files, want 50", got)
	}
}

func TestDirSeesAnEditInTheSameClockTick(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "a.yml")
	tick := time.Now().Truncate(time.Second)
	writeFiles(t, dir, map[string]string{"a.yml": "v1"})
	os.Chtimes(p, tick, tick)
	src := open(t, Config{Repo: dir})
	first := latest(t, src)
	// Same size, same modification time: only the content differs.
	writeFiles(t, dir, map[string]string{"a.yml": "v2"})
	os.Chtimes(p, tick, tick)
	if second := latest(t, src); second.ID == first.ID {
		t.Fatal("an edit with unchanged size and mtime was missed")
	}
	if got := checkout(t, src, latest(t, src))["a.yml"]; got != "v2" {
		t.Errorf("a.yml = %q, want v2", got)
	}
}

func TestDirThroughASymbolicLink(t *testing.T) {
	real := t.TempDir()
	writeFiles(t, real, map[string]string{"specs/a.yml": "v1"})
	links := t.TempDir()
	for name, target := range map[string]string{"repo": real, "specs": filepath.Join(real, "specs")} {
		if err := os.Symlink(target, filepath.Join(links, name)); err != nil {
			t.Fatal(err)
		}
	}
	for _, cfg := range []Config{{Repo: filepath.Join(links, "repo"), Path: "specs"}, {Repo: filepath.Join(links, "specs")}} {
		src := open(t, cfg)
		if got := checkout(t, src, latest(t, src)); got["a.yml"] != "v1" {
			t.Errorf("%s: files = %v, want a.yml", src.Describe(), got)
		}
	}
}

func TestDirWatchSurvivesTheDirectoryBeingReplaced(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"specs/a.yml": "v1"})
	src := open(t, Config{Repo: dir, Path: "specs", Debounce: 20 * time.Millisecond, PollInterval: time.Hour})
	runSource(t, src)

	// rm -rf specs && mkdir specs && …, as a script or a branch switch does.
	if err := os.RemoveAll(filepath.Join(dir, "specs")); err != nil {
		t.Fatal(err)
	}
	if !waitNudge(src, 5*time.Second) {
		t.Fatal("no nudge for the removal")
	}
	if _, err := src.Latest(context.Background()); !errors.Is(err, ErrPathNotFound) {
		t.Errorf("Latest() with the directory gone: error = %v, want ErrPathNotFound", err)
	}
	writeFiles(t, dir, map[string]string{"specs/a.yml": "v2"})
	if !waitNudge(src, 5*time.Second) {
		t.Fatal("no nudge when the directory came back")
	}
	if got := checkout(t, src, latest(t, src))["a.yml"]; got != "v2" {
		t.Fatalf("a.yml = %q, want v2", got)
	}
	// And it is watched again.
	writeFiles(t, dir, map[string]string{"specs/a.yml": "v3"})
	for deadline := time.Now().Add(5 * time.Second); ; {
		if !waitNudge(src, time.Until(deadline)) {
			t.Fatal("no nudge for an edit after the directory came back")
		}
		if got := checkout(t, src, latest(t, src))["a.yml"]; got == "v3" {
			break
		}
	}
}

func TestDirRefusesSymbolicLinksOutOfTheTree(t *testing.T) {
	outside := t.TempDir()
	writeFiles(t, outside, map[string]string{"secret.yml": "type: task\nname: SECRET-CONTENT\n"})
	tests := []struct {
		name   string
		target func(repo string) string
	}{
		{"absolute link to a file outside", func(string) string { return filepath.Join(outside, "secret.yml") }},
		{"relative link climbing out", func(repo string) string {
			rel, _ := filepath.Rel(filepath.Join(repo, "specs"), filepath.Join(outside, "secret.yml"))
			return rel
		}},
		{"link to a link outside", func(repo string) string {
			hop := filepath.Join(repo, "hop.yml")
			if err := os.Symlink(filepath.Join(outside, "secret.yml"), hop); err != nil {
				t.Fatal(err)
			}
			return hop
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			repo := t.TempDir()
			writeFiles(t, repo, map[string]string{"specs/a.yml": "type: task\n"})
			if err := os.Symlink(tt.target(repo), filepath.Join(repo, "specs", "leak.yml")); err != nil {
				t.Fatal(err)
			}
			src := open(t, Config{Repo: repo, Path: "specs"})
			_, err := src.Latest(context.Background())
			if !errors.Is(err, ErrLinkOutside) {
				t.Fatalf("Latest() error = %v, want ErrLinkOutside", err)
			}
			msg := err.Error()
			if !strings.Contains(msg, "leak.yml") {
				t.Errorf("error %q does not name the link", msg)
			}
			if strings.Contains(msg, "SECRET-CONTENT") || strings.Contains(msg, outside) {
				t.Errorf("error %q shows the target or its content", msg)
			}
		})
	}
}

func TestDirFollowsSymbolicLinksWithinTheTree(t *testing.T) {
	repo := t.TempDir()
	writeFiles(t, repo, map[string]string{"common/base.yml": "shared", "specs/a.yml": "v1"})
	if err := os.Symlink("../common/base.yml", filepath.Join(repo, "specs", "b.yml")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("a.yml", filepath.Join(repo, "specs", "c.yml")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("missing.yml", filepath.Join(repo, "specs", "dangling.yml")); err != nil {
		t.Fatal(err)
	}
	src := open(t, Config{Repo: repo, Path: "specs"})
	got := checkout(t, src, latest(t, src))
	if got["a.yml"] != "v1" || got["b.yml"] != "shared" || got["c.yml"] != "v1" {
		t.Errorf("files = %v, want a.yml, b.yml (from common/) and c.yml", got)
	}
}
