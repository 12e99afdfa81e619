// Command benchtable reads the output of `go test -bench '^BenchmarkTable_'`
// and prints one table: per measure, hoist's figure, the reference measured
// in the same run, their ratio, the goal and whether it is met.
//
// Each row is one Go benchmark named BenchmarkTable_<measure> that reports
// its two figures with b.ReportMetric as "hoist-<unit>" and "ref-<unit>".
// The rows, their labels, what the reference is and the goals are in
// rows.go, keyed by benchmark name. A row whose benchmark produced no
// result (it failed, or did not run) is printed as "not run", and so is a
// result without both figures; either makes the command exit 1, as does a
// goal not met, so that `go tool task bench` fails rather than hide a
// figure.
//
// Usage:
//
//	go run ./e2e/benchtable bench.txt [more.txt ...]
//
// With no file it reads standard input. The output of several `go test`
// runs may be concatenated; a benchmark reported more than once keeps its
// last result.
package main
