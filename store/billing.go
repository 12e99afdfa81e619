package store

import "time"

// BilledSpan is when the instance was billed: from the start of its
// provisioning (its creation when that is unknown) until it finished; to
// is nil while it lives. One terminated without a finish time is taken to
// have finished when its row was last written.
func (i Instance) BilledSpan() (from time.Time, to *time.Time) {
	from = i.StartedAt
	if from.IsZero() {
		from = i.CreatedAt
	}
	switch {
	case !i.FinishedAt.IsZero():
		t := i.FinishedAt
		to = &t
	case i.Status == InstanceTerminated:
		t := i.UpdatedAt
		to = &t
	}
	return from, to
}

// SpendBetween is what instances cost between start and end, in dollars:
// each one's price per hour times the hours of its BilledSpan within
// [start, end].
func SpendBetween(is []Instance, start, end time.Time) float64 {
	var total float64
	for _, i := range is {
		from, to := i.BilledSpan()
		hi := end
		if to != nil && to.Before(end) {
			hi = *to
		}
		if from.Before(start) {
			from = start
		}
		if hi.After(from) {
			total += i.Price * hi.Sub(from).Hours()
		}
	}
	return total
}
