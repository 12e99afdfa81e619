package blob

import (
	"context"
	"errors"
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
	// what was there. A failed Put leaves no partial object.
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
