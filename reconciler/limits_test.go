package reconciler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"hoist/agents/api"
	"hoist/schema"
)

// The largest task the schema accepts, written with the characters whose
// JSON encoding grows most, still makes a job spec the runner accepts.
func TestLimits_anAcceptedSpecFitsTheRunner(t *testing.T) {
	line := strings.Repeat("<", 200)
	var b strings.Builder
	b.WriteString("type: task\nimage: x\ncommands:\n")
	for b.Len() < schema.MaxResourceBytes-128*1024 {
		fmt.Fprintf(&b, "  - '%s'\n", line)
	}
	b.WriteString("env:\n")
	for i := 0; b.Len() < schema.MaxResourceBytes-96*1024; i++ {
		fmt.Fprintf(&b, "  - K%d=<\n", i)
	}
	d, err := schema.Load(fstest.MapFS{"big.dstack.yml": {Data: []byte(b.String())}})
	if err != nil {
		t.Fatalf("load: %.300v", err)
	}
	spec, err := decodeRunSpec(d.Resources[0].JSON)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, e := range spec.Env {
		env[e.Name] = e.Value
	}
	js, _ := json.Marshal(api.JobSpec{RunName: "big", JobID: "0190a0a0-0000-7000-8000-000000000000", Commands: spec.script(), Env: env})
	if len(js) > api.MaxJobSpecBytes {
		t.Fatalf("job spec of %d bytes from an accepted resource of %d: over the runner's %d", len(js), len(d.Resources[0].JSON), api.MaxJobSpecBytes)
	}
	t.Logf("resource %d bytes → job spec %d bytes (runner limit %d)", len(d.Resources[0].JSON), len(js), api.MaxJobSpecBytes)
}

func TestRefusedByAgent_onlyRequestsThatCanNeverSucceed(t *testing.T) {
	wrap := func(status int) error {
		return fmt.Errorf("runner POST /api/submit: %w", &api.Error{Status: status, Message: "why"})
	}
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"bad request fails the job", wrap(http.StatusBadRequest), true},
		{"body too large fails the job", wrap(http.StatusRequestEntityTooLarge), true},
		{"unprocessable fails the job", wrap(http.StatusUnprocessableEntity), true},
		{"not found is retried", wrap(http.StatusNotFound), false},
		{"conflict is retried", wrap(http.StatusConflict), false},
		{"unauthorized is retried", wrap(http.StatusUnauthorized), false},
		{"rate limit is retried", wrap(http.StatusTooManyRequests), false},
		{"server error is retried", wrap(http.StatusInternalServerError), false},
		{"network error is retried", errors.New("connection refused"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg, got := refusedByAgent(tt.err)
			if got != tt.want || (got && msg != "why") {
				t.Errorf("refusedByAgent = %q, %v; want %v", msg, got, tt.want)
			}
		})
	}
}

// A revision whose validation outlives Config.LoadTimeout is refused,
// naming the deadline, and the next revision syncs.
func TestSync_revisionPastTheLoadDeadlineIsRefusedAndTheNextSyncs(t *testing.T) {
	f := newFixture(t, map[string]string{"a.dstack.yml": "type: task\nname: keep\nimage: busybox\ncommands: [x]\n"})
	f.c.cfg.LoadTimeout = time.Millisecond
	f.write("slow.cue", "package x\nimport (\"list\"\n\"strings\")\n"+
		"n: len(strings.Split(strings.Repeat(\"a,\", 3000), \",\"))\n"+
		"t: {type: \"task\", image: \"busybox\", commands: [for i in list.Range(0, n, 1) {\"echo \\(i)\"}]}\n")
	if res := f.sync(); res != resultInvalid {
		t.Fatalf("sync = %s, want invalid", res)
	}
	// Stopped during the CUE evaluation, or (on a slow start) before it.
	if errs := strings.Join(f.syncState().Errors, "\n"); !strings.Contains(errs, "slow.cue:1:1: ") || !strings.Contains(errs, "deadline") {
		t.Fatalf("errors = %q", errs)
	}
	f.c.cfg.LoadTimeout = 30 * time.Second
	f.remove("slow.cue")
	if res := f.sync(); res != resultSynced {
		t.Fatalf("sync of the next revision = %s", res)
	}
	f.run("keep")
}

// A plan stops validating when its caller goes away (POST /api/v1/plan's
// request context ends when the client disconnects).
func TestPlanFS_stopsWhenTheCallerLeaves(t *testing.T) {
	f := newFixture(t, map[string]string{"a.dstack.yml": "type: task\nname: keep\nimage: busybox\ncommands: [x]\n"})
	fsys := fstest.MapFS{"slow.cue": {Data: []byte("package x\nimport (\"list\"\n\"strings\")\n" +
		"n: len(strings.Split(strings.Repeat(\"c,\", 3000), \",\"))\n" +
		"t: {type: \"task\", image: \"busybox\", commands: [for i in list.Range(0, n, 1) {\"echo \\(i)\"}]}\n")}}
	ctx, cancel := context.WithCancel(f.ctx)
	time.AfterFunc(time.Millisecond, cancel)
	start := time.Now()
	_, err := f.c.PlanFS(ctx, fsys)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("PlanFS = %v, want context.Canceled", err)
	}
	t.Logf("returned %v after the start", time.Since(start))
}
