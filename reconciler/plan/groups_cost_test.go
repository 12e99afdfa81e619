package plan_test

import (
	"slices"
	"testing"
	"testing/fstest"

	"hoist/reconciler/plan"
	"hoist/schema"
)

// TestCompute_groupsTaskCostSumsEachGroupsNodesTimesItsPrice: a task with
// groups costs, for each group, its nodes times the price of an instance
// fitting the group's resources; its step says so group by group, and one
// group of one node is a single-node run with no breakdown.
func TestCompute_groupsTaskCostSumsEachGroupsNodesTimesItsPrice(t *testing.T) {
	for _, tc := range []struct {
		name, task, want string
		after            float64
	}{
		{"a GPU node and two CPU nodes",
			"type: task\nname: tt\ngroups:\n  - name: head\n    commands: [x]\n    resources:\n      gpu: 1\n  - name: workers\n    nodes: 2\n    commands: [y]\n",
			"1 node × $10/h + 2 nodes × $1/h = $12/h", 12},
		{"two GPU groups",
			"type: task\nname: tt\ngroups:\n  - nodes: 2\n    commands: [x]\n    resources:\n      gpu: 1\n  - nodes: 3\n    commands: [y]\n    resources:\n      gpu: 1\n",
			"2 nodes × $10/h + 3 nodes × $10/h = $50/h", 50},
		{"the task's resources are not the groups'",
			"type: task\nname: tt\nresources:\n  gpu: 1\ngroups:\n  - nodes: 2\n    commands: [x]\n",
			"2 nodes × $1/h = $2/h", 2},
		{"one group of one node", "type: task\nname: tt\ngroups:\n  - commands: [x]\n    resources:\n      gpu: 1\n", "", 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := schema.Load(fstest.MapFS{"f.dstack.yml": {Data: []byte(clusterFleet)}, "t.dstack.yml": {Data: []byte(tc.task)}})
			if err != nil {
				t.Fatal(err)
			}
			pr := &prices{}
			p := plan.Compute(d.Resources, plan.Observed{}, genNow, plan.Options{Estimate: pr.price})
			i := slices.IndexFunc(p.Steps, func(s plan.Step) bool { return s.Name == "tt" })
			if p.Steps[i].Cost != tc.want || p.CostAfter != tc.after {
				t.Errorf("step cost %q, after %v; want %q and %v", p.Steps[i].Cost, p.CostAfter, tc.want, tc.after)
			}
		})
	}
}
