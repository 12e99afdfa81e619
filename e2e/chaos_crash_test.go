package e2e

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"hoist/e2e/cloudsim/sim"
)

// crashMoments are where a cycle of TestChaos_crash kills the server: just
// after a commit (the sync), while RunInstances is in flight (the create),
// while a job is being placed or started (the attach), while a task's
// lines are being pumped, while TerminateInstances is in flight.
var crashMoments = []string{"sync", "create", "attach", "pump", "terminate"}

// crashPool is the fleet the scenario's runs use: one warm instance,
// growing for jobs.
const crashPool = "type: fleet\nname: pool\nnodes: 1..4\nbackends: [aws]\nspot_policy: on-demand\nresources:\n  cpu: 2..\n  memory: 4GB..\n"

// crashOn pins a run to the pool with small resources; a job finding every
// instance busy at the pool's size is retried.
const crashOn = "fleets: [pool]\nspot_policy: on-demand\nresources:\n  cpu: 1..\n  memory: 1GB..\nretry:\n  on_events: [no-capacity]\n  duration: 10m\n"

// crashState is what the repository declares in a cycle of TestChaos_crash.
type crashState struct {
	extra      string // the name of the extra fleet, "" when none
	extraNodes int
	tasks      []chaosTask // numbered tasks, oldest first
	service    bool
	sleeper    bool
	removed    []string // runs removed from the repository
	gone       []string // fleets removed from the repository
}

func (st crashState) files() map[string]string {
	f := map[string]string{"pool.dstack.yml": crashPool}
	if st.extra != "" {
		f[st.extra+".dstack.yml"] = fmt.Sprintf("type: fleet\nname: %s\nnodes: %d\nbackends: [aws]\nspot_policy: on-demand\nresources:\n  cpu: 2..\n  memory: 4GB..\n", st.extra, st.extraNodes)
	}
	for _, tk := range st.tasks {
		f[tk.name+".dstack.yml"] = numberedTask(tk.name, tk.lines) + crashOn
	}
	if st.service {
		f["web.dstack.yml"] = serviceSpec("web", 1, "") + crashOn
	}
	if st.sleeper {
		f["sleeper.dstack.yml"] = task("sleeper", "  - echo asleep\n  - sleep 3600\n") + crashOn
	}
	return f
}

// TestChaos_crash drives `hoist serve` (SQLite) on the simulated AWS
// through cycles of a commit — a task printing numbered lines, an extra
// fleet added, resized or removed, a service and a long task started or
// removed, old tasks removed — and a SIGKILL at a moment the cycle aims at
// (crashMoments), then a restart on the same data dir. After each cycle
// the server reaches the commit's state and the audit (chaosEnv.audit)
// finds nothing leaked, done twice or lost. 10 cycles by default;
// HOIST_CHAOS=full runs 100 (HOIST_CHAOS_CYCLES overrides) and prints a
// summary; HOIST_CHAOS_SEED replays a run.
func TestChaos_crash(t *testing.T) {
	t.Parallel() // mostly waits: runs beside the other slow tests (harness_test.go)
	seed := chaosSeed(t)
	cycles := 10
	if chaosFull() {
		cycles = 100
	}
	cycles = chaosCycles(t, cycles)
	e := newChaosEnv(t, seed)
	s := e.startServer()
	var st crashState
	var tot chaosTotals
	kills := map[string]int{}
	var settle []time.Duration
	var slowest struct {
		d    time.Duration
		what string
	}
	began := time.Now()
	for c := range cycles {
		moment := crashMoments[e.rng.IntN(len(crashMoments))]
		next, moment := e.crashChange(st, c, moment)
		e.trace(fmt.Sprintf("cycle %d: kill during %s", c, moment))
		// The simulator's calls are counted (and slowed) before the
		// commit: the server may call at once.
		calls := e.cs.Stats().Calls["aws"]
		if moment == "create" || moment == "terminate" {
			e.cs.Faults(sim.Faults{LatencyMS: 400 + e.rng.IntN(600)})
		}
		sha := e.writeSpecs(next.files(), fmt.Sprintf("cycle %d", c))
		e.crashKill(s, next, moment, calls)
		kills[moment]++
		s.start()
		e.cs.Faults(sim.Faults{})
		t0 := time.Now()
		e.waitState(s, next, sha)
		settle = append(settle, time.Since(t0))
		if d := settle[len(settle)-1]; d > slowest.d {
			slowest.d, slowest.what = d, fmt.Sprintf("cycle %d, kill during %s", c, moment)
		}
		st = next
		e.audit(st.tasks, &tot)
	}
	e.audit(st.tasks, &tot)
	moments := slices.Sorted(maps.Keys(kills))
	var byMoment []string
	for _, m := range moments {
		byMoment = append(byMoment, fmt.Sprintf("%s=%d", m, kills[m]))
	}
	t.Logf("chaos crash: seed %d, %d cycles in %s, kills %s, convergence %s (slowest: %s), %d containers started, audits %d: leaked %d duplicated %d lost %d",
		seed, cycles, time.Since(began).Round(time.Second), strings.Join(byMoment, " "), durations(settle), slowest.what, e.starts.total(),
		tot.audits, tot.leaked, tot.duplicated, tot.lost)
}

