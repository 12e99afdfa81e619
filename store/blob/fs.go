package blob

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
)

// FS is a Store on a local directory: each key is a file under it.
type FS struct {
	dir string
}

// OpenFS returns the Store kept in dir, creating dir if needed.
func OpenFS(dir string) (*FS, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("open artifact directory: %w", err)
	}
	return &FS{dir: dir}, nil
}

// path maps a key to its file, refusing keys that are not clean relative
// paths.
func (s *FS) path(key string) (string, error) {
	if !validKey(key) {
		return "", fmt.Errorf("invalid blob key %q", key)
	}
	return filepath.Join(s.dir, filepath.FromSlash(key)), nil
}

// Put writes r to a temporary file beside the key's and renames it into
// place, so a failed Put leaves nothing behind.
func (s *FS) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	p, err := s.path(key)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	f, err := os.CreateTemp(filepath.Dir(p), ".put-*")
	if err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	ok := false
	defer func() {
		if !ok {
			_ = f.Close()
			_ = os.Remove(f.Name())
		}
	}()
	if _, err := io.Copy(f, newCheckedReader(ctx, r, size)); err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	if err := os.Rename(f.Name(), p); err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	ok = true
	return nil
}

// Get opens the key's file.
func (s *FS) Get(_ context.Context, key string) (io.ReadCloser, int64, error) {
	p, err := s.path(key)
	if err != nil {
		return nil, 0, err
	}
	f, err := os.Open(p)
	// ENOTDIR: a leading part of the key is an object, not a directory.
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return nil, 0, fmt.Errorf("get %s: %w", key, ErrNotFound)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("get %s: %w", key, err)
	}
	info, err := f.Stat()
	if err != nil || !info.Mode().IsRegular() {
		_ = f.Close()
		return nil, 0, fmt.Errorf("get %s: %w", key, ErrNotFound)
	}
	return f, info.Size(), nil
}

// List walks the directory of prefix's longest directory part.
func (s *FS) List(_ context.Context, prefix string) ([]Object, error) {
	root := s.dir
	if i := strings.LastIndex(prefix, "/"); i > 0 {
		if !validKey(prefix[:i]) {
			return nil, fmt.Errorf("invalid blob prefix %q", prefix)
		}
		root = filepath.Join(s.dir, filepath.FromSlash(prefix[:i]))
	}
	var out []Object
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if d.IsDir() || strings.HasPrefix(d.Name(), ".put-") {
			return nil
		}
		rel, err := filepath.Rel(s.dir, p)
		if err != nil {
			return err
		}
		key := filepath.ToSlash(rel)
		if !strings.HasPrefix(key, prefix) {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if info.Mode().IsRegular() {
			out = append(out, Object{Key: key, Size: info.Size(), ModTime: info.ModTime().UTC()})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", prefix, err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

// DeletePrefix removes the prefix's objects and the directories left empty.
func (s *FS) DeletePrefix(ctx context.Context, prefix string) error {
	objs, err := s.List(ctx, prefix)
	if err != nil {
		return err
	}
	dirs := map[string]bool{}
	for _, o := range objs {
		p := filepath.Join(s.dir, filepath.FromSlash(o.Key))
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("delete %s: %w", o.Key, err)
		}
		for d := filepath.Dir(p); d != s.dir && strings.HasPrefix(d, s.dir); d = filepath.Dir(d) {
			dirs[d] = true
		}
	}
	// Deepest first, so parents are empty by the time they are tried.
	ds := make([]string, 0, len(dirs))
	for d := range dirs {
		ds = append(ds, d)
	}
	sort.Slice(ds, func(i, j int) bool { return len(ds[i]) > len(ds[j]) })
	for _, d := range ds {
		_ = os.Remove(d) // fails while not empty, as meant
	}
	return nil
}
