package web

import (
	"context"
	"net/http"
	"time"

	"github.com/labstack/echo/v5"

	"hoist/reconciler/plan"
)

func (s *Server) pageOverview(c *echo.Context) error {
	ctx := c.Request().Context()
	st, err := s.proj(c).Syncer.SyncStatus(ctx)
	if err != nil {
		return err
	}
	_, canConfirm := s.proj(c).Controller.(Confirmer)
	d := overviewData{Sync: st, Controls: s.proj(c).Controller != nil, CanConfirm: canConfirm}
	if st.Errors == nil {
		d.Sync.Errors = []string{}
	}
	for _, sha := range []string{st.Revision, st.LatestRevision} {
		if sha == "" {
			continue
		}
		if r, err := s.proj(c).Store.GetRevision(ctx, sha); err == nil {
			if sha == st.Revision {
				d.Applied = &r
			}
			if sha == st.LatestRevision {
				rr := r
				d.Latest = &rr
			}
		}
	}
	counts, err := s.countRuns(ctx, s.proj(c).project)
	if err != nil {
		return err
	}
	for _, stName := range runStatuses {
		if counts[stName] > 0 {
			d.Counts = append(d.Counts, statusCount{stName, counts[stName]})
		}
	}
	if d.Budget, err = s.budgetStatus(ctx, s.proj(c).project); err != nil {
		return err
	}
	d.SpendPerHour = d.Budget.SpendPerHour
	if d.Runs, err = s.proj(c).runList.list(ctx, s.proj(c).Store, RunFilter{Limit: 10}); err != nil {
		return err
	}
	pts, err := s.spend(ctx, s.proj(c).project, 24*time.Hour, time.Hour)
	if err != nil {
		return err
	}
	d.Spend = spendBars(pts)
	return s.render(c, http.StatusOK, overviewPage(s.viewer(c), d))
}

// spendPerHour is what project p's billed instances cost per hour now
// (plan.CostsOf): the same figure as a plan's spend now.
func (s *Server) spendPerHour(ctx context.Context, p *project) (float64, error) {
	if p.Inventory == nil {
		return 0, nil
	}
	is, err := p.Inventory.ListInstances(ctx, "")
	if err != nil {
		return 0, err
	}
	in := make([]plan.Instance, 0, len(is))
	for _, i := range is {
		in = append(in, plan.Instance{Fleet: i.Fleet, Status: i.Status, Price: i.Price})
	}
	return plan.CostsOf(in).Total, nil
}
