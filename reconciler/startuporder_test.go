package reconciler

import (
	"testing"
	"time"

	"hoist/store"
)

func TestStartupWait_countsANodeThatHasRunAndEnded(t *testing.T) {
	ran := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	node := func(num int, status string, started bool) store.Job {
		j := store.Job{JobNum: num, Status: status}
		if started {
			j.StartedAt = ran
		}
		return j
	}
	for _, tc := range []struct {
		name  string
		order string
		nodes []store.Job
		job   int
		waits bool
	}{
		{"a worker waits for a master still pulling", startupMasterFirst, []store.Job{node(0, store.JobPulling, false), node(1, store.JobPulling, false)}, 1, true},
		{"a worker starts once the master runs", startupMasterFirst, []store.Job{node(0, store.JobRunning, true), node(1, store.JobPulling, false)}, 1, false},
		{"a worker starts once the master has run and is done", startupMasterFirst, []store.Job{node(0, store.JobDone, true), node(1, store.JobPulling, false)}, 1, false},
		{"the master waits for a worker still pulling", startupWorkersFirst, []store.Job{node(0, store.JobPulling, false), node(1, store.JobPulling, false)}, 0, true},
		{"the master starts once every worker has run", startupWorkersFirst, []store.Job{node(0, store.JobPulling, false), node(1, store.JobDone, true), node(2, store.JobRunning, true)}, 0, false},
		{"any order waits for nothing", "any", []store.Job{node(0, store.JobPulling, false), node(1, store.JobPulling, false)}, 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			job := tc.nodes[tc.job]
			if got := startupWait(tc.nodes, &job, tc.order); (got != "") != tc.waits {
				t.Errorf("startupWait = %q, want waiting %v", got, tc.waits)
			}
		})
	}
}
