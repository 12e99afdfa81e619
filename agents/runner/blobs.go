package runner

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// defaultCodeCacheBytes bounds an instance's blob cache when
// Config.CodeCacheBytes is zero: one job's largest code
// (api.MaxCodeExtractedBytes) and as much again of other revisions.
const defaultCodeCacheBytes = 2 << 30

// staleTempAge is how old a temporary file in the blob cache must be before
// it counts as left behind by a runner that died while writing it.
const staleTempAge = time.Hour

// tempPrefix starts the names of blobs being written; blob names are hex.
const tempPrefix = ".blob-"

// errBlobCorrupt is wrapped by a blob whose content is not what its name says.
var errBlobCorrupt = errors.New("content does not match its sha256")

// blobCache is a directory of code blobs, each named by the SHA-256 of its
// content (lowercase hex). The instance's jobs share it (the shim's code
// cache, sticky and writable by every job user, like /tmp): a blob is
// written to a temporary file and renamed into place, so that a reader
// never sees half a blob and two jobs storing the same blob do not clash;
// what a file holds is checked against its name before it is used, as
// another job may have written it. Recency is the file's modification
// time, refreshed on use; eviction removes the least recently used blobs
// beyond maxBytes. In a sticky directory a job may remove or refresh only
// the blobs its own user wrote; the others stay until a job of their user
// evicts them.
type blobCache struct {
	dir      string
	maxBytes int64
	now      func() time.Time
	log      *slog.Logger
	// private is set for a job's own directory, removed once the code is
	// placed.
	private bool
}

// validSum reports whether s is a SHA-256 in lowercase hex.
func validSum(s string) bool {
	if len(s) != sha256.Size*2 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil && strings.ToLower(s) == s
}

func (c *blobCache) path(sum string) string { return filepath.Join(c.dir, sum) }

// has reports whether the cache holds a file named sum of size bytes; its
// content is checked by verify.
func (c *blobCache) has(sum string, size int64) bool {
	fi, err := os.Stat(c.path(sum))
	return err == nil && fi.Mode().IsRegular() && fi.Size() == size
}

// put stores the blob read from r, which must be size bytes whose SHA-256
// is sum.
func (c *blobCache) put(sum string, size int64, r io.Reader) error {
	tmp, err := os.CreateTemp(c.dir, tempPrefix+"*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, h), io.LimitReader(r, size+1))
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if n != size {
		return fmt.Errorf("%d bytes where the manifest says %d", n, size)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != sum {
		return fmt.Errorf("%w (it is %s)", errBlobCorrupt, got)
	}
	// Other job users read it; nobody writes a blob in place.
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), c.path(sum)); err != nil {
		// Another user's file of that name (sticky directory) stays; it
		// serves if it holds the blob.
		if verr := c.verify(sum); verr != nil {
			return fmt.Errorf("store: %w", err)
		}
	}
	return nil
}

// verify checks that the blob named sum holds what its name says and marks
// it used. A blob of other content is removed (when this user may) and
// errBlobCorrupt returned.
func (c *blobCache) verify(sum string) error {
	f, err := os.Open(c.path(sum))
	if err != nil {
		return err
	}
	h := sha256.New()
	_, err = io.Copy(h, f)
	f.Close()
	if err != nil {
		return err
	}
	if hex.EncodeToString(h.Sum(nil)) != sum {
		_ = os.Remove(c.path(sum))
		return errBlobCorrupt
	}
	now := c.now()
	_ = os.Chtimes(c.path(sum), now, now) // most recently used; only the owner may
	return nil
}

// copyTo writes the blob named sum to a new file target with mode perm,
// checking its content on the way: a blob changed since verify fails with
// errBlobCorrupt and leaves no target.
func (c *blobCache) copyTo(sum, target string, perm os.FileMode) error {
	src, err := os.Open(c.path(sum))
	if err != nil {
		return err
	}
	defer src.Close()
	_ = os.Remove(target)
	dst, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	h := sha256.New()
	_, err = io.Copy(io.MultiWriter(dst, h), src)
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err == nil && hex.EncodeToString(h.Sum(nil)) != sum {
		err = errBlobCorrupt
	}
	if err != nil {
		_ = os.Remove(target)
	}
	return err
}

// evict removes the least recently used blobs until the cache holds at most
// maxBytes, never one of keep (the blobs of the code just placed), and the
// temporary files a dead runner left behind.
func (c *blobCache) evict(keep map[string]bool) {
	ents, err := os.ReadDir(c.dir)
	if err != nil {
		return
	}
	type blob struct {
		name string
		size int64
		used time.Time
	}
	var blobs []blob
	for _, e := range ents {
		info, err := e.Info()
		if err != nil || !info.Mode().IsRegular() {
			continue
		}
		if strings.HasPrefix(e.Name(), ".") {
			if c.now().Sub(info.ModTime()) > staleTempAge {
				_ = os.Remove(filepath.Join(c.dir, e.Name()))
			}
			continue
		}
		blobs = append(blobs, blob{e.Name(), info.Size(), info.ModTime()})
	}
	sort.Slice(blobs, func(i, j int) bool { return blobs[i].used.After(blobs[j].used) })
	var total int64
	removed := 0
	for _, b := range blobs {
		if keep[b.name] || total+b.size <= c.maxBytes {
			total += b.size
			continue
		}
		if err := os.Remove(filepath.Join(c.dir, b.name)); err == nil {
			removed++
		} else if !errors.Is(err, os.ErrNotExist) {
			total += b.size // another user's: it stays
		}
	}
	if removed > 0 {
		c.log.Info("code_cache_evicted", "blobs", removed, "kept_bytes", total)
	}
}
