package reconciler

import (
	"testing"
	"time"

	"hoist/agents/api"
	"hoist/schema"
	"hoist/store"
)

// TestDeriveRunStatus checks dstack's priority of job statuses when an
// active run's status is derived: failed > running > provisioning >
// submitted > all done.
func TestDeriveRunStatus(t *testing.T) {
	j := func(status string, reason ...string) store.Job {
		job := store.Job{Status: status}
		if len(reason) > 0 {
			job.TerminationReason = reason[0]
		}
		return job
	}
	for _, tc := range []struct {
		name         string
		jobs         []store.Job
		want, reason string
	}{
		{"no jobs yet", nil, store.RunSubmitted, ""},
		{"submitted", []store.Job{j(store.JobSubmitted)}, store.RunSubmitted, ""},
		{"provisioning beats submitted", []store.Job{j(store.JobSubmitted), j(store.JobProvisioning)}, store.RunProvisioning, ""},
		{"pulling counts as provisioning", []store.Job{j(store.JobPulling)}, store.RunProvisioning, ""},
		{"running beats provisioning", []store.Job{j(store.JobProvisioning), j(store.JobRunning)}, store.RunRunning, ""},
		{"a failed job terminates the run", []store.Job{j(store.JobRunning), j(store.JobFailed)}, store.RunTerminating, runReasonJobFailed},
		{"an aborted job counts as failed", []store.Job{j(store.JobAborted)}, store.RunTerminating, runReasonJobFailed},
		{"a terminated job counts as failed", []store.Job{j(store.JobDone), j(store.JobTerminated)}, store.RunTerminating, runReasonJobFailed},
		{"terminating with an error counts as failed", []store.Job{j(store.JobTerminating, reasonContainerExitedErr)}, store.RunTerminating, runReasonJobFailed},
		{"terminating done by runner counts as done", []store.Job{j(store.JobTerminating, reasonDoneByRunner), j(store.JobDone)}, store.RunTerminating, runReasonAllJobsDone},
		{"all done", []store.Job{j(store.JobDone), j(store.JobDone)}, store.RunTerminating, runReasonAllJobsDone},
		{"one done one running stays running", []store.Job{j(store.JobDone), j(store.JobRunning)}, store.RunRunning, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, reason := deriveRunStatus(tc.jobs)
			if got != tc.want || reason != tc.reason {
				t.Errorf("deriveRunStatus = %s (%q), want %s (%q)", got, reason, tc.want, tc.reason)
			}
		})
	}
}

// TestFinalStatuses checks every termination reason's final status
// (dstack's RunStatus and JobStatus in src/dstack/_internal/core/models/runs.py) and how a run's reason reaches its jobs.
func TestFinalStatuses(t *testing.T) {
	jobs := map[string]string{
		reasonNoCapacity: store.JobFailed, reasonInterruptedCapacity: store.JobFailed,
		reasonInstanceUnreachable: store.JobFailed, reasonWaitingInstance: store.JobFailed,
		reasonWaitingRunner: store.JobFailed, reasonTerminatedByUser: store.JobTerminated,
		reasonVolumeError: store.JobFailed, reasonScaledDown: store.JobTerminated,
		reasonDoneByRunner: store.JobDone, reasonAbortedByUser: store.JobAborted,
		reasonTerminatedByServer: store.JobTerminated, "inactivity_duration_exceeded": store.JobTerminated,
		"terminated_due_to_utilization_policy": store.JobTerminated, reasonContainerExitedErr: store.JobFailed,
		"ports_binding_failed": store.JobFailed, reasonCreatingContainer: store.JobFailed,
		reasonExecutorError: store.JobFailed, reasonMaxDuration: store.JobTerminated, reasonLogQuota: store.JobFailed,
		"gateway_error": store.JobFailed, "instance_access_revoked": store.JobFailed,
	}
	for reason, want := range jobs {
		if got := jobFinalStatus(reason); got != want {
			t.Errorf("jobFinalStatus(%s) = %s, want %s", reason, got, want)
		}
	}
	runs := map[string]string{
		runReasonAllJobsDone: store.RunDone, runReasonJobFailed: store.RunFailed,
		runReasonRetryExceeded: store.RunFailed, runReasonStoppedByUser: store.RunTerminated,
		runReasonAbortedByUser: store.RunTerminated, runReasonServerError: store.RunFailed,
		"gateway_error": store.RunFailed, reasonTerminatedByServer: store.RunTerminated,
	}
	for reason, want := range runs {
		if got := runFinalStatus(reason); got != want {
			t.Errorf("runFinalStatus(%s) = %s, want %s", reason, got, want)
		}
	}
	toJob := map[string]string{
		runReasonAllJobsDone: reasonDoneByRunner, runReasonStoppedByUser: reasonTerminatedByUser,
		runReasonAbortedByUser: reasonAbortedByUser, runReasonJobFailed: reasonTerminatedByServer,
		runReasonRetryExceeded: reasonTerminatedByServer, reasonTerminatedByServer: reasonTerminatedByServer,
	}
	for reason, want := range toJob {
		if got := jobReasonForRun(reason); got != want {
			t.Errorf("jobReasonForRun(%s) = %s, want %s", reason, got, want)
		}
	}
}

