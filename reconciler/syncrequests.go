package reconciler

import (
	"context"
	"sync"
)

// syncRequests coalesces requests for a sync of the revision pipeline
// ("sync now", webhooks, confirmations, resumes, the periodic resync).
// Every request increments a monotonically increasing requested counter;
// the sync loop syncs whenever requested is ahead of handled and afterwards
// marks as handled only the value it read before starting. A request that
// arrives while a sync runs therefore causes exactly one more sync (never
// lost, Argo CD #28306), and a burst of requests while idle collapses into a
// single sync of the newest revision.
type syncRequests struct {
	mu        sync.Mutex
	requested uint64
	handled   uint64
	force     bool // a pending request wants a sync even if nothing changed
	running   bool
	syncs     uint64
	lastErr   error // of the last sync
	wake      chan struct{}
	changed   *sync.Cond
}

func newSyncRequests() *syncRequests {
	r := &syncRequests{wake: make(chan struct{}, 1)}
	r.changed = sync.NewCond(&r.mu)
	return r
}

// request asks for a sync and returns the request's number. force asks
// for a sync even if the latest revision was already handled (re-plan);
// without it the sync only looks for a new revision.
func (r *syncRequests) request(force bool) uint64 {
	r.mu.Lock()
	r.requested++
	r.force = r.force || force
	n := r.requested
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
	return n
}

// state reports the counters: requested, handled, whether a sync is
// running, and how many syncs ran.
func (r *syncRequests) state() (requested, handled uint64, running bool, syncs uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requested, r.handled, r.running, r.syncs
}

// wait blocks until request n is handled or ctx is done, and returns the
// error of the sync that handled it (or of a later one), or ctx's error.
func (r *syncRequests) wait(ctx context.Context, n uint64) error {
	stop := context.AfterFunc(ctx, func() {
		r.mu.Lock()
		r.changed.Broadcast()
		r.mu.Unlock()
	})
	defer stop()
	r.mu.Lock()
	defer r.mu.Unlock()
	for r.handled < n {
		if err := ctx.Err(); err != nil {
			return err
		}
		r.changed.Wait()
	}
	return r.lastErr
}

// run calls sync once at start, then whenever a request is pending or
// changes (the source's nudges) delivers, until ctx is done. Nudges and
// requests that arrive while a sync runs coalesce into one more sync.
func (r *syncRequests) run(ctx context.Context, changes <-chan struct{}, sync func(ctx context.Context, force bool) error) {
	r.once(ctx, true, sync)
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
			return
		case <-changes:
		case <-r.wake:
			r.mu.Lock()
			idle := r.requested == r.handled
			r.mu.Unlock()
			if idle { // woken for requests an earlier sync already took
				continue
			}
		}
		select { // a nudge pending now is covered by this sync
		case <-changes:
		default:
		}
		r.once(ctx, false, sync)
	}
}

// once runs one sync that handles every request made before it began.
func (r *syncRequests) once(ctx context.Context, force bool, sync func(ctx context.Context, force bool) error) {
	r.mu.Lock()
	target := r.requested
	force = force || r.force
	r.force = false
	r.running = true
	r.mu.Unlock()

	err := sync(ctx, force)

	r.mu.Lock()
	r.running = false
	r.syncs++
	r.handled = target
	r.lastErr = err
	r.changed.Broadcast()
	r.mu.Unlock()
}
