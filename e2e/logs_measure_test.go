package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// latencies collects, per reader, how long each job line took from the
// job's write to the reader.
type latencies struct {
	mu   sync.Mutex
	from time.Time // lines written before it are not counted
	got  []time.Duration
	seen int
}

// line records one line read at when: "L <n> <unix µs written>".
func (l *latencies) line(text string, when time.Time) {
	f := strings.Fields(text)
	if len(f) != 3 || f[0] != "L" {
		return
	}
	us, err := strconv.ParseInt(f[2], 10, 64)
	if err != nil {
		return
	}
	written := time.UnixMicro(us)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seen++
	if written.Before(l.from) {
		return
	}
	l.got = append(l.got, when.Sub(written))
}

// summary is "n lines: p50 … p95 … max …".
func (l *latencies) summary() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.got) == 0 {
		return "no lines"
	}
	s := slices.Clone(l.got)
	slices.Sort(s)
	q := func(p float64) time.Duration { return s[min(len(s)-1, int(p*float64(len(s))))] }
	return fmt.Sprintf("%d lines: p50 %v, p95 %v, max %v", len(s), q(0.50).Round(100*time.Microsecond),
		q(0.95).Round(100*time.Microsecond), s[len(s)-1].Round(100*time.Microsecond))
}

// TestMeasure_logs measures `hoist logs -f` latency: a task on the local
// backend (Docker) prints a line every 100 ms with the time it wrote it
// (busybox adjtimex: µs; the container shares the host's clock), and the
// time each line comes out of `hoist logs RUN -f` (the real CLI, its
// stdout a pipe) is compared with it; a plain HTTP follower of the same
// API answer is measured alongside, to tell the CLI's share from the
// server's. Prints p50/p95/max. Set HOIST_MEASURE=1 to run it;
// HOIST_MEASURE_LINES sets the line count (default 200).
func TestMeasure_logs(t *testing.T) {
	if os.Getenv("HOIST_MEASURE") == "" {
		t.Skip("measurement: set HOIST_MEASURE=1")
	}
	n := 200
	if v, err := strconv.Atoi(os.Getenv("HOIST_MEASURE_LINES")); err == nil && v > 0 {
		n = v
	}
	r := newRepo(t)
	// The job waits for both readers to attach, then writes the lines.
	r.write("tick.dstack.yml", task("tick", fmt.Sprintf(
		"  - while [ ! -e /tmp/go ]; do sleep 0.1; done\n"+
			"  - i=0; while [ $i -lt %d ]; do i=$((i+1)); adjtimex | awk -v i=$i '/tv_sec/ {s=$2} /tv_usec/ {u=$2} END {printf \"L %%d %%d%%06d\\n\", i, s, u}'; sleep 0.1; done\n", n)))
	rev := r.commit("tick")
	s := startServer(t, r.dir, "--log-level", "info")
	s.waitRun("tick", rev, "running", reconcileWait)

	cli := &latencies{}
	cmd := exec.Command(filepath.Join(bin, "hoist"), "logs", "tick", "-f", "--server", s.url, "--token", s.token)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	cliDone := make(chan struct{})
	go func() {
		defer close(cliDone)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			cli.line(sc.Text(), time.Now())
		}
	}()

	api := &latencies{}
	req, err := http.NewRequest("GET", s.url+"/api/v1/runs/tick/logs?follow=true", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+s.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	apiDone := make(chan struct{})
	go func() {
		defer close(apiDone)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			api.line(sc.Text(), time.Now())
		}
		_, _ = io.Copy(io.Discard, resp.Body)
	}()

	// Both readers are attached once the job's empty output was answered;
	// give them a moment, then let the job write.
	time.Sleep(time.Second)
	cli.from, api.from = time.Now(), time.Now()
	ids := s.containers()
	if len(ids) != 1 {
		t.Fatalf("%d containers, want the task's one", len(ids))
	}
	if out, err := exec.Command("docker", "exec", ids[0], "touch", "/tmp/go").CombinedOutput(); err != nil {
		t.Fatalf("docker exec: %v\n%s", err, out)
	}
	for _, done := range []chan struct{}{cliDone, apiDone} {
		select {
		case <-done:
		case <-time.After(time.Duration(n)*100*time.Millisecond + 2*time.Minute):
			t.Fatal("a follower did not end with the job")
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("hoist logs -f: %v", err)
	}
	if cli.seen != n || api.seen != n {
		t.Errorf("lines seen: CLI %d, API %d; want %d each", cli.seen, api.seen, n)
	}
	t.Logf("hoist logs -f latency, job write → read (a line every 100 ms, local backend, Docker):")
	t.Logf("  hoist logs -f (CLI):       %s", cli.summary())
	t.Logf("  GET logs?follow=true (API): %s", api.summary())
}

