package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"hoist/e2e/cloudsim/sim"
)

// TestBudget_heldAndWaitsUntilRaised drives a project's budget through
// `hoist serve`, Git and the simulated AWS: with `max_per_hour` below the
// price of the cheapest offer a fleet growing for jobs gets, a commit of
// the fleet and a task on it is held with the overrun; confirming it
// applies it, but no instance is created (none in the simulator, through
// several resyncs): the task waits with a message naming the budget, one
// event and hoist_budget_blocked_total say so. Restarting the server with
// a budget above the price provisions the instance and the task ends done.
func TestBudget_heldAndWaitsUntilRaised(t *testing.T) {
	e := newCloudEnv(t, "aws", "2s")
	s, r := e.s, e.r
	price := e.offers("on-demand", 1)[0].Price
	// Half the cheapest offer that fits: every offer the fleet may get
	// exceeds it; fifty times it takes any of them.
	low, high := price/2, price*50
	e.setBudget(low)

	r.write("fleet.dstack.yml", "type: fleet\nname: pool\nnodes: 0..1\nbackends: [aws]\nspot_policy: on-demand\nresources:\n  cpu: 2..\n  memory: 4GB..\n")
	r.write("hello.dstack.yml", task("hello", "  - echo within budget\n")+"fleets: [pool]\nspot_policy: on-demand\nresources:\n  cpu: 2..\n  memory: 4GB..\n")
	sha := r.commit("a growing fleet and a task on it")
	var st apiSync
	waitFor(t, cloudWithin, func() string { return fmt.Sprintf("revision %.8s held (last: %+v)", sha, st) }, func() bool {
		st = s.sync()
		return st.LatestRevision == sha && st.Held
	})
	wantHold := fmt.Sprintf("exceeds project main's budget of $%.2f/h by $", low)
	if len(st.HeldReasons) != 1 || !strings.HasPrefix(st.HeldReasons[0], "the plan's $") || !strings.Contains(st.HeldReasons[0], wantHold) {
		t.Fatalf("held reasons %q, want the plan's overrun of $%.2f/h", st.HeldReasons, low)
	}
	if code, body := s.do("POST", "/api/v1/sync/confirm", strings.NewReader(`{"revision":"`+sha+`"}`)); code != 200 {
		t.Fatalf("POST /api/v1/sync/confirm = %d %s", code, body)
	}
	var run apiRun
	waitFor(t, cloudWithin, func() string { return fmt.Sprintf("run waiting for the budget (last: %+v)", run) }, func() bool {
		s.getJSON("/api/v1/runs/hello", &run)
		return strings.HasPrefix(run.StatusMessage, "waiting: instance at $") &&
			strings.HasSuffix(run.StatusMessage, fmt.Sprintf(", over its budget of $%.2f/h", low))
	})
	wantWait := run.StatusMessage
	time.Sleep(5 * time.Second) // two resyncs or more: still nothing is created
	if s.getJSON("/api/v1/runs/hello", &run); run.Status != "submitted" || run.StatusMessage != wantWait {
		t.Fatalf("run %s %q, want submitted %q", run.Status, run.StatusMessage, wantWait)
	}
	for _, vm := range e.sim.Instances() {
		if vm.Kind == sim.KindInstance && e.ours(vm) {
			t.Fatalf("the simulator has VM %s (%s) while the budget forbids it", vm.ID, vm.State)
		}
	}
	var events []struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	}
	s.getJSON("/api/v1/events?kind=job&limit=1000", &events)
	waits := 0
	for _, ev := range events {
		if ev.Message == wantWait {
			waits++
		}
	}
	if waits != 1 {
		t.Fatalf("%d job events say %q, want 1 (once per wait)", waits, wantWait)
	}
	_, metrics := s.do("GET", "/metrics", nil)
	for _, want := range []string{
		`hoist_budget_blocked_total{kind="job",project="main"} 1`,
		fmt.Sprintf(`hoist_project_budget_dollars_per_hour{project="main"} %g`, low),
	} {
		if !strings.Contains(string(metrics), want+"\n") {
			t.Fatalf("/metrics lacks %s", want)
		}
	}

	began := time.Now()
	e.setBudget(high)
	s.waitRun("hello", sha, "done", cloudWithin)
	if got := s.logs("hello"); got != "within budget\n" {
		t.Fatalf("hello logs: %q", got)
	}
	var budget struct {
		MaxPerHour       float64 `json:"max_per_hour"`
		SpendMonthToDate float64 `json:"spend_month_to_date"`
	}
	if code := s.getJSON("/api/v1/budget", &budget); code != 200 || budget.MaxPerHour != high || budget.SpendMonthToDate <= 0 {
		t.Fatalf("GET /api/v1/budget = %d %+v, want the raised budget and some spend", code, budget)
	}
	t.Logf("budget raised from $%.4f/h to $%.4f/h (offer $%.4f/h): restart → task done %s", low, high, price, time.Since(began).Round(time.Millisecond))

	r.remove("hello.dstack.yml")
	r.remove("fleet.dstack.yml")
	e.removeCommit("remove the fleet and the task")
	e.waitNothingLeft()
}

// setBudget rewrites the server config with project main's hourly budget
// and restarts the server, as the owners of the platform change it.
func (e *cloudEnv) setBudget(perHour float64) {
	e.t.Helper()
	b, err := json.Marshal(e.entry)
	if err != nil {
		e.t.Fatal(err)
	}
	cfg := fmt.Sprintf("backends:\n  - %s\nprojects:\n  - name: main\n    budget:\n      max_per_hour: %v\n", b, perHour)
	if err := os.WriteFile(e.cfg, []byte(cfg), 0o600); err != nil {
		e.t.Fatal(err)
	}
	e.s.restart()
}
