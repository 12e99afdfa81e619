package store

import (
	"context"
	"sync"
	"time"

	"github.com/uptrace/bun"
)

// renewers batches the heartbeats of a store's kept leases (KeepAlive):
// one group per lease length, each renewing all its leases every third of
// that length, one UPDATE per table and chunk, where a heartbeat per lease
// cost one write each.
type renewers struct {
	mu     sync.Mutex
	groups map[time.Duration]*renewGroup
}

// renewChunk bounds the leases renewed by one statement (two parameters
// each, well below SQLite's and PostgreSQL's limits).
const renewChunk = 500

func (r *renewers) group(s *Store, leaseFor time.Duration) *renewGroup {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.groups == nil {
		r.groups = map[time.Duration]*renewGroup{}
	}
	g := r.groups[leaseFor]
	if g == nil {
		g = &renewGroup{s: s, leaseFor: leaseFor, keepers: map[*LeaseKeeper]struct{}{}}
		r.groups[leaseFor] = g
	}
	return g
}

// renewGroup is the kept leases of one length. Its goroutine runs while it
// holds any; mu is held across a renewal, so a keeper removed is never
// renewed or lost afterwards.
type renewGroup struct {
	s        *Store
	leaseFor time.Duration

	mu      sync.Mutex
	keepers map[*LeaseKeeper]struct{}
	running bool
}

func (g *renewGroup) add(k *LeaseKeeper) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.keepers[k] = struct{}{}
	if !g.running {
		g.running = true
		go g.loop()
	}
}

func (g *renewGroup) remove(k *LeaseKeeper) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.keepers, k)
}

func (g *renewGroup) loop() {
	t := time.NewTicker(max(g.leaseFor/3, time.Millisecond))
	defer t.Stop()
	for range t.C {
		g.mu.Lock()
		if len(g.keepers) == 0 {
			g.running = false
			g.mu.Unlock()
			return
		}
		g.renewLocked()
		g.mu.Unlock()
	}
}

// renewLocked extends every lease of the group to now+leaseFor; a lease
// whose token no longer matches its row was taken by another worker, and
// its keeper's context ends.
func (g *renewGroup) renewLocked() {
	byTable := map[string][]*LeaseKeeper{}
	for k := range g.keepers {
		if k.ctx.Err() == nil {
			byTable[k.cur.Table] = append(byTable[k.cur.Table], k)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), max(g.leaseFor/3, time.Second))
	defer cancel()
	for table, ks := range byTable {
		for len(ks) > 0 {
			n := min(len(ks), renewChunk)
			g.renew(ctx, table, ks[:n])
			ks = ks[n:]
		}
	}
}

func (g *renewGroup) renew(ctx context.Context, table string, ks []*LeaseKeeper) {
	ids := make([]string, len(ks))
	tokens := make([]string, len(ks))
	for i, k := range ks {
		k.mu.Lock()
		ids[i], tokens[i] = k.cur.ID, k.cur.Token
		k.mu.Unlock()
	}
	expires := g.s.Now().Add(g.leaseFor)
	// Tokens are unique per row and claim (claimQuery); the ids let the
	// primary key find the rows.
	var kept []string
	err := g.s.db.NewUpdate().Table(table).
		Set("lock_expires_at = ?", expires).
		Where("id IN (?)", bun.In(ids)).
		Where("lock_token IN (?)", bun.In(tokens)).
		Returning("lock_token").
		Scan(ctx, &kept)
	if err != nil {
		g.s.log.Warn("lease heartbeat failed", "table", table, "leases", len(ks), "error", err)
		return
	}
	ok := make(map[string]bool, len(kept))
	for _, t := range kept {
		ok[t] = true
	}
	for i, k := range ks {
		if ok[tokens[i]] {
			k.renewed(expires)
		} else {
			k.lose(g.s.log)
		}
	}
}
