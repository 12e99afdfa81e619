package reconciler

import (
	"sync"
	"testing"
	"time"

	"hoist/backends/fake"
	"hoist/store"
)

// finishedJobs is an Observer that records JobFinished calls.
type finishedJobs struct {
	nopObserver
	mu   sync.Mutex
	seen []finishedJob
}

// finishedJob is one JobFinished call.
type finishedJob struct {
	backend, status string
	d               time.Duration
}

func (o *finishedJobs) JobFinished(backend, status string, d time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.seen = append(o.seen, finishedJob{backend, status, d})
}

// TestWorkers_finishedJobIsObservedWithItsBackendAndRunTime: when a job's
// final status is written, the observer is told its backend, that status
// and how long it ran (from its start to its finish, on the clock).
func TestWorkers_finishedJobIsObservedWithItsBackendAndRunTime(t *testing.T) {
	f := newFixture(t, map[string]string{
		"fleet.dstack.yml": cloudFleet,
		"task.dstack.yml":  "type: task\nname: train\nimage: busybox\ncommands: [echo hello]\n",
	})
	f.withFakeBackend(fake.Config{})
	obs := &finishedJobs{}
	f.c.obs = obs
	if res := f.sync(); res != resultSynced {
		t.Fatalf("sync = %s", res)
	}
	f.provision("train")
	f.stepJob("train", store.JobRunning)
	f.clock.Advance(3 * time.Minute)
	f.reconcileJobs("train") // hands the job to its pump
	f.waitJob("train", store.JobTerminating)
	j := f.stepJob("train", store.JobDone)
	obs.mu.Lock()
	defer obs.mu.Unlock()
	want := finishedJob{"fake", store.JobDone, j.FinishedAt.Sub(j.StartedAt)}
	if len(obs.seen) != 1 || obs.seen[0] != want || want.d < 3*time.Minute {
		t.Errorf("observed %+v, want [%+v] of at least 3m", obs.seen, want)
	}
}
