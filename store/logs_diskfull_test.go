package store

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"hoist/e2e/testenv"
)

// TestLogs_diskFullLosesNoAcknowledgedLine appends numbered lines to a job's
// log on a tiny tmpfs that a filler file keeps full for a while, then frees
// the space: every append the store reported as written must be readable,
// once and in order, and the failed ones must not be stored.
func TestLogs_diskFullLosesNoAcknowledgedLine(t *testing.T) {
	dir := testenv.Tmpfs(t, "8m")
	s := openTest(t, filepath.Join(dir, "hoist.db"), Options{})
	ctx := t.Context()

	var stored []string // the lines the store acknowledged, in order
	next := 0
	appendBatch := func() error {
		var batch []LogLine
		var texts []string
		for range 20 {
			next++
			txt := fmt.Sprintf("line %06d %0200d", next, next)
			batch = append(batch, LogLine{Stream: "stdout", Data: []byte(txt)})
			texts = append(texts, txt)
		}
		last, err := s.AppendLogs(ctx, "job-1", batch)
		if err != nil {
			next -= len(batch) // the caller retries the same lines
			return err
		}
		stored = append(stored, texts...)
		if last != int64(len(stored)) {
			t.Fatalf("append returned last seq %d, want %d", last, len(stored))
		}
		return nil
	}
	for range 20 {
		if err := appendBatch(); err != nil {
			t.Fatalf("append before the disk filled: %v", err)
		}
	}
	filler := filepath.Join(dir, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	for {
		if _, err := f.Write(buf); err != nil {
			break
		}
	}
	_ = f.Close()
	full := 0
	for i := range 300 {
		if i%5 == 0 {
			// A little room now and then, as other files on the disk shrink:
			// some writes fit, some stop half way.
			if st, err := os.Stat(filler); err == nil {
				_ = os.Truncate(filler, st.Size()-int64(i%3+1)*4096)
			}
		}
		if err := appendBatch(); err != nil {
			if !IsDiskFull(err) {
				t.Logf("append on a full disk: %v", err)
			}
			full++
		}
	}
	t.Logf("%d of 300 appends failed on the full disk; %d lines stored", full, len(stored))
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	for range 20 {
		if err := appendBatch(); err != nil {
			out, _ := exec.Command("ls", "-la", dir).CombinedOutput()
			df, _ := exec.Command("df", dir).CombinedOutput()
			t.Fatalf("append after the disk was freed: %v\n%s\n%s", err, out, df)
		}
	}
	got, err := s.ReadLogs(ctx, "job-1", 0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if _, last, err := s.LogSize(ctx, "job-1"); err != nil || last != int64(len(stored)) {
		t.Errorf("LogSize last seq = %d, %v; want %d", last, err, len(stored))
	}
	if len(got) != len(stored) {
		t.Errorf("read %d lines, %d acknowledged", len(got), len(stored))
	}
	for i := range min(len(got), len(stored)) {
		if string(got[i].Data) != stored[i] || got[i].Seq != int64(i+1) {
			t.Fatalf("line %d: seq %d %.12q, want %.12q", i+1, got[i].Seq, got[i].Data, stored[i])
		}
	}
}
