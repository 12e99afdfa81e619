package reconciler

import (
	"slices"
	"testing"

	"hoist/store"
)

// TestBySite_groupsInstancesByBackendAndRegionInOrder: a gang is placed
// on instances of one backend and region; the groups keep the order the
// instances came in (the gang's own and the cheapest first).
func TestBySite_groupsInstancesByBackendAndRegionInOrder(t *testing.T) {
	got := bySite([]store.Instance{
		{Name: "a", Backend: "aws", Region: "east"},
		{Name: "b", Backend: "gcp", Region: "east"},
		{Name: "c", Backend: "AWS", Region: "east"},
		{Name: "d", Backend: "aws", Region: "west"},
	})
	want := [][]string{{"a", "c"}, {"b"}, {"d"}}
	if len(got) != len(want) {
		t.Fatalf("%d groups, want %d", len(got), len(want))
	}
	for k, g := range got {
		var names []string
		for _, i := range g {
			names = append(names, i.Name)
		}
		if !slices.Equal(names, want[k]) {
			t.Errorf("group %d = %v, want %v", k, names, want[k])
		}
	}
}
