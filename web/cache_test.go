package web

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// countingStore counts ListRuns calls and can hold them.
type countingStore struct {
	*memStore
	calls atomic.Int64
	hold  chan struct{}
}

func (c *countingStore) ListRuns(ctx context.Context, f RunFilter) ([]Run, error) {
	c.calls.Add(1)
	if c.hold != nil {
		<-c.hold
	}
	return c.memStore.ListRuns(ctx, f)
}

func TestRunListCache_sharesAndInvalidates(t *testing.T) {
	st := &countingStore{memStore: newMemStore(), hold: make(chan struct{})}
	st.putRun(Run{Name: "a", Status: "done"})
	c := newRunListCache(time.Hour)
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			if runs, err := c.list(t.Context(), st, RunFilter{}); err != nil || len(runs) != 1 {
				t.Errorf("list: %v %v", runs, err)
			}
		})
	}
	time.Sleep(20 * time.Millisecond)
	close(st.hold)
	wg.Wait()
	if n := st.calls.Load(); n != 1 {
		t.Errorf("10 concurrent lists made %d store reads", n)
	}
	st.putRun(Run{Name: "b", Status: "done"})
	if runs, _ := c.list(t.Context(), st, RunFilter{}); len(runs) != 1 {
		t.Errorf("fresh cache entry not used: %d runs", len(runs))
	}
	c.invalidate()
	if runs, _ := c.list(t.Context(), st, RunFilter{}); len(runs) != 2 || st.calls.Load() != 2 {
		t.Errorf("after invalidate: %d runs, %d reads", len(runs), st.calls.Load())
	}
	if runs, _ := c.list(t.Context(), st, RunFilter{Status: "running"}); len(runs) != 0 || st.calls.Load() != 3 {
		t.Errorf("another filter shares an entry")
	}
}

func TestRunListCache_staleEntryAnswersAtOnceAndRefreshes(t *testing.T) {
	st := &countingStore{memStore: newMemStore()}
	st.putRun(Run{Name: "a", Status: "done"})
	c := newRunListCache(20 * time.Millisecond)
	c.list(t.Context(), st, RunFilter{})
	st.putRun(Run{Name: "b", Status: "done"})
	time.Sleep(30 * time.Millisecond) // stale, within staleFor TTLs
	st.hold = make(chan struct{})
	runs, err := c.list(t.Context(), st, RunFilter{}) // must not wait for the held read
	if err != nil || len(runs) != 1 {
		t.Fatalf("stale answer: %d runs, %v", len(runs), err)
	}
	close(st.hold)
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		c.mu.Lock()
		n := len(c.m[RunFilter{}].runs)
		c.mu.Unlock()
		if n == 2 {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatal("background refresh never landed")
}
