package source

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
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

// treeSnapshot copies the files under sub (a clean relative path, "" for the
// root) of commit c into memory. Submodules and symbolic links are skipped:
// a spec tree holds plain files.
func treeSnapshot(c *object.Commit, sub string, maxBytes int64) (*memFS, error) {
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
	m := newMemFS(c.Committer.When)
	walker := tree.Files()
	defer walker.Close()
	for {
		f, err := walker.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("walk tree of %s: %w", c.Hash, err)
		}
		var perm fs.FileMode
		switch f.Mode {
		case filemode.Regular, filemode.Deprecated:
			perm = 0o444
		case filemode.Executable:
			perm = 0o555
		default:
			continue // symlink or submodule
		}
		if m.size+f.Size > maxBytes {
			return nil, fmt.Errorf("%s: more than %d bytes: %w", c.Hash.String()[:12], maxBytes, ErrTooLarge)
		}
		data, err := readBlob(f)
		if err != nil {
			return nil, fmt.Errorf("read %s in %s: %w", f.Name, c.Hash, err)
		}
		m.add(f.Name, data, perm, c.Committer.When)
	}
	return m.seal(), nil
}

func readBlob(f *object.File) ([]byte, error) {
	r, err := f.Reader()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}
