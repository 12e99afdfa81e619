package reconciler

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	"hoist/store"
)

// A DiskFullError says that the server's data directory has no room for
// new work: a sync (a new revision's runs) or a re-run is refused until
// space is freed; what was already stored stays.
type DiskFullError struct {
	// Dir is the data directory.
	Dir string
	// Free is the space free for the server, in bytes.
	Free uint64
	// Min is the free space new work needs (Config.MinFreeBytes).
	Min int64
	// Err is the store's write that failed for want of room, if that is
	// how it was found.
	Err error
}

func (e *DiskFullError) Error() string {
	msg := fmt.Sprintf("data directory %s is full: %d bytes free, below the minimum %d (serve --min-free-disk)", e.Dir, e.Free, e.Min)
	if e.Err != nil {
		msg = fmt.Sprintf("data directory %s is full: %d bytes free; a store write failed: %v", e.Dir, e.Free, e.Err)
	}
	return msg
}

func (e *DiskFullError) Unwrap() error { return e.Err }

// freeBytes returns the space of the file system holding dir that the
// server may use (statfs(2)'s f_bavail blocks).
func freeBytes(dir string) (uint64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("statfs %s: %w", dir, err)
	}
	return st.Bavail * uint64(st.Bsize), nil
}

// checkDiskSpace refuses new work while Config.DataDir has less than
// Config.MinFreeBytes free.
func (c *Controller) checkDiskSpace() error {
	if c.cfg.DataDir == "" || c.cfg.MinFreeBytes <= 0 {
		return nil
	}
	free, err := freeBytes(c.cfg.DataDir)
	if err != nil {
		return err
	}
	if free < uint64(c.cfg.MinFreeBytes) {
		return &DiskFullError{Dir: c.cfg.DataDir, Free: free, Min: c.cfg.MinFreeBytes}
	}
	return nil
}

// diskFull returns err as a DiskFullError when it is a store write the
// disk had no room for, else err.
func (c *Controller) diskFull(err error) error {
	var dfe *DiskFullError
	if err == nil || errors.As(err, &dfe) || !store.IsDiskFull(err) {
		return err
	}
	dfe = &DiskFullError{Dir: c.cfg.DataDir, Min: c.cfg.MinFreeBytes, Err: err}
	if c.cfg.DataDir != "" {
		dfe.Free, _ = freeBytes(c.cfg.DataDir)
	}
	return dfe
}
