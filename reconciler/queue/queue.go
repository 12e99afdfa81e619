// Package queue is the reconciler's keyed work queue: level-based, one item
// per key, one in-flight worker per key, delayed re-adds and per-key
// exponential back-off.
//
// A key added while it is being processed is marked dirty and handed out
// again once the worker is done, so no nudge is ever lost and no key is ever
// processed twice at once. Only the reconciler imports it.
package queue

import (
	"container/heap"
	"context"
	"sync"
	"time"
)

// Queue hands out keys to workers. The zero value is not usable; call New.
type Queue[K comparable] struct {
	mu         sync.Mutex
	cond       *sync.Cond
	ready      []K
	queued     map[K]bool // in ready
	processing map[K]bool
	dirty      map[K]bool // re-added while processing
	delayed    delayHeap[K]
	failures   map[K]int
	closed     bool
	now        func() time.Time
	timer      *time.Timer
	base, max  time.Duration
}

// New returns an empty queue whose back-off starts at base and is capped at
// max. now is the clock (time.Now in production).
func New[K comparable](base, max time.Duration, now func() time.Time) *Queue[K] {
	q := &Queue[K]{
		queued:     map[K]bool{},
		processing: map[K]bool{},
		dirty:      map[K]bool{},
		failures:   map[K]int{},
		now:        now,
		base:       base,
		max:        max,
	}
	q.cond = sync.NewCond(&q.mu)
	return q
}

// Add makes key ready now.
func (q *Queue[K]) Add(key K) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.addLocked(key)
}

func (q *Queue[K]) addLocked(key K) {
	if q.closed {
		return
	}
	if q.processing[key] {
		q.dirty[key] = true
		return
	}
	if q.queued[key] {
		return
	}
	q.queued[key] = true
	q.ready = append(q.ready, key)
	q.cond.Signal()
}

// AddAfter makes key ready after d. An earlier pending AddAfter of the same
// key still fires; Add semantics de-duplicate.
func (q *Queue[K]) AddAfter(key K, d time.Duration) {
	if d <= 0 {
		q.Add(key)
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return
	}
	heap.Push(&q.delayed, delayed[K]{key: key, at: q.now().Add(d)})
	q.armLocked()
}

// AddRateLimited re-adds key after its next back-off interval (base doubled
// per consecutive failure, capped at max) and returns that interval.
func (q *Queue[K]) AddRateLimited(key K) time.Duration {
	q.mu.Lock()
	n := q.failures[key]
	q.failures[key] = n + 1
	q.mu.Unlock()
	d := q.base
	for i := 0; i < n && d < q.max; i++ {
		d *= 2
	}
	if d > q.max {
		d = q.max
	}
	q.AddAfter(key, d)
	return d
}

// Forget clears key's back-off after a success.
func (q *Queue[K]) Forget(key K) {
	q.mu.Lock()
	delete(q.failures, key)
	q.mu.Unlock()
}

// armLocked promotes due delayed keys and schedules a wake-up for the next.
func (q *Queue[K]) armLocked() {
	now := q.now()
	for q.delayed.Len() > 0 && !q.delayed[0].at.After(now) {
		d := heap.Pop(&q.delayed).(delayed[K])
		q.addLocked(d.key)
	}
	if q.timer != nil {
		q.timer.Stop()
		q.timer = nil
	}
	if q.delayed.Len() > 0 {
		wait := q.delayed[0].at.Sub(now)
		q.timer = time.AfterFunc(wait, func() {
			q.mu.Lock()
			defer q.mu.Unlock()
			q.armLocked()
		})
	}
}

// Get blocks until a key is ready or ctx is done; ok is false then. The
// caller must call Done(key) when finished with it.
func (q *Queue[K]) Get(ctx context.Context) (key K, ok bool) {
	stop := context.AfterFunc(ctx, func() {
		q.mu.Lock()
		q.cond.Broadcast()
		q.mu.Unlock()
	})
	defer stop()
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.ready) == 0 && !q.closed && ctx.Err() == nil {
		q.cond.Wait()
	}
	if len(q.ready) == 0 {
		var zero K
		return zero, false
	}
	key = q.ready[0]
	q.ready = q.ready[1:]
	delete(q.queued, key)
	q.processing[key] = true
	return key, true
}

// Done marks key processed; a key re-added meanwhile becomes ready again.
func (q *Queue[K]) Done(key K) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.processing, key)
	if q.dirty[key] {
		delete(q.dirty, key)
		q.addLocked(key)
	}
}

// Depth returns the number of keys ready for a worker now and the number
// waiting for a delay (scheduled re-checks and retries).
func (q *Queue[K]) Depth() (ready, delayed int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.ready), q.delayed.Len()
}

// Len returns the number of keys ready or waiting for a delay.
func (q *Queue[K]) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.ready) + q.delayed.Len()
}

// BackingOff returns how many keys failed since their last success
// (AddRateLimited without a Forget since): those waiting out a back-off or
// being retried.
func (q *Queue[K]) BackingOff() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.failures)
}

// Close wakes every Get and refuses further adds.
func (q *Queue[K]) Close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	if q.timer != nil {
		q.timer.Stop()
	}
	q.cond.Broadcast()
}

type delayed[K comparable] struct {
	key K
	at  time.Time
}

type delayHeap[K comparable] []delayed[K]

func (h delayHeap[K]) Len() int           { return len(h) }
func (h delayHeap[K]) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h delayHeap[K]) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *delayHeap[K]) Push(x any)        { *h = append(*h, x.(delayed[K])) }
func (h *delayHeap[K]) Pop() any {
	old := *h
	n := len(old)
	x := old[n-1]
	*h = old[:n-1]
	return x
}
