package plan

import "fmt"

// Budget is what a project may spend, set by the owners of the platform in
// the server config (not by the specs committers write). A zero field is
// no limit.
type Budget struct {
	// MaxPerHour caps the project's spend in dollars per hour.
	MaxPerHour float64 `json:"max_per_hour,omitempty"`
	// MaxPerMonth caps the project's spend in dollars since the start of
	// the current UTC month.
	MaxPerMonth float64 `json:"max_per_month,omitempty"`
}

// Limited reports whether the budget caps anything.
func (b Budget) Limited() bool { return b.MaxPerHour > 0 || b.MaxPerMonth > 0 }

// BudgetCheck is a plan's verdict against its project's budget.
type BudgetCheck struct {
	// Project names the project whose budget it is.
	Project string `json:"project"`
	Budget
	// MonthToDate is what the project spent since the start of the current
	// UTC month, in dollars.
	MonthToDate float64 `json:"month_to_date"`
	// OverPerHour is by how many dollars per hour the plan's CostAfter
	// exceeds MaxPerHour (0 when it does not).
	OverPerHour float64 `json:"over_per_hour,omitempty"`
	// MonthSpent reports that MonthToDate has reached MaxPerMonth.
	MonthSpent bool `json:"month_spent,omitempty"`
	// Holds reports that the budget holds the plan until a project admin
	// confirms it (set whether or not it was confirmed).
	Holds bool `json:"holds,omitempty"`
}

// checkBudget sets p.Budget and returns why the plan is held for its
// budget (empty when it is not): a plan that raises the spend per hour
// (CostAfter above CostBefore) is held when CostAfter exceeds the hourly
// budget, or when the month's budget is already spent. A plan that keeps
// or lowers the spend is never held, so that a lowered budget never blocks
// the deletions that bring the spend back under it.
func checkBudget(p *Plan, opts Options) string {
	b := opts.Budget
	if !b.Limited() {
		return ""
	}
	chk := &BudgetCheck{Project: opts.Project, Budget: b, MonthToDate: opts.MonthToDate}
	p.Budget = chk
	if b.MaxPerHour > 0 && p.CostAfter > b.MaxPerHour {
		chk.OverPerHour = p.CostAfter - b.MaxPerHour
	}
	chk.MonthSpent = b.MaxPerMonth > 0 && opts.MonthToDate >= b.MaxPerMonth
	if p.CostAfter <= p.CostBefore {
		return ""
	}
	chk.Holds = chk.OverPerHour > 0 || chk.MonthSpent
	switch {
	case chk.OverPerHour > 0:
		return fmt.Sprintf("the plan's $%.2f/h exceeds project %s's budget of $%.2f/h by $%.2f/h; a project admin may confirm",
			p.CostAfter, opts.Project, b.MaxPerHour, chk.OverPerHour)
	case chk.MonthSpent:
		return fmt.Sprintf("project %s spent $%.2f of its budget of $%.2f this month, and the plan raises its spend from $%.2f/h to $%.2f/h; a project admin may confirm",
			opts.Project, opts.MonthToDate, b.MaxPerMonth, p.CostBefore, p.CostAfter)
	}
	return ""
}
