package runner_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"hoist/agents/api"
	"hoist/agents/runner"
)

// newRunner serves a fresh runner over HTTP and returns its client and the
// job's working dir (a temporary directory).
func newRunner(t testing.TB) (*api.RunnerClient, *runner.Runner, string) {
	t.Helper()
	return newRunnerWith(t, runner.Config{Home: t.TempDir(), Version: "test"})
}

func newRunnerWith(t testing.TB, cfg runner.Config) (*api.RunnerClient, *runner.Runner, string) {
	t.Helper()
	r, err := runner.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	srv := httptest.NewServer(r.Handler())
	t.Cleanup(func() {
		r.Stop(0, "", "test ended")
		<-r.Done()
		srv.Close()
		r.Close()
	})
	return api.NewRunnerClient(srv.URL, nil), r, t.TempDir()
}

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func run(t *testing.T, c *api.RunnerClient, job api.JobSpec) api.JobState {
	t.Helper()
	if err := c.Submit(ctx(t), job); err != nil {
		t.Fatalf("Submit: %v", err)
	}
	if _, err := c.Run(ctx(t)); err != nil {
		t.Fatalf("Run: %v", err)
	}
	st, err := c.Wait(ctx(t))
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	return st
}

func stdout(t *testing.T, c *api.RunnerClient) (string, string) {
	t.Helper()
	var out, errs strings.Builder
	if err := c.Follow(ctx(t), 0, func(l api.LogLine) error {
		if l.Stream == api.StreamStderr {
			errs.Write(l.Data)
		} else {
			out.Write(l.Data)
		}
		return nil
	}); err != nil {
		t.Fatalf("Follow: %v", err)
	}
	return out.String(), errs.String()
}

func TestRunner_exitStates(t *testing.T) {
	tests := []struct {
		name     string
		commands []string
		state    string
		code     int
		reason   string
		stdout   string
	}{
		{"exit zero is done", []string{"echo a", "echo b"}, api.JobDone, 0, api.ReasonDoneByRunner, "a\nb\n"},
		{"non-zero exit fails with its code", []string{"echo a", "exit 3"}, api.JobFailed, 3, api.ReasonContainerExitedWithError, "a\n"},
		{"first failing command ends the job", []string{"echo a", "false", "echo never"}, api.JobFailed, 1, api.ReasonContainerExitedWithError, "a\n"},
		{"killed by a signal exits 128+n", []string{"kill -9 $$"}, api.JobFailed, 137, api.ReasonContainerExitedWithError, ""},
		{"multi-line command runs whole", []string{"for i in 1 2 3; do\n  echo $i\ndone"}, api.JobDone, 0, api.ReasonDoneByRunner, "1\n2\n3\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, _, wd := newRunner(t)
			st := run(t, c, api.JobSpec{Commands: tt.commands, WorkingDir: wd})
			if st.State != tt.state || st.ExitCode == nil || *st.ExitCode != tt.code || st.TerminationReason != tt.reason {
				t.Errorf("state = %+v (exit %v), want %s exit %d reason %s", st, deref(st.ExitCode), tt.state, tt.code, tt.reason)
			}
			if got, _ := stdout(t, c); got != tt.stdout {
				t.Errorf("stdout = %q, want %q", got, tt.stdout)
			}
		})
	}
}

func deref(p *int) any {
	if p == nil {
		return nil
	}
	return *p
}

func TestRunner_envAndWorkingDir(t *testing.T) {
	c, _, wd := newRunner(t)
	job := api.JobSpec{
		RunName:    "train",
		JobID:      "job-1",
		Commands:   []string{`echo "$GREETING $TOKEN $HOIST_RUN_NAME $HOIST_JOB_ID"`, "pwd"},
		Env:        map[string]string{"GREETING": "hi"},
		Secrets:    map[string]string{"TOKEN": "s3cret"},
		WorkingDir: filepath.Join(wd, "code"),
	}
	if err := c.Submit(ctx(t), job); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Run(ctx(t)); err != nil {
		t.Fatal(err)
	}
	st, err := c.Wait(ctx(t))
	if err != nil || st.State != api.JobDone {
		t.Fatalf("Wait = %+v, %v; want done", st, err)
	}
	got, _ := stdout(t, c)
	want := "hi s3cret train job-1\n" + filepath.Join(wd, "code") + "\n"
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("stdout (-want +got):\n%s", diff)
	}
}

