package web

import (
	"context"
	"sync"
	"time"
)

// logPoll is how often followers re-read logs when nobody calls NotifyLogs.
const logPoll = 250 * time.Millisecond

// broadcast wakes every waiter at once: waiters take the current channel,
// and notify closes it and installs a fresh one.
type broadcast struct {
	mu sync.Mutex
	ch chan struct{}
}

func (b *broadcast) wait() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ch == nil {
		b.ch = make(chan struct{})
	}
	return b.ch
}

func (b *broadcast) notify() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ch != nil {
		close(b.ch)
		b.ch = nil
	}
}

// NotifyLogs tells live log followers (SSE and ?follow=true) that new lines
// were stored. Whoever appends logs should call it; without it followers
// poll every 250 ms.
func (s *Server) NotifyLogs() { s.logs.notify() }

// NotifyChange tells live pages that run or sync state changed.
func (s *Server) NotifyChange() { s.logs.notify() }

// waitLogs blocks until NotifyLogs, the poll interval, or ctx; it reports
// false when ctx is done.
func (s *Server) waitLogs(ctx context.Context) bool {
	ch := s.logs.wait()
	t := time.NewTimer(logPoll)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-ch:
	case <-t.C:
	}
	return true
}
