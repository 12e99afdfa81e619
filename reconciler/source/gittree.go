package source

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// commitRevision returns the Revision of a commit read on branch.
func commitRevision(c *object.Commit, branch string) Revision {
	return Revision{
		ID:      c.Hash.String(),
		Branch:  branch,
		Author:  fmt.Sprintf("%s <%s>", c.Author.Name, c.Author.Email),
		Message: strings.TrimSpace(c.Message),
		Time:    c.Committer.When,
	}
}

// treeReader copies Git trees into memory. It remembers the last tree it
// built, and reuses every directory whose tree hash and every file whose
// blob hash is unchanged at the same path: after a one-file commit only
// the changed file and its parent trees are read. Not safe for concurrent
// use; its owner serializes calls.
type treeReader struct {
	last *memDir
}

// snapshot copies the files under sub (a clean relative path, "" for the
// root) of commit c into memory. Submodules and symbolic links are
// skipped: a spec tree holds plain files. Git has no file times; every
// ModTime is zero.
func (r *treeReader) snapshot(objects storer.EncodedObjectStorer, c *object.Commit, sub string, maxBytes int64) (*memFS, error) {
	tree, err := c.Tree()
	if err != nil {
		return nil, fmt.Errorf("read tree of %s: %w", c.Hash, err)
	}
	if sub != "" {
		tree, err = tree.Tree(sub)
		if errors.Is(err, object.ErrDirectoryNotFound) || errors.Is(err, object.ErrEntryNotFound) {
			return nil, fmt.Errorf("%s in %s: %w", sub, c.Hash.String()[:12], ErrPathNotFound)
		}
		if err != nil {
			return nil, fmt.Errorf("read %s in %s: %w", sub, c.Hash, err)
		}
	}
	b := &treeBuild{objects: objects, budget: maxBytes}
	root, err := b.dir(tree, ".", r.last)
	if err != nil {
		return nil, fmt.Errorf("read tree of %s: %w", c.Hash.String()[:12], err)
	}
	r.last = root
	return &memFS{root: root}, nil
}

type treeBuild struct {
	objects storer.EncodedObjectStorer
	budget  int64 // bytes left before ErrTooLarge
}

func (b *treeBuild) spend(n int64) error {
	if b.budget -= n; b.budget < 0 {
		return ErrTooLarge
	}
	return nil
}

// dir builds the directory for t named name, reusing old (the directory at
// the same path in the last tree) where hashes match.
func (b *treeBuild) dir(t *object.Tree, name string, old *memDir) (*memDir, error) {
	if old != nil && old.hash == t.Hash {
		if err := b.spend(old.size); err != nil {
			return nil, err
		}
		if old.name != name {
			cp := *old
			cp.name = name
			return &cp, nil
		}
		return old, nil
	}
	d := newMemDir(name, time.Time{})
	d.hash = t.Hash
	for _, e := range t.Entries {
		var perm fs.FileMode
		switch e.Mode {
		case filemode.Dir:
			var oldSub *memDir
			if old != nil {
				oldSub = old.dirs[e.Name]
			}
			if oldSub != nil && oldSub.hash == e.Hash {
				sub, err := b.dir(&object.Tree{Hash: e.Hash}, e.Name, oldSub)
				if err != nil {
					return nil, err
				}
				d.dirs[e.Name] = sub
				continue
			}
			st, err := object.GetTree(b.objects, e.Hash)
			if err != nil {
				return nil, fmt.Errorf("tree %s: %w", e.Name, err)
			}
			sub, err := b.dir(st, e.Name, oldSub)
			if err != nil {
				return nil, err
			}
			d.dirs[e.Name] = sub
			continue
		case filemode.Regular, filemode.Deprecated:
			perm = 0o444
		case filemode.Executable:
			perm = 0o555
		default:
			continue // symlink or submodule
		}
		if old != nil {
			if f := old.files[e.Name]; f != nil && f.hash == e.Hash && f.mode == perm {
				if err := b.spend(int64(len(f.data))); err != nil {
					return nil, err
				}
				d.files[e.Name] = f
				continue
			}
		}
		data, err := b.blob(e.Hash)
		if err != nil {
			return nil, fmt.Errorf("file %s: %w", e.Name, err)
		}
		d.files[e.Name] = &memFile{hash: e.Hash, name: e.Name, data: data, mode: perm}
	}
	d.seal()
	return d, nil
}

func (b *treeBuild) blob(h plumbing.Hash) ([]byte, error) {
	blob, err := object.GetBlob(b.objects, h)
	if err != nil {
		return nil, err
	}
	if err := b.spend(blob.Size); err != nil {
		return nil, err
	}
	rd, err := blob.Reader()
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	return io.ReadAll(rd)
}
