package store

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"hoist/e2e/testenv"
)

// tableClaimRows is how many due runs each side of
// BenchmarkTable_claimsPostgres2Servers claims.
const tableClaimRows = 5000

// BenchmarkTable_claimsPostgres2Servers measures claims/s on Postgres with
// two servers (two Stores, each its own pool) of benchWorkers workers each,
// as the reconciler's pipelines claim: a batch claim, then per row one
// transaction with the row's write and the release (mode "complete"). The
// reference is the plainest claim there is, on a fresh database with the
// same rows and as many workers over two pools: one UPDATE … WHERE id =
// (SELECT … FOR UPDATE SKIP LOCKED LIMIT 1) RETURNING id per row, making
// the same write. Run with -benchtime 1x under e2e/testenv/with-services.sh;
// go tool task bench prints it in the table.
func BenchmarkTable_claimsPostgres2Servers(b *testing.B) {
	ctx := context.Background()
	dsn := testenv.Postgres(b)
	a := openTest(b, dsn, Options{})
	r := replica(b, dsn, time.Now)
	insertDueRuns(b, a, tableClaimRows)
	start := time.Now()
	st := runClaimers(ctx, []*Store{a, r}, benchWorkers, tableClaimRows, "complete")
	elapsed := time.Since(start)
	for _, err := range st.errs {
		b.Fatal(err)
	}
	if st.processed.Load() != tableClaimRows || st.leaseLost.Load() != 0 || st.claims.Load() != tableClaimRows {
		b.Fatalf("processed %d of %d with %d claims, %d leases lost", st.processed.Load(), tableClaimRows, st.claims.Load(), st.leaseLost.Load())
	}
	b.ReportMetric(tableClaimRows/elapsed.Seconds(), "hoist-claims/s")

	refDSN := testenv.Postgres(b)
	ra := openTest(b, refDSN, Options{})
	rb := replica(b, refDSN, time.Now)
	insertDueRuns(b, ra, tableClaimRows)
	start = time.Now()
	n, err := plainClaims(ctx, []*Store{ra, rb}, benchWorkers)
	elapsed = time.Since(start)
	if err != nil {
		b.Fatal(err)
	}
	if n != tableClaimRows {
		b.Fatalf("the plain loop claimed %d rows, want %d", n, tableClaimRows)
	}
	b.ReportMetric(tableClaimRows/elapsed.Seconds(), "ref-claims/s")
}

// plainClaims claims every submitted run with workers per store, one
// UPDATE … RETURNING per row, until none is left, and returns how many it
// claimed.
func plainClaims(ctx context.Context, stores []*Store, workers int) (int64, error) {
	const claim = `UPDATE runs SET status = ?, priority = priority + 1, version = version + 1
WHERE id = (SELECT id FROM runs WHERE status = ? LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING id`
	var n atomic.Int64
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	for _, s := range stores {
		for range workers {
			wg.Go(func() {
				for {
					var id string
					err := s.db.NewRaw(claim, RunRunning, RunSubmitted).Scan(ctx, &id)
					if errors.Is(err, sql.ErrNoRows) {
						return
					}
					if err != nil {
						mu.Lock()
						firstErr = errors.Join(firstErr, err)
						mu.Unlock()
						return
					}
					n.Add(1)
				}
			})
		}
	}
	wg.Wait()
	return n.Load(), firstErr
}
