package store

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"
)

// BenchmarkClaims measures how many due rows two replicas with eight workers
// each claim and process per second. Modes: "release" (claim, release),
// "complete" (claim, then one transaction with the write and the release),
// "withlease+release" (claim, guarded write transaction, release). Run with:
// go test ./store -run '^$' -bench Claims -benchtime 10000x
func BenchmarkClaims(b *testing.B) {
	for _, c := range dbCases {
		for _, mode := range []string{"release", "complete", "withlease+release"} {
			b.Run(c.name+"/"+mode, func(b *testing.B) {
				dsn := c.dsn(b)
				a := openTest(b, dsn, Options{})
				// SQLite has one server: its two claimers share the one pool.
				r := a
				if isPostgres(dsn) {
					r = replica(b, dsn, time.Now)
				}
				insertDueRuns(b, a, b.N)
				b.ResetTimer()
				start := time.Now()
				st := runClaimers(context.Background(), []*Store{a, r}, benchWorkers, b.N, mode)
				elapsed := time.Since(start)
				b.StopTimer()
				for _, err := range st.errs {
					b.Fatal(err)
				}
				if st.processed.Load() != int64(b.N) || st.leaseLost.Load() != 0 || st.claims.Load() != int64(b.N) {
					b.Fatalf("processed %d of %d, %d leases lost", st.processed.Load(), b.N, st.leaseLost.Load())
				}
				b.ReportMetric(float64(b.N)/elapsed.Seconds(), "claims/s")
			})
		}
	}
}

// BenchmarkLogs writes 1,000,000 log lines of one job in batches of 1,000
// (as the log copier does), reads them back in pages and checks none is lost
// or reordered. Run with: go test ./store -run '^$' -bench Logs -benchtime 1x
func BenchmarkLogs(b *testing.B) {
	const lines, batch = 1_000_000, 1_000
	for _, c := range dbCases {
		b.Run(c.name, func(b *testing.B) {
			s := openTest(b, c.dsn(b), Options{LogQuota: 1 << 40})
			ctx := context.Background()
			base := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
			want := make([]LogLine, lines)
			for n := range want {
				stream := "stdout"
				if n%10 == 0 {
					stream = "stderr"
				}
				want[n] = LogLine{Time: base.Add(time.Duration(n) * time.Microsecond), Stream: stream, Data: logData(n)}
			}
			b.ResetTimer()
			var writeTime, readTime time.Duration
			for it := range b.N {
				job := fmt.Sprintf("job-%d", it)
				start := time.Now()
				for i := 0; i < lines; i += batch {
					if _, err := s.AppendLogs(ctx, job, want[i:i+batch]); err != nil {
						b.Fatal(err)
					}
				}
				writeTime += time.Since(start)
				start = time.Now()
				var after int64
				n := 0
				for {
					page, err := s.ReadLogs(ctx, job, after, 10_000)
					if err != nil {
						b.Fatal(err)
					}
					if len(page) == 0 {
						break
					}
					for _, l := range page {
						w := want[n]
						if l.Seq != int64(n+1) || !bytes.Equal(l.Data, w.Data) || l.Stream != w.Stream || !l.Time.Equal(w.Time) {
							b.Fatalf("line %d: got seq %d %s %v %q", n, l.Seq, l.Stream, l.Time, l.Data)
						}
						n++
					}
					after = page[len(page)-1].Seq
				}
				readTime += time.Since(start)
				if n != lines {
					b.Fatalf("read %d lines, wrote %d", n, lines)
				}
			}
			b.ReportMetric(float64(lines*b.N)/writeTime.Seconds(), "written_lines/s")
			b.ReportMetric(float64(lines*b.N)/readTime.Seconds(), "read_lines/s")
		})
	}
}

// benchWorkers is the number of workers per replica in BenchmarkClaims.
const benchWorkers = 8

func logData(n int) []byte {
	return fmt.Appendf(nil, "step %07d loss=0.%06d lr=3e-4 tokens/s=12345 some more text to make a line\n", n, n%999983)
}
