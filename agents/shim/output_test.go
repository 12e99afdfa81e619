package shim_test

import (
	"bytes"
	"strconv"
	"testing"

	"hoist/agents/api"
)

// TestShim_hundredMegabytesOfNumberedLinesArriveIntact streams ~97 MB of
// numbered lines (seq 1..12,000,000) from a job through runner → client and
// checks that no line is lost, duplicated or reordered.
func TestShim_hundredMegabytesOfNumberedLinesArriveIntact(t *testing.T) {
	if testing.Short() {
		t.Skip("SKIP: streams 100 MB (-short)")
	}
	t.Parallel()
	const n = 12_000_000
	e := newEnv(t)
	_, rc := e.runTask(t, api.TaskSpec{ID: "bulk"})
	ctx := t.Context()
	if err := rc.Submit(ctx, api.JobSpec{Commands: []string{"seq 1 " + strconv.Itoa(n)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := rc.Run(ctx); err != nil {
		t.Fatal(err)
	}
	next := int64(1)
	var partial []byte
	var bytesSeen, lastSeq int64
	err := rc.Follow(ctx, 0, func(l api.LogLine) error {
		if l.Seq != lastSeq+1 {
			t.Fatalf("record seq %d follows %d", l.Seq, lastSeq)
		}
		lastSeq = l.Seq
		if l.Stream != api.StreamStdout {
			t.Fatalf("stderr output: %q", l.Data)
		}
		bytesSeen += int64(len(l.Data))
		data := l.Data
		if len(partial) > 0 {
			data = append(partial, data...)
			partial = nil
		}
		for len(data) > 0 {
			i := bytes.IndexByte(data, '\n')
			if i < 0 {
				partial = append([]byte(nil), data...)
				break
			}
			got, err := strconv.ParseInt(string(data[:i]), 10, 64)
			if err != nil || got != next {
				t.Fatalf("line %d is %q", next, data[:i])
			}
			next++
			data = data[i+1:]
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if next != n+1 || len(partial) != 0 {
		t.Errorf("read %d lines (partial %q), want %d", next-1, partial, n)
	}
	t.Logf("%d bytes in %d records", bytesSeen, lastSeq)
	if st, err := rc.Wait(ctx); err != nil || st.State != api.JobDone {
		t.Errorf("job = %+v, %v; want done", st, err)
	}
}
