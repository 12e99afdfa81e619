package web

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
)

// fakeServiceStatuses is the reconciler's dashboard view, by run name.
type fakeServiceStatuses map[string]ServiceStatus

func (f fakeServiceStatuses) ServiceStatus(_ context.Context, project, run string) (ServiceStatus, error) {
	st, ok := f[run]
	if !ok || project != DefaultProject {
		return ServiceStatus{}, fmt.Errorf("service %s/%s: %w", project, run, ErrNotFound)
	}
	return st, nil
}

// dashboardStatus is a service with two replicas, one ready and one
// failing its probe, and three samples ten seconds apart.
func dashboardStatus() ServiceStatus {
	yes, no := true, false
	at := t0.Add(-5 * time.Second)
	return ServiceStatus{
		RPS: 12.5, RPSWindowSeconds: 60, MinReplicas: 1, MaxReplicas: 3, DesiredReplicas: 2, ReadyReplicas: 1,
		Replicas: []ServiceReplicaStatus{
			{JobID: "job-w0", JobName: "web-0-0", Revision: "0123456789abcdef0123", ReplicaNum: 0, Status: "running", Address: "127.0.0.1:8000", Ready: true,
				Probes: []ProbeStatus{{Method: "get", URL: "/health", Passes: 3, ReadyAfter: 2, LastProbeAt: &at, LastOK: &yes}}},
			{JobID: "job-w1", JobName: "web-0-1", Revision: "0123456789abcdef0123", ReplicaNum: 1, SubmissionNum: 1, Status: "running", Address: "127.0.0.1:8001",
				Probes: []ProbeStatus{{Method: "get", URL: "/health", Passes: 0, ReadyAfter: 2, LastProbeAt: &at, LastOK: &no}}},
		},
		History: []ServiceSample{
			{At: t0.Add(-20 * time.Second), RPS: 0, Replicas: 1, DesiredReplicas: 1},
			{At: t0.Add(-10 * time.Second), RPS: 20, Replicas: 1, DesiredReplicas: 2},
			{At: t0, RPS: 12.5, Replicas: 1, DesiredReplicas: 2},
		},
		HistoryIntervalSeconds: 10,
	}
}

// dashboardFixture serves a service run web (and the task hello) with the
// given statuses; nil leaves ServiceStatuses unset.
func dashboardFixture(t *testing.T, statuses ServiceStatuses) *fixture {
	t.Helper()
	f := newFixture(t, func(_ *Config, d *Deps) {
		d.Services = &fakeServices{m: map[string]Service{}}
		d.ServiceStatuses = statuses
	})
	f.store.putRun(Run{Name: "web", Type: "service", Status: "running", Revision: "0123456789abcdef0123", SubmittedAt: t0.Add(-time.Hour),
		Jobs: []Job{
			{ID: "job-w1", SubmissionID: "job-w1", SubmissionNum: 1, Status: "running", SubmittedAt: t0.Add(-time.Hour)},
			{ID: "job-w0", SubmissionID: "job-w0", Status: "running", SubmittedAt: t0.Add(-time.Hour)},
		}})
	return f
}

