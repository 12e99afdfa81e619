package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// apiService is the `service` of a run in the API (web/API.md).
type apiService struct {
	RPS             float64 `json:"rps"`
	DesiredReplicas int     `json:"desired_replicas"`
	ReadyReplicas   int     `json:"ready_replicas"`
	Replicas        []struct {
		Status  string `json:"status"`
		Address string `json:"address"`
		Ready   bool   `json:"ready"`
		Probes  []struct {
			Passes int   `json:"passes"`
			LastOK *bool `json:"last_ok"`
		} `json:"probes"`
	} `json:"replicas"`
	History []struct {
		RPS      float64 `json:"rps"`
		Replicas int     `json:"replicas"`
	} `json:"history"`
}

// TestServiceDashboard_showsProbesTrafficAndHistory: a running service's
// run API reports its replica ready once its probe passed ready_after
// times, the requests sent through the proxy as rps, and samples of both
// over time; its run page draws the replicas table and the chart.
func TestServiceDashboard_showsProbesTrafficAndHistory(t *testing.T) {
	r := newRepo(t)
	r.write("web.dstack.yml", webService("dashboard"))
	rev := r.commit("web")
	s := startServer(t, r.dir, "--resync-interval", "2s")
	s.waitRun("web", rev, "running", 90*time.Second)

	var svc apiService
	get := func() apiService {
		var run struct {
			Service *apiService `json:"service"`
		}
		if code := s.getJSON("/api/v1/runs/web", &run); code != 200 || run.Service == nil {
			t.Fatalf("GET run web: %d, service %v", code, run.Service)
		}
		return *run.Service
	}
	waitFor(t, 60*time.Second, func() string { return fmt.Sprintf("the replica to be ready (service %+v)", svc) }, func() bool {
		svc = get()
		return svc.ReadyReplicas == 1 && svc.DesiredReplicas == 1 && len(svc.Replicas) == 1 && svc.Replicas[0].Ready &&
			len(svc.Replicas[0].Probes) == 1 && svc.Replicas[0].Probes[0].Passes >= 2 &&
			svc.Replicas[0].Probes[0].LastOK != nil && *svc.Replicas[0].Probes[0].LastOK
	})
	for range 30 {
		if code, body := s.proxyGet("/proxy/services/main/web/", s.token); code != 200 || !strings.Contains(body, "dashboard") {
			t.Fatalf("proxy: %d %q", code, body)
		}
	}
	// Samples are taken every 10 s.
	waitFor(t, 40*time.Second, func() string { return fmt.Sprintf("rps and a sample with traffic (service %+v)", svc) }, func() bool {
		svc = get()
		for _, h := range svc.History {
			if h.RPS > 0 && h.Replicas == 1 {
				return svc.RPS > 0
			}
		}
		return false
	})
	code, page := s.do("GET", "/runs/web", nil)
	if code != 200 {
		t.Fatalf("run page: %d", code)
	}
	for _, want := range []string{`data-testid="replicas-table"`, `data-testid="traffic-chart"`, `data-testid="traffic-rps"`} {
		if !strings.Contains(string(page), want) {
			t.Errorf("run page lacks %s", want)
		}
	}
}
