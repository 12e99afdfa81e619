package main

import "fmt"

// goal is what a row's figures must satisfy.
type goal struct {
	text string
	met  func(hoist, ref float64) bool
}

// atMost is met when hoist's figure is at most limit.
func atMost(limit float64, unit string) goal {
	return goal{fmt.Sprintf("≤ %g %s", limit, unit), func(h, _ float64) bool { return h <= limit }}
}

// atLeast is met when hoist's figure is at least limit.
func atLeast(limit float64, unit string) goal {
	return goal{fmt.Sprintf("≥ %g %s", limit, unit), func(h, _ float64) bool { return h >= limit }}
}

// ratioAtMost is met when hoist / reference is at most limit.
func ratioAtMost(limit float64) goal {
	return goal{fmt.Sprintf("ratio ≤ %g", limit), func(h, r float64) bool { return r > 0 && h/r <= limit }}
}

// ratioAtLeast is met when hoist / reference is at least limit.
func ratioAtLeast(limit float64) goal {
	return goal{fmt.Sprintf("ratio ≥ %g", limit), func(h, r float64) bool { return r > 0 && h/r >= limit }}
}

// addedAtMost is met when hoist's figure exceeds the reference's by at most
// limit.
func addedAtMost(limit float64, unit string) goal {
	return goal{fmt.Sprintf("≤ ref + %g %s", limit, unit), func(h, r float64) bool { return h-r <= limit }}
}

// row is one line of the table.
type row struct {
	bench string // the benchmark's name without "Benchmark"
	label string // the measure, for people
	unit  string // the unit both figures are reported in
	ref   string // what the reference figure is
	goal  goal
}

// rows are the table's lines in the order printed. Goals come from what the
// repository states next to the measure (cited); where it states none, the
// goal is this table's own and says so.
var rows = []row{
	// Own goal: no more than a second over a bare `docker run --rm` of the
	// same image and command.
	{"Table_commitToDone", "git commit → one-line task done (local Docker)", "ms",
		"bare `docker run --rm` of the same image and command", addedAtMost(1000, "ms")},
	// schema/bench_test.go BenchmarkLoad_10000: ≤ 2 s on 2 cores with
	// nothing memoized.
	{"Table_plan10kCold", "Git checkout + validate + plan of 10,000 specs, cold (nothing memoized)", "ms",
		"WalkDir + read of the same 10,000 files in the work tree", atMost(2000, "ms")},
	// reconciler/bench_test.go BenchmarkPlanFS_10k: ≤ 2 s.
	{"Table_plan10kWarm", "Git checkout + validate + plan of 10,000 specs, warm (unchanged head)", "ms",
		"WalkDir + read of the same 10,000 files in the work tree", atMost(2000, "ms")},
	// reconciler/bench_test.go BenchmarkPlanFS_10kOneFileCommit: ≤ 100 ms.
	{"Table_replanOneFileCommit", "re-plan of 10,000 specs after a one-file commit (checkout + plan)", "ms",
		"WalkDir + read of the same 10,000 files in the work tree", atMost(100, "ms")},
	// backends/offers/bench_test.go BenchmarkQuery200k: index/scan ≤ 0.1.
	{"Table_offersQuery200k", "offers: 11 queries over 200,000 rows", "ms",
		"linear filter + sort of the same rows in a slice", ratioAtMost(0.1)},
	// Own goal: a job printing fast is not held back below 10 MB/s.
	{"Table_logThroughput", "logs: job stdout → runner → store → GET /api/v1/runs/<r>/logs", "MB/s",
		"`cp` of a file of the same bytes", atLeast(10, "MB/s")},
	// Own goal: the lease protocol (claim batch, guarded write + release in
	// one transaction) keeps a quarter of a bare claim-and-write loop.
	{"Table_claimsPostgres2Servers", "claims/s, Postgres, 2 servers × 8 workers", "claims/s",
		"plain UPDATE … FOR UPDATE SKIP LOCKED … RETURNING loop, same table and workers", ratioAtLeast(0.25)},
	// Own goal: 1,000 active runs fit in half a gibibyte.
	{"Table_rss1000Runs", "server RSS with 1,000 active runs", "MiB",
		"an idle hoist serve on an empty repository, same run", atMost(512, "MiB")},
	// web/bench_test.go TestMeasure_runsPageUnderWrk: p99 ≤ 50 ms.
	{"Table_runsPageP99", "/runs p99 with 1,000 runs under wrk", "ms",
		"wrk on /healthz of the same server", atMost(50, "ms")},
	// Own goal: the proxy adds at most 10 ms at p99.
	{"Table_proxyP99", "service p99 through /proxy under wrk", "ms",
		"wrk directly at the replica's port", addedAtMost(10, "ms")},
}
