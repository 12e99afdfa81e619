package shim_test

import (
	"syscall"
	"testing"

	"hoist/agents/api"
)

// TestShim_nonRootJobRunsUnderAnOwnerOnlyUmask: hoist serve runs local
// shims with umask 077; the runner of a container whose user is not the
// shim's must still read its token and write its home.
func TestShim_nonRootJobRunsUnderAnOwnerOnlyUmask(t *testing.T) {
	// Not parallel: the umask is the process's. Parallel tests are paused
	// until the serial ones have finished.
	old := syscall.Umask(0o077)
	t.Cleanup(func() { syscall.Umask(old) })
	e := newEnv(t)
	_, rc := e.runTask(t, api.TaskSpec{ID: "umask-nobody", User: "65534:65534"})
	st := runJob(t, rc, api.JobSpec{RunName: "nobody", JobID: "j1", Commands: []string{"id -u"}})
	if st.State != api.JobDone || st.ExitCode == nil || *st.ExitCode != 0 {
		t.Fatalf("job state = %+v, want done with exit code 0", st)
	}
	if got := output(t, rc, api.StreamStdout); got != "65534\n" {
		t.Errorf("stdout = %q, want the container user's id 65534", got)
	}
}
