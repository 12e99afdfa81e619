package reconciler

import (
	"fmt"

	"hoist/agents/api"
	"hoist/store"
)

// Job termination reasons (dstack's JobTerminationReason vocabulary).
const (
	// reasonNoCapacity is also a shim's reason for a task that could not
	// start for want of capacity (the Kubernetes pod shim's pod left
	// unschedulable), passed through to the job.
	reasonNoCapacity          = api.ReasonNoCapacity
	reasonInterruptedCapacity = api.ReasonInterrupted
	reasonInstanceUnreachable = "instance_unreachable"
	reasonWaitingInstance     = "waiting_instance_limit_exceeded"
	reasonWaitingRunner       = "waiting_runner_limit_exceeded"
	reasonTerminatedByUser    = "terminated_by_user"
	reasonAbortedByUser       = "aborted_by_user"
	reasonTerminatedByServer  = "terminated_by_server"
	reasonDoneByRunner        = "done_by_runner"
	reasonContainerExitedErr  = "container_exited_with_error"
	reasonCreatingContainer   = "creating_container_error"
	reasonExecutorError       = "executor_error"
	reasonMaxDuration         = "max_duration_exceeded"
	reasonLogQuota            = "log_quota_exceeded"
	reasonVolumeError         = "volume_error"
	reasonScaledDown          = "scaled_down"
	reasonUtilizationPolicy   = "terminated_due_to_utilization_policy"
)

// Run termination reasons (dstack's RunTerminationReason vocabulary).
const (
	runReasonAllJobsDone   = "all_jobs_done"
	runReasonJobFailed     = "job_failed"
	runReasonRetryExceeded = "retry_limit_exceeded"
	runReasonStoppedByUser = "stopped_by_user"
	runReasonAbortedByUser = "aborted_by_user"
	runReasonServerError   = "server_error"
)

// jobFinalStatus maps a job termination reason to the job's final status.
func jobFinalStatus(reason string) string {
	switch reason {
	case reasonDoneByRunner:
		return store.JobDone
	case reasonTerminatedByUser, reasonTerminatedByServer, reasonMaxDuration, reasonScaledDown,
		reasonInactivity, reasonUtilizationPolicy:
		return store.JobTerminated
	case reasonAbortedByUser:
		return store.JobAborted
	default:
		return store.JobFailed
	}
}

// runFinalStatus maps a run termination reason to the run's final status.
// The reasons hoist uses for Git-driven stops (a spec changed or removed)
// are the server's: terminated.
func runFinalStatus(reason string) string {
	switch reason {
	case runReasonAllJobsDone:
		return store.RunDone
	case runReasonStoppedByUser, runReasonAbortedByUser, reasonTerminatedByServer:
		return store.RunTerminated
	default:
		return store.RunFailed
	}
}

// jobReasonForRun is the reason a run's termination gives its remaining
// jobs (dstack's to_job_termination_reason).
func jobReasonForRun(runReason string) string {
	switch runReason {
	case runReasonAllJobsDone:
		return reasonDoneByRunner
	case runReasonStoppedByUser:
		return reasonTerminatedByUser
	case runReasonAbortedByUser:
		return reasonAbortedByUser
	default:
		return reasonTerminatedByServer
	}
}

// retryEvent classifies a failed job's reason into the retry policy's
// events: no-capacity, interruption or error; "" when not retryable.
func retryEvent(reason string) string {
	switch reason {
	case reasonNoCapacity:
		return "no-capacity"
	case reasonInterruptedCapacity, reasonInstanceUnreachable:
		return "interruption"
	case reasonContainerExitedErr, reasonCreatingContainer, reasonExecutorError,
		reasonWaitingInstance, reasonWaitingRunner, reasonVolumeError:
		return "error"
	}
	return ""
}

// jobStatusMessage is the short message a user reads next to a job status.
func jobStatusMessage(j store.Job) string {
	switch {
	case j.Status == store.JobDone || (j.ExitCode != nil && j.Status == store.JobFailed):
		if j.ExitCode != nil {
			return fmt.Sprintf("exited (%d)", *j.ExitCode)
		}
		return "exited (0)"
	case j.TerminationReason == reasonNoCapacity:
		if j.TerminationMessage == "no fleets" {
			return "no fleets"
		}
		return "no capacity"
	case j.TerminationReason == reasonInterruptedCapacity || j.TerminationReason == reasonInstanceUnreachable:
		return "interrupted"
	case j.Status == store.JobAborted:
		return "aborted"
	case j.Status == store.JobTerminated:
		return "stopped"
	case j.Status == store.JobFailed:
		return "error"
	}
	return j.Status
}

// deriveRunStatus computes an active run's status from the latest
// submission of each of its jobs (dstack's priority: failed > running >
// provisioning > submitted > all done). It returns the status and, when the
// run must terminate, the run termination reason.
func deriveRunStatus(latest []store.Job) (status, terminate string) {
	if len(latest) == 0 {
		return store.RunSubmitted, ""
	}
	var failed, running, provisioning, submitted, done int
	for _, j := range latest {
		switch j.Status {
		case store.JobFailed, store.JobAborted, store.JobTerminated:
			failed++
		case store.JobRunning:
			running++
		case store.JobProvisioning, store.JobPulling:
			provisioning++
		case store.JobSubmitted:
			submitted++
		case store.JobDone:
			done++
		case store.JobTerminating:
			if j.TerminationReason == reasonDoneByRunner {
				done++
			} else {
				failed++
			}
		}
	}
	switch {
	case failed > 0:
		return store.RunTerminating, runReasonJobFailed
	case running > 0:
		return store.RunRunning, ""
	case provisioning > 0:
		return store.RunProvisioning, ""
	case submitted > 0:
		return store.RunSubmitted, ""
	case done == len(latest):
		return store.RunTerminating, runReasonAllJobsDone
	}
	return store.RunRunning, ""
}

// latestSubmissions keeps, per (job_num, replica_num), the newest
// submission; jobs come newest first from the store.
func latestSubmissions(jobs []store.Job) []store.Job {
	seen := map[[2]int]bool{}
	var out []store.Job
	for _, j := range jobs {
		k := [2]int{j.JobNum, j.ReplicaNum}
		if seen[k] {
			continue
		}
		seen[k] = true
		out = append(out, j)
	}
	return out
}
