package web

import (
	"bufio"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
)

func TestServer_sseStreamsLinesThenEnds(t *testing.T) {
	f := newFixture(t)
	r := f.do(t, "GET", "/runs/hello/logs/stream", adminTok, nil)
	if ct := r.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content-type %q", ct)
	}
	body := readBody(t, r)
	want := "retry: 2000\n\nevent: line\nid: 1\ndata: hello\n\nevent: line\nid: 2\ndata: world\n\nevent: status\ndata: done\n\nevent: end\ndata: done\n\n"
	if body != want {
		t.Errorf("stream:\n%q\nwant\n%q", body, want)
	}
	// Last-Event-ID resumes after the last line seen.
	r = f.do(t, "GET", "/runs/hello/logs/stream", adminTok, nil, "Last-Event-ID", "1")
	if body := readBody(t, r); strings.Contains(body, "data: hello\n") || !strings.Contains(body, "data: world\n") {
		t.Errorf("resumed stream: %q", body)
	}
}

func TestServer_sseFollowsARunningJob(t *testing.T) {
	f := newFixture(t)
	f.store.appendLog("job-3", "epoch 1")
	r := f.do(t, "GET", "/runs/train/logs/stream", adminTok, nil)
	br := bufio.NewReader(r.Body)
	next := func() string { // the data of the next line event
		t.Helper()
		for {
			l, err := br.ReadString('\n')
			if err != nil {
				t.Fatalf("stream ended: %v", err)
			}
			if d, ok := strings.CutPrefix(l, "data: "); ok && d != "running\n" {
				return strings.TrimSuffix(d, "\n")
			}
		}
	}
	if got := next(); got != "epoch 1" {
		t.Fatalf("first line %q", got)
	}
	start := time.Now()
	f.store.appendLog("job-3", "epoch 2")
	f.srv.NotifyLogs()
	if got := next(); got != "epoch 2" {
		t.Fatalf("second line %q", got)
	}
	if d := time.Since(start); d > logPoll {
		t.Errorf("NotifyLogs did not wake the stream: %v", d)
	}
}

