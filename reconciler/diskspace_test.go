package reconciler

import (
	"errors"
	"strings"
	"testing"
)

// TestSync_refusedWhileTheDataDirectoryIsShortOfSpace syncs a revision
// while the data directory has less free space than the minimum: the sync
// fails with a DiskFullError, the status says the directory is full with
// its figures, and nothing of the revision is applied; with room again the
// same revision syncs and the status's error is gone.
func TestSync_refusedWhileTheDataDirectoryIsShortOfSpace(t *testing.T) {
	f := newFixture(t, map[string]string{"hello.dstack.yml": "type: task\nname: hello\nimage: busybox\ncommands: [echo hi]\n"})
	dir := t.TempDir()
	f.c.cfg.DataDir, f.c.cfg.MinFreeBytes = dir, 1<<62

	err := f.c.runSync(f.ctx, true)
	var dfe *DiskFullError
	if !errors.As(err, &dfe) || dfe.Dir != dir {
		t.Fatalf("sync on a full disk: %v, want a DiskFullError for %s", err, dir)
	}
	st, err := f.c.Status(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(st.Error, "data directory "+dir+" is full") || !strings.Contains(st.Error, "below the minimum 4611686018427387904") {
		t.Errorf("status error %q, want the data directory full with its figures", st.Error)
	}
	if st.Revision != "" {
		t.Errorf("revision %s applied on a full disk", st.Revision)
	}
	if err := f.c.RerunRun(f.ctx, "hello"); !errors.As(err, &dfe) {
		t.Errorf("re-run on a full disk: %v, want a DiskFullError", err)
	}

	f.c.cfg.MinFreeBytes = 1
	if err := f.c.runSync(f.ctx, true); err != nil {
		t.Fatalf("sync with room: %v", err)
	}
	if st, _ := f.c.Status(f.ctx); st.Error != "" || st.Revision == "" {
		t.Errorf("status after a sync with room: %+v", st)
	}
}
