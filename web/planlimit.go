package web

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/labstack/echo/v5"
)

// Plans validate a whole tree of specs, which costs CPU up to the
// reconciler's load deadline, so POST /api/v1/plan is rate-limited per
// caller with a token bucket.
const (
	// planBurst is how many plans a caller may start at once.
	planBurst = 5
	// planRefill is how often a caller gets another plan.
	planRefill = 12 * time.Second
	// planBodyMax caps the body of POST /api/v1/plan.
	planBodyMax = 8 << 20
	// planBucketsMax bounds the callers remembered; full buckets are
	// forgotten first.
	planBucketsMax = 10_000
)

// planLimiter holds one token bucket per caller (token or session name).
type planLimiter struct {
	mu      sync.Mutex
	now     func() time.Time
	buckets map[string]*planBucket
}

type planBucket struct {
	tokens float64
	at     time.Time
}

func newPlanLimiter(now func() time.Time) *planLimiter {
	return &planLimiter{now: now, buckets: map[string]*planBucket{}}
}

// take spends one of key's tokens; when none is left it returns how long
// until the next one.
func (l *planLimiter) take(key string) (ok bool, retryAfter time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	b, found := l.buckets[key]
	if !found {
		if len(l.buckets) >= planBucketsMax {
			l.forgetFull(now)
		}
		b = &planBucket{tokens: planBurst, at: now}
		l.buckets[key] = b
	}
	b.tokens = min(planBurst, b.tokens+float64(now.Sub(b.at))/float64(planRefill))
	b.at = now
	if b.tokens < 1 {
		return false, time.Duration((1 - b.tokens) * float64(planRefill))
	}
	b.tokens--
	return true, 0
}

// forgetFull drops the buckets that have refilled (they hold no state
// worth keeping), or all of them when none has.
func (l *planLimiter) forgetFull(now time.Time) {
	for k, b := range l.buckets {
		if b.tokens+float64(now.Sub(b.at))/float64(planRefill) >= planBurst {
			delete(l.buckets, k)
		}
	}
	if len(l.buckets) >= planBucketsMax {
		clear(l.buckets)
	}
}

// limitPlans answers 429 with Retry-After once the caller's bucket is
// empty.
func (s *Server) limitPlans(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c *echo.Context) error {
		ok, wait := s.plans.take(principal(c).Name)
		if !ok {
			secs := int((wait + time.Second - 1) / time.Second)
			c.Response().Header().Set("Retry-After", strconv.Itoa(secs))
			return echo.NewHTTPError(http.StatusTooManyRequests,
				"plan rate limit: "+strconv.Itoa(planBurst)+" plans at once, then one every "+planRefill.String()+"; retry in "+strconv.Itoa(secs)+"s")
		}
		return next(c)
	}
}
