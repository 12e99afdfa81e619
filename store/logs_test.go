package store

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestLogs_appendAndReadInOrder(t *testing.T) {
	forEachDB(t, func(t *testing.T, s *Store, clock *fakeClock) {
		ctx := t.Context()
		var want []LogLine
		seq := int64(0)
		// Batches of varied size, some larger than a chunk, plus empty and binary data.
		for _, n := range []int{1, 3, 0, 5000, 2, 1} {
			var batch []LogLine
			for range n {
				seq++
				data := fmt.Appendf(nil, "line %d %s\n", seq, bytes.Repeat([]byte("x"), int(seq%97)))
				if seq%13 == 0 {
					data = []byte{}
				}
				if seq%17 == 0 {
					data = []byte{0, 0xff, '\n', 0x80}
				}
				stream := "stdout"
				if seq%3 == 0 {
					stream = "stderr"
				}
				l := LogLine{Seq: seq, Time: clock.Now().Add(time.Duration(seq) * time.Millisecond), Stream: stream, Data: data}
				batch = append(batch, LogLine{Time: l.Time, Stream: l.Stream, Data: l.Data})
				want = append(want, l)
			}
			last, err := s.AppendLogs(ctx, "job-1", batch)
			if err != nil {
				t.Fatal(err)
			}
			if last != seq {
				t.Fatalf("AppendLogs returned last seq %d, want %d", last, seq)
			}
		}
		// Another job's lines do not mix in.
		if _, err := s.AppendLogs(ctx, "job-2", []LogLine{{Stream: "stdout", Data: []byte("other")}}); err != nil {
			t.Fatal(err)
		}
		all, err := s.ReadLogs(ctx, "job-1", 0, 1_000_000)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, all, cmp.Comparer(func(a, b []byte) bool { return bytes.Equal(a, b) })); diff != "" {
			t.Fatalf("ReadLogs (-want +got):\n%s", diff)
		}
		// Paging from any cursor returns the rest in order.
		var paged []LogLine
		var after int64
		for {
			page, err := s.ReadLogs(ctx, "job-1", after, 333)
			if err != nil {
				t.Fatal(err)
			}
			if len(page) == 0 {
				break
			}
			if len(page) > 333 {
				t.Fatalf("page of %d lines, limit 333", len(page))
			}
			paged = append(paged, page...)
			after = page[len(page)-1].Seq
		}
		if len(paged) != len(want) {
			t.Errorf("paged read got %d lines, want %d", len(paged), len(want))
		}
		mid, _ := s.ReadLogs(ctx, "job-1", 2500, 2)
		if len(mid) != 2 || mid[0].Seq != 2501 || mid[1].Seq != 2502 {
			t.Errorf("ReadLogs(after 2500, 2) = %+v", mid)
		}
		// Appending to a returned line must not corrupt its neighbour.
		mid[0].Data = append(mid[0].Data, "CLOBBER"...)
		if bytes.Contains(mid[1].Data, []byte("CLOBBER")) {
			t.Error("returned lines share spare capacity")
		}
		size, last, _ := s.LogSize(ctx, "job-1")
		var wantSize int64
		for _, l := range want {
			wantSize += int64(len(l.Data))
		}
		if size != wantSize || last != seq {
			t.Errorf("LogSize = %d, %d; want %d, %d", size, last, wantSize, seq)
		}
	})
}

