package e2e

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"hoist/e2e/testenv"
	"hoist/store"
)

// TestChaos_replicas runs two (HOIST_CHAOS=full: two, then three) `hoist
// serve` replicas on one PostgreSQL database and the simulated AWS, and
// commits waves of short tasks printing numbered lines while one replica
// at a time is killed (SIGKILL) at a random moment and restarted (in
// a wave in four; full: three in four). After each wave the tasks are
// done and the audit (chaosEnv.audit) finds nothing leaked, done twice or
// lost. Default: 50 tasks in waves of 5;
// full: 100 tasks per replica count. HOIST_CHAOS_SEED replays a run.
func TestChaos_replicas(t *testing.T) {
	t.Parallel() // mostly waits: runs beside the other slow tests (harness_test.go)
	counts, tasks := []int{2}, 50
	if chaosFull() {
		counts, tasks = []int{2, 3}, 100
	}
	for _, n := range counts {
		t.Run(strconv.Itoa(n), func(t *testing.T) { chaosReplicas(t, n, tasks) })
	}
}

// replicaWave is how many tasks a wave commits: the pool's size, so that
// each gets an instance.
const replicaWave = 5

func chaosReplicas(t *testing.T, replicas, tasks int) {
	seed := chaosSeed(t)
	dsn := testenv.Postgres(t)
	e := newChaosEnv(t, seed)
	// Replicas sharing a database share its secret key.
	e.env = []string{store.SecretKeyEnv + "=" + e2eSecretKey}
	for range replicas {
		e.startServer("--db", dsn)
	}
	pool := "type: fleet\nname: pool\nnodes: 1..5\nbackends: [aws]\nspot_policy: on-demand\nresources:\n  cpu: 2..\n  memory: 4GB..\n"
	files := map[string]string{"pool.dstack.yml": pool}
	killShare := 1
	if chaosFull() {
		killShare = 3
	}
	var all []chaosTask
	var tot chaosTotals
	var settle []time.Duration
	kills := 0
	began := time.Now()
	for w := 0; len(all) < tasks; w++ {
		var wave []chaosTask
		for i := 0; i < replicaWave && len(all) < tasks; i++ {
			tk := chaosTask{name: fmt.Sprintf("w%dt%d", w, i), lines: 3 + e.rng.IntN(8)}
			wave = append(wave, tk)
			all = append(all, tk)
			files[tk.name+".dstack.yml"] = numberedTask(tk.name, tk.lines) + crashOn
		}
		sha := e.writeSpecs(files, fmt.Sprintf("wave %d", w))
		t0 := time.Now()
		// A wave in four (full: three in four) loses a replica at a random
		// moment of its work; its leases hold its rows until they expire.
		if e.rng.IntN(4) < killShare {
			victim := e.servers[e.rng.IntN(len(e.servers))]
			time.Sleep(time.Duration(e.rng.IntN(3000)) * time.Millisecond)
			victim.kill()
			kills++
			e.trace(fmt.Sprintf("wave %d: killed %s", w, victim.url))
			time.Sleep(time.Duration(e.rng.IntN(2000)) * time.Millisecond)
			victim.start()
		}
		e.trace(fmt.Sprintf("wave %d: committed %.8s", w, sha))
		e.waitTasks(wave, sha)
		t.Logf("wave %d done in %s", w, time.Since(t0).Round(time.Millisecond))
		settle = append(settle, time.Since(t0))
		e.audit(wave, &tot)
	}
	e.audit(all, &tot)
	t.Logf("chaos replicas: seed %d, %d replicas, %d tasks in %s, %d kills, wave done %s, %d containers started, audits %d: leaked %d duplicated %d lost %d",
		seed, replicas, len(all), time.Since(began).Round(time.Second), kills, durations(settle), e.starts.total(),
		tot.audits, tot.leaked, tot.duplicated, tot.lost)
}

// waitTasks waits until every server applied sha and the tasks are done.
func (e *chaosEnv) waitTasks(tasks []chaosTask, sha string) {
	e.t.Helper()
	var why string
	waitFor(e.t, chaosSettle, func() string { return "the wave done (" + why + ")" }, func() bool {
		s := e.api()
		if sy := s.sync(); sy.Revision != sha {
			why = fmt.Sprintf("revision %.8s, want %.8s", sy.Revision, sha)
			return false
		}
		for _, tk := range tasks {
			var run apiRunFull
			if s.getJSON("/api/v1/runs/"+tk.name, &run) != 200 {
				why = "run " + tk.name + " absent"
				return false
			}
			if run.Status == "failed" || run.Status == "terminated" {
				e.t.Fatalf("run %s is %s: %+v", tk.name, run.Status, run.Jobs)
			}
			if run.Status != "done" {
				if w := "run " + tk.name + " " + run.Status; w != why {
					why = w
					e.trace("settling: " + why)
				}
				return false
			}
		}
		return true
	})
}