// TestRetryEvent checks which failures each retry event covers.
func TestRetryEvent(t *testing.T) {
	for reason, want := range map[string]string{
		reasonNoCapacity:          "no-capacity",
		reasonInterruptedCapacity: "interruption",
		reasonInstanceUnreachable: "interruption",
		reasonContainerExitedErr:  "error",
		reasonCreatingContainer:   "error",
		reasonExecutorError:       "error",
		reasonWaitingInstance:     "error",
		reasonWaitingRunner:       "error",
		reasonVolumeError:         "error",
		reasonDoneByRunner:        "",
		reasonTerminatedByUser:    "",
		reasonAbortedByUser:       "",
		reasonMaxDuration:         "",
		reasonTerminatedByServer:  "",
	} {
		if got := retryEvent(reason); got != want {
			t.Errorf("retryEvent(%s) = %q, want %q", reason, got, want)
		}
	}
}

// TestBackoffFor checks dstack's resubmission back-off: 15 s, 30 s, 1 m,
// 2 m, 5 m, then 10 m for every later attempt.
func TestBackoffFor(t *testing.T) {
	want := []time.Duration{15 * time.Second, 30 * time.Second, time.Minute, 2 * time.Minute, 5 * time.Minute,
		10 * time.Minute, 10 * time.Minute, 10 * time.Minute}
	for attempt, w := range want {
		if got := backoffFor(attempt); got != w {
			t.Errorf("backoffFor(%d) = %s, want %s", attempt, got, w)
		}
	}
	if got := backoffFor(-1); got != 15*time.Second {
		t.Errorf("backoffFor(-1) = %s", got)
	}
}

// TestRunSpec_retryOn checks the retry policy's events and its duration,
// measured from the run's submission with an injected clock.
func TestRunSpec_retryOn(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	spec := func(events []string, duration int64) runSpec {
		var s runSpec
		s.Retry = &schema.Retry{OnEvents: events, Duration: duration}
		return s
	}
	for _, tc := range []struct {
		name  string
		spec  runSpec
		event string
		after time.Duration
		want  bool
	}{
		{"no retry policy", runSpec{}, "error", 0, false},
		{"event listed", spec([]string{"error"}, 3600), "error", time.Minute, true},
		{"event not listed", spec([]string{"no-capacity"}, 3600), "error", time.Minute, false},
		{"at the end of the duration", spec([]string{"error"}, 3600), "error", time.Hour, true},
		{"after the duration", spec([]string{"error"}, 3600), "error", time.Hour + time.Second, false},
		{"no duration means no limit", spec([]string{"interruption"}, 0), "interruption", 1000 * time.Hour, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.spec.retryOn(tc.event, t0, t0.Add(tc.after)); got != tc.want {
				t.Errorf("retryOn(%s, +%s) = %v, want %v", tc.event, tc.after, got, tc.want)
			}
		})
	}
}