func (f *fixture) page(t *testing.T, path string) *goquery.Document {
	t.Helper()
	resp := f.do(t, "GET", path, adminTok, nil)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, readBody(t, resp))
	}
	d, err := goquery.NewDocumentFromReader(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestRunPage_serviceShowsReplicasProbesTrafficAndChart: a service's run
// page links its URL and shows its rps, ready and desired replicas, each
// replica's probe state, and the chart of its samples, all without
// JavaScript.
func TestRunPage_serviceShowsReplicasProbesTrafficAndChart(t *testing.T) {
	f := dashboardFixture(t, fakeServiceStatuses{"web": dashboardStatus()})
	d := f.page(t, "/runs/web")
	if href, _ := d.Find("[data-testid=service-url]").Attr("href"); href != "/proxy/services/main/web/" {
		t.Errorf("service URL link = %q", href)
	}
	sec := d.Find("[data-testid=service]")
	if sec.Length() != 1 {
		t.Fatal("no service section")
	}
	if got := squash(sec.Find("[data-testid=service-rps]").Text()); got != "12.5 over the last 60 s" {
		t.Errorf("rps = %q", got)
	}
	if got := squash(sec.Find("[data-testid=service-replicas]").Text()); got != "1 ready of 2 desired (range 1..3)" {
		t.Errorf("replicas = %q", got)
	}
	for _, tc := range []struct {
		row, ready, probe string
	}{
		{row: "replica-row-0-job-w0", ready: "yes", probe: "GET /health 2/2 passes · last passed 5s ago"},
		{row: "replica-row-1-job-w1", ready: "no", probe: "GET /health 0/2 passes · last failed 5s ago"},
	} {
		row := sec.Find("[data-testid=" + tc.row + "]")
		if row.Length() != 1 {
			t.Fatalf("no row %s", tc.row)
		}
		if got := squash(row.Find("[data-testid=replica-ready]").Text()); got != tc.ready {
			t.Errorf("%s ready = %q, want %q", tc.row, got, tc.ready)
		}
		if got := squash(row.Find("[data-testid=replica-probe]").Text()); got != tc.probe {
			t.Errorf("%s probe = %q, want %q", tc.row, got, tc.probe)
		}
		if !strings.Contains(row.Text(), "127.0.0.1:800") || !strings.Contains(row.Text(), "@0123456") {
			t.Errorf("%s lacks its address or revision: %q", tc.row, squash(row.Text()))
		}
	}
	svg := sec.Find("svg[data-testid=traffic-chart]")
	if svg.Length() != 1 {
		t.Fatal("no traffic chart")
	}
	for _, line := range []string{"traffic-rps", "traffic-ready", "traffic-desired"} {
		pts, _ := svg.Find("[data-testid=" + line + "]").Attr("points")
		if strings.Count(pts, ",") < 3 { // three samples
			t.Errorf("%s has points %q, want one per sample at least", line, pts)
		}
	}
	if got := squash(svg.Find("title").First().Text()); !strings.Contains(got, "peak 20.0 rps, now 12.5 rps with 1 of 2 replicas ready") {
		t.Errorf("chart title = %q", got)
	}
	if d.Find("[data-testid=traffic-summary]").Length() != 1 {
		t.Error("no summary in words under the chart")
	}
}

// TestRunPage_serviceWithoutDashboardOrSamples: without ServiceStatuses
// the page keeps the URL and has no section; with no samples yet the
// section says so instead of drawing; a task has no section.
func TestRunPage_serviceWithoutDashboardOrSamples(t *testing.T) {
	f := dashboardFixture(t, nil)
	d := f.page(t, "/runs/web")
	if d.Find("[data-testid=service-url]").Length() != 1 || d.Find("[data-testid=service]").Length() != 0 {
		t.Error("not wired: want the URL and no service section")
	}
	st := dashboardStatus()
	st.History = nil
	f = dashboardFixture(t, fakeServiceStatuses{"web": st})
	d = f.page(t, "/runs/web")
	if d.Find("[data-testid=traffic-empty]").Length() != 1 || d.Find("[data-testid=traffic-chart]").Length() != 0 {
		t.Error("no samples: want the empty note and no chart")
	}
	if d = f.page(t, "/runs/hello"); d.Find("[data-testid=service]").Length() != 0 {
		t.Error("a task has a service section")
	}
}

// TestAPI_getRunCarriesTheServiceDashboard: GET /api/v1/runs/{name} of a
// service carries `service` with API.md's field names; a task does not.
func TestAPI_getRunCarriesTheServiceDashboard(t *testing.T) {
	f := dashboardFixture(t, fakeServiceStatuses{"web": dashboardStatus()})
	resp := f.do(t, "GET", "/api/v1/runs/web", viewerTok, nil)
	body := readBody(t, resp)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	var got struct {
		ServiceURL string                     `json:"service_url"`
		Service    map[string]json.RawMessage `json:"service"`
	}
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"rps", "rps_window_seconds", "min_replicas", "max_replicas", "desired_replicas", "ready_replicas", "replicas", "history", "history_interval_seconds"} {
		if _, ok := got.Service[k]; !ok {
			t.Errorf("service lacks %q: %s", k, body)
		}
	}
	var reps []map[string]any
	if err := json.Unmarshal(got.Service["replicas"], &reps); err != nil || len(reps) != 2 {
		t.Fatalf("replicas %s: %v", got.Service["replicas"], err)
	}
	probe := reps[1]["probes"].([]any)[0].(map[string]any)
	if reps[1]["ready"] != false || reps[1]["address"] != "127.0.0.1:8001" || probe["passes"] != 0.0 || probe["ready_after"] != 2.0 ||
		probe["last_ok"] != false || probe["last_probe_at"] != "2026-11-21T23:59:55Z" {
		t.Errorf("replica 1 = %v", reps[1])
	}
	var hist []ServiceSample
	if err := json.Unmarshal(got.Service["history"], &hist); err != nil || len(hist) != 3 || hist[1].RPS != 20 || hist[1].DesiredReplicas != 2 {
		t.Errorf("history %s: %v", got.Service["history"], err)
	}
	resp = f.do(t, "GET", "/api/v1/runs/hello", viewerTok, nil)
	if body := readBody(t, resp); strings.Contains(body, `"service"`) {
		t.Errorf("a task carries service: %s", body)
	}
}