// tableLogLines is how many lines the job of BenchmarkTable_logThroughput
// prints (`seq 1 N`: about 15.8 MB).
const tableLogLines = 2_000_000

// BenchmarkTable_logThroughput measures log throughput end to end on the
// local backend (Docker): a job prints `seq 1 2000000` as fast as it can;
// its output goes from the runner's log API through the server's log pump
// into the store, and out of GET /api/v1/runs/<r>/logs?follow=true, read by
// a plain HTTP follower attached before the job starts printing. The
// figure is the bytes read over the time from the job's go to the follow's
// end (the run done). The reference is `cp` of a file of the same bytes
// (both on the host's temporary directory). Run with -benchtime 1x; go tool
// task bench prints it in the table.
func BenchmarkTable_logThroughput(b *testing.B) {
	var want bytes.Buffer
	for i := 1; i <= tableLogLines; i++ {
		want.WriteString(strconv.Itoa(i))
		want.WriteByte('\n')
	}
	r := newRepo(b)
	r.write("flood.dstack.yml", task("flood", fmt.Sprintf(
		"  - while [ ! -e /tmp/go ]; do sleep 0.1; done\n  - seq 1 %d\n", tableLogLines)))
	rev := r.commit("flood")
	s := startServer(b, r.dir, "--log-level", "info")
	s.waitRun("flood", rev, "running", reconcileWait)
	req, err := http.NewRequest("GET", s.url+"/api/v1/runs/flood/logs?follow=true", nil)
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+s.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b.Fatalf("GET logs?follow=true: %s", resp.Status)
	}
	type read struct {
		n   int64
		end time.Time
		err error
	}
	got := make(chan read, 1)
	var body bytes.Buffer
	go func() {
		n, err := io.Copy(&body, resp.Body)
		got <- read{n, time.Now(), err}
	}()
	time.Sleep(time.Second) // the follower is attached once its request was answered
	ids := s.containers()
	if len(ids) != 1 {
		b.Fatalf("%d containers, want the job's one", len(ids))
	}
	start := time.Now()
	if out, err := exec.Command("docker", "exec", ids[0], "touch", "/tmp/go").CombinedOutput(); err != nil {
		b.Fatalf("docker exec: %v\n%s", err, out)
	}
	var res read
	select {
	case res = <-got:
	case <-time.After(5 * time.Minute):
		b.Fatal("the follower did not end within 5 minutes of the job's go")
	}
	if res.err != nil {
		b.Fatalf("reading the log: %v", res.err)
	}
	if !bytes.Equal(body.Bytes(), want.Bytes()) {
		i := firstDiff(body.Bytes(), want.Bytes())
		around := func(p []byte) []byte { return p[max(0, i-24):min(len(p), i+24)] }
		b.Fatalf("the API gave %d bytes, the job printed %d; first difference at %d: API %q, job %q",
			body.Len(), want.Len(), i, around(body.Bytes()), around(want.Bytes()))
	}
	b.ReportMetric(float64(res.n)/res.end.Sub(start).Seconds()/1e6, "hoist-MB/s")

	dir := b.TempDir()
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	if err := os.WriteFile(src, want.Bytes(), 0o644); err != nil {
		b.Fatal(err)
	}
	start = time.Now()
	if out, err := exec.Command("cp", src, dst).CombinedOutput(); err != nil {
		b.Fatalf("cp: %v\n%s", err, out)
	}
	b.ReportMetric(float64(want.Len())/time.Since(start).Seconds()/1e6, "ref-MB/s")
}

// firstDiff is the index of the first byte where a and b differ.
func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
