package web_test

import (
	"encoding/json"
	"io"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"hoist/reconciler/plan"
	"hoist/store"
	"hoist/web"
	"hoist/web/internal/fixture"
	"hoist/web/storeview"
)

// TestMetrics_moneyAndHealthSeriesComeFromTheStore scrapes /metrics over
// a real SQLite store: the fixture's two live instances (created two days
// before now), an instance of last month finished mid-month, one of last
// month still running on spot, one finished last month, and the fixture's
// jobs plus one placed on another backend.
func TestMetrics_moneyAndHealthSeriesComeFromTheStore(t *testing.T) {
	ctx := t.Context()
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	storeNow := now.Add(-48 * time.Hour) // when the fixture's rows are written
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "hoist.db"), store.Options{Now: func() time.Time { return storeNow }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := fixture.Seed(ctx, st, now); err != nil {
		t.Fatal(err)
	}
	fl, err := st.GetFleetByName(ctx, store.DefaultProject, "gpu-pool")
	if err != nil {
		t.Fatal(err)
	}
	at := func(month time.Month, day, hour int) time.Time {
		return time.Date(2026, month, day, hour, 0, 0, 0, time.UTC)
	}
	spot := &store.Instance{Name: "spot-0", Backend: "aws", Region: "us-east-1", Price: 0.5, Status: store.InstanceBusy,
		Offer: json.RawMessage(`{"instance":"g5.xlarge","spot":true}`), StartedAt: at(10, 1, 0)}
	for _, i := range []*store.Instance{
		spot,
		{Name: "gpu-pool-2", FleetID: fl.ID, Backend: "local", Region: "home", Price: 1, Status: store.InstanceTerminated,
			StartedAt: at(10, 31, 12), FinishedAt: at(11, 10, 0)},
		{Name: "old-0", Backend: "aws", Region: "us-east-1", Price: 3, Status: store.InstanceTerminated,
			StartedAt: at(10, 1, 0), FinishedAt: at(10, 20, 0), Deleted: true},
	} {
		if err := st.CreateInstance(ctx, i); err != nil {
			t.Fatal(err)
		}
	}
	run := &store.Run{Name: "finetune", Type: "task", Status: store.RunRunning, SubmittedAt: now.Add(-time.Hour)}
	if err := st.CreateRun(ctx, run); err != nil {
		t.Fatal(err)
	}
	if err := st.CreateJob(ctx, &store.Job{RunID: run.ID, RunName: run.Name, JobName: "finetune-0-0", Status: store.JobRunning,
		Backend: "aws", InstanceID: spot.ID, SubmittedAt: now.Add(-time.Hour), StartedAt: now.Add(-50 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
	view := storeview.New(st, "")
	srv, err := web.New(web.Config{AdminToken: "bootstrap-admin", Now: func() time.Time { return now },
		Budgets: map[string]plan.Budget{store.DefaultProject: {MaxPerHour: 10, MaxPerMonth: 1000}}},
		web.Deps{Store: view, Syncer: noopSyncer{view}, Tokens: view, Inventory: view})
	if err != nil {
		t.Fatal(err)
	}
	srv.Metrics().ObserveJobFinished("aws", "done", 90*time.Second)
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		srv.Close()
		ts.Close()
	})
	resp, err := ts.Client().Get(ts.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	m := string(b)
	// Spend: the fixture's instances 48 h at $1.25 + $0.75, gpu-pool-2
	// 1–10 Nov (216 h) at $1, spot-0 since 1 Nov (516 h) at $0.5, old-0
	// nothing: 96 + 216 + 258.
	for _, want := range []string{
		`hoist_instance_price_dollars_per_hour{backend="local",fleet="gpu-pool",instance="gpu-pool-0",project="main",region="home",spot="false"} 1.25`,
		`hoist_instance_price_dollars_per_hour{backend="local",fleet="gpu-pool",instance="gpu-pool-1",project="main",region="home",spot="false"} 0.75`,
		`hoist_instance_price_dollars_per_hour{backend="aws",fleet="",instance="spot-0",project="main",region="us-east-1",spot="true"} 0.5`,
		`hoist_project_spend_month_to_date_dollars{project="main"} 570`,
		// All time: this month's 570, old-0 1–20 Oct (456 h) at $3,
		// gpu-pool-2 31 Oct from noon (12 h) at $1, spot-0 in October
		// (744 h) at $0.5.
		`hoist_project_spend_dollars_total{project="main"} 2322`,
		`hoist_project_budget_dollars_per_hour{project="main"} 10`,
		`hoist_project_budget_dollars_per_month{project="main"} 1000`,
		`hoist_instances{backend="local",project="main",status="busy"} 1`,
		`hoist_instances{backend="local",project="main",status="idle"} 1`,
		`hoist_instances{backend="local",project="main",status="terminated"} 1`,
		`hoist_instances{backend="local",project="main",status="pending"} 0`,
		`hoist_instances{backend="aws",project="main",status="busy"} 1`,
		`hoist_instances{backend="aws",project="main",status="terminated"} 0`,
		`hoist_jobs{backend="none",project="main",status="failed"} 2`,
		`hoist_jobs{backend="none",project="main",status="done"} 1`,
		`hoist_jobs{backend="none",project="main",status="running"} 1`,
		`hoist_jobs{backend="none",project="main",status="terminated"} 0`,
		`hoist_jobs{backend="aws",project="main",status="running"} 1`,
		`hoist_jobs{backend="aws",project="main",status="done"} 0`,
		`hoist_job_duration_seconds_bucket{backend="aws",status="done",le="64"} 0`,
		`hoist_job_duration_seconds_bucket{backend="aws",status="done",le="256"} 1`,
		`hoist_job_duration_seconds_sum{backend="aws",status="done"} 90`,
		`hoist_job_duration_seconds_count{backend="aws",status="done"} 1`,
		`# HELP hoist_project_spend_month_to_date_dollars USD spent since the start of the current UTC month:`,
	} {
		if !strings.Contains(m, want+"\n") && !strings.Contains(m, want+" ") {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	for _, absent := range []string{`instance="gpu-pool-2"`, `instance="old-0"`} {
		if strings.Contains(m, absent) {
			t.Errorf("/metrics prices a terminated instance: %s", absent)
		}
	}
}

// TestBudget_shownBesideTheSpend: GET /api/v1/budget and the overview
// show the project's budget beside its month-to-date and hourly spend,
// over a real SQLite store (the fixture's instances: $1.25/h and $0.75/h,
// created two days before now).
func TestBudget_shownBesideTheSpend(t *testing.T) {
	ctx := t.Context()
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "hoist.db"), store.Options{Now: func() time.Time { return now.Add(-48 * time.Hour) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := fixture.Seed(ctx, st, now); err != nil {
		t.Fatal(err)
	}
	view := storeview.New(st, "")
	for _, tc := range []struct {
		name    string
		budgets map[string]plan.Budget
		api     string
		page    string
	}{
		{"with a budget", map[string]plan.Budget{"main": {MaxPerHour: 10, MaxPerMonth: 500}},
			`{"project":"main","max_per_hour":10,"max_per_month":500,"spend_per_hour":2,"spend_month_to_date":96}`,
			"spent $96.00 of $500.00 this month; $2.00/h of $10.00/h"},
		{"without a budget", nil,
			`{"project":"main","max_per_hour":null,"max_per_month":null,"spend_per_hour":2,"spend_month_to_date":96}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, err := web.New(web.Config{AdminToken: "bootstrap-admin", Now: func() time.Time { return now }, Budgets: tc.budgets},
				web.Deps{Store: view, Syncer: noopSyncer{view}, Tokens: view, Inventory: view})
			if err != nil {
				t.Fatal(err)
			}
			ts := httptest.NewServer(srv.Handler())
			t.Cleanup(func() {
				srv.Close()
				ts.Close()
			})
			get := func(path string) string {
				req := httptest.NewRequest("GET", ts.URL+path, nil)
				req.RequestURI = ""
				req.Header.Set("Authorization", "Bearer bootstrap-admin")
				resp, err := ts.Client().Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				if resp.StatusCode != 200 {
					t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
				}
				return string(b)
			}
			if got := strings.TrimSpace(get("/api/v1/budget")); got != tc.api {
				t.Errorf("GET /api/v1/budget = %s, want %s", got, tc.api)
			}
			page := get("/")
			if tc.page == "" && strings.Contains(page, `data-testid="budget"`) {
				t.Errorf("the overview shows a budget the project does not have")
			}
			if tc.page != "" && !strings.Contains(page, tc.page) {
				t.Errorf("the overview lacks %q", tc.page)
			}
		})
	}
}