func TestPruneLogs_dropsOnlyJobsFinishedBeforeTheCutoff(t *testing.T) {
	forEachDB(t, func(t *testing.T, s *Store, clock *fakeClock) {
		ctx := t.Context()
		r := &Run{Name: "t", Type: "task", Status: RunRunning}
		if err := s.CreateRun(ctx, r); err != nil {
			t.Fatal(err)
		}
		jobs := map[string]*Job{}
		for _, name := range []string{"old", "recent", "running"} {
			j := &Job{RunID: r.ID, RunName: r.Name, JobName: name, Status: JobRunning}
			if err := s.CreateJob(ctx, j); err != nil {
				t.Fatal(err)
			}
			if _, err := s.AppendLogs(ctx, j.ID, []LogLine{{Stream: "stdout", Data: []byte(name)}}); err != nil {
				t.Fatal(err)
			}
			jobs[name] = j
		}
		finish := func(j *Job, at time.Time) {
			j.Status, j.FinishedAt = JobDone, at
			if err := s.UpdateJob(ctx, j); err != nil {
				t.Fatal(err)
			}
		}
		cutoff := clock.Now()
		finish(jobs["old"], cutoff.Add(-time.Hour))
		finish(jobs["recent"], cutoff.Add(time.Minute))
		n, err := s.PruneLogs(ctx, cutoff)
		if err != nil || n != 1 {
			t.Fatalf("PruneLogs = %d, %v; want 1", n, err)
		}
		for name, want := range map[string]int{"old": 0, "recent": 1, "running": 1} {
			got, err := s.ReadLogs(ctx, jobs[name].ID, 0, 10)
			if err != nil || len(got) != want {
				t.Errorf("%s: %d lines (%v), want %d", name, len(got), err, want)
			}
			if size, _, _ := s.LogSize(ctx, jobs[name].ID); (size == 0) != (want == 0) {
				t.Errorf("%s: log size %d after prune", name, size)
			}
		}
	})
}

func TestLogs_quota(t *testing.T) {
	forEachDSN(t, func(t *testing.T, dsn string) {
		ctx := t.Context()
		s := openTest(t, dsn, Options{LogQuota: 100})
		line := func(n int) LogLine { return LogLine{Stream: "stdout", Data: bytes.Repeat([]byte("a"), n)} }
		if _, err := s.AppendLogs(ctx, "j", []LogLine{line(40), line(40)}); err != nil {
			t.Fatal(err)
		}
		last, err := s.AppendLogs(ctx, "j", []LogLine{line(10), line(30), line(5)})
		if !errors.Is(err, ErrLogQuota) {
			t.Fatalf("AppendLogs over quota = %v, want ErrLogQuota", err)
		}
		if last != 3 {
			t.Errorf("last seq = %d, want 3 (the line that fit)", last)
		}
		if _, err := s.AppendLogs(ctx, "j", []LogLine{line(1)}); !errors.Is(err, ErrLogQuota) {
			t.Errorf("AppendLogs at quota = %v, want ErrLogQuota", err)
		}
		lines, _ := s.ReadLogs(ctx, "j", 0, 0)
		size, _, _ := s.LogSize(ctx, "j")
		if len(lines) != 3 || size != 90 {
			t.Errorf("stored %d lines, %d bytes; want 3 lines, 90 bytes", len(lines), size)
		}
		// Other jobs have their own quota.
		if _, err := s.AppendLogs(ctx, "k", []LogLine{line(100)}); err != nil {
			t.Errorf("other job: %v", err)
		}
	})
}

func TestLogs_concurrentAppendersLoseNothing(t *testing.T) {
	forEachDB(t, func(t *testing.T, s *Store, clock *fakeClock) {
		ctx := t.Context()
		const writers, batches, per = 4, 20, 25
		var wg sync.WaitGroup
		errs := make(chan error, writers)
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for b := range batches {
					batch := make([]LogLine, per)
					for i := range batch {
						batch[i] = LogLine{Stream: fmt.Sprint(w), Data: fmt.Appendf(nil, "%d", b*per+i)}
					}
					if _, err := s.AppendLogs(ctx, "j", batch); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		lines, err := s.ReadLogs(ctx, "j", 0, 1_000_000)
		if err != nil {
			t.Fatal(err)
		}
		if len(lines) != writers*batches*per {
			t.Fatalf("read %d lines, want %d", len(lines), writers*batches*per)
		}
		next := map[string]int{}
		for i, l := range lines {
			if l.Seq != int64(i+1) {
				t.Fatalf("line %d has seq %d", i, l.Seq)
			}
			// Within a stream, lines keep the order their writer sent them.
			if got := string(l.Data); got != fmt.Sprint(next[l.Stream]) {
				t.Fatalf("stream %s: got %s, want %d", l.Stream, got, next[l.Stream])
			}
			next[l.Stream]++
		}
	})
}
