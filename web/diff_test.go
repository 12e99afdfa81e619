package web

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// sides rebuilds the two inputs of a line diff: kept and removed lines
// give the old text, kept and added lines the new one.
func sides(d []DiffLine) (old, new []string) {
	for _, l := range d {
		if l.Op != "+" {
			old = append(old, l.Text)
		}
		if l.Op != "-" {
			new = append(new, l.Text)
		}
	}
	return old, new
}

func TestLineDiff_keepsEveryLineOfBothSidesInOrder(t *testing.T) {
	big := func(n, changeEvery int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("line %d", i)
			if changeEvery > 0 && i%changeEvery == 0 {
				out[i] += " changed"
			}
		}
		return out
	}
	for _, tc := range []struct {
		name      string
		a, b      []string
		wantEdits int // lines marked + or -
	}{
		{"identical", []string{"a", "b"}, []string{"a", "b"}, 0},
		{"one line changed", []string{"a", "b", "c"}, []string{"a", "B", "c"}, 2},
		{"added at the end", []string{"a"}, []string{"a", "b"}, 1},
		{"removed in the middle", []string{"a", "b", "c"}, []string{"a", "c"}, 1},
		{"from nothing", nil, []string{"a", "b"}, 2},
		{"to nothing", []string{"a", "b"}, nil, 2},
		{"large spec with scattered changes", big(20000, 0), big(20000, 1000), 40},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := lineDiff(tc.a, tc.b)
			old, new := sides(d)
			if !slices.Equal(old, tc.a) || !slices.Equal(new, tc.b) {
				t.Fatalf("diff does not rebuild its inputs:\n%v", d)
			}
			edits := 0
			for _, l := range d {
				if l.Op != " " {
					edits++
				}
			}
			if edits != tc.wantEdits {
				t.Errorf("%d edited lines, want %d", edits, tc.wantEdits)
			}
		})
	}
}

func TestDiffSpecs_ordersChangedAddedRemovedUnchanged(t *testing.T) {
	a := map[string][]byte{"task/x": []byte(`{"a":1}`), "task/gone": []byte(`{}`), "task/same": []byte(`{}`)}
	b := map[string][]byte{"task/x": []byte(`{"a":2}`), "task/new": []byte(`{}`), "task/same": []byte(`{}`)}
	conv := func(m map[string][]byte) map[string]json.RawMessage {
		out := map[string]json.RawMessage{}
		for k, v := range m {
			out[k] = v
		}
		return out
	}
	d := diffSpecs("1", "2", conv(a), conv(b))
	var got []string
	for _, r := range d.Resources {
		got = append(got, r.Key+"="+r.Change)
	}
	if want := "task/x=changed task/new=added task/gone=removed task/same=unchanged"; strings.Join(got, " ") != want {
		t.Errorf("got %s, want %s", strings.Join(got, " "), want)
	}
}
