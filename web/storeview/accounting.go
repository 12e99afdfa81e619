package storeview

import (
	"context"
	"time"

	"hoist/store"
	"hoist/web"
)

// Project implements web.Accounting: the project the view shows.
func (v *View) Project() string { return v.project }

// BilledInstances implements web.Accounting. An instance is billed from
// the start of its provisioning (its creation when that is unknown) until
// it finished; one terminated without a finish time is taken to have
// finished when its row was last written.
func (v *View) BilledInstances(ctx context.Context, since time.Time) ([]web.BilledInstance, error) {
	is, err := v.st.ListInstancesBilledSince(ctx, v.project, since)
	if err != nil {
		return nil, err
	}
	out := make([]web.BilledInstance, 0, len(is))
	for _, i := range is {
		b := web.BilledInstance{Name: i.Name, Price: i.Price, From: i.StartedAt, To: timePtr(i.FinishedAt)}
		if b.From.IsZero() {
			b.From = i.CreatedAt
		}
		if b.To == nil && i.Status == store.InstanceTerminated {
			b.To = timePtr(i.UpdatedAt)
		}
		out = append(out, b)
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
