package web

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// rateLimits keeps the token buckets of services' `rate_limits`: one per
// run, rule and key, as dstack's gateway keys nginx's limit_req zones by
// $binary_remote_addr, or by $http_<header> for `key: {type: header}`
// (dstack src/dstack/_internal/proxy/gateway/services/registry.py and
// resources/nginx/service.jinja2). Buckets that have refilled are dropped.
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

// limitKey is what rule l counts a request by: the client's address, or
// the value of the rule's header. A request without that header is not
// limited (ok false), as nginx does not count requests whose key is empty.
// As nginx's $http_<name>, the name matches regardless of case and of "-"
// or "_" in the spec; a request header with "_" in its name is ignored
// (nginx's underscores_in_headers off).
func limitKey(l ServiceRateLimit, r *http.Request, ip string) (key string, ok bool) {
	if l.Header == "" {
		return ip, true
	}
	v := r.Header.Get(strings.ReplaceAll(l.Header, "_", "-"))
	return v, v != ""
}

// allow takes a token from the bucket of run's rule i for key (a client
// address or a header's value) and reports whether there was one; when
// not, also how long until there is.
func (rl *rateLimits) allow(run string, i int, l ServiceRateLimit, key string) (bool, time.Duration) {
	if l.RPS <= 0 {
		return true, 0
	}
	full := float64(max(l.Burst, 0) + 1) // burst requests above the one the rate allows
	key = run + "\x00" + strconv.Itoa(i) + "\x00" + key
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