// TestRunSpec_jobNums checks how many jobs a submission has per run type.
func TestRunSpec_jobNums(t *testing.T) {
	three := 3.0
	for _, tc := range []struct {
		name string
		spec runSpec
		want int
	}{
		{"task", runSpec{Type: "task"}, 1},
		{"multi-node task", runSpec{Type: "task", Nodes: 4}, 4},
		{"service default", runSpec{Type: "service"}, 1},
		{"service replicas min", runSpec{Type: "service", Replicas: &schema.Range{Min: &three}}, 3},
		{"dev environment", runSpec{Type: "dev-environment"}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := len(tc.spec.jobNums()); got != tc.want {
				t.Errorf("jobs = %d, want %d", got, tc.want)
			}
		})
	}
}

// TestNextCron checks the earliest fire time across expressions, in UTC.
func TestNextCron(t *testing.T) {
	now := time.Date(2026, 1, 1, 10, 7, 0, 0, time.UTC)
	got, err := nextCron([]string{"0 12 * * *", "*/15 * * * *"}, now)
	if err != nil {
		t.Fatal(err)
	}
	if want := time.Date(2026, 1, 1, 10, 15, 0, 0, time.UTC); !got.Equal(want) {
		t.Errorf("nextCron = %s, want %s", got, want)
	}
	if _, err := nextCron([]string{"not cron"}, now); err == nil {
		t.Error("nextCron accepted a bad expression")
	}
}

// TestLatestSubmissions keeps the newest submission per job and replica.
func TestLatestSubmissions(t *testing.T) {
	jobs := []store.Job{ // newest first, as the store lists them
		{ID: "r0s1", JobNum: 0, SubmissionNum: 1},
		{ID: "r1s0", ReplicaNum: 1},
		{ID: "r0s0", JobNum: 0},
	}
	got := latestSubmissions(jobs)
	if len(got) != 2 || got[0].ID != "r0s1" || got[1].ID != "r1s0" {
		t.Errorf("latestSubmissions = %+v", got)
	}
	if n := nextSubmission(jobs); n != 2 {
		t.Errorf("nextSubmission = %d, want 2", n)
	}
}

// TestJobStatusMessage checks dstack's user-facing job messages.
func TestJobStatusMessage(t *testing.T) {
	code := func(n int) *int { return &n }
	for _, tc := range []struct {
		job  store.Job
		want string
	}{
		{store.Job{Status: store.JobDone}, "exited (0)"},
		{store.Job{Status: store.JobFailed, ExitCode: code(3)}, "exited (3)"},
		{store.Job{Status: store.JobFailed, TerminationReason: reasonNoCapacity, TerminationMessage: "no fleets"}, "no fleets"},
		{store.Job{Status: store.JobFailed, TerminationReason: reasonNoCapacity}, "no capacity"},
		{store.Job{Status: store.JobFailed, TerminationReason: reasonInstanceUnreachable}, "interrupted"},
		{store.Job{Status: store.JobAborted}, "aborted"},
		{store.Job{Status: store.JobTerminated}, "stopped"},
		{store.Job{Status: store.JobFailed, TerminationReason: reasonExecutorError}, "error"},
	} {
		if got := jobStatusMessage(tc.job); got != tc.want {
			t.Errorf("jobStatusMessage(%+v) = %q, want %q", tc.job, got, tc.want)
		}
	}
}

func TestTaskReason(t *testing.T) {
	tests := []struct {
		name        string
		info        api.TaskInfo
		reason, msg string
	}{
		{"killed from outside keeps the shim's words", api.TaskInfo{TerminationReason: api.ReasonContainerExitedWithError, TerminationMessage: "killed"},
			reasonContainerExitedErr, "killed"},
		{"removed from outside is an error exit in dstack's terms", api.TaskInfo{TerminationReason: api.ReasonContainerLost, TerminationMessage: "the container was removed from outside"},
			reasonContainerExitedErr, "the container was removed from outside"},
		{"no reason", api.TaskInfo{}, reasonContainerExitedErr, "the container ended"},
		{"done", api.TaskInfo{TerminationReason: api.ReasonDoneByRunner}, reasonDoneByRunner, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if r, m := taskReason(tt.info); r != tt.reason || m != tt.msg {
				t.Errorf("taskReason = %q, %q; want %q, %q", r, m, tt.reason, tt.msg)
			}
		})
	}
}