func TestServer_logsFollowEndsWithTheJob(t *testing.T) {
	f := newFixture(t)
	f.store.appendLog("job-3", "a")
	done := make(chan string)
	go func() {
		req, _ := http.NewRequestWithContext(t.Context(), "GET", f.ts.URL+"/api/v1/runs/train/logs?follow=true", nil)
		req.Header.Set("Authorization", "Bearer "+adminTok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- err.Error()
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		done <- string(b)
	}()
	time.Sleep(50 * time.Millisecond)
	f.store.appendLog("job-3", "b")
	f.store.mu.Lock()
	r := f.store.runs["train"]
	r.Jobs[0].Status = "done"
	f.store.runs["train"] = r
	f.store.mu.Unlock()
	f.srv.NotifyLogs()
	select {
	case got := <-done:
		if got != "a\nb\n" {
			t.Errorf("followed %q", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("follow did not end with the job")
	}
}

func TestServer_metricsExposeHoistSeries(t *testing.T) {
	f := newFixture(t)
	f.srv.Metrics().ObserveReconcile("run", "success", 30*time.Millisecond)
	f.srv.Metrics().SetQueueDepth("runs", 3, 7)
	f.srv.Metrics().ObserveRetry("instances", 2*time.Second)
	f.srv.Metrics().SetBackingOff("instances", 1)
	f.srv.Metrics().BackendFailed("aws", "transient")
	f.srv.Metrics().ObserveSync("held")
	f.srv.Metrics().ObserveSync("error")
	f.do(t, "GET", "/api/v1/runs", adminTok, nil)
	body := `{}`
	f.hook(t, "/hooks/generic", body, "X-Hub-Signature-256", sign(hookSecret, body))
	m := readBody(t, f.do(t, "GET", "/metrics", "", nil))
	for _, want := range []string{
		`hoist_reconcile_duration_seconds_count{kind="run",result="success"} 1`,
		`hoist_reconcile_total{kind="run",result="success"} 1`,
		`hoist_queue_depth{kind="runs"} 3`,
		`hoist_queue_scheduled{kind="runs"} 7`,
		`hoist_reconcile_backoff_seconds_count{kind="instances"} 1`,
		`hoist_queue_backing_off{kind="instances"} 1`,
		`hoist_backend_errors_total{backend="aws",kind="transient"} 1`,
		`hoist_runs{project="main",status="done"} 1`,
		`hoist_runs{project="main",status="running"} 1`,
		`hoist_http_request_duration_seconds_count{code="200",method="GET",route="/api/v1/runs"} 1`,
		`hoist_webhook_deliveries_total{event="",provider="generic",result="sync_requested"} 1`,
		`hoist_sync_requests_total 1`,
		`hoist_syncs_total{result="success"} 1`,
		`hoist_syncs_total{result="error"} 1`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// doc parses an HTML answer.
func doc(t *testing.T, r *http.Response) *goquery.Document {
	t.Helper()
	d, err := goquery.NewDocumentFromReader(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestPages_components(t *testing.T) {
	f, _ := fullFixture(t)
	t.Run("runs table lists runs with status and revision", func(t *testing.T) {
		d := doc(t, f.do(t, "GET", "/runs", adminTok, nil))
		row := d.Find(`[data-testid="run-row-hello"]`)
		if row.Length() != 1 || row.Find(`[data-testid=status]`).Text() != "done" || !strings.Contains(row.Text(), "0123456") {
			t.Errorf("hello row: %q", row.Text())
		}
		if n := d.Find(`[data-testid="runs-table"] tbody tr`).Length(); n != 2 {
			t.Errorf("%d rows", n)
		}
	})
	t.Run("run page shows submissions, termination reason and logs", func(t *testing.T) {
		d := doc(t, f.do(t, "GET", "/runs/hello", adminTok, nil))
		if got := d.Find(`[data-testid="jobs-table"] tbody tr`).Length(); got != 2 {
			t.Errorf("%d submissions", got)
		}
		if !strings.Contains(d.Find(`[data-testid="job-row-job-1"]`).Text(), "container_exited_with_error") {
			t.Error("termination reason missing")
		}
		if got := d.Find(`[data-testid=logs]`).Text(); got != "hello\nworld\n" {
			t.Errorf("logs %q", got)
		}
		if src, _ := d.Find(`[data-testid=logs]`).Attr("data-live-logs"); src != "/runs/hello/logs/stream?job=job-2&after=2" {
			t.Errorf("live logs source %q", src)
		}
		if d.Find(`svg[data-testid=timeline] rect`).Length() == 0 {
			t.Error("timeline has no bars")
		}
		if d.Find(`[data-testid=run-actions] form`).Length() != 3 {
			t.Error("admin sees no actions")
		}
	})
	t.Run("viewers see no forms that act", func(t *testing.T) {
		for _, p := range []string{"/", "/runs/hello", "/history/aaa"} {
			d := doc(t, f.do(t, "GET", p, viewerTok, nil))
			d.Find(`form[method=post]`).Each(func(_ int, s *goquery.Selection) {
				if a, _ := s.Attr("action"); a != "/logout" {
					t.Errorf("%s shows a viewer the form %s", p, a)
				}
			})
		}
	})
	t.Run("every post form carries the csrf token", func(t *testing.T) {
		ck := f.login(t, adminTok)
		for _, p := range []string{"/", "/runs/hello", "/history", "/history/aaa"} {
			d := doc(t, f.do(t, "GET", p, "", nil, "Cookie", ck.Name+"="+ck.Value))
			d.Find(`form[method=post]`).Each(func(_ int, s *goquery.Selection) {
				if v, _ := s.Find(`input[name=csrf]`).Attr("value"); v == "" {
					a, _ := s.Attr("action")
					t.Errorf("%s: form %s has no csrf token", p, a)
				}
			})
		}
	})
	t.Run("runs are paged", func(t *testing.T) {
		for i := range 130 {
			f.store.putRun(Run{Name: "bulk-" + strings.Repeat("x", 1) + string(rune('a'+i%26)) + itoa(i), Status: "done", SubmittedAt: t0.Add(-time.Duration(i) * time.Second)})
		}
		d := doc(t, f.do(t, "GET", "/runs", adminTok, nil))
		if n := d.Find(`[data-testid="runs-table"] tbody tr`).Length(); n != runsPerPage {
			t.Errorf("page 1 has %d rows", n)
		}
		href, _ := d.Find(`[data-testid=runs-older]`).Attr("href")
		d2 := doc(t, f.do(t, "GET", href, adminTok, nil))
		if n := d2.Find(`[data-testid="runs-table"] tbody tr`).Length(); n != 132-runsPerPage {
			t.Errorf("page 2 (%s) has %d rows", href, n)
		}
	})
}

func TestServer_closeEndsLiveStreams(t *testing.T) {
	f := newFixture(t)
	r := f.do(t, "GET", "/runs/train/logs/stream", adminTok, nil)
	done := make(chan error, 1)
	go func() {
		_, err := io.ReadAll(r.Body)
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	f.srv.Close()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("stream still open after Close")
	}
}

func TestServer_logsSinceDropsOlderLines(t *testing.T) {
	f := newFixture(t)
	// The fixture's lines are at 1700000001 and 1700000002 (Unix).
	for _, tc := range []struct {
		name, since string
		status      int
		want        string
	}{
		{"before both", time.Unix(1700000000, 0).UTC().Format(time.RFC3339), http.StatusOK, "hello\nworld\n"},
		{"at the second", time.Unix(1700000002, 0).UTC().Format(time.RFC3339), http.StatusOK, "world\n"},
		{"after both", time.Unix(1700000003, 0).UTC().Format(time.RFC3339), http.StatusOK, ""},
		{"not a time", "10m", http.StatusBadRequest, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := f.do(t, "GET", "/api/v1/runs/hello/logs?since="+tc.since, adminTok, nil)
			if r.StatusCode != tc.status {
				t.Fatalf("status %d, want %d", r.StatusCode, tc.status)
			}
			if body := readBody(t, r); tc.status == http.StatusOK && body != tc.want {
				t.Errorf("body %q, want %q", body, tc.want)
			}
		})
	}
}
