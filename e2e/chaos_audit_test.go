package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"hoist/backends"
	"hoist/e2e/cloudsim/ec2"
	"hoist/e2e/cloudsim/sim"
	"hoist/e2e/testenv"
)

// The chaos scenarios (TestChaos_*) kill `hoist serve` at chosen moments
// and check, after the servers settled, that nothing was leaked, done twice
// or lost. This file holds what they share: the environment on the
// simulated AWS, the independent count of container starts and the audit.

// chaosLeakGrace and chaosLeakInterval are the leak audit's settings in the
// chaos scenarios: short, so that a VM a kill orphaned is reaped within the
// audit's wait.
const (
	chaosLeakGrace    = "3s"
	chaosLeakInterval = "1s"
	// chaosLeakWait bounds how long the audit waits for tagged VMs hoist
	// does not know to be reaped (grace + interval + a terminate, loaded).
	chaosLeakWait = 45 * time.Second
	// chaosSettle bounds how long servers may take to reach a commit's
	// state after a restart.
	chaosSettle = 3 * time.Minute
)

// chaosSeed returns the scenario's seed: HOIST_CHAOS_SEED when set (to
// replay a failure), else a fresh one, logged either way.
func chaosSeed(t *testing.T) uint64 {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("HOIST_CHAOS_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("HOIST_CHAOS_SEED=%q: %v", v, err)
		}
		seed = n
	}
	t.Logf("chaos seed %d (replay with HOIST_CHAOS_SEED=%d)", seed, seed)
	return seed
}

// chaosCycles returns HOIST_CHAOS_CYCLES when set, else def.
func chaosCycles(t *testing.T, def int) int {
	t.Helper()
	if v := os.Getenv("HOIST_CHAOS_CYCLES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("HOIST_CHAOS_CYCLES=%q: want a positive number", v)
		}
		return n
	}
	return def
}

// chaosEnv is the simulated AWS, a spec repository, one installation and
// the `hoist serve` processes running it (one on SQLite, or several on one
// PostgreSQL database).
type chaosEnv struct {
	t       *testing.T
	rng     *rand.Rand
	cs      *testenv.CloudSim
	r       *repo
	cfg     string
	install string
	servers []*server
	// env is added to each server's environment (e.g. a shared secret key).
	env    []string
	starts *startCounter
	// steps is the scenario's trace (cycles, kills, what the servers
	// still lacked while settling), logged when the test fails.
	stepsMu sync.Mutex
	steps   []string
}

// trace records a step of the scenario for the failure's log.
func (e *chaosEnv) trace(step string) {
	e.stepsMu.Lock()
	defer e.stepsMu.Unlock()
	e.steps = append(e.steps, time.Now().Format("15:04:05.000")+" "+step)
}

func newChaosEnv(t *testing.T, seed uint64) *chaosEnv {
	t.Helper()
	testenv.Docker(t)
	cs := testenv.StartCloudSim(t, ec2.New())
	cfg := backendConfig(t, cs.Backend("aws"))
	r := newRepo(t)
	r.write("README.md", "specs\n")
	r.commit("empty")
	e := &chaosEnv{
		t: t, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), cs: cs, r: r, cfg: cfg,
		install: fmt.Sprintf("e2e-chaos-%d", time.Now().UnixNano()),
	}
	e.starts = watchStarts(t, e.install)
	t.Cleanup(func() {
		if t.Failed() {
			e.stepsMu.Lock()
			t.Logf("chaos trace:\n%s", strings.Join(e.steps, "\n"))
			e.stepsMu.Unlock()
		}
	})
	return e
}

// startServer starts one more `hoist serve` of the installation (extra:
// e.g. --db for a shared database) with a short leak audit.
func (e *chaosEnv) startServer(extra ...string) *server {
	e.t.Helper()
	args := append([]string{"--config", e.cfg, "--installation", e.install, "--resync-interval", "2s",
		"--unreachable-grace", "20s", "--leak-audit-interval", chaosLeakInterval, "--leak-grace", chaosLeakGrace}, extra...)
	s := startServerEnv(e.t, "", e.env, e.r.dir, args...)
	s.install = e.install // its cleanup removes the installation's containers
	e.servers = append(e.servers, s)
	return s
}

// api returns a server to ask: the first one running.
func (e *chaosEnv) api() *server {
	e.t.Helper()
	for _, s := range e.servers {
		if s.running() {
			return s
		}
	}
	e.t.Fatal("no hoist server is running")
	return nil
}

// writeSpecs makes the repository's specs exactly files (name → content)
// and commits them.
func (e *chaosEnv) writeSpecs(files map[string]string, msg string) string {
	e.t.Helper()
	old, _ := filepath.Glob(filepath.Join(e.r.dir, "*.dstack.yml"))
	for _, p := range old {
		if _, keep := files[filepath.Base(p)]; !keep {
			e.r.remove(filepath.Base(p))
		}
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		e.r.write(n, files[n])
	}
	return e.r.commit(msg)
}