// crashChange returns what cycle c declares after st, aimed at moment (or
// the moment it can aim at: a termination needs something to terminate).
// Every cycle adds a numbered task and drops those three cycles old.
func (e *chaosEnv) crashChange(st crashState, c int, moment string) (crashState, string) {
	next := st
	next.tasks = slices.Clone(st.tasks)
	next.removed, next.gone = nil, nil
	lines := 5 + e.rng.IntN(20)
	if moment == "pump" {
		lines = 40
	}
	next.tasks = append(next.tasks, chaosTask{name: fmt.Sprintf("t%d", c), lines: lines})
	for len(next.tasks) > 3 {
		next.removed = append(next.removed, next.tasks[0].name)
		next.tasks = next.tasks[1:]
	}
	if moment == "terminate" && st.extra == "" && !st.service && !st.sleeper {
		moment = "create"
	}
	switch moment {
	case "create":
		if st.extra != "" {
			next.gone = append(next.gone, st.extra)
		}
		next.extra, next.extraNodes = fmt.Sprintf("extra%d", c), 1+e.rng.IntN(2)
	case "terminate":
		switch {
		case st.extra != "":
			next.gone = append(next.gone, st.extra)
			next.extra = ""
		case st.service:
			next.service = false
			next.removed = append(next.removed, "web")
		default:
			next.sleeper = false
			next.removed = append(next.removed, "sleeper")
		}
	default:
		// Now and then a service or a long task comes or goes.
		switch e.rng.IntN(4) {
		case 0:
			next.service = !st.service
			if st.service {
				next.removed = append(next.removed, "web")
			}
		case 1:
			next.sleeper = !st.sleeper
			if st.sleeper {
				next.removed = append(next.removed, "sleeper")
			}
		}
	}
	return next, moment
}

// crashKill kills s at the cycle's moment: it waits (bounded) for the
// moment to come and kills the server then, or when the wait runs out.
func (e *chaosEnv) crashKill(s *server, next crashState, moment string, calls map[string]int) {
	e.t.Helper()
	last := next.tasks[len(next.tasks)-1].name
	switch moment {
	case "sync":
		time.Sleep(time.Duration(e.rng.IntN(400)) * time.Millisecond)
	case "terminate":
		if len(next.gone) == 0 {
			// A service or the long task removed: its job is being
			// stopped on its instance, which stays.
			stopped := next.removed[len(next.removed)-1]
			within(time.Minute, func() bool {
				var run apiRunFull
				if s.getJSON("/api/v1/runs/"+stopped, &run) != 200 {
					return true
				}
				return slices.ContainsFunc(run.Jobs, func(j apiJobFull) bool { return j.Status == "terminating" || j.Status == "terminated" })
			})
			break
		}
		e.inCall("TerminateInstances", calls["TerminateInstances"])
	case "create":
		e.inCall("RunInstances", calls["RunInstances"])
	case "attach":
		within(time.Minute, func() bool {
			var run apiRunFull
			s.getJSON("/api/v1/runs/"+last, &run)
			return slices.ContainsFunc(run.Jobs, func(j apiJobFull) bool {
				return j.Status == "provisioning" || j.Status == "pulling" || j.Status == "running"
			})
		})
	case "pump":
		n := 1 + e.rng.IntN(30)
		within(time.Minute, func() bool {
			code, b := s.do("GET", "/api/v1/runs/"+last+"/logs", nil)
			return code == 200 && strings.Count(string(b), "\n") >= n
		})
	}
	s.kill()
}

