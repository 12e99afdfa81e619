package main

import (
	"fmt"
	"math"
	"strings"

	"hoist/reconciler/plan"
)

// budgetConfig is a project's `budget:` in the server config: what the
// project may spend, set by the owners of the platform (not by the specs
// committers write). An absent or zero field is no limit.
type budgetConfig struct {
	// MaxPerHour caps the project's spend in USD per hour: a plan raising
	// it past the cap is held for a project admin's confirmation, and an
	// instance whose price would take the project past it is not created.
	MaxPerHour float64 `yaml:"max_per_hour"`
	// MaxPerMonth caps the project's spend in USD since the start of the
	// current UTC month: once reached, no instance is created and plans
	// raising the spend are held.
	MaxPerMonth float64 `yaml:"max_per_month"`
}

// check refuses negative, infinite and NaN amounts, naming the field
// under path (e.g. "projects[0].budget").
func (b budgetConfig) check(path string) error {
	for _, f := range []struct {
		name string
		v    float64
	}{{"max_per_hour", b.MaxPerHour}, {"max_per_month", b.MaxPerMonth}} {
		if math.IsNaN(f.v) || math.IsInf(f.v, 0) || f.v < 0 {
			return fmt.Errorf("%s.%s: %v is not an amount of USD (a number, 0 or more)", path, f.name, f.v)
		}
	}
	return nil
}

// plan is the budget as the reconciler takes it.
func (b budgetConfig) plan() plan.Budget {
	return plan.Budget{MaxPerHour: b.MaxPerHour, MaxPerMonth: b.MaxPerMonth}
}

// projectBudget is the budget of project name (zero when it has none).
func (c serverConfig) projectBudget(name string) plan.Budget {
	for _, p := range c.Projects {
		if p.Name == name {
			return p.Budget.plan()
		}
	}
	return plan.Budget{}
}

// budgetLimits says a budget's limits, e.g. "$10.00/h, $2500.00 a month".
func budgetLimits(b plan.Budget) string {
	var out []string
	if b.MaxPerHour > 0 {
		out = append(out, fmt.Sprintf("$%.2f/h", b.MaxPerHour))
	}
	if b.MaxPerMonth > 0 {
		out = append(out, fmt.Sprintf("$%.2f a month", b.MaxPerMonth))
	}
	return strings.Join(out, ", ")
}
