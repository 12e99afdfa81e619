package web

import (
	"sync"
	"time"
)

// meterSeconds is the longest window a Meter answers for: it keeps one
// counter per second for this many seconds.
const meterSeconds = 600

// A Meter counts the requests the service proxy receives for each service
// run (forwarded, held or refused by a rate limit), one counter per second
// over the last ten minutes. It implements TrafficMeter; cmd/hoist gives the
// same Meter to the web server (Deps.Meter) and to the reconciler's
// autoscaling. It is safe for concurrent use.
type Meter struct {
	now func() time.Time
	mu  sync.Mutex
	m   map[string]*runMeter
}

// runMeter is one run's ring of per-second counts.
type runMeter struct {
	counts [meterSeconds]int64
	secs   [meterSeconds]int64 // the unix second each slot counts
	last   time.Time
}

var _ TrafficMeter = (*Meter)(nil)

// NewMeter returns an empty Meter reading the clock now (nil means
// time.Now).
func NewMeter(now func() time.Time) *Meter {
	if now == nil {
		now = time.Now
	}
	return &Meter{now: now, m: map[string]*runMeter{}}
}

func meterKey(project, run string) string { return project + "/" + run }

// record counts one request to the run now.
func (m *Meter) record(project, run string) {
	now := m.now()
	sec := now.Unix()
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.m[meterKey(project, run)]
	if r == nil {
		r = &runMeter{}
		m.m[meterKey(project, run)] = r
	}
	i := sec % meterSeconds
	if r.secs[i] != sec {
		r.secs[i], r.counts[i] = sec, 0
	}
	r.counts[i]++
	r.last = now
}

// RPS returns the requests per second the run received over the last
// window (at most ten minutes, at least one second), the current second
// included.
func (m *Meter) RPS(project, run string, window time.Duration) float64 {
	n := int64(window / time.Second)
	n = max(1, min(n, meterSeconds))
	now := m.now().Unix()
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.m[meterKey(project, run)]
	if r == nil {
		return 0
	}
	var sum int64
	for i := range r.secs {
		if s := r.secs[i]; s > now-n && s <= now {
			sum += r.counts[i]
		}
	}
	return float64(sum) / float64(n)
}

// LastRequest returns when the run last received a request; zero when
// never.
func (m *Meter) LastRequest(project, run string) time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r := m.m[meterKey(project, run)]; r != nil {
		return r.last
	}
	return time.Time{}
}