func TestRunner_requestsOutOfOrderConflict(t *testing.T) {
	c, _, wd := newRunner(t)
	if _, err := c.Run(ctx(t)); !errors.Is(err, api.ErrConflict) {
		t.Errorf("Run before Submit: err = %v, want ErrConflict", err)
	}
	run(t, c, api.JobSpec{Commands: []string{"true"}, WorkingDir: wd})
	if err := c.Submit(ctx(t), api.JobSpec{Commands: []string{"true"}}); !errors.Is(err, api.ErrConflict) {
		t.Errorf("Submit after Run: err = %v, want ErrConflict", err)
	}
	if _, err := c.Run(ctx(t)); !errors.Is(err, api.ErrConflict) {
		t.Errorf("second Run: err = %v, want ErrConflict", err)
	}
}

func TestRunner_stopKillsTheProcessGroup(t *testing.T) {
	c, _, wd := newRunner(t)
	// The child ignores SIGTERM, so only the SIGKILL after the grace period
	// ends it; the shell waits for it.
	job := api.JobSpec{Commands: []string{`sh -c 'trap "" TERM; echo $$ > child.pid; while :; do sleep 1; done' & sleep 0.2; echo started; wait`}, WorkingDir: wd}
	if err := c.Submit(ctx(t), job); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Run(ctx(t)); err != nil {
		t.Fatal(err)
	}
	waitOutput(t, c, "started\n")
	st, err := c.Stop(ctx(t), 300*time.Millisecond)
	if err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if st.State != api.JobTerminated || st.TerminationReason != api.ReasonTerminatedByServer {
		t.Errorf("state after Stop = %+v, want terminated by server", st)
	}
	b, err := os.ReadFile(filepath.Join(wd, "child.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if alive(pid) {
		t.Errorf("child %d survived Stop", pid)
	}
}

// alive reports whether pid names a live (not zombie) process. The child's
// parent may reap it a moment after SIGKILL, so it is asked a few times.
func alive(pid int) bool {
	for range 50 {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil || strings.Contains(string(b), ") Z ") {
			return false
		}
		if syscall.Kill(pid, 0) != nil {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

// waitOutput follows the log until it has seen want on stdout.
func waitOutput(t *testing.T, c *api.RunnerClient, want string) {
	t.Helper()
	var got string
	errSeen := errors.New("seen")
	err := c.Follow(ctx(t), 0, func(l api.LogLine) error {
		got += string(l.Data)
		if strings.Contains(got, want) {
			return errSeen
		}
		return nil
	})
	if !errors.Is(err, errSeen) {
		t.Fatalf("waiting for %q: %v (got %q)", want, err, got)
	}
}

func TestRunner_maxDurationStopsTheJob(t *testing.T) {
	c, _, wd := newRunner(t)
	st := run(t, c, api.JobSpec{Commands: []string{"sleep 30"}, WorkingDir: wd, MaxDuration: 200 * time.Millisecond})
	if st.State != api.JobTerminated || st.TerminationReason != api.ReasonMaxDurationExceeded {
		t.Errorf("state = %+v, want terminated with %s", st, api.ReasonMaxDurationExceeded)
	}
}

func TestRunner_logQuotaStopsTheJob(t *testing.T) {
	c, _, wd := newRunner(t)
	st := run(t, c, api.JobSpec{Commands: []string{"while :; do echo 0123456789; done"}, WorkingDir: wd, LogQuotaBytes: 100_000})
	if st.State != api.JobTerminated || st.TerminationReason != api.ReasonLogQuotaExceeded {
		t.Errorf("state = %+v, want terminated with %s", st, api.ReasonLogQuotaExceeded)
	}
}

func TestRunner_stopBeforeRunTerminates(t *testing.T) {
	c, _, _ := newRunner(t)
	st, err := c.StopWithReason(ctx(t), time.Second, api.ReasonTerminatedByUser, "changed my mind")
	if err != nil {
		t.Fatal(err)
	}
	if st.State != api.JobTerminated || st.TerminationReason != api.ReasonTerminatedByUser || st.ExitCode != nil {
		t.Errorf("state = %+v, want terminated by user without exit code", st)
	}
}

func TestRunner_logsResumeWithoutLossOrDuplicates(t *testing.T) {
	c, _, wd := newRunner(t)
	// Lines arrive one at a time, so that there are many records.
	run(t, c, api.JobSpec{Commands: []string{"i=1; while [ $i -le 300 ]; do echo $i; i=$((i+1)); sleep 0.001; done"}, WorkingDir: wd})
	var all []api.LogLine
	after := int64(0)
	for {
		lines, err := c.Logs(ctx(t), after, 7)
		if err != nil {
			t.Fatal(err)
		}
		if len(lines) == 0 {
			break
		}
		if len(lines) > 7 {
			t.Fatalf("Logs(limit 7) returned %d records", len(lines))
		}
		all = append(all, lines...)
		after = lines[len(lines)-1].Seq
	}
	var text strings.Builder
	for i, l := range all {
		if l.Seq != int64(i+1) {
			t.Fatalf("record %d has seq %d", i, l.Seq)
		}
		text.Write(l.Data)
	}
	var want strings.Builder
	for i := 1; i <= 300; i++ {
		fmt.Fprintf(&want, "%d\n", i)
	}
	if text.String() != want.String() {
		t.Errorf("paged logs differ from the output")
	}
	// LogsSince the time of record 10 starts at record 10 (or an earlier
	// record read in the same instant).
	since, err := c.LogsSince(ctx(t), all[9].Time, 1)
	if err != nil || len(since) != 1 || since[0].Seq > 10 || !since[0].Time.Equal(all[since[0].Seq-1].Time) {
		t.Errorf("LogsSince(record 10's time) = %+v, %v", since, err)
	}
}

func TestRunner_partialLineIsFlushed(t *testing.T) {
	c, _, wd := newRunner(t)
	if err := c.Submit(ctx(t), api.JobSpec{Commands: []string{"printf 'progress 50%%'; sleep 30"}, WorkingDir: wd}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Run(ctx(t)); err != nil {
		t.Fatal(err)
	}
	waitOutput(t, c, "progress 50%")
}

func TestRunner_health(t *testing.T) {
	c, _, _ := newRunner(t)
	h, err := c.Health(ctx(t))
	want := api.Health{Service: api.RunnerService, Version: "test", APIVersion: api.RunnerAPIVersion}
	if err != nil || h != want {
		t.Errorf("Health = %+v, %v; want %+v", h, err, want)
	}
}

func TestRunner_stopLetsChildrenCleanUpWithinGrace(t *testing.T) {
	c, _, wd := newRunner(t)
	// The shell dies of SIGTERM at once; its child takes 200ms to clean up.
	job := api.JobSpec{Commands: []string{`sh -c 'trap "sleep 0.2; echo cleaned up; exit 0" TERM; echo started; while :; do sleep 0.05; done'`}, WorkingDir: wd}
	if err := c.Submit(ctx(t), job); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Run(ctx(t)); err != nil {
		t.Fatal(err)
	}
	waitOutput(t, c, "started\n")
	if _, err := c.Stop(ctx(t), 5*time.Second); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if got, _ := stdout(t, c); got != "started\ncleaned up\n" {
		t.Errorf("stdout = %q, want the child's clean-up output", got)
	}
}

func TestRunner_ackDeletesStoredLogSegments(t *testing.T) {
	home := t.TempDir()
	c, _, wd := newRunnerWith(t, runner.Config{Home: home, LogSegmentBytes: 1024})
	run(t, c, api.JobSpec{Commands: []string{"i=1; while [ $i -le 400 ]; do echo line $i; i=$((i+1)); sleep 0.001; done"}, WorkingDir: wd})
	segments := func() int {
		ents, err := os.ReadDir(filepath.Join(home, api.RunnerLogDir))
		if err != nil {
			t.Fatal(err)
		}
		return len(ents)
	}
	before := segments()
	if before < 3 {
		t.Fatalf("%d log segments, want several of 1 KiB", before)
	}
	all, err := c.Logs(ctx(t), 0, 100000)
	if err != nil {
		t.Fatal(err)
	}
	mid := all[len(all)/2].Seq
	resp, err := c.Ack(ctx(t), mid)
	if err != nil {
		t.Fatal(err)
	}
	if resp.FirstSeq <= 1 || resp.FirstSeq > mid+1 {
		t.Errorf("Ack(%d).FirstSeq = %d, want deleted segments before it", mid, resp.FirstSeq)
	}
	if after := segments(); after >= before {
		t.Errorf("%d segments after Ack, %d before; want fewer", after, before)
	}
	// Records after the acknowledged one are all still there, in order.
	var got []api.LogLine
	err = c.Follow(ctx(t), mid, func(l api.LogLine) error { got = append(got, l); return nil })
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(all[len(all)/2+1:], got); diff != "" {
		t.Errorf("records after the ack (-want +got):\n%s", diff)
	}
	// Asking from the start yields the oldest record kept.
	first, err := c.Logs(ctx(t), 0, 1)
	if err != nil || len(first) != 1 || first[0].Seq != resp.FirstSeq {
		t.Errorf("Logs(0) after Ack = %+v, %v; want record %d", first, err, resp.FirstSeq)
	}
}

func TestRunner_logQuotaCountsOnlyUnacknowledgedLog(t *testing.T) {
	c, _, wd := newRunnerWith(t, runner.Config{Home: t.TempDir(), LogSegmentBytes: 8 << 10})
	// 200 KB in all, in 2 KB bursts; the quota is 64 KB.
	job := api.JobSpec{
		Commands:      []string{"i=0; while [ $i -lt 100 ]; do head -c 2000 /dev/zero | tr '\\0' x; echo; i=$((i+1)); sleep 0.01; done"},
		WorkingDir:    wd,
		LogQuotaBytes: 64 << 10,
	}
	if err := c.Submit(ctx(t), job); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Run(ctx(t)); err != nil {
		t.Fatal(err)
	}
	var total int
	err := c.Follow(ctx(t), 0, func(l api.LogLine) error {
		total += len(l.Data)
		_, err := c.Ack(ctx(t), l.Seq)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	st, err := c.Wait(ctx(t))
	if err != nil || st.State != api.JobDone {
		t.Errorf("job = %+v, %v; want done (the reader acknowledged as it went)", st, err)
	}
	if total != 100*2001 {
		t.Errorf("read %d bytes, want %d", total, 100*2001)
	}
}

func TestRunner_whatTheJobRuns(t *testing.T) {
	tests := []struct {
		name   string
		cfg    runner.Config
		job    api.JobSpec
		stdout string
	}{
		{"commands in the shell", runner.Config{}, api.JobSpec{Commands: []string{"echo $((1+2))"}}, "3\n"},
		{"entrypoint with commands as arguments", runner.Config{}, api.JobSpec{Entrypoint: []string{"echo", "entry"}, Commands: []string{"a b", "$HOME"}}, "entry a b $HOME\n"},
		{"image command without commands", runner.Config{ImageCommand: []string{"echo", "from", "image"}}, api.JobSpec{}, "from image\n"},
		{"commands win over the image command", runner.Config{ImageCommand: []string{"echo", "image"}}, api.JobSpec{Commands: []string{"echo job"}}, "job\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.Home = t.TempDir()
			c, _, wd := newRunnerWith(t, tt.cfg)
			tt.job.WorkingDir = wd
			if st := run(t, c, tt.job); st.State != api.JobDone {
				t.Fatalf("job = %+v, want done", st)
			}
			if got, _ := stdout(t, c); got != tt.stdout {
				t.Errorf("stdout = %q, want %q", got, tt.stdout)
			}
		})
	}
}

func TestRunner_workingDirDefaultsToTheImages(t *testing.T) {
	imageWD := t.TempDir()
	c, _, _ := newRunnerWith(t, runner.Config{Home: t.TempDir(), ImageWorkingDir: imageWD})
	run(t, c, api.JobSpec{Commands: []string{"pwd"}})
	if got, _ := stdout(t, c); got != imageWD+"\n" {
		t.Errorf("pwd = %q, want the image's WORKDIR %s", got, imageWD)
	}
	c, _, _ = newRunnerWith(t, runner.Config{Home: t.TempDir(), ImageWorkingDir: imageWD})
	run(t, c, api.JobSpec{Commands: []string{"pwd"}, WorkingDir: "sub"})
	if got, _ := stdout(t, c); got != filepath.Join(imageWD, "sub")+"\n" {
		t.Errorf("pwd = %q, want sub under the image's WORKDIR", got)
	}
}

func TestRunner_submitWithNothingToRunIsRefused(t *testing.T) {
	c, _, _ := newRunner(t)
	err := c.Submit(ctx(t), api.JobSpec{})
	if !isStatus(err, http.StatusBadRequest) {
		t.Errorf("Submit without commands, entrypoint or image command: err = %v, want http 400", err)
	}
}

func isStatus(err error, status int) bool {
	var ae *api.Error
	return errors.As(err, &ae) && ae.Status == status
}

func TestRunner_logStreamServesJSONLinesLive(t *testing.T) {
	r, err := runner.New(runner.Config{Home: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(r.Handler())
	t.Cleanup(func() { // the job must be over before its home is removed
		r.Stop(0, "", "test ended")
		<-r.Done()
		srv.Close()
		r.Close()
	})
	c := api.NewRunnerClient(srv.URL, nil)
	if err := c.Submit(ctx(t), api.JobSpec{Commands: []string{"echo one", "sleep 0.2", "echo two >&2"}, WorkingDir: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequestWithContext(ctx(t), http.MethodGet, srv.URL+"/api/v1/logs/stream", nil)
	resp, err := http.DefaultClient.Do(req) // before the job writes anything
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if _, err := c.Run(ctx(t)); err != nil {
		t.Fatal(err)
	}
	var got []string
	dec := json.NewDecoder(resp.Body)
	for {
		var l api.LogLine
		if err := dec.Decode(&l); err != nil {
			break
		}
		got = append(got, fmt.Sprintf("%d %s %s", l.Seq, l.Stream, l.Data))
	}
	want := []string{"1 stdout one\n", "2 stderr two\n"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("stream (-want +got):\n%s", diff)
	}
}

func TestRunner_logsDefaultToJSONLines(t *testing.T) {
	r, err := runner.New(runner.Config{Home: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(r.Handler())
	t.Cleanup(func() { // the job must be over before its home is removed
		r.Stop(0, "", "test ended")
		<-r.Done()
		srv.Close()
		r.Close()
	})
	c := api.NewRunnerClient(srv.URL, nil)
	run(t, c, api.JobSpec{Commands: []string{"echo hi"}, WorkingDir: t.TempDir()})
	resp, err := http.Get(srv.URL + "/api/v1/logs?after_seq=0")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var l api.LogLine
	if err := json.NewDecoder(resp.Body).Decode(&l); err != nil {
		t.Fatal(err)
	}
	if resp.Header.Get("Content-Type") != "application/x-ndjson" || l.Seq != 1 || l.Stream != api.StreamStdout || string(l.Data) != "hi\n" || l.Time.IsZero() {
		t.Errorf("GET /api/v1/logs = %s %+v, want one JSON line with seq, time, stream and data", resp.Header.Get("Content-Type"), l)
	}
}
