package source

import (
	"bytes"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
)

// memFS is an immutable in-memory file tree: the FS of every Snapshot.
// Directories are shared between snapshots when their Git tree is
// unchanged, so nothing may be modified once a memDir is sealed.
type memFS struct {
	root *memDir
}

// memDir is one directory; entries is the sorted listing of files and dirs.
type memDir struct {
	hash    plumbing.Hash // Git tree hash; zero in dev mode
	name    string
	modTime time.Time
	files   map[string]*memFile
	dirs    map[string]*memDir
	entries []fs.DirEntry
	size    int64 // total bytes of the files below
}

type memFile struct {
	hash    plumbing.Hash // Git blob hash; zero in dev mode
	name    string        // base name
	data    []byte
	mode    fs.FileMode
	modTime time.Time
}

func newMemDir(name string, modTime time.Time) *memDir {
	return &memDir{name: name, modTime: modTime, files: map[string]*memFile{}, dirs: map[string]*memDir{}}
}

// newMemFS starts an empty tree; add files, then seal it.
func newMemFS(modTime time.Time) *memFS { return &memFS{root: newMemDir(".", modTime)} }

// add records a file at the clean slash path name, creating parents.
func (m *memFS) add(name string, data []byte, mode fs.FileMode, modTime time.Time) {
	d := m.root
	dir, base := path.Split(name)
	if dir != "" {
		for part := range strings.SplitSeq(strings.TrimSuffix(dir, "/"), "/") {
			child, ok := d.dirs[part]
			if !ok {
				child = newMemDir(part, m.root.modTime)
				d.dirs[part] = child
			}
			d = child
		}
	}
	d.files[base] = &memFile{name: base, data: data, mode: mode.Perm(), modTime: modTime}
}

// seal computes listings and sizes of the whole tree; call it once, last.
func (m *memFS) seal() *memFS {
	m.root.seal()
	return m
}

// seal computes the listing and size of d and of every directory below.
func (d *memDir) seal() {
	d.entries = d.entries[:0]
	d.size = 0
	for _, f := range d.files {
		d.entries = append(d.entries, fileEntry{f})
		d.size += int64(len(f.data))
	}
	for _, sub := range d.dirs {
		if sub.entries == nil { // not sealed yet: a reused directory is
			sub.seal()
		}
		d.entries = append(d.entries, dirInfo{sub})
		d.size += sub.size
	}
	slices.SortFunc(d.entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	if d.entries == nil {
		d.entries = []fs.DirEntry{}
	}
}

// size is the total number of bytes of the files in the tree.
func (m *memFS) size() int64 { return m.root.size }

// lookup finds the file or directory at a valid fs path.
func (m *memFS) lookup(name string) (*memFile, *memDir) {
	if name == "." {
		return nil, m.root
	}
	d := m.root
	for {
		part, rest, more := strings.Cut(name, "/")
		if !more {
			if f, ok := d.files[part]; ok {
				return f, nil
			}
			return nil, d.dirs[part]
		}
		if d = d.dirs[part]; d == nil {
			return nil, nil
		}
		name = rest
	}
}

// ContentID implements schema.ContentIDFS: the Git blob id of the file at
// name, so that a load skips reading files whose blob it has already
// validated. Files of a plain directory (dev mode) have none.
func (m *memFS) ContentID(name string) (string, bool) {
	f, _ := m.lookup(name)
	if f == nil || f.hash.IsZero() {
		return "", false
	}
	return f.hash.String(), true
}

// Open implements fs.FS.
func (m *memFS) Open(name string) (fs.File, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	f, d := m.lookup(name)
	switch {
	case f != nil:
		return &openFile{memFile: f, r: bytes.NewReader(f.data)}, nil
	case d != nil:
		return &openDirFile{d: d}, nil
	}
	return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
}

// ReadFile implements fs.ReadFileFS; the caller gets its own copy.
func (m *memFS) ReadFile(name string) ([]byte, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "readfile", Path: name, Err: fs.ErrInvalid}
	}
	f, d := m.lookup(name)
	if d != nil {
		return nil, &fs.PathError{Op: "readfile", Path: name, Err: fs.ErrInvalid}
	}
	if f == nil {
		return nil, &fs.PathError{Op: "readfile", Path: name, Err: fs.ErrNotExist}
	}
	return bytes.Clone(f.data), nil
}

