package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPrintTable(t *testing.T) {
	all := func(extra string) string {
		var b strings.Builder
		b.WriteString("goos: linux\npkg: hoist/x\n")
		for _, r := range rows {
			h, ref := "1", "1" // figures that meet the row's goal
			switch {
			case r.goal.met(1, 1):
			case r.goal.met(20, 20):
				h, ref = "20", "20"
			default:
				ref = "20"
			}
			b.WriteString("Benchmark" + r.bench + "-2   1   5 ns/op   " + h + " hoist-" + r.unit + "   " + ref + " ref-" + r.unit + "\n")
		}
		return b.String() + extra
	}
	for _, tc := range []struct {
		name   string
		input  string
		ok     bool
		expect []string
	}{
		{"every row ran and met its goal", all(""), true, []string{"1 ms", "20 MB/s", "1×", "yes"}},
		{"a missing benchmark is not run and fails", "BenchmarkTable_plan10kCold-2 1 5 ns/op 1 hoist-ms 1 ref-ms\n", false, []string{"not run"}},
		{"a result without its reference is not run", all("BenchmarkTable_plan10kWarm-2 1 5 ns/op 1 hoist-ms\n"), false, []string{"not run"}},
		{"figures of different units are not run", all("BenchmarkTable_plan10kWarm-2 1 5 ns/op 1 hoist-ms 1 ref-MB/s\n"), false, []string{"not run"}},
		{"a missed goal fails", all("BenchmarkTable_replanOneFileCommit-2 1 5 ns/op 250 hoist-ms 20 ref-ms\n"), false, []string{"250 ms", "12.5×", "no"}},
		{"a figure in another unit than the row's is not run", all("BenchmarkTable_logThroughput-2 1 5 ns/op 1 hoist-ms 1 ref-ms\n"), false, []string{"not run"}},
		{"a ratio goal is hoist over the reference", all("BenchmarkTable_offersQuery200k-2 1 5 ns/op 5 hoist-ms 100 ref-ms\n"), true, []string{"0.05×"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "bench.out")
			if err := os.WriteFile(path, []byte(tc.input), 0o644); err != nil {
				t.Fatal(err)
			}
			results, err := readAll([]string{path})
			if err != nil {
				t.Fatal(err)
			}
			var out strings.Builder
			if ok := printTable(&out, results); ok != tc.ok {
				t.Errorf("printTable = %v, want %v:\n%s", ok, tc.ok, out.String())
			}
			for _, e := range tc.expect {
				if !strings.Contains(out.String(), e) {
					t.Errorf("the table lacks %q:\n%s", e, out.String())
				}
			}
			if n := strings.Count(out.String(), "\n"); n != len(rows)+1 {
				t.Errorf("%d lines, want a header and %d rows", n, len(rows))
			}
		})
	}
}

func TestReadAll_refusesAMalformedResult(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bench.out")
	if err := os.WriteFile(path, []byte("BenchmarkTable_plan10kCold-2 one 5 ns/op\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readAll([]string{path}); err == nil || !strings.Contains(err.Error(), "bench.out") {
		t.Errorf("readAll = %v, want an error naming the file", err)
	}
}
