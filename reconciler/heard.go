package reconciler

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// A running job's runner is unreachable when it has not been heard from
// for the unreachable grace, as dstack counts it: the grace runs from the
// runner's last answer, not from the first failed call, which on a cut
// link may hang for as long as the transport's own timeouts (the log
// follow's long poll, the SSH keepalive). So while a job is followed a
// watchdog asks the runner for its state every heartbeatEvery(grace): a
// healthy job that prints nothing for hours still answers, and a runner
// silent for the grace has its follow cancelled at once.

// errRunnerSilent ends the calls of a follow whose runner has not been
// heard from for the unreachable grace.
var errRunnerSilent = errors.New("the runner was not heard from for the unreachable grace")

// lastHeard records when a job's runner last answered.
type lastHeard struct {
	now func() time.Time
	mu  sync.Mutex
	at  time.Time
}

// newLastHeard starts counting at now: a job just started, or a follow
// resumed, was heard from by whoever handed it over.
func newLastHeard(now func() time.Time) *lastHeard {
	return &lastHeard{now: now, at: now()}
}

// heard records an answer of the runner.
func (h *lastHeard) heard() {
	t := h.now()
	h.mu.Lock()
	if t.After(h.at) {
		h.at = t
	}
	h.mu.Unlock()
}

// silentFor returns how long the runner has not been heard from.
func (h *lastHeard) silentFor() time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.now().Sub(h.at)
}

// heartbeatEvery is how often the watchdog asks a runner for its state
// and looks at its silence: a quarter of the grace, within [250 ms, 10 s],
// so that a few lost answers never make a healthy runner unreachable.
func heartbeatEvery(grace time.Duration) time.Duration {
	return min(max(grace/4, 250*time.Millisecond), 10*time.Second)
}

// watchRunner asks the runner (probe) every heartbeatEvery(grace) while
// ctx lasts, records every answer in h, and calls silent and returns once
// h has heard nothing for longer than grace.
func watchRunner(ctx context.Context, h *lastHeard, grace time.Duration, probe func(context.Context) error, silent func()) {
	watchRunnerEvery(ctx, h, grace, heartbeatEvery(grace), probe, silent)
}

// watchRunnerEvery is watchRunner looking every every. An ask runs on its
// own, for up to agentCallTimeout, one at a time: a slow answer (a loaded
// host) still counts, and a hung one does not delay the verdict, which
// comes at most every after the grace has passed.
func watchRunnerEvery(ctx context.Context, h *lastHeard, grace, every time.Duration, probe func(context.Context) error, silent func()) {
	var (
		asking atomic.Bool
		wg     sync.WaitGroup
	)
	defer wg.Wait()
	t := time.NewTimer(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if h.silentFor() > grace {
			silent()
			return
		}
		if asking.CompareAndSwap(false, true) {
			wg.Go(func() {
				defer asking.Store(false)
				pctx, cancel := context.WithTimeout(ctx, agentCallTimeout)
				defer cancel()
				if probe(pctx) == nil {
					h.heard()
				}
			})
		}
		t.Reset(every)
	}
}
