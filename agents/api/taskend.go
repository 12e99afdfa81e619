package api

import "fmt"

// TaskEnd returns the termination reason and message of a task whose
// container exited: code is its exit code (nil when unknown), oom says the
// kernel killed it for memory, and job is the runner's last job state (nil
// when the runner left none, i.e. it never started). The docker shim and
// the Kubernetes pod shim read a container's end through it.
func TaskEnd(code *int, oom bool, job *JobState) (string, string) {
	switch {
	case oom:
		return ReasonContainerExitedWithError, "the container ran out of memory (OOM killed)"
	case job != nil && job.Finished():
		switch job.State {
		case JobDone:
			return ReasonDoneByRunner, ""
		case JobFailed:
			return ReasonContainerExitedWithError, job.TerminationMessage
		default:
			return job.TerminationReason, job.TerminationMessage
		}
	case code == nil:
		return ReasonContainerExitedWithError, "the container exited"
	case *code == 0:
		return ReasonDoneByRunner, ""
	case *code == 137:
		return ReasonContainerExitedWithError, "the container was killed (SIGKILL) from outside while its job was running"
	case job == nil:
		return ReasonContainerExitedWithError, fmt.Sprintf("the container exited with code %d before its runner started "+
			"(the image cannot run the static hoist-runner binary, or it failed: see the container's output)", *code)
	default:
		return ReasonContainerExitedWithError, fmt.Sprintf("the container exited with code %d while its job was running", *code)
	}
}
