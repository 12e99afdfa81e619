package blob

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"
	"time"
)

// ErrNotFound is returned by Get for a key the store does not hold.
var ErrNotFound = errors.New("blob not found")

// Object is one stored file.
type Object struct {
	// Key is the object's full key.
	Key string
	// Size is its length in bytes.
	Size int64
	// ModTime is when it was written.
	ModTime time.Time
}

// Store keeps files by key. Implementations are safe for concurrent use.
type Store interface {
	// Put writes r (size bytes, or -1 when unknown) under key, replacing
	// what was there. A body of another length than a known size fails.
	// A failed Put leaves no partial object (and the one it would have
	// replaced as it was).
	Put(ctx context.Context, key string, r io.Reader, size int64) error
	// Get opens the object under key, with its size; ErrNotFound when
	// there is none.
	Get(ctx context.Context, key string) (io.ReadCloser, int64, error)
	// List returns the objects whose keys start with prefix, sorted by key.
	List(ctx context.Context, prefix string) ([]Object, error)
	// DeletePrefix removes every object whose key starts with prefix.
	DeletePrefix(ctx context.Context, prefix string) error
}

// RunPrefix is the key prefix of every artifact of a run (with its
// trailing slash): "artifacts/<project>/<run ID>/".
func RunPrefix(project, runID string) string {
	return "artifacts/" + project + "/" + runID + "/"
}

// JobPrefix is the key prefix of one job's artifacts (with its trailing
// slash): RunPrefix + "<job number>/".
func JobPrefix(project, runID string, jobNum int) string {
	return RunPrefix(project, runID) + strconv.Itoa(jobNum) + "/"
}

// Key is the key of an artifact file: JobPrefix + its slash path relative
// to the job's working directory (e.g. "data/input.txt").
func Key(project, runID string, jobNum int, file string) string {
	return JobPrefix(project, runID, jobNum) + file
}

// validKey reports whether key is a clean relative slash path: no empty,
// "." or ".." element, no leading slash.
func validKey(key string) bool {
	if key == "" || strings.HasPrefix(key, "/") || strings.HasSuffix(key, "/") {
		return false
	}
	for _, e := range strings.Split(key, "/") {
		if e == "" || e == "." || e == ".." {
			return false
		}
	}
	return path.Clean(key) == key
}

// checkedReader reads a Put's body, stopping once ctx ends and failing
// when the body is not the size bytes announced (size -1: any length). The
// error comes from the read that finds the mismatch, before the store
// commits the object.
type checkedReader struct {
	ctx  context.Context
	r    io.Reader
	size int64
	n    int64
}

// newCheckedReader wraps a Put's body; it also hides r's other methods
// (Seek, Len, WriterTo), so stores read it as a plain stream.
func newCheckedReader(ctx context.Context, r io.Reader, size int64) *checkedReader {
	return &checkedReader{ctx: ctx, r: r, size: size}
}

// Read reads from the body, checking the context and the length so far.
func (c *checkedReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	n, err := c.r.Read(p)
	c.n += int64(n)
	if c.size >= 0 && c.n > c.size {
		return n, fmt.Errorf("body longer than its size, %d bytes", c.size)
	}
	if errors.Is(err, io.EOF) && c.size >= 0 && c.n < c.size {
		return n, fmt.Errorf("body ended after %d of its %d bytes: %w", c.n, c.size, io.ErrUnexpectedEOF)
	}
	return n, err
}
