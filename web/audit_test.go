package web

import (
	"encoding/json"
	"io"
	"slices"
	"testing"
)

// TestAudit_servesTheReportWithItsJSONNames reads GET /api/v1/audit as a
// manager: the report's top-level and leaked entries' keys are the
// documented ones (web/API.md), which scripts and the chaos harness read.
func TestAudit_servesTheReportWithItsJSONNames(t *testing.T) {
	f, _ := fullFixture(t)
	r := f.do(t, "GET", "/api/v1/audit", managerTok, nil)
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	if r.StatusCode != 200 {
		t.Fatalf("GET /api/v1/audit: %d %s", r.StatusCode, b)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(b, &top); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"project", "checked_at", "grace_seconds", "leaked", "lost", "duplicated", "errors"} {
		if _, ok := top[k]; !ok {
			t.Errorf("report %s lacks %q", b, k)
		}
	}
	var leaked []map[string]any
	if err := json.Unmarshal(top["leaked"], &leaked); err != nil || len(leaked) != 1 {
		t.Fatalf("leaked %s: %v", top["leaked"], err)
	}
	var keys []string
	for k := range leaked[0] {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if want := []string{"age_seconds", "backend", "created_at", "id", "kind", "provider_id", "reap_at"}; !slices.Equal(keys, want) {
		t.Errorf("leaked entry keys %q, want %q", keys, want)
	}
}
