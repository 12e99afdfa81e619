package web

import (
	"context"
	"log/slog"
	"sync"
)

// trigger coalesces sync requests. Every request increments a monotonically
// increasing requested counter; one worker calls sync whenever requested is
// ahead of handled, and afterwards marks as handled only the value it read
// before starting. A request that arrives while a sync runs therefore causes
// exactly one more sync (never lost, Argo CD #28306), and a burst of requests
// while idle collapses into a single sync of the newest revision.
type trigger struct {
	sync func(context.Context) error
	log  *slog.Logger

	mu        sync.Mutex
	requested uint64
	handled   uint64
	running   bool
	syncs     uint64
	wake      chan struct{}
	changed   *sync.Cond

	onSync    func(error)
	onRequest func()
}

func newTrigger(fn func(context.Context) error, log *slog.Logger) *trigger {
	t := &trigger{sync: fn, log: log, wake: make(chan struct{}, 1)}
	t.changed = sync.NewCond(&t.mu)
	return t
}

// request asks for a sync and returns the request's number.
func (t *trigger) request() uint64 {
	if t.onRequest != nil {
		t.onRequest()
	}
	t.mu.Lock()
	t.requested++
	n := t.requested
	t.mu.Unlock()
	select {
	case t.wake <- struct{}{}:
	default:
	}
	return n
}

// state reports the counters: requested, handled, whether a sync is
// running, and how many syncs ran.
func (t *trigger) state() (requested, handled uint64, running bool, syncs uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.requested, t.handled, t.running, t.syncs
}

// waitHandled blocks until request n is handled or ctx is done.
func (t *trigger) waitHandled(ctx context.Context, n uint64) error {
	stop := context.AfterFunc(ctx, func() {
		t.mu.Lock()
		t.changed.Broadcast()
		t.mu.Unlock()
	})
	defer stop()
	t.mu.Lock()
	defer t.mu.Unlock()
	for t.handled < n {
		if err := ctx.Err(); err != nil {
			return err
		}
		t.changed.Wait()
	}
	return nil
}

func (t *trigger) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.wake:
		}
		for {
			t.mu.Lock()
			target := t.requested
			if target == t.handled {
				t.mu.Unlock()
				break
			}
			t.running = true
			t.mu.Unlock()

			err := t.sync(ctx)
			if err != nil && ctx.Err() == nil {
				t.log.Warn("sync_failed", "requested", target, "error", err)
			}

			if t.onSync != nil {
				t.onSync(err)
			}
			t.mu.Lock()
			t.running = false
			t.syncs++
			t.handled = target
			t.changed.Broadcast()
			t.mu.Unlock()
			if ctx.Err() != nil {
				return
			}
		}
	}
}
