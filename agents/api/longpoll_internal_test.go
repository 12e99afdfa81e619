package api

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestFollow_givesUpOnARunnerThatNeverAnswers: a runner that accepts the
// connection but holds the long poll past the wait it was asked for (plus
// the grace) ends Follow with a deadline error instead of blocking its
// caller forever, so that the server can count the runner as silent.
func TestFollow_givesUpOnARunnerThatNeverAnswers(t *testing.T) {
	oldWait, oldGrace := defaultLongPoll, longPollGrace
	defaultLongPoll, longPollGrace = 100*time.Millisecond, 50*time.Millisecond
	t.Cleanup(func() { defaultLongPoll, longPollGrace = oldWait, oldGrace })
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(release); srv.Close() })
	// No client-wide timeout, like the clients the server dials agents with.
	c := NewRunnerClient(srv.Listener.Addr().String(), &http.Client{})
	done := make(chan error, 1)
	go func() { done <- c.Follow(context.Background(), 0, func(LogLine) error { return nil }) }()
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Follow = %v, want a deadline error", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Follow still waits on a runner that never answers")
	}
}
