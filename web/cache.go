package web

import (
	"context"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
)

// runListCache shares run lists between concurrent viewers: identical
// queries within TTL are answered from one store read (and concurrent
// misses collapse into one read); an entry up to staleFor×TTL old is
// answered at once while one background read refreshes it, so no viewer
// waits on a periodic miss. NotifyChange clears it. A dashboard that
// many people keep open then costs the store one query per TTL.
type runListCache struct {
	ttl   time.Duration
	mu    sync.Mutex
	m     map[RunFilter]runListEntry
	group singleflight.Group
	gen   uint64
}

// staleFor bounds, in TTLs, how old an entry may be served while it is
// being refreshed.
const staleFor = 5

type runListEntry struct {
	runs []Run
	at   time.Time
}

func newRunListCache(ttl time.Duration) *runListCache {
	return &runListCache{ttl: ttl, m: map[RunFilter]runListEntry{}}
}

// list returns the runs for f, from the cache when fresh. Callers must not
// modify the returned slice.
func (c *runListCache) list(ctx context.Context, st Store, f RunFilter) ([]Run, error) {
	if c.ttl <= 0 {
		return st.ListRuns(ctx, f)
	}
	c.mu.Lock()
	e, ok := c.m[f]
	gen := c.gen
	c.mu.Unlock()
	if ok && time.Since(e.at) < c.ttl {
		return e.runs, nil
	}
	refresh := func() (any, error) {
		runs, err := st.ListRuns(context.WithoutCancel(ctx), f)
		if err != nil {
			return nil, err
		}
		c.mu.Lock()
		if c.gen == gen {
			if len(c.m) > 1000 {
				clear(c.m)
			}
			c.m[f] = runListEntry{runs: runs, at: time.Now()}
		}
		c.mu.Unlock()
		return runs, nil
	}
	key := fmt.Sprintf("%d|%+v", gen, f)
	if ok && time.Since(e.at) < staleFor*c.ttl {
		// Stale but recent: answer now, refresh once in the background.
		c.group.DoChan(key, refresh)
		return e.runs, nil
	}
	v, err, _ := c.group.Do(key, refresh)
	if err != nil {
		return nil, err
	}
	return v.([]Run), nil
}

// invalidate drops every cached list.
func (c *runListCache) invalidate() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	clear(c.m)
}
