package storeview

import (
	"context"
	"time"

	"hoist/web"
)

// Project implements web.Accounting: the project the view shows.
func (v *View) Project() string { return v.project }

// BilledInstances implements web.Accounting, each instance billed over
// its store.Instance.BilledSpan.
func (v *View) BilledInstances(ctx context.Context, since time.Time) ([]web.BilledInstance, error) {
	is, err := v.st.ListInstancesBilledSince(ctx, v.project, since)
	if err != nil {
		return nil, err
	}
	out := make([]web.BilledInstance, 0, len(is))
	for _, i := range is {
		from, to := i.BilledSpan()
		out = append(out, web.BilledInstance{Name: i.Name, Price: i.Price, From: from, To: to})
	}
	return out, nil
}

// CountJobs implements web.Accounting: the project's job submissions by
// status and backend.
func (v *View) CountJobs(ctx context.Context) ([]web.JobCount, error) {
	cs, err := v.st.CountJobsByStatusBackend(ctx, v.project)
	if err != nil {
		return nil, err
	}
	out := make([]web.JobCount, len(cs))
	for i, c := range cs {
		out[i] = web.JobCount{Status: c.Status, Backend: c.Backend, N: c.N}
	}
	return out, nil
}

var _ web.Accounting = (*View)(nil)
