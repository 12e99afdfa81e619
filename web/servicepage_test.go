package web_test

import (
	"strings"
	"testing"
)

// TestRunPage_serviceDashboardOverTheRealStore: over the real store and
// its fixture, the service serve's page draws its replicas and chart (the
// page the browser tests look at without JavaScript).
func TestRunPage_serviceDashboardOverTheRealStore(t *testing.T) {
	e := newLiveEnv(t)
	d := get(t, e.url+"/runs/serve", e.seeded.Tokens.Viewer)
	if rows := d.Find(`[data-testid=replicas-table] tbody tr`); rows.Length() != 1 || !strings.Contains(rows.Text(), "serve-0-0") {
		t.Errorf("replicas table: %q", rows.Text())
	}
	svg := d.Find(`svg[data-testid=traffic-chart]`)
	if svg.Length() != 1 {
		t.Fatal("no traffic chart")
	}
}
