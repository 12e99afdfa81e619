package plan_test

import (
	"math"
	"strings"
	"testing"
	"testing/fstest"

	"hoist/reconciler/plan"
	"hoist/schema"
)

// TestCompute_budget checks the budget hold: a plan that raises the spend
// past the project's hourly budget, or while its month's budget is spent,
// is held with the overrun until confirmed; one within the budget, or one
// that does not raise the spend, is not.
func TestCompute_budget(t *testing.T) {
	// fixedFleet costs 2 × $10/h with the prices Pricer.
	d, err := schema.Load(fstest.MapFS{"a.dstack.yml": {Data: []byte(fixedFleet)}})
	if err != nil {
		t.Fatal(err)
	}
	live := []plan.Current{{Kind: schema.KindFleet, Name: "fixed", Spec: d.Resources[0].JSON, PricePerHour: 20}}
	for _, tc := range []struct {
		name      string
		observed  []plan.Current
		budget    plan.Budget
		mtd       float64
		confirmed bool
		held      bool
		reason    string
		over      float64
	}{
		{name: "no budget: nothing is held", budget: plan.Budget{}},
		{name: "under the hourly budget", budget: plan.Budget{MaxPerHour: 25}},
		{name: "at the hourly budget", budget: plan.Budget{MaxPerHour: 20}},
		{name: "over the hourly budget: held with the overrun", budget: plan.Budget{MaxPerHour: 14.5}, held: true, over: 5.5,
			reason: "the plan's $20.00/h exceeds project main's budget of $14.50/h by $5.50/h; a project admin may confirm"},
		{name: "over the hourly budget but confirmed", budget: plan.Budget{MaxPerHour: 14.5}, confirmed: true, over: 5.5},
		{name: "month's budget spent: held", budget: plan.Budget{MaxPerMonth: 100}, mtd: 100, held: true,
			reason: "project main spent $100.00 of its budget of $100.00 this month, and the plan raises its spend from $0.00/h to $20.00/h; a project admin may confirm"},
		{name: "month's budget not yet spent", budget: plan.Budget{MaxPerMonth: 100}, mtd: 99.5},
		{name: "over budget but the plan keeps the spend: not held", observed: live, budget: plan.Budget{MaxPerHour: 5, MaxPerMonth: 1}, mtd: 50, over: 15},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := plan.Compute(d.Resources, plan.Observed{Resources: tc.observed}, genNow, plan.Options{
				Estimate: (&prices{}).price, Confirmed: tc.confirmed, Project: "main", Budget: tc.budget, MonthToDate: tc.mtd,
			})
			if p.Held != tc.held || (tc.held && p.HoldReason != tc.reason) {
				t.Errorf("held %v %q, want %v %q", p.Held, p.HoldReason, tc.held, tc.reason)
			}
			if !tc.budget.Limited() {
				if p.Budget != nil {
					t.Errorf("budget verdict %+v without a budget", p.Budget)
				}
				return
			}
			if p.Budget == nil || p.Budget.Project != "main" || p.Budget.Budget != tc.budget || math.Abs(p.Budget.OverPerHour-tc.over) > 1e-9 ||
				p.Budget.Holds != (tc.held || tc.confirmed) {
				t.Errorf("budget verdict %+v, want over %v", p.Budget, tc.over)
			}
		})
	}
}

// TestCompute_budgetAndMassDeletion: both holds are named.
func TestCompute_budgetAndMassDeletion(t *testing.T) {
	d, err := schema.Load(fstest.MapFS{"a.dstack.yml": {Data: []byte(fixedFleet)}})
	if err != nil {
		t.Fatal(err)
	}
	cur := []plan.Current{{Kind: schema.KindTask, Name: "a", Spec: []byte(`{}`)}, {Kind: schema.KindTask, Name: "b", Spec: []byte(`{}`)}}
	p := plan.Compute(d.Resources, plan.Observed{Resources: cur}, genNow, plan.Options{
		Estimate: (&prices{}).price, Project: "main", Budget: plan.Budget{MaxPerHour: 1},
	})
	if !p.Held || !strings.Contains(p.HoldReason, "deletes 2 of 2") || !strings.Contains(p.HoldReason, "budget of $1.00/h") {
		t.Errorf("held %v %q, want both reasons", p.Held, p.HoldReason)
	}
}
