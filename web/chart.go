package web

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"hoist/reconciler/source"
)

// Server-side SVG charts: geometry is computed here, templ draws it.

const (
	chartWidth  = 900
	chartLabelW = 190
	chartRowH   = 22
	chartAxisH  = 22
)

type timelineChart struct {
	Width, Height int
	Rows          []tlRow
	Ticks         []tick
	Empty         bool
}

type tlRow struct {
	Label string
	Y     int
	Segs  []tlSeg
}

type tlSeg struct {
	X, W  int
	Class string
	Title string
}

type tick struct {
	X     int
	Label string
}

// runTimeline lays out a Gantt of the run's submissions, oldest at the top:
// a provisioning segment (submitted → started) and a running segment
// (started → finished, or now) coloured by the final status.
func runTimeline(r Run, now time.Time) timelineChart {
	jobs := make([]Job, len(r.Jobs))
	for i, j := range r.Jobs { // oldest first
		jobs[len(r.Jobs)-1-i] = j
	}
	ch := timelineChart{Width: chartWidth}
	if len(jobs) == 0 {
		ch.Empty = true
		ch.Height = chartAxisH
		return ch
	}
	start, end := jobs[0].SubmittedAt, now
	for _, j := range jobs {
		if j.SubmittedAt.Before(start) {
			start = j.SubmittedAt
		}
	}
	allDone := true
	var last time.Time
	for _, j := range jobs {
		if j.FinishedAt == nil {
			allDone = false
		} else if j.FinishedAt.After(last) {
			last = *j.FinishedAt
		}
	}
	if allDone && !last.IsZero() {
		end = last
	}
	if !end.After(start) {
		end = start.Add(time.Minute)
	}
	span := end.Sub(start)
	plotW := chartWidth - chartLabelW - 30
	x := func(t time.Time) int {
		return chartLabelW + int(math.Round(float64(plotW)*float64(t.Sub(start))/float64(span)))
	}
	for i, j := range jobs {
		row := tlRow{Label: fmt.Sprintf("#%d %s", j.SubmissionNum, shortID(j.SubmissionID)), Y: chartAxisH + i*chartRowH}
		if j.Revision != "" {
			row.Label += " @" + source.ShortID(j.Revision)
		}
		stop := now
		if j.FinishedAt != nil {
			stop = *j.FinishedAt
		}
		started := stop
		if j.StartedAt != nil {
			started = *j.StartedAt
		}
		if started.After(j.SubmittedAt) {
			row.Segs = append(row.Segs, seg(x(j.SubmittedAt), x(started), "seg-provisioning", "provisioning", j.SubmittedAt, started))
		}
		if stop.After(started) || j.StartedAt != nil {
			row.Segs = append(row.Segs, seg(x(started), x(stop), "seg-"+j.Status, j.Status, started, stop))
		}
		ch.Rows = append(ch.Rows, row)
	}
	ch.Height = chartAxisH + len(jobs)*chartRowH + 4
	for k := 0; k <= 4; k++ {
		t := start.Add(span * time.Duration(k) / 4)
		ch.Ticks = append(ch.Ticks, tick{X: x(t), Label: t.UTC().Format("15:04")})
	}
	return ch
}

func seg(x0, x1 int, class, status string, from, to time.Time) tlSeg {
	w := x1 - x0
	if w < 2 {
		w = 2
	}
	return tlSeg{X: x0, W: w, Class: class,
		Title: fmt.Sprintf("%s %s → %s (%s)", status, from.UTC().Format("15:04:05"), to.UTC().Format("15:04:05"), humanDuration(to.Sub(from)))}
}

type spendChart struct {
	Width, Height int
	Bars          []spendBar
	Ticks         []tick
	YLabels       []yLabel
	Total         float64
}

type spendBar struct {
	X, Y, W, H int
	Title      string
}

type yLabel struct {
	Y     int
	Label string
}

// spendBars lays out a bar chart of spend per bucket.
func spendBars(pts []SpendPoint) spendChart {
	const h, top, bottom, left = 180, 10, 22, 60
	ch := spendChart{Width: chartWidth, Height: h}
	maxC := 0.0
	for _, p := range pts {
		maxC = math.Max(maxC, p.Cost)
		ch.Total += p.Cost
	}
	if maxC == 0 {
		maxC = 1
	}
	plotH := h - top - bottom
	plotW := chartWidth - left - 10
	if len(pts) == 0 {
		return ch
	}
	bw := plotW / len(pts)
	for i, p := range pts {
		bh := int(math.Round(float64(plotH) * p.Cost / maxC))
		ch.Bars = append(ch.Bars, spendBar{X: left + i*bw + 1, Y: top + plotH - bh, W: max(bw-2, 1), H: bh,
			Title: fmt.Sprintf("%s–%s: $%.2f", p.Start.UTC().Format("Jan 2 15:04"), p.End.UTC().Format("15:04"), p.Cost)})
		if i%max(len(pts)/6, 1) == 0 {
			ch.Ticks = append(ch.Ticks, tick{X: left + i*bw, Label: p.Start.UTC().Format("Jan 2 15:04")})
		}
	}
	for k := 0; k <= 2; k++ {
		v := maxC * float64(k) / 2
		ch.YLabels = append(ch.YLabels, yLabel{Y: top + plotH - int(float64(plotH)*float64(k)/2), Label: "$" + strconv.FormatFloat(v, 'f', 2, 64)})
	}
	return ch
}