// TestServiceChart_layout: the chart's lines stay inside the plot, the
// rps axis tops at a round number, replica counts are drawn as steps, and
// no samples draw nothing.
func TestServiceChart_layout(t *testing.T) {
	if ch := serviceChart(nil); !ch.Empty {
		t.Error("no samples: want an empty chart")
	}
	ch := serviceChart(dashboardStatus().History)
	if ch.Empty {
		t.Fatal("empty chart")
	}
	pts := func(s string) [][2]int {
		var out [][2]int
		for _, p := range strings.Fields(s) {
			x, y, _ := strings.Cut(p, ",")
			xi, _ := strconv.Atoi(x)
			yi, _ := strconv.Atoi(y)
			out = append(out, [2]int{xi, yi})
		}
		return out
	}
	rps, ready, desired := pts(ch.RPS), pts(ch.Ready), pts(ch.Desired)
	if len(rps) != 3 || len(ready) != 3 || len(desired) != 4 {
		t.Fatalf("%d rps, %d ready, %d desired points; want 3, 3 and 4 (a step where the count changed)", len(rps), len(ready), len(desired))
	}
	if desired[1][0] != desired[2][0] || desired[1][1] == desired[2][1] {
		t.Errorf("desired %v: want a vertical step at the second sample", desired)
	}
	for _, p := range append(append(rps, ready...), desired...) {
		if p[0] < ch.Left || p[0] > ch.Right || p[1] < ch.Top || p[1] > ch.Bottom {
			t.Errorf("point %v outside the plot %d..%d × %d..%d", p, ch.Left, ch.Right, ch.Top, ch.Bottom)
		}
	}
	if rps[1][1] != ch.Top || rps[0][1] != ch.Bottom || rps[0][0] != ch.Left {
		t.Errorf("rps line %v: want the peak of 20 at the top, 0 at the bottom left", rps)
	}
	if top := ch.RPSLabels[len(ch.RPSLabels)-1].Label; top != "20" {
		t.Errorf("rps axis tops at %s, want 20", top)
	}
	for _, tc := range []struct{ in, want float64 }{{0, 1}, {0.3, 0.5}, {1, 1}, {12.5, 20}, {51, 100}} {
		if got := niceCeil(tc.in); got != tc.want {
			t.Errorf("niceCeil(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

// squash collapses runs of white space.
func squash(s string) string { return strings.Join(strings.Fields(s), " ") }
