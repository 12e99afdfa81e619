package api

import (
	"strings"
	"testing"
)

func TestTaskEnd(t *testing.T) {
	code := func(c int) *int { return &c }
	running := &JobState{State: JobRunning}
	for _, tt := range []struct {
		name    string
		code    *int
		oom     bool
		job     *JobState
		reason  string
		message string
	}{
		{"an OOM kill says so whatever the job did", code(137), true, &JobState{State: JobDone}, ReasonContainerExitedWithError, "out of memory"},
		{"a job done is done by the runner", code(0), false, &JobState{State: JobDone}, ReasonDoneByRunner, ""},
		{"a job failed gives its message", code(1), false, &JobState{State: JobFailed, TerminationMessage: "commands exited with code 3"}, ReasonContainerExitedWithError, "code 3"},
		{"a job stopped keeps its reason", code(0), false, &JobState{State: JobTerminated, TerminationReason: ReasonMaxDurationExceeded}, ReasonMaxDurationExceeded, ""},
		{"exit 0 without a finished job is done", code(0), false, running, ReasonDoneByRunner, ""},
		{"SIGKILL while running is from outside", code(137), false, running, ReasonContainerExitedWithError, "killed (SIGKILL) from outside"},
		{"an exit while running names the code", code(2), false, running, ReasonContainerExitedWithError, "code 2 while its job was running"},
		{"an exit before the runner started says so", code(1), false, nil, ReasonContainerExitedWithError, "before its runner started"},
		{"an unknown code", nil, false, nil, ReasonContainerExitedWithError, "the container exited"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			reason, msg := TaskEnd(tt.code, tt.oom, tt.job)
			if reason != tt.reason || !strings.Contains(msg, tt.message) {
				t.Errorf("TaskEnd = %s, %q; want %s, a message with %q", reason, msg, tt.reason, tt.message)
			}
		})
	}
}
