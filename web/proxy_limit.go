package web

import (
	"math"
	"strconv"
	"strings"
	"sync"
	"time"
)

// rateLimits keeps the token buckets of services' `rate_limits`: one per
// run, rule and client address, as dstack's gateway keys nginx's limit_req
// zones by $binary_remote_addr (dstack
// src/dstack/_internal/proxy/gateway/services/registry.py). Buckets that
// have refilled are dropped.
type rateLimits struct {
	now func() time.Time
	mu  sync.Mutex
	m   map[string]*bucket
	n   int // takes since the last sweep
}

// bucket is a token bucket: tokens refill at the rule's rps up to its burst.
type bucket struct {
	tokens float64
	at     time.Time
	full   float64
	rps    float64
}

func newRateLimits(now func() time.Time) *rateLimits {
	return &rateLimits{now: now, m: map[string]*bucket{}}
}

// matchLimit returns the rule of limits whose prefix is the longest that
// path starts with, as nginx picks the longest matching location.
func matchLimit(limits []ServiceRateLimit, path string) (int, bool) {
	best, n := -1, -1
	for i, l := range limits {
		p := l.Prefix
		if p == "" {
			p = "/"
		}
		if strings.HasPrefix(path, p) && len(p) > n {
			best, n = i, len(p)
		}
	}
	return best, best >= 0
}

// allow takes a token from the bucket of run's rule i for the client ip and
// reports whether there was one; when not, also how long until there is.
func (rl *rateLimits) allow(run string, i int, l ServiceRateLimit, ip string) (bool, time.Duration) {
	if l.RPS <= 0 {
		return true, 0
	}
	full := float64(max(l.Burst, 0) + 1) // burst requests above the one the rate allows
	key := run + "\x00" + strconv.Itoa(i) + "\x00" + ip
	now := rl.now()
	rl.mu.Lock()
	defer rl.mu.Unlock()
	if rl.n++; rl.n >= 4096 {
		rl.sweep(now)
	}
	b := rl.m[key]
	if b == nil {
		b = &bucket{tokens: full, at: now, full: full, rps: l.RPS}
		rl.m[key] = b
	}
	b.full, b.rps = full, l.RPS
	b.tokens = math.Min(b.full, b.tokens+now.Sub(b.at).Seconds()*b.rps)
	b.at = now
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	wait := time.Duration((1 - b.tokens) / b.rps * float64(time.Second))
	return false, wait
}

// sweep drops buckets that have refilled: they behave as new ones.
func (rl *rateLimits) sweep(now time.Time) {
	rl.n = 0
	for k, b := range rl.m {
		if b.tokens+now.Sub(b.at).Seconds()*b.rps >= b.full {
			delete(rl.m, k)
		}
	}
}
