package web

import (
	"context"
	"net/http"
	"time"

	"github.com/labstack/echo/v5"
)

// SpendPoint is the estimated spend of one time bucket.
type SpendPoint struct {
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	// Cost is USD spent in the bucket: price per hour × hours each
	// submission ran on its instance.
	Cost float64 `json:"cost"`
}

// spendWindow parses ?window= (24h default, 7d or 30d) into a window and
// bucket size.
func spendWindow(v string) (time.Duration, time.Duration, error) {
	switch v {
	case "", "24h":
		return 24 * time.Hour, time.Hour, nil
	case "7d":
		return 7 * 24 * time.Hour, 6 * time.Hour, nil
	case "30d":
		return 30 * 24 * time.Hour, 24 * time.Hour, nil
	}
	return 0, 0, echo.NewHTTPError(http.StatusBadRequest, "window must be 24h, 7d or 30d")
}

// spend buckets the cost of every submission of project p that ran in the window.
func (s *Server) spend(ctx context.Context, p *project, window, step time.Duration) ([]SpendPoint, error) {
	now := s.now().UTC()
	end := now.Truncate(step).Add(step)
	start := end.Add(-window)
	jobs, err := p.Store.ListJobs(ctx, JobFilter{Since: start})
	if err != nil {
		return nil, err
	}
	n := int(window / step)
	pts := make([]SpendPoint, n)
	for i := range pts {
		pts[i].Start = start.Add(time.Duration(i) * step)
		pts[i].End = pts[i].Start.Add(step)
	}
	for _, j := range jobs {
		if j.Price <= 0 {
			continue
		}
		from := j.SubmittedAt
		if j.StartedAt != nil {
			from = *j.StartedAt
		}
		to := now
		if j.FinishedAt != nil {
			to = *j.FinishedAt
		}
		for i := range pts {
			lo, hi := maxTime(from, pts[i].Start), minTime(to, pts[i].End)
			if hi.After(lo) {
				pts[i].Cost += j.Price * hi.Sub(lo).Hours()
			}
		}
	}
	return pts, nil
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func (s *Server) apiSpend(c *echo.Context) error {
	window, step, err := spendWindow(c.QueryParam("window"))
	if err != nil {
		return err
	}
	pts, err := s.spend(c.Request().Context(), s.proj(c).project, window, step)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, pts)
}
