package source

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
)

// TestCacheStorage_fetchedEntriesAreOwnerOnly: under hoist serve's umask
// (077), a fetch into the git cache leaves nothing others may read, not
// even the packs and objects go-git makes read-only with chmod 0444.
func TestCacheStorage_fetchedEntriesAreOwnerOnly(t *testing.T) {
	old := syscall.Umask(0o077)
	t.Cleanup(func() { syscall.Umask(old) })
	src := newGoGitRepo(t, "main")
	src.commit(t, "add", map[string]string{"a.dstack.yml": "type: task\n", "b/c.dstack.yml": "type: service\n"})

	dir := filepath.Join(t.TempDir(), "git", "fetch-1")
	st := cacheStorage(dir)
	defer st.Close()
	repo, err := git.Init(st, nil)
	if err != nil {
		t.Fatal(err)
	}
	rem, err := repo.CreateRemote(&config.RemoteConfig{Name: "origin", URLs: []string{src.dir}})
	if err != nil {
		t.Fatal(err)
	}
	if err := rem.FetchContext(t.Context(), &git.FetchOptions{RefSpecs: []config.RefSpec{"+refs/heads/main:refs/remotes/origin/main"}}); err != nil {
		t.Fatal(err)
	}
	// A loose object too (go-git writes those with its object writer).
	obj := st.NewEncodedObject()
	obj.SetType(plumbing.BlobObject)
	w, err := obj.Writer()
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte("loose\n"))
	w.Close()
	if _, err := st.SetEncodedObject(obj); err != nil {
		t.Fatal(err)
	}

	var files, open []string
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if !d.IsDir() {
			files = append(files, fmt.Sprintf("%s %#o", rel, info.Mode().Perm()))
		}
		if info.Mode().Perm()&0o077 != 0 {
			open = append(open, fmt.Sprintf("%s %#o", rel, info.Mode().Perm()))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var packs, loose int
	for _, f := range files {
		if m, _ := filepath.Match("objects/pack/*.pack *", f); m {
			packs++
		}
		if m, _ := filepath.Match("objects/??/* *", f); m {
			loose++
		}
	}
	if packs == 0 || loose == 0 {
		t.Fatalf("want a pack and a loose object; files: %v", files)
	}
	if len(open) > 0 {
		t.Errorf("entries others may read: %v", open)
	}
}
