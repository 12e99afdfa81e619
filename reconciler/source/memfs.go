package source

import (
	"bytes"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"
	"time"
)

// memFS is an immutable in-memory file tree: the FS of every Snapshot.
// Build it with newMemFS, add files in any order, then call seal.
type memFS struct {
	files   map[string]*memFile
	dirs    map[string][]fs.DirEntry // dir path ("." for the root) → sorted entries
	modTime time.Time
	size    int64
}

type memFile struct {
	name    string // base name
	data    []byte
	mode    fs.FileMode
	modTime time.Time
}

func newMemFS(modTime time.Time) *memFS {
	return &memFS{files: map[string]*memFile{}, dirs: map[string][]fs.DirEntry{".": nil}, modTime: modTime}
}

// add records a file at the clean slash path name; parents are implied.
func (m *memFS) add(name string, data []byte, mode fs.FileMode, modTime time.Time) {
	f := &memFile{name: path.Base(name), data: data, mode: mode.Perm(), modTime: modTime}
	m.files[name] = f
	m.size += int64(len(data))
	child := fs.DirEntry(fileEntry{f})
	for dir := path.Dir(name); ; dir = path.Dir(dir) {
		_, seen := m.dirs[dir]
		m.dirs[dir] = append(m.dirs[dir], child)
		if seen || dir == "." {
			return
		}
		child = dirEntry{name: path.Base(dir), modTime: m.modTime}
	}
}

// seal sorts the directory listings; call it once after the last add.
func (m *memFS) seal() *memFS {
	for _, entries := range m.dirs {
		slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	}
	return m
}

// Open implements fs.FS.
func (m *memFS) Open(name string) (fs.File, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	if f, ok := m.files[name]; ok {
		return &openFile{memFile: f, r: bytes.NewReader(f.data)}, nil
	}
	if entries, ok := m.dirs[name]; ok {
		return &openDirFile{info: dirEntry{name: path.Base(name), modTime: m.modTime}, entries: entries}, nil
	}
	return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
}

// ReadFile implements fs.ReadFileFS; the caller gets its own copy.
func (m *memFS) ReadFile(name string) ([]byte, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "readfile", Path: name, Err: fs.ErrInvalid}
	}
	f, ok := m.files[name]
	if !ok {
		return nil, &fs.PathError{Op: "readfile", Path: name, Err: fs.ErrNotExist}
	}
	return bytes.Clone(f.data), nil
}

// ReadDir implements fs.ReadDirFS.
func (m *memFS) ReadDir(name string) ([]fs.DirEntry, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: fs.ErrInvalid}
	}
	entries, ok := m.dirs[name]
	if !ok {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: fs.ErrNotExist}
	}
	return slices.Clone(entries), nil
}

// Stat implements fs.StatFS.
func (m *memFS) Stat(name string) (fs.FileInfo, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "stat", Path: name, Err: fs.ErrInvalid}
	}
	if f, ok := m.files[name]; ok {
		return fileEntry{f}, nil
	}
	if _, ok := m.dirs[name]; ok {
		return dirEntry{name: path.Base(name), modTime: m.modTime}, nil
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

// dirEntry is both the fs.FileInfo and the fs.DirEntry of a directory.
type dirEntry struct {
	name    string
	modTime time.Time
}

func (e dirEntry) Name() string               { return e.name }
func (e dirEntry) Size() int64                { return 0 }
func (e dirEntry) Mode() fs.FileMode          { return fs.ModeDir | 0o555 }
func (e dirEntry) ModTime() time.Time         { return e.modTime }
func (e dirEntry) IsDir() bool                { return true }
func (e dirEntry) Sys() any                   { return nil }
func (e dirEntry) Type() fs.FileMode          { return fs.ModeDir }
func (e dirEntry) Info() (fs.FileInfo, error) { return e, nil }

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
	info    dirEntry
	entries []fs.DirEntry
	off     int
}

func (d *openDirFile) Stat() (fs.FileInfo, error) { return d.info, nil }
func (d *openDirFile) Read([]byte) (int, error) {
	return 0, &fs.PathError{Op: "read", Path: d.info.name, Err: fs.ErrInvalid}
}
func (d *openDirFile) Close() error { return nil }

// ReadDir implements fs.ReadDirFile.
func (d *openDirFile) ReadDir(n int) ([]fs.DirEntry, error) {
	rest := d.entries[d.off:]
	if n <= 0 {
		d.off = len(d.entries)
		return slices.Clone(rest), nil
	}
	if len(rest) == 0 {
		return nil, io.EOF
	}
	n = min(n, len(rest))
	d.off += n
	return slices.Clone(rest[:n]), nil
}
