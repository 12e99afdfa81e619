package reconciler

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// TestWatchRunner counts the unreachable grace from the runner's last
// answer: every ask moves the injected clock on by a second, and the
// watchdog gives up only once the silence since the last answer exceeds
// the grace, within one ask of it.
func TestWatchRunner(t *testing.T) {
	const grace = 6 * time.Second
	for _, tc := range []struct {
		name string
		// answers says whether ask n (from 0) is answered.
		answers    func(n int) bool
		wantSilent bool
	}{
		{name: "a quiet runner that answers is never unreachable", answers: func(int) bool { return true }},
		{name: "a runner that answers one ask in three is never unreachable", answers: func(n int) bool { return n%3 == 0 }},
		{name: "a runner silent from the start is unreachable after the grace", answers: func(int) bool { return false }, wantSilent: true},
		{name: "a runner cut after answering is unreachable a grace after its last answer", answers: func(n int) bool { return n < 10 }, wantSilent: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := newFakeClock()
			start := clock.Now()
			h := newLastHeard(clock.Now)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			var (
				mu         sync.Mutex
				asks       int
				lastAnswer = start
			)
			probe := func(context.Context) error {
				mu.Lock()
				defer mu.Unlock()
				n := asks
				asks++
				clock.Advance(time.Second)
				if n+1 >= 40 {
					cancel() // seen enough
				}
				if tc.answers(n) {
					lastAnswer = clock.Now()
					return nil
				}
				return errors.New("no answer")
			}
			silent, quiet := false, time.Duration(0)
			// The test's clock counts the grace; its asks come every
			// millisecond of real time.
			watchRunnerEvery(ctx, h, grace, time.Millisecond, probe, func() { silent, quiet = true, h.silentFor() })
			mu.Lock()
			defer mu.Unlock()
			if silent != tc.wantSilent {
				t.Fatalf("silent %v after %d asks, want %v", silent, asks, tc.wantSilent)
			}
			// An ask in flight as the watchdog looks may move the clock
			// on once more.
			if silent && (quiet <= grace || quiet > grace+2*time.Second) {
				t.Errorf("gave up %s after the last answer (at %s), want within an ask or two past the %s grace", quiet, lastAnswer.Sub(start), grace)
			}
		})
	}
}

// TestHeartbeatEvery: a quarter of the grace, within [250 ms, 10 s].
func TestHeartbeatEvery(t *testing.T) {
	for grace, want := range map[time.Duration]time.Duration{
		time.Second:     250 * time.Millisecond,
		6 * time.Second: 1500 * time.Millisecond,
		2 * time.Minute: 10 * time.Second,
	} {
		if got := heartbeatEvery(grace); got != want {
			t.Errorf("heartbeatEvery(%s) = %s, want %s", grace, got, want)
		}
	}
}
