package storeview

import (
	"testing"

	"hoist/store"
)

// TestNodeGroup names the group a job of a task with groups is a node of:
// job numbers count through the groups' nodes in order.
func TestNodeGroup(t *testing.T) {
	groups := `{"type":"task","groups":[{"name":"head","nodes":1},{"name":"workers","nodes":2}]}`
	for _, tc := range []struct {
		name, spec string
		num        int
		want       string
	}{
		{"the first node is the first group's", groups, 0, "head"},
		{"the next nodes are the next group's", groups, 2, "workers"},
		{"past the nodes, none", groups, 3, ""},
		{"a task without groups has none", `{"type":"task","nodes":2}`, 1, ""},
		{"a service's replica groups are not node groups", `{"type":"service","groups":[{"name":"a","nodes":1}]}`, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := nodeGroup(store.Job{Spec: []byte(tc.spec), JobNum: tc.num}); got != tc.want {
				t.Errorf("nodeGroup = %q, want %q", got, tc.want)
			}
		})
	}
}