// timeTicks labels five evenly spaced times from start to end on a time
// axis that x maps to pixels, with seconds on spans under ten minutes.
func timeTicks(start, end time.Time, x func(time.Time) int) []tick {
	layout := "15:04"
	if end.Sub(start) < 10*time.Minute {
		layout = "15:04:05"
	}
	ticks := make([]tick, 0, 5)
	for k := 0; k <= 4; k++ {
		t := start.Add(end.Sub(start) * time.Duration(k) / 4)
		ticks = append(ticks, tick{X: x(t), Label: t.UTC().Format(layout)})
	}
	return ticks
}

func itoa(n int) string { return strconv.Itoa(n) }

// trafficChart is a service's requests per second and replica counts over
// time: two axes (rps on the left, replicas on the right) over one time
// axis.
type trafficChart struct {
	Width, Height int
	// Left and Right are the x of the plot's edges, Top and Bottom the y.
	Left, Right, Top, Bottom int
	// RPS is the rps line, Ready and Desired the replica counts as steps
	// (SVG polyline points).
	RPS, Ready, Desired string
	// RPSLabels are the left axis's labels, ReplicaLabels the right's.
	RPSLabels, ReplicaLabels []yLabel
	Ticks                    []tick
	// Summary says in words what the chart draws.
	Summary string
	Empty   bool
}

// serviceChart lays out a service's samples (oldest first) as a
// trafficChart.
func serviceChart(samples []ServiceSample) trafficChart {
	const h, top, bottom, left, right = 170, 12, 22, 60, 40
	ch := trafficChart{Width: chartWidth, Height: h, Left: left, Right: chartWidth - right, Top: top, Bottom: h - bottom}
	if len(samples) == 0 {
		ch.Empty = true
		return ch
	}
	start, end := samples[0].At, samples[len(samples)-1].At
	if end.Sub(start) < time.Minute {
		end = start.Add(time.Minute)
	}
	maxRPS, maxRep, peak := 0.0, 1, 0.0
	for _, s := range samples {
		maxRPS = math.Max(maxRPS, s.RPS)
		maxRep = max(maxRep, s.Replicas, s.DesiredReplicas)
	}
	peak = maxRPS
	maxRPS = niceCeil(maxRPS)
	plotW, plotH := float64(ch.Right-ch.Left), float64(ch.Bottom-ch.Top)
	x := func(t time.Time) int {
		return ch.Left + int(math.Round(plotW*float64(t.Sub(start))/float64(end.Sub(start))))
	}
	y := func(v, top float64) int { return ch.Bottom - int(math.Round(plotH*v/top)) }
	var rps, ready, desired []byte
	pt := func(b []byte, x, y int) []byte {
		if len(b) > 0 {
			b = append(b, ' ')
		}
		return fmt.Appendf(b, "%d,%d", x, y)
	}
	for i, s := range samples {
		xi := x(s.At)
		rps = pt(rps, xi, y(s.RPS, maxRPS))
		// Steps: a count holds until the next sample.
		if i > 0 && samples[i-1].Replicas != s.Replicas {
			ready = pt(ready, xi, y(float64(samples[i-1].Replicas), float64(maxRep)))
		}
		if i > 0 && samples[i-1].DesiredReplicas != s.DesiredReplicas {
			desired = pt(desired, xi, y(float64(samples[i-1].DesiredReplicas), float64(maxRep)))
		}
		ready = pt(ready, xi, y(float64(s.Replicas), float64(maxRep)))
		desired = pt(desired, xi, y(float64(s.DesiredReplicas), float64(maxRep)))
	}
	ch.RPS, ch.Ready, ch.Desired = string(rps), string(ready), string(desired)
	for k := 0; k <= 2; k++ {
		v := maxRPS * float64(k) / 2
		ch.RPSLabels = append(ch.RPSLabels, yLabel{Y: y(v, maxRPS), Label: strconv.FormatFloat(v, 'f', -1, 64)})
	}
	for k := 0; k <= maxRep; k += max(maxRep/4, 1) {
		ch.ReplicaLabels = append(ch.ReplicaLabels, yLabel{Y: y(float64(k), float64(maxRep)), Label: strconv.Itoa(k)})
	}
	ch.Ticks = timeTicks(start, end, x)
	last := samples[len(samples)-1]
	ch.Summary = fmt.Sprintf("%d samples from %s to %s: peak %s rps, now %s rps with %d of %d replicas ready",
		len(samples), samples[0].At.UTC().Format("15:04:05"), last.At.UTC().Format("15:04:05"),
		fmtRPS(peak), fmtRPS(last.RPS), last.Replicas, last.DesiredReplicas)
	return ch
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten (1 for v ≤ 0),
// for an axis's top.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p*(1+1e-9) {
			return m * p
		}
	}
	return 10 * p
}

// fmtRPS formats requests per second for people: two decimals below 10,
// one above.
func fmtRPS(v float64) string {
	if v < 10 {
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
	return strconv.FormatFloat(v, 'f', 1, 64)
}

// replicaRange says a service's `replicas` range in words.
func replicaRange(lo, hi int) string {
	if lo == hi {
		return "fixed at " + strconv.Itoa(lo)
	}
	return "range " + strconv.Itoa(lo) + ".." + strconv.Itoa(hi)
}
