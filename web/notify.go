package web

import (
	"context"
	"sync"
	"time"
)

// logPoll is how often followers re-read logs while nobody calls
// NotifyLogs; once it has been called, followers rely on it and re-read only
// every logPollNotified as a safety net.
const (
	logPoll         = 100 * time.Millisecond
	logPollNotified = time.Second
)

// statusPoll is how often followers re-read their job's status between
// notifications.
const statusPoll = time.Second

// broadcast wakes every waiter at once. Its generation counts
// notifications, so a waiter that read state at generation g and then waits
// "after g" is woken at once by a notification it would otherwise miss.
type broadcast struct {
	mu  sync.Mutex
	ch  chan struct{}
	gen uint64
}

// current returns the generation to pass to after.
func (b *broadcast) current() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.gen
}

// after returns a channel closed by the first notification after
// generation seen (already closed if there was one).
func (b *broadcast) after(seen uint64) <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.gen != seen {
		c := make(chan struct{})
		close(c)
		return c
	}
	if b.ch == nil {
		b.ch = make(chan struct{})
	}
	return b.ch
}

func (b *broadcast) notify() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.gen++
	if b.ch != nil {
		close(b.ch)
		b.ch = nil
	}
}

// NotifyLogs tells live log followers (SSE and ?follow=true) that new lines
// were stored. Whoever appends logs should call it; without it followers
// poll every 250 ms.
func (s *Server) NotifyLogs() {
	s.notifying.Store(true)
	s.logs.notify()
}

// NotifyChange tells the server that run or sync state changed: live
// followers re-read their job and shared run lists are dropped.
func (s *Server) NotifyChange() {
	for _, p := range s.projects {
		p.runList.invalidate()
	}
	s.logs.notify()
}

// waitLogs blocks until a NotifyLogs after generation seen, the poll
// interval, or ctx. It reports whether it was notified, and false for ok
// when ctx is done.
func (s *Server) waitLogs(ctx context.Context, seen uint64) (notified, ok bool) {
	ch := s.logs.after(seen)
	every := logPoll
	if s.notifying.Load() {
		every = logPollNotified
	}
	t := time.NewTimer(every)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false, false
	case <-s.ctx.Done(): // the server is closing: end live streams
		return false, false
	case <-ch:
		return true, true
	case <-t.C:
		return false, true
	}
}

// JobGetter is an optional Store capability: reading one job cheaply, for
// live followers that watch its status.
type JobGetter interface {
	// GetJob returns the job with the given id, or ErrNotFound.
	GetJob(ctx context.Context, id string) (Job, error)
}

// follower tracks one live follower's job.
type follower struct {
	s       *Server
	store   Store
	run     string
	job     Job
	checked time.Time
}

// refresh re-reads the job's status when notified or when statusPoll has
// passed since the last read.
func (f *follower) refresh(ctx context.Context, notified bool) {
	if !notified && time.Since(f.checked) < statusPoll {
		return
	}
	f.checked = time.Now()
	if jg, ok := f.store.(JobGetter); ok {
		if j, err := jg.GetJob(ctx, f.job.ID); err == nil {
			f.job = j
		}
		return
	}
	if r, err := f.store.GetRun(ctx, f.run); err == nil {
		if j, ok := pickJob(r, f.job.ID); ok {
			f.job = j
		}
	}
}