// simCalls returns how many calls of op the simulated AWS answered or is
// answering.
func (e *chaosEnv) simCalls(op string) int { return e.cs.Stats().Calls["aws"][op] }

// within polls cond every 20 ms for up to d and reports whether it became
// true; unlike waitFor, running out of time is not a failure.
func within(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// startCounter counts the containers started for each hoist task (job
// submission) of an installation, from `docker events`: independent of
// what hoist records.
type startCounter struct {
	mu     sync.Mutex
	counts map[string]int
}

// watchStarts runs `docker events` for the installation's container starts
// for the rest of the test.
func watchStarts(t *testing.T, install string) *startCounter {
	t.Helper()
	c := &startCounter{counts: map[string]int{}}
	cmd := exec.Command("docker", "events", "--filter", "type=container", "--filter", "event=start",
		"--filter", "label=hoist.installation="+install, "--format", `{{index .Actor.Attributes "hoist.task-id"}}`)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("docker events: %v", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if id := strings.TrimSpace(sc.Text()); id != "" {
				c.mu.Lock()
				c.counts[id]++
				c.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		_ = cmd.Wait()
	})
	// docker events reports from when it subscribed: give it that moment
	// before anything starts.
	time.Sleep(300 * time.Millisecond)
	return c
}

// twice returns the task ids started more than once, with their counts.
func (c *startCounter) twice() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for id, n := range c.counts {
		if n > 1 {
			out = append(out, fmt.Sprintf("container of job %s started %d times", id, n))
		}
	}
	sort.Strings(out)
	return out
}

func (c *startCounter) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, k := range c.counts {
		n += k
	}
	return n
}

// chaosFindings are what an audit found, by kind.
type chaosFindings struct {
	Leaked     []string `json:"leaked"`
	Lost       []string `json:"lost"`
	Duplicated []string `json:"duplicated"`
	Errors     []string `json:"errors"`
}

func (f chaosFindings) empty() bool {
	return len(f.Leaked)+len(f.Lost)+len(f.Duplicated)+len(f.Errors) == 0
}

// plus is f with g's findings added.
func (f chaosFindings) plus(g chaosFindings) chaosFindings {
	return chaosFindings{
		Leaked: append(f.Leaked, g.Leaked...), Lost: append(f.Lost, g.Lost...),
		Duplicated: append(f.Duplicated, g.Duplicated...), Errors: append(f.Errors, g.Errors...),
	}
}

func (f chaosFindings) String() string {
	return fmt.Sprintf("leaked %q, lost %q, duplicated %q, errors %q", f.Leaked, f.Lost, f.Duplicated, f.Errors)
}

// chaosTotals adds up the findings of every audit of a scenario.
type chaosTotals struct{ audits, leaked, lost, duplicated int }

func (c *chaosTotals) add(f chaosFindings) {
	c.audits++
	c.leaked += len(f.Leaked)
	c.lost += len(f.Lost)
	c.duplicated += len(f.Duplicated)
}

// chaosTask is a numbered task the scenario expects to end done with lines
// "line 0" … "line N-1".
type chaosTask struct {
	name  string
	lines int
}

// audit checks the installation after the servers settled, failing the
// test on any finding: tagged VMs and volumes hoist does not know are
// reaped within chaosLeakWait (none is left), no VM is doubled, no hoist
// instance lost its VM, no run has two live submissions, no job's
// container started twice, and every done task's job has each of its
// lines once and in order. Then the server's own audit (auditAPI).
func (e *chaosEnv) audit(tasks []chaosTask, tot *chaosTotals) {
	e.t.Helper()
	var f chaosFindings
	var leaked []string
	within(chaosLeakWait, func() bool {
		leaked, f.Duplicated, f.Lost = e.auditVMs()
		return len(leaked) == 0 && len(f.Duplicated) == 0 && len(f.Lost) == 0
	})
	f.Leaked = leaked
	f.Duplicated = append(f.Duplicated, e.starts.twice()...)
	s := e.api()
	var runs []apiRunFull
	if code := s.getJSON("/api/v1/runs", &runs); code != 200 {
		f.Errors = append(f.Errors, fmt.Sprintf("GET /api/v1/runs: %d", code))
	}
	for _, sum := range runs {
		var run apiRunFull
		if s.getJSON("/api/v1/runs/"+sum.Name, &run) != 200 {
			continue // removed meanwhile
		}
		live := 0
		for _, j := range run.Jobs {
			if !slices.Contains([]string{"done", "failed", "terminated", "aborted"}, j.Status) {
				live++
			}
		}
		if live > 1 {
			f.Duplicated = append(f.Duplicated, fmt.Sprintf("run %s has %d live submissions: %+v", run.Name, live, run.Jobs))
		}
	}
	for _, tk := range tasks {
		f.Lost = append(f.Lost, e.auditLines(s, tk)...)
	}
	f = f.plus(auditAPI(s, true))
	tot.add(f)
	if !f.empty() {
		e.t.Fatalf("audit: %s", f)
	}
}

