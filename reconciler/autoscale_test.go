package reconciler

import (
	"sync"
	"testing"
	"time"

	"hoist/schema"
	"hoist/store"
)

// fakeTraffic is a Traffic whose readings the test sets.
type fakeTraffic struct {
	mu   sync.Mutex
	rps  float64
	last time.Time
	// window is the last window asked for.
	window time.Duration
}

func (t *fakeTraffic) RPS(_, _ string, window time.Duration) float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.window = window
	return t.rps
}

func (t *fakeTraffic) LastRequest(_, _ string) time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.last
}

func (t *fakeTraffic) set(rps float64, last time.Time) {
	t.mu.Lock()
	t.rps, t.last = rps, last
	t.mu.Unlock()
}

func scalingSpec(lo, hi float64) runSpec {
	return runSpec{Type: string(schema.KindService), Replicas: &schema.Range{Min: &lo, Max: &hi},
		Scaling: &schema.Scaling{Metric: "rps", Target: 10, Window: 30, ScaleUpDelay: 60, ScaleDownDelay: 300}}
}

// TestDesiredReplicas_followsRPSWithinTheRangeAfterTheDelays: dstack's
// RPSAutoscaler: ceil(rps/target) within [min, max], a rise only once
// scale_up_delay passed since the last change (at once from zero), a fall
// once scale_down_delay has; the last replica of a `min: 0` service goes
// only after scale_down_delay without a request.
func TestDesiredReplicas_followsRPSWithinTheRangeAfterTheDelays(t *testing.T) {
	type step struct {
		advance time.Duration // clock moves first
		rps     float64
		lastAgo time.Duration // the last request was this long ago (-1: never)
		alive   int
		want    int
	}
	for _, tc := range []struct {
		name   string
		lo, hi float64
		steps  []step
	}{
		{name: "rises to ceil(rps/target) after scale_up_delay and is capped at max", lo: 1, hi: 3, steps: []step{
			{rps: 0, alive: 1, want: 1},
			{advance: 10 * time.Second, rps: 15, want: 1},  // 10 s since the start, up delay is 60 s
			{advance: 55 * time.Second, rps: 15, want: 2},  // 65 s
			{advance: 65 * time.Second, rps: 100, want: 3}, // capped at max
		}},
		{name: "falls only after scale_down_delay since the last change, never below min", lo: 1, hi: 3, steps: []step{
			{rps: 25, alive: 3, want: 3},
			{advance: 100 * time.Second, rps: 0, want: 3},
			{advance: 201 * time.Second, rps: 0, want: 1},
		}},
		{name: "rises from zero at once", lo: 0, hi: 2, steps: []step{
			{rps: 0, lastAgo: -1, alive: 0, want: 0},
			{advance: time.Second, rps: 0.5, lastAgo: 0, want: 1},
		}},
		{name: "keeps the last replica while requests came within scale_down_delay", lo: 0, hi: 2, steps: []step{
			{rps: 1, lastAgo: 0, alive: 1, want: 1},
			{advance: 400 * time.Second, rps: 0, lastAgo: 200 * time.Second, want: 1},
			{advance: 101 * time.Second, rps: 0, lastAgo: 301 * time.Second, want: 0},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, nil)
			tr := &fakeTraffic{}
			f.c.traffic = tr
			run := &store.Run{ID: "r1", Project: store.DefaultProject, Name: "web"}
			spec := scalingSpec(tc.lo, tc.hi)
			for i, s := range tc.steps {
				f.clock.Advance(s.advance)
				var last time.Time
				if s.lastAgo >= 0 {
					last = f.clock.Now().Add(-s.lastAgo)
				}
				tr.set(s.rps, last)
				got, after := f.c.desiredReplicas(run, spec, s.alive)
				if got != s.want || after != scaleInterval {
					t.Fatalf("step %d (rps %.1f): %d replicas, look again in %s; want %d in %s", i, s.rps, got, after, s.want, scaleInterval)
				}
			}
			if tr.window != 30*time.Second {
				t.Errorf("rps asked over %s, want the spec's window of 30s", tr.window)
			}
		})
	}
}

// TestDesiredReplicas_withoutScalingOrTrafficKeepsMin: a fixed count, or
// no meter (nil Traffic), keeps replicas.min and never asks to look again.
func TestDesiredReplicas_withoutScalingOrTrafficKeepsMin(t *testing.T) {
	f := newFixture(t, nil)
	run := &store.Run{ID: "r1", Project: store.DefaultProject, Name: "web"}
	two := 2.0
	if got, after := f.c.desiredReplicas(run, runSpec{Type: "service", Replicas: &schema.Range{Min: &two, Max: &two}}, 5); got != 2 || after != 0 {
		t.Errorf("fixed 2: %d, %s; want 2, 0", got, after)
	}
	if got, _ := f.c.desiredReplicas(run, scalingSpec(1, 3), 1); got != 1 {
		t.Errorf("no traffic meter: %d, want min 1", got)
	}
}

// TestDesiredReplicas_newRunOfTheServiceStartsFromTheOlderRunsCount: a
// rolling deployment's new run starts at the count its older run scaled
// to, not at min.
func TestDesiredReplicas_newRunOfTheServiceStartsFromTheOlderRunsCount(t *testing.T) {
	f := newFixture(t, nil)
	tr := &fakeTraffic{}
	f.c.traffic = tr
	spec := scalingSpec(1, 3)
	tr.set(25, f.clock.Now())
	if got, _ := f.c.desiredReplicas(&store.Run{ID: "old", Project: store.DefaultProject, Name: "web"}, spec, 3); got != 3 {
		t.Fatalf("old run: %d, want 3", got)
	}
	tr.set(0, f.clock.Now())
	if got, _ := f.c.desiredReplicas(&store.Run{ID: "new", Project: store.DefaultProject, Name: "web"}, spec, 1); got != 3 {
		t.Errorf("new run: %d, want the old run's 3", got)
	}
	if got, _ := f.c.desiredReplicas(&store.Run{ID: "other", Project: store.DefaultProject, Name: "api"}, spec, 1); got != 1 {
		t.Errorf("another service: %d, want its own 1", got)
	}
}
