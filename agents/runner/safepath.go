package runner

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
)

var errUnsafePath = errors.New("path leaves the working dir")

// noSymlinkBetween refuses a parent directory reached through a symlink, so
// that an archive cannot write through a link it planted itself.
func noSymlinkBetween(root, dir string) error {
	rel, err := filepath.Rel(root, dir)
	if err != nil || rel == "." {
		return nil
	}
	cur := root
	for _, part := range strings.Split(rel, string(filepath.Separator)) {
		cur = filepath.Join(cur, part)
		fi, err := os.Lstat(cur)
		if err != nil {
			return nil // not there yet: it will be created as a directory
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			return errUnsafePath
		}
	}
	return nil
}