// auditVMs compares the simulator's VMs and volumes carrying the
// installation's tag with hoist's instances: leaked are those hoist does
// not know, duplicated hoist instances with two VMs, lost hoist instances
// (idle or busy) whose VM is gone.
func (e *chaosEnv) auditVMs() (leaked, duplicated, lost []string) {
	var insts []cloudInstance
	e.api().getJSON("/api/v1/instances", &insts)
	known := map[string]cloudInstance{}
	for _, i := range insts {
		if i.Status != "terminated" {
			known[i.Name] = i
		}
	}
	byInstance := map[string][]string{}
	liveName := map[string]bool{}
	for _, r := range e.cs.Instances() {
		if r.Tags[backends.TagInstallation] != e.install || gone(r) {
			continue
		}
		switch r.Kind {
		case sim.KindInstance:
			id := r.Tags[backends.TagInstance]
			byInstance[id] = append(byInstance[id], r.ID)
			// The VM's name is hoist-<instance name>-<the id's suffix>
			// (backends.ResourceName).
			name := strings.TrimSuffix(strings.TrimPrefix(r.Name, "hoist-"), "-"+backends.IDSuffix(id))
			liveName[name] = true
			if _, ok := known[name]; !ok {
				leaked = append(leaked, fmt.Sprintf("VM %s (%s, %s) is not a live hoist instance", r.ID, r.Name, r.State))
			}
		case sim.KindVolume:
			// The scenarios declare no volume: any is a leak.
			leaked = append(leaked, fmt.Sprintf("volume %s (%s, %s)", r.ID, r.Name, r.State))
		}
	}
	for id, vms := range byInstance {
		if len(vms) > 1 {
			duplicated = append(duplicated, fmt.Sprintf("hoist instance %s has %d VMs: %v", id, len(vms), vms))
		}
	}
	for name, i := range known {
		if (i.Status == "idle" || i.Status == "busy") && !liveName[name] {
			lost = append(lost, fmt.Sprintf("hoist instance %s is %s but its VM is gone", name, i.Status))
		}
	}
	sort.Strings(leaked)
	sort.Strings(duplicated)
	sort.Strings(lost)
	return leaked, duplicated, lost
}

// auditLines checks that task tk's run is done and that the logs of each
// of its done submissions are its numbered lines, each once, in order.
func (e *chaosEnv) auditLines(s *server, tk chaosTask) []string {
	var run apiRunFull
	if code := s.getJSON("/api/v1/runs/"+tk.name, &run); code != 200 {
		return []string{fmt.Sprintf("run %s: GET answered %d", tk.name, code)}
	}
	if run.Status != "done" {
		return []string{fmt.Sprintf("run %s is %s, want done: %+v", tk.name, run.Status, run.Jobs)}
	}
	var want strings.Builder
	for i := range tk.lines {
		fmt.Fprintf(&want, "line %d\n", i)
	}
	var out []string
	for _, j := range run.Jobs {
		if j.Status != "done" {
			continue
		}
		code, b := s.do("GET", "/api/v1/runs/"+tk.name+"/logs?job="+j.SubmissionID, nil)
		if code != 200 {
			out = append(out, fmt.Sprintf("logs of %s job %s: %d %s", tk.name, j.SubmissionID, code, b))
			continue
		}
		if got := string(b); got != want.String() {
			out = append(out, fmt.Sprintf("logs of %s job %s are not lines 0..%d once in order: %q", tk.name, j.SubmissionID, tk.lines-1, got))
		}
	}
	return out
}

// auditAPI asks the server's own audit (GET /api/v1/audit, what `hoist
// audit` prints) and returns its findings, one line per entry. What it
// could not list is an error only when unlisted is; under injected faults
// a failed list is expected and the next pass lists again.
func auditAPI(s *server, unlisted bool) chaosFindings {
	var f chaosFindings
	code, b := s.do("GET", "/api/v1/audit", nil)
	var rep struct{ Leaked, Lost, Duplicated, Errors []json.RawMessage }
	if code != 200 {
		f.Errors = append(f.Errors, fmt.Sprintf("GET /api/v1/audit: %d %s", code, b))
		return f
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		f.Errors = append(f.Errors, fmt.Sprintf("GET /api/v1/audit: %v: %s", err, b))
		return f
	}
	line := func(m json.RawMessage) string { return "server audit: " + string(m) }
	for _, m := range rep.Leaked {
		f.Leaked = append(f.Leaked, line(m))
	}
	for _, m := range rep.Lost {
		f.Lost = append(f.Lost, line(m))
	}
	for _, m := range rep.Duplicated {
		f.Duplicated = append(f.Duplicated, line(m))
	}
	if unlisted {
		for _, m := range rep.Errors {
			f.Errors = append(f.Errors, line(m))
		}
	}
	return f
}

// durations summarises convergence times: p50 and max.
func durations(ds []time.Duration) string {
	if len(ds) == 0 {
		return "none"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return fmt.Sprintf("p50 %s max %s", s[len(s)/2].Round(time.Millisecond), s[len(s)-1].Round(time.Millisecond))
}
