package web

import (
	"context"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v5"

	"hoist/reconciler/plan"
)

// BudgetStatus is a project's budget beside what it spends (GET
// /api/v1/budget and the overview).
type BudgetStatus struct {
	// Project names the project.
	Project string `json:"project"`
	// MaxPerHour and MaxPerMonth are the budget in USD (the server
	// config's `projects[].budget`); nil is no limit.
	MaxPerHour  *float64 `json:"max_per_hour"`
	MaxPerMonth *float64 `json:"max_per_month"`
	// SpendPerHour is what the billed instances cost per hour now.
	SpendPerHour float64 `json:"spend_per_hour"`
	// SpendMonthToDate is the USD spent since midnight UTC on the 1st of
	// the current month (as hoist_project_spend_month_to_date_dollars).
	SpendMonthToDate float64 `json:"spend_month_to_date"`
}

// budgetOf is the configured budget of project (zero: none).
func (s *Server) budgetOf(project string) plan.Budget { return s.cfg.Budgets[project] }

// budgetStatus is the shown project's budget and spend; without an
// Accounting store the month-to-date spend is 0.
func (s *Server) budgetStatus(ctx context.Context, p *project) (BudgetStatus, error) {
	st := BudgetStatus{Project: p.name}
	perHour, err := s.spendPerHour(ctx, p)
	if err != nil {
		return st, err
	}
	st.SpendPerHour = perHour
	if acc, ok := p.Store.(Accounting); ok {
		now := s.now().UTC()
		start := monthStart(now)
		is, err := acc.BilledInstances(ctx, start)
		if err != nil {
			return st, err
		}
		st.SpendMonthToDate = spendSince(is, start, now)
	}
	b := s.budgetOf(st.Project)
	if b.MaxPerHour > 0 {
		st.MaxPerHour = &b.MaxPerHour
	}
	if b.MaxPerMonth > 0 {
		st.MaxPerMonth = &b.MaxPerMonth
	}
	return st, nil
}

func (s *Server) apiBudget(c *echo.Context) error {
	st, err := s.budgetStatus(c.Request().Context(), s.proj(c).project)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, st)
}

// budgetLine says a budget beside its spend, e.g. "spent $12.50 of $100.00
// this month; $2.00/h of $10.00/h" (a part without a limit says the
// spend alone).
func budgetLine(b BudgetStatus) string {
	month := fmt.Sprintf("spent $%.2f this month", b.SpendMonthToDate)
	if b.MaxPerMonth != nil {
		month = fmt.Sprintf("spent $%.2f of $%.2f this month", b.SpendMonthToDate, *b.MaxPerMonth)
	}
	hour := fmt.Sprintf("$%.2f/h", b.SpendPerHour)
	if b.MaxPerHour != nil {
		hour = fmt.Sprintf("$%.2f/h of $%.2f/h", b.SpendPerHour, *b.MaxPerHour)
	}
	return month + "; " + hour
}

// mayConfirmBudget refuses (403) to confirm revision sha when its recorded
// plan is held by its project's budget and the caller is not an admin of
// that project: the budget is the platform owners' to waive, not every
// committer's.
func (s *Server) mayConfirmBudget(c *echo.Context, sha string) error {
	r, err := s.deps.Store.GetRevision(c.Request().Context(), sha)
	if err != nil || r.Plan == nil || r.Plan.Budget == nil || !r.Plan.Budget.Holds {
		return nil // no recorded budget hold (an unknown revision is the controller's to refuse)
	}
	if p := r.Plan.Budget.Project; principal(c).RoleIn(p) != RoleAdmin {
		return echo.NewHTTPError(http.StatusForbidden, "the plan exceeds project "+p+"'s budget; only an admin of the project may confirm it")
	}
	return nil
}
