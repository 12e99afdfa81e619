package web

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// A run page renders at most pageSpecBytes of spec and pageLogBytes of log
// text, saying so, whatever the run holds.
func TestServer_runPageCapsSpecAndLogs(t *testing.T) {
	f := newFixture(t)
	big := strings.Repeat("x", 2*pageSpecBytes)
	f.store.putRun(Run{Name: "big", Type: "task", Status: "running", Revision: "abc", SubmittedAt: t0.Add(-time.Minute),
		Spec: json.RawMessage(`{"type":"task","name":"big","commands":["` + big + `"]}`),
		Jobs: []Job{{ID: "job-big", SubmissionID: "sub-big", Status: "running", SubmittedAt: t0.Add(-time.Minute)}}})
	line := strings.Repeat("y", 300<<10)
	for i := 0; i < 6; i++ {
		f.store.appendLog("job-big", line)
	}
	r := f.do(t, "GET", "/runs/big?job=job-big&after=0", adminTok, nil)
	body := readBody(t, r)
	if r.StatusCode != 200 {
		t.Fatalf("status %d", r.StatusCode)
	}
	if len(body) > pageSpecBytes+pageLogBytes+64<<10 {
		t.Errorf("page is %d bytes", len(body))
	}
	if !strings.Contains(body, `data-testid="spec-truncated"`) {
		t.Error("no note that the spec is truncated")
	}
	if got := strings.Count(body, line); got != 3 {
		t.Errorf("%d log lines of 300 KiB shown, want the 3 that fit in 1 MiB", got)
	}
	if !strings.Contains(body, `data-testid="logs-next"`) {
		t.Error("no link to the lines left for the next page")
	}
}

func TestCapLogLines_cutsALineTooLongAlone(t *testing.T) {
	lines := []LogLine{{Seq: 1, Text: strings.Repeat("é", pageLogBytes)}, {Seq: 2, Text: "next"}}
	got, more := capLogLines(lines)
	if len(got) != 1 || !more || !strings.Contains(got[0].Text, "line truncated") || len(got[0].Text) > pageLogBytes+100 {
		t.Fatalf("got %d lines (more %v), first %d bytes", len(got), more, len(got[0].Text))
	}
	if !strings.HasPrefix(got[0].Text, "é") || strings.ContainsRune(got[0].Text, '\uFFFD') {
		t.Error("cut inside a character")
	}
}
