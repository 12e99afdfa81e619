package reconciler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"hoist/reconciler/plan"
	"hoist/schema"
	"hoist/store"
)

// errBudget says an instance was not created because its price would take
// the project past its budget (Config.Budget); the job or fleet that asked
// for it waits, its status message being the error's.
var errBudget = errors.New("waiting")

// budgetPoll is how often a job waiting for the budget looks again.
const budgetPoll = 5 * time.Second

// budgetPrefix starts the status message of what waits for the budget.
const budgetPrefix = "waiting: "

// liveStatuses are the statuses of instances that cost money or are about
// to (pending ones are being created).
var liveStatuses = []string{store.InstancePending, store.InstanceProvisioning, store.InstanceIdle, store.InstanceBusy, store.InstanceTerminating}

// projectSpend is what the project's instances cost now, in dollars per
// hour (those billed and those pending), and what they cost since the
// start of the current UTC month.
func (c *Controller) projectSpend(ctx context.Context) (perHour, monthToDate float64, err error) {
	now := c.now().UTC()
	start := monthStart(now)
	is, err := c.st.ListInstancesBilledSince(ctx, c.cfg.Project, start)
	if err != nil {
		return 0, 0, fmt.Errorf("observe the project's spend: %w", err)
	}
	for _, i := range is {
		for _, s := range liveStatuses {
			if i.Status == s {
				perHour += i.Price
				break
			}
		}
	}
	return perHour, store.SpendBetween(is, start, now), nil
}

// monthStart is midnight UTC of the first day of t's month.
func monthStart(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
}

// monthToDate is projectSpend's month-to-date spend, for the plan's
// budget check; zero (logged) when it cannot be read, and zero when the
// project has no monthly budget.
func (c *Controller) monthToDate(ctx context.Context) float64 {
	if c.cfg.Budget.MaxPerMonth <= 0 {
		return 0
	}
	_, mtd, err := c.projectSpend(ctx)
	if err != nil {
		c.log.Warn("read month-to-date spend failed", "error", err)
	}
	return mtd
}

// planOptions are the options every plan of the controller is computed
// with.
func (c *Controller) planOptions(ctx context.Context, confirmed bool) plan.Options {
	return plan.Options{Estimate: c.est, Confirmed: confirmed, Project: c.cfg.Project,
		Budget: c.cfg.Budget, MonthToDate: c.monthToDate(ctx)}
}

// withinBudget returns an errBudget error when n instances costing add
// dollars per hour in all would take the project past its budget: its
// spend per hour past MaxPerHour, or when the month's MaxPerMonth is
// already spent. A confirmed plan does not lift it: the budget binds what
// is created, whatever was planned.
func (c *Controller) withinBudget(ctx context.Context, n int, add float64) error {
	b := c.cfg.Budget
	if !b.Limited() || add <= 0 {
		return nil
	}
	perHour, mtd, err := c.projectSpend(ctx)
	if err != nil {
		return err
	}
	if b.MaxPerMonth > 0 && mtd >= b.MaxPerMonth {
		return fmt.Errorf("%w: project %s spent $%.2f of its budget of $%.2f this month", errBudget, c.cfg.Project, mtd, b.MaxPerMonth)
	}
	if b.MaxPerHour > 0 && perHour+add > b.MaxPerHour {
		what := "instance"
		if n != 1 {
			what = fmt.Sprintf("%d instances", n)
		}
		return fmt.Errorf("%w: %s at $%.2f/h would take project %s to $%.2f/h, over its budget of $%.2f/h",
			errBudget, what, add, c.cfg.Project, perHour+add, b.MaxPerHour)
	}
	return nil
}

// budgetBlocked tells the observer, once per wait, that what (a job or a
// fleet) waits for the budget: msg differs from the status message it had.
func (c *Controller) budgetBlocked(kind, had, msg string) {
	if had != msg {
		c.obs.BudgetBlocked(c.cfg.Project, kind)
	}
}

// holdForBudget keeps a job submitted while the instance it needs would
// take the project past its budget, its status message saying so; the
// event (holdJob) and the metric are recorded once per wait.
func (c *Controller) holdForBudget(ctx context.Context, l store.Lease, job *store.Job, run *store.Run, err error) (time.Duration, error) {
	c.budgetBlocked("job", job.StatusMessage, err.Error())
	return c.holdJob(ctx, l, job, run, err.Error(), budgetPoll)
}

// blockFleetForBudget records that fleet f keeps fewer instances than its
// nodes ask because the next one would take the project past its budget:
// its status message says so, with an event and the metric once per wait.
// The resync looks again (retryBudgetFleets).
func (c *Controller) blockFleetForBudget(ctx context.Context, f store.Fleet, err error) error {
	if f.StatusMessage == err.Error() {
		return nil
	}
	c.budgetBlocked("fleet", f.StatusMessage, err.Error())
	f.StatusMessage = err.Error()
	if uerr := c.st.UpdateFleet(ctx, &f); uerr != nil {
		return uerr
	}
	c.event(ctx, "fleet", f.Name, f.ID, "waiting", f.Revision, f.StatusMessage)
	return nil
}

// clearFleetBudget clears a fleet's budget message once it provisions
// again.
func (c *Controller) clearFleetBudget(ctx context.Context, f *store.Fleet) error {
	if !strings.HasPrefix(f.StatusMessage, budgetPrefix) {
		return nil
	}
	f.StatusMessage = ""
	return c.st.UpdateFleet(ctx, f)
}

// retryBudgetFleets consolidates again the active backend fleets that wait
// for the budget (blockFleetForBudget): the spend may have dropped.
func (c *Controller) retryBudgetFleets(ctx context.Context) {
	fleets, err := c.st.ListFleets(ctx, store.InfraFilter{Project: c.cfg.Project, Limit: everyRow})
	if err != nil {
		c.log.Warn("list fleets waiting for the budget failed", "error", err)
		return
	}
	for _, f := range fleets {
		if f.Status != store.FleetActive || f.Deleted || !strings.HasPrefix(f.StatusMessage, budgetPrefix) {
			continue
		}
		var spec schema.Fleet
		if json.Unmarshal(f.Spec, &spec) != nil || spec.SSHConfig != nil {
			continue
		}
		if err := c.withFleetLock(ctx, f.ID, func() error { return c.consolidateCloudFleet(ctx, f, &spec, "") }); err != nil {
			c.log.Warn("consolidate fleet waiting for the budget failed", "fleet", f.Name, "error", err)
		}
	}
}
