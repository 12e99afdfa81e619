package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"golang.org/x/perf/benchfmt"
)

func main() {
	results, err := readAll(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchtable:", err)
		os.Exit(2)
	}
	if !printTable(os.Stdout, results) {
		os.Exit(1)
	}
}

// figures are one benchmark's two figures and their unit.
type figures struct {
	hoist, ref float64
	unit       string
}

// readAll reads the benchmark results of the named files (standard input
// when none) and returns each benchmark's figures by its base name.
func readAll(names []string) (map[string]figures, error) {
	out := map[string]figures{}
	read := func(r io.Reader, name string) error {
		br := benchfmt.NewReader(r, name)
		for br.Scan() {
			switch rec := br.Result().(type) {
			case *benchfmt.Result:
				out[string(rec.Name.Base())] = figuresOf(rec)
			case *benchfmt.SyntaxError:
				return rec
			}
		}
		return br.Err()
	}
	if len(names) == 0 {
		return out, read(os.Stdin, "stdin")
	}
	for _, n := range names {
		f, err := os.Open(n)
		if err != nil {
			return nil, err
		}
		err = read(f, n)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", n, err)
		}
	}
	return out, nil
}

// figuresOf picks the "hoist-<unit>" and "ref-<unit>" values of a result;
// unit is empty unless both are there with the same unit.
func figuresOf(r *benchfmt.Result) figures {
	var f figures
	var hu, ru string
	for _, v := range r.Values {
		val, unit := v.Value, v.Unit
		if v.OrigUnit != "" {
			val, unit = v.OrigValue, v.OrigUnit
		}
		if u, ok := strings.CutPrefix(unit, "hoist-"); ok {
			f.hoist, hu = val, u
		}
		if u, ok := strings.CutPrefix(unit, "ref-"); ok {
			f.ref, ru = val, u
		}
	}
	if hu != "" && hu == ru {
		f.unit = hu
	}
	return f
}

// printTable writes the table and reports whether every row ran and met
// its goal.
func printTable(w io.Writer, results map[string]figures) bool {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "MEASURE\tHOIST\tREFERENCE\tRATIO\tGOAL\tMET\tREFERENCE IS")
	ok := true
	var why []string
	for _, r := range rows {
		f, found := results[r.bench]
		if !found || f.unit != r.unit {
			ok = false
			if found {
				why = append(why, fmt.Sprintf("Benchmark%s reported no hoist-%s and ref-%s pair", r.bench, r.unit, r.unit))
			} else {
				why = append(why, fmt.Sprintf("Benchmark%s has no result (it failed, or did not run)", r.bench))
			}
			fmt.Fprintf(tw, "%s\tnot run\t\t\t%s\tno\t%s\n", r.label, r.goal.text, r.ref)
			continue
		}
		met := r.goal.met(f.hoist, f.ref)
		ok = ok && met
		ratio := "-"
		if f.ref != 0 {
			ratio = strconv.FormatFloat(f.hoist/f.ref, 'g', 3, 64) + "×"
		}
		fmt.Fprintf(tw, "%s\t%s %s\t%s %s\t%s\t%s\t%s\t%s\n", r.label, num(f.hoist), f.unit, num(f.ref), f.unit,
			ratio, r.goal.text, yesNo(met), r.ref)
	}
	if err := tw.Flush(); err != nil {
		fmt.Fprintln(os.Stderr, "benchtable:", err)
		return false
	}
	for _, w := range why {
		fmt.Fprintln(os.Stderr, "benchtable:", w)
	}
	return ok
}

// num prints a figure with three significant digits, without an exponent
// below a million.
func num(v float64) string {
	if v >= 1000 && v < 1e6 {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