// inCall returns once a call of op started after the first before (the
// simulator's calls are slowed), a little while into it, or after a
// minute without one.
func (e *chaosEnv) inCall(op string, before int) {
	e.t.Helper()
	if !within(time.Minute, func() bool { return e.simCalls(op) > before }) {
		e.t.Logf("no %s call within a minute: killed anyway", op)
	}
	time.Sleep(time.Duration(e.rng.IntN(300)) * time.Millisecond)
}

// waitState waits until s has applied revision sha and reached st: every
// task done, the service and the long task running, removed runs ended,
// the extra fleet at its size, removed fleets without instances, no
// instance on its way.
func (e *chaosEnv) waitState(s *server, st crashState, sha string) {
	e.t.Helper()
	var why string
	waitFor(e.t, chaosSettle, func() string { return "the commit's state (" + why + ")" }, func() bool {
		prev := why
		why = e.stateGap(s, st, sha)
		if why != prev {
			e.trace("settling: " + why)
		}
		return why == ""
	})
}

// stateGap says how s differs from st at sha ("" when it is there).
func (e *chaosEnv) stateGap(s *server, st crashState, sha string) string {
	if sy := s.sync(); sy.Revision != sha {
		return fmt.Sprintf("revision %.8s, want %.8s (%v)", sy.Revision, sha, sy.Errors)
	}
	runStatus := func(name string) string {
		var run apiRunFull
		if s.getJSON("/api/v1/runs/"+name, &run) != 200 {
			return "absent"
		}
		if run.RemovedFromGit && !slices.Contains([]string{"done", "failed", "terminated"}, run.Status) {
			return "removed-" + run.Status
		}
		if run.RemovedFromGit {
			return "removed"
		}
		return run.Status
	}
	want := map[string]string{}
	for _, tk := range st.tasks {
		want[tk.name] = "done"
	}
	if st.service {
		want["web"] = "running"
	}
	if st.sleeper {
		want["sleeper"] = "running"
	}
	names := slices.Sorted(maps.Keys(want))
	for _, n := range names {
		if got := runStatus(n); got != want[n] {
			if got == "failed" || got == "terminated" {
				e.t.Fatalf("run %s is %s, want %s", n, got, want[n])
			}
			return fmt.Sprintf("run %s %s, want %s", n, got, want[n])
		}
	}
	for _, n := range st.removed {
		if got := runStatus(n); got != "absent" && got != "removed" {
			return fmt.Sprintf("removed run %s is %s", n, got)
		}
	}
	var insts []cloudInstance
	s.getJSON("/api/v1/instances", &insts)
	live := map[string][]string{}
	for _, i := range insts {
		switch i.Status {
		case "terminated":
		case "idle", "busy":
			live[i.Fleet] = append(live[i.Fleet], i.Name)
		default:
			return fmt.Sprintf("instance %s of %s is %s", i.Name, i.Fleet, i.Status)
		}
	}
	if st.extra != "" && len(live[st.extra]) != st.extraNodes {
		return fmt.Sprintf("fleet %s has %v, want %d instances", st.extra, live[st.extra], st.extraNodes)
	}
	for _, f := range st.gone {
		if len(live[f]) > 0 {
			return fmt.Sprintf("removed fleet %s still has %v", f, live[f])
		}
	}
	for f := range live {
		if f != "pool" && f != st.extra && !slices.Contains(st.gone, f) {
			sort.Strings(live[f])
			return fmt.Sprintf("fleet %s of an earlier cycle still has %v", f, live[f])
		}
	}
	return ""
}
