package storeview_test

import (
	"testing"

	"hoist/reconciler/plan"
	"hoist/schema"
	"hoist/web/storeview"
)

// TestPlanView_multiNodeCostInDetail: a multi-node task's change says,
// after its reason, what its estimated cost is made of (nodes × price),
// as `hoist plan` and the web's plan pages show it.
func TestPlanView_multiNodeCostInDetail(t *testing.T) {
	p := plan.Plan{Steps: []plan.Step{
		{Kind: schema.KindTask, Name: "train", Action: plan.Create, Reason: "new", Cost: "2 nodes × $0.1/h = $0.2/h"},
		{Kind: schema.KindTask, Name: "bare", Action: plan.Create, Cost: "2 nodes × $0.1/h = $0.2/h"},
		{Kind: schema.KindTask, Name: "solo", Action: plan.Create, Reason: "new"},
	}}
	got := storeview.PlanView("abc", p).Changes
	want := []string{"new; estimated 2 nodes × $0.1/h = $0.2/h", "estimated 2 nodes × $0.1/h = $0.2/h", "new"}
	for i, c := range got {
		if c.Detail != want[i] {
			t.Errorf("%s detail %q, want %q", c.Name, c.Detail, want[i])
		}
	}
}
