package reconciler

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// blockingSync is a sync function that signals began when a sync starts
// and, when block is set, holds it until a value is received.
type blockingSync struct {
	mu    sync.Mutex
	syncs int
	force []bool
	block chan struct{}
	began chan struct{}
	err   error
}

func (b *blockingSync) sync(ctx context.Context, force bool) error {
	b.mu.Lock()
	b.syncs++
	b.force = append(b.force, force)
	block, began, err := b.block, b.began, b.err
	b.mu.Unlock()
	if began != nil {
		began <- struct{}{}
	}
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
		}
	}
	return err
}

func (b *blockingSync) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.syncs
}

// startRequests runs r's loop over sync until the test ends, and waits for
// its first sync (the one at start).
func startRequests(t *testing.T, r *syncRequests, changes chan struct{}, b *blockingSync) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.run(ctx, changes, b.sync)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	waitIdle(t, r, b, 1)
}

// waitIdle waits until the loop ran want syncs and no request is pending.
func waitIdle(t *testing.T, r *syncRequests, b *blockingSync, want int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		req, handled, running, _ := r.state()
		if req == handled && !running && b.count() >= want {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	if got := b.count(); got != want {
		t.Fatalf("syncs = %d, want %d", got, want)
	}
}

func TestSyncRequests_burstDuringASyncCoalescesAndNoRequestIsLost(t *testing.T) {
	r := newSyncRequests()
	b := &blockingSync{}
	startRequests(t, r, make(chan struct{}), b)
	b.mu.Lock()
	b.block, b.began = make(chan struct{}), make(chan struct{}, 16)
	b.mu.Unlock()

	start := time.Now()
	r.request(true)
	<-b.began // the first requested sync is now running (and blocked)
	for i := 2; i <= 20; i++ {
		if n := r.request(true); n != uint64(i) {
			t.Fatalf("request %d numbered %d", i, n)
		}
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("20 requests took %v while a sync was blocked: requests wait for the sync", d)
	}
	b.block <- struct{}{} // finish sync 1; the 19 requests during it coalesce into one
	<-b.began
	b.block <- struct{}{}
	waitIdle(t, r, b, 3) // the sync at start, then two
	req, handled, _, _ := r.state()
	if req != 20 || handled != 20 {
		t.Errorf("requested %d handled %d, want 20/20", req, handled)
	}
}

func TestSyncRequests_waitReturnsAfterASyncThatBeganAfterTheRequest(t *testing.T) {
	r := newSyncRequests()
	b := &blockingSync{}
	startRequests(t, r, make(chan struct{}), b)
	b.mu.Lock()
	b.err = errors.New("fetch failed")
	b.mu.Unlock()

	n := r.request(true)
	if err := r.wait(t.Context(), n); err == nil || err.Error() != "fetch failed" {
		t.Errorf("wait = %v, want the sync's error", err)
	}
	if got := b.count(); got != 2 {
		t.Errorf("syncs = %d, want 2", got)
	}
	// A request already handled does not wait.
	if err := r.wait(t.Context(), n); err == nil {
		t.Error("wait for a handled request lost the sync's error")
	}
	// A context that ends stops the wait.
	b.mu.Lock()
	b.block, b.began = make(chan struct{}), make(chan struct{}, 1)
	b.mu.Unlock()
	n = r.request(true)
	<-b.began
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	if err := r.wait(ctx, n); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("wait = %v, want the context's error", err)
	}
	b.block <- struct{}{}
}

func TestSyncRequests_forceOnlyWhenARequestAsksForIt(t *testing.T) {
	r := newSyncRequests()
	b := &blockingSync{}
	changes := make(chan struct{}, 1)
	startRequests(t, r, changes, b)

	changes <- struct{}{} // the source's nudge: look for a new revision
	waitIdle(t, r, b, 2)
	r.request(false) // the periodic resync
	waitIdle(t, r, b, 3)
	r.request(true) // "sync now": re-plan even an unchanged revision
	waitIdle(t, r, b, 4)
	b.mu.Lock()
	defer b.mu.Unlock()
	want := []bool{true, false, false, true}
	for i := range want {
		if b.force[i] != want[i] {
			t.Fatalf("force per sync = %v, want %v", b.force, want)
		}
	}
}