// ReadDir implements fs.ReadDirFS.
func (m *memFS) ReadDir(name string) ([]fs.DirEntry, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: fs.ErrInvalid}
	}
	f, d := m.lookup(name)
	if f != nil {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: fs.ErrInvalid}
	}
	if d == nil {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: fs.ErrNotExist}
	}
	return slices.Clone(d.entries), nil
}

// Stat implements fs.StatFS.
func (m *memFS) Stat(name string) (fs.FileInfo, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "stat", Path: name, Err: fs.ErrInvalid}
	}
	f, d := m.lookup(name)
	switch {
	case f != nil:
		return fileEntry{f}, nil
	case d != nil:
		return dirInfo{d}, nil
	}
	return nil, &fs.PathError{Op: "stat", Path: name, Err: fs.ErrNotExist}
}

// fileEntry is both the fs.FileInfo and the fs.DirEntry of a memFile.
type fileEntry struct{ f *memFile }

func (e fileEntry) Name() string               { return e.f.name }
func (e fileEntry) Size() int64                { return int64(len(e.f.data)) }
func (e fileEntry) Mode() fs.FileMode          { return e.f.mode }
func (e fileEntry) ModTime() time.Time         { return e.f.modTime }
func (e fileEntry) IsDir() bool                { return false }
func (e fileEntry) Sys() any                   { return nil }
func (e fileEntry) Type() fs.FileMode          { return 0 }
func (e fileEntry) Info() (fs.FileInfo, error) { return e, nil }

// dirInfo is both the fs.FileInfo and the fs.DirEntry of a memDir.
type dirInfo struct{ d *memDir }

func (e dirInfo) Name() string               { return e.d.name }
func (e dirInfo) Size() int64                { return 0 }
func (e dirInfo) Mode() fs.FileMode          { return fs.ModeDir | 0o555 }
func (e dirInfo) ModTime() time.Time         { return e.d.modTime }
func (e dirInfo) IsDir() bool                { return true }
func (e dirInfo) Sys() any                   { return nil }
func (e dirInfo) Type() fs.FileMode          { return fs.ModeDir }
func (e dirInfo) Info() (fs.FileInfo, error) { return e, nil }

type openFile struct {
	*memFile
	r *bytes.Reader
}

func (f *openFile) Stat() (fs.FileInfo, error) { return fileEntry{f.memFile}, nil }
func (f *openFile) Read(p []byte) (int, error) { return f.r.Read(p) }
func (f *openFile) Seek(off int64, whence int) (int64, error) {
	return f.r.Seek(off, whence)
}
func (f *openFile) ReadAt(p []byte, off int64) (int, error) { return f.r.ReadAt(p, off) }
func (f *openFile) Close() error                            { return nil }

type openDirFile struct {
	d   *memDir
	off int
}

func (o *openDirFile) Stat() (fs.FileInfo, error) { return dirInfo{o.d}, nil }
func (o *openDirFile) Read([]byte) (int, error) {
	return 0, &fs.PathError{Op: "read", Path: o.d.name, Err: fs.ErrInvalid}
}
func (o *openDirFile) Close() error { return nil }

// ReadDir implements fs.ReadDirFile.
func (o *openDirFile) ReadDir(n int) ([]fs.DirEntry, error) {
	rest := o.d.entries[o.off:]
	if n <= 0 {
		o.off = len(o.d.entries)
		return slices.Clone(rest), nil
	}
	if len(rest) == 0 {
		return nil, io.EOF
	}
	n = min(n, len(rest))
	o.off += n
	return slices.Clone(rest[:n]), nil
}
