package source

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"hoist/schema"
)

// TestSnapshotContentIDIsTheBlobID checks that a Git snapshot names each
// file's content by its blob id (what `git hash-object` prints), so that
// schema.Load keys its verdicts by it, and that a plain directory's
// snapshot names none.
func TestSnapshotContentIDIsTheBlobID(t *testing.T) {
	requireGit(t)
	g := newGoGitRepo(t, "main")
	g.commit(t, "specs", map[string]string{"a.dstack.yml": "type: task\n", "sub/b.dstack.yml": "type: service\n"})
	src := open(t, Config{Repo: g.dir})
	snap, err := src.Checkout(t.Context(), latest(t, src))
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	ids, ok := snap.FS.(schema.ContentIDFS)
	if !ok {
		t.Fatalf("a Git snapshot's FS %T names no content ids", snap.FS)
	}
	for _, name := range []string{"a.dstack.yml", "sub/b.dstack.yml"} {
		id, ok := ids.ContentID(name)
		want := strings.TrimSpace(gitCmd(t, g.dir, "hash-object", name))
		if !ok || id != want {
			t.Errorf("ContentID(%s) = %q, %v; want %q", name, id, ok, want)
		}
	}
	for _, name := range []string{"missing.dstack.yml", "sub"} {
		if id, ok := ids.ContentID(name); ok {
			t.Errorf("ContentID(%s) = %q, want none", name, id)
		}
	}

	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.dstack.yml"), []byte("type: task\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dev := open(t, Config{Repo: dir})
	dsnap, err := dev.Checkout(t.Context(), latest(t, dev))
	if err != nil {
		t.Fatal(err)
	}
	defer dsnap.Close()
	if ids, ok := dsnap.FS.(schema.ContentIDFS); ok {
		if id, ok := ids.ContentID("a.dstack.yml"); ok {
			t.Errorf("a plain directory's ContentID = %q, want none", id)
		}
	}
}
