package reconciler

import (
	"errors"
	"testing"

	"hoist/store"
)

// TestDialJobSSH_onlyRunningJobs: a job that does not exist, has not
// started running or has no runner yet is not found (the web answers 404
// or 409 from the job's status), and no instance is dialled for it.
func TestDialJobSSH_onlyRunningJobs(t *testing.T) {
	f := newFixture(t, map[string]string{"once.dstack.yml": "type: task\nname: once\nimage: busybox\ncommands: [x]\n"})
	f.sync()
	f.reconcileRun("once")
	js := f.jobs(f.run("once").ID)
	if len(js) != 1 || js[0].Status != store.JobSubmitted {
		t.Fatalf("jobs = %+v, want one submitted job", js)
	}
	running := js[0]
	running.Status = store.JobRunning // but no runner address yet
	if err := f.st.UpdateJob(f.ctx, &running); err != nil {
		t.Fatal(err)
	}
	for name, id := range map[string]string{"unknown job": "nope", "running without a runner": running.ID} {
		conn, _, err := f.c.DialJobSSH(f.ctx, id, "ssh-ed25519 AAAA")
		if conn != nil || !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s: DialJobSSH = %v, %v; want store.ErrNotFound", name, conn, err)
		}
	}
}
