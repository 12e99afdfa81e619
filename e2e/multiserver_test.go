package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"hoist/e2e/testenv"
	"hoist/store"
)

// multiFleet is the SSH fleet of the multi-server scenarios; its backend is
// configured as {name: gpu-hosts, type: ssh}.
const multiFleet = "shared"

// multiTasks is how many tasks the scenarios run, in waves of one task per
// host (an SSH host runs one job at a time; a job finding no free host
// fails for capacity, as in dstack).
const multiTasks = 20

// multiEnv is one Postgres database, one SSH fleet of two sshd hosts, and
// the hoist servers sharing them.
type multiEnv struct {
	t       *testing.T
	r       *repo
	dsn     string
	cfg     string
	install string
	hosts   []*testenv.SSHD
	client  testenv.SSHKey
	user    string
}

func newMultiEnv(t *testing.T) *multiEnv {
	t.Helper()
	testenv.Docker(t)
	e := &multiEnv{t: t, dsn: testenv.Postgres(t), install: fmt.Sprintf("e2e-multi-%d", time.Now().UnixNano())}
	keys := t.TempDir()
	e.client = testenv.NewSSHKey(t, keys, "id_ed25519")
	for i := range 2 {
		e.hosts = append(e.hosts, testenv.StartSSHD(t, "127.0.0."+strconv.Itoa(i+2), e.client.Signer.PublicKey()))
	}
	remote := t.TempDir()
	t.Cleanup(func() { reapShims(t, remote) })
	e.cfg = filepath.Join(keys, "hoist.yaml")
	writeTestFile(t, e.cfg, fmt.Sprintf(`backends:
  - name: gpu-hosts
    type: ssh
    remote_dir: %s
    connect_timeout: 2s
    drain_grace: 2s
`, remote))
	e.user = testenv.LoginUser(t)
	e.r = newRepo(t)
	e.r.write("README.md", "specs\n")
	e.r.commit("empty")
	return e
}

// start starts one more `hoist serve` on the shared database, repository
// and installation.
func (e *multiEnv) start() *server {
	e.t.Helper()
	// Servers sharing a database share its secret key (the records of the
	// SSH hosts are encrypted under it).
	env := []string{store.SecretKeyEnv + "=" + e2eSecretKey}
	s := startServerEnv(e.t, "", env, e.r.dir, "--config", e.cfg, "--db", e.dsn, "--installation", e.install,
		"--resync-interval", "3s", "--unreachable-grace", "20s")
	s.install = e.install // its cleanup removes the shared installation's containers
	return s
}

func (e *multiEnv) fleetSpec() string {
	var b strings.Builder
	fmt.Fprintf(&b, "type: fleet\nname: %s\nssh_config:\n  user: %s\n  identity_file: %s\n  hosts:\n", multiFleet, e.user, e.client.Path)
	for _, h := range e.hosts {
		fmt.Fprintf(&b, "    - hostname: %s\n      port: %d\n", h.IP, h.Port)
	}
	return b.String()
}

// instances returns the fleet's instances by name, as s reports them.
func (e *multiEnv) instances(s *server) map[string]apiInstance {
	e.t.Helper()
	var is []apiInstance
	if code := s.getJSON("/api/v1/instances?fleet="+multiFleet, &is); code != 200 {
		e.t.Fatalf("GET /api/v1/instances: %d", code)
	}
	out := map[string]apiInstance{}
	for _, i := range is {
		out[i.Name] = i
	}
	return out
}

func (e *multiEnv) waitFleetReady(s *server) {
	e.t.Helper()
	var last map[string]apiInstance
	waitFor(e.t, 2*sshWithin, func() string { return fmt.Sprintf("both hosts idle on gpu-hosts (last: %+v)", last) }, func() bool {
		last = e.instances(s)
		return len(last) == 2 && allInstances(last, func(i apiInstance) bool {
			return i.Status == "idle" && i.Reachable && i.Backend == "gpu-hosts"
		})
	})
}

// multiTask prints its start, works 2 s and prints its end.
func multiTask(i int) string {
	return task(fmt.Sprintf("t%02d", i), fmt.Sprintf("  - echo start %d\n  - sleep 2\n  - echo end %d\n", i, i)) +
		"fleets: [" + multiFleet + "]\n"
}

// runWaves commits the tasks in waves of one per host and waits for each
// wave to be done, asking the servers in turn. In wave killWave (when >= 0)
// it kills (SIGKILL), once the wave's tasks run, the server holding their
// leases (following their output), and asks only the others from then on;
// it returns the killed server.
func (e *multiEnv) runWaves(servers []*server, killWave int) (killed *server) {
	e.t.Helper()
	per := len(e.hosts)
	for w := 0; w*per < multiTasks; w++ {
		var names []string
		for i := w * per; i < min((w+1)*per, multiTasks); i++ {
			e.r.write(fmt.Sprintf("t%02d.dstack.yml", i), multiTask(i))
			names = append(names, fmt.Sprintf("t%02d", i))
		}
		sha := e.r.commit(fmt.Sprintf("wave %d", w))
		s := servers[w%len(servers)]
		if w == killWave {
			for _, n := range names {
				s.waitRun(n, sha, "running", sshWithin)
			}
			k := e.leaseHolder(servers, names)
			killed = servers[k]
			e.t.Logf("wave %d runs: killing the server following it (SIGKILL, pid %d)", w, killed.cmd.Process.Pid)
			if err := killed.cmd.Process.Kill(); err != nil {
				e.t.Fatal(err)
			}
			<-killed.done
			servers = append(servers[:k:k], servers[k+1:]...)
			s = servers[0]
		}
		for _, n := range names {
			s.waitRun(n, sha, "done", 2*sshWithin)
		}
	}
	return killed
}

// leaseHolder returns the index in servers of the server whose lease the
// running jobs of the runs named names are under (their leases name the
// server as <hostname>-<id>, id from its data directory's server-id).
func (e *multiEnv) leaseHolder(servers []*server, names []string) int {
	e.t.Helper()
	key, err := store.ParseSecretKey(e2eSecretKey)
	if err != nil {
		e.t.Fatal(err)
	}
	st, err := store.Open(e.t.Context(), e.dsn, store.Options{SecretKey: key})
	if err != nil {
		e.t.Fatal(err)
	}
	defer st.Close()
	jobs, err := st.ListJobsFiltered(e.t.Context(), store.JobFilter{Status: []string{store.JobRunning}, Limit: 1 << 20})
	if err != nil {
		e.t.Fatal(err)
	}
	var owners []string
	for _, j := range jobs {
		if slices.Contains(names, j.RunName) && j.LockOwner != "" {
			owners = append(owners, j.LockOwner)
		}
	}
	for _, o := range owners {
		for i, s := range servers {
			id, err := os.ReadFile(filepath.Join(s.dataDir, "server-id"))
			if err == nil && strings.HasSuffix(o, "-"+strings.TrimSpace(string(id))) {
				return i
			}
		}
	}
	e.t.Logf("no lease holder among the servers (owners %q); killing the first", owners)
	return 0
}

// checkExactlyOnce checks every task ran once and finished done: one job
// submission, done, whose output is the task's start and end.
func (e *multiEnv) checkExactlyOnce(s *server) {
	e.t.Helper()
	for i := range multiTasks {
		name := fmt.Sprintf("t%02d", i)
		r := s.sshRun(name)
		if r.Status != "done" || len(r.Jobs) != 1 || r.Jobs[0].Status != "done" || r.Jobs[0].SubmissionNum != 0 {
			e.t.Errorf("%s: %s with jobs %+v; want done once", name, r.Status, r.Jobs)
			continue
		}
		if got, want := s.logs(name), fmt.Sprintf("start %d\nend %d\n", i, i); got != want {
			e.t.Errorf("%s logs %q, want %q (once)", name, got, want)
		}
	}
}

// claimConflicts counts the claims that found their row leased elsewhere,
// in a server's log.
func claimConflicts(s *server) int { return strings.Count(s.logText(), "claim conflict") }

// TestMultiServer runs two `hoist serve` processes on one Postgres with
// one SSH fleet of two hosts behind a backend named gpu-hosts: the fleet
// becomes ready once (both servers see it); 20 tasks, committed in waves,
// are each done exactly once; one server is killed (SIGKILL) while a wave
// runs and the other finishes that wave and the rest; no instance is
// marked terminated while its host is up; a plan held for confirmation is
// confirmed through the restarted server and the hold lifts.
func TestMultiServer(t *testing.T) {
	t.Parallel() // mostly waits: runs beside the other slow tests (harness_test.go)
	e := newMultiEnv(t)
	a, b := e.start(), e.start()

	t.Log("phase: one fleet of two SSH hosts, seen by both servers")
	e.r.write("fleet.dstack.yml", e.fleetSpec())
	e.r.commit("ssh fleet of two hosts")
	e.waitFleetReady(a)
	e.waitFleetReady(b)
	recs := backendRecords(t, e.dsn, "gpu-hosts")
	if len(recs) != 2 {
		t.Fatalf("%d records of gpu-hosts in the database, want one per host: %+v", len(recs), recs)
	}

	t.Logf("phase: %d tasks, one server killed mid-way", multiTasks)
	start := time.Now()
	killWave := multiTasks / len(e.hosts) / 2
	killed := e.runWaves([]*server{a, b}, killWave)
	if killed == b {
		a, b = b, a // a is the killed one from here on
	}
	total := time.Since(start)
	e.checkExactlyOnce(b)

	t.Log("phase: no instance was marked terminated while its host is up")
	for name, i := range e.instances(b) {
		if i.Status != "idle" || !i.Reachable {
			t.Errorf("instance %s: %s (reachable %v), want idle and reachable", name, i.Status, i.Reachable)
		}
		var evs []apiEvent
		b.getJSON("/api/v1/events?kind=instance&name="+name, &evs)
		for _, ev := range evs {
			if ev.Type == "terminated" || ev.Type == "terminating" {
				t.Errorf("instance %s had event %s: %s", name, ev.Type, ev.Message)
			}
		}
	}

	t.Log("phase: a held plan is confirmed through the other (restarted) server")
	for _, n := range []string{"cron1", "cron2"} {
		e.r.write(n+".dstack.yml", task(n, "  - echo never\n")+"fleets: ["+multiFleet+"]\nschedule:\n  cron: \"0 0 1 1 *\"\n")
	}
	sha := e.r.commit("two scheduled tasks")
	b.waitRun("cron1", sha, "pending", sshWithin)
	b.waitRun("cron2", sha, "pending", sshWithin)
	e.r.remove("cron1.dstack.yml")
	e.r.remove("cron2.dstack.yml")
	held := e.r.commit("remove both scheduled tasks")
	b.waitSync(sshWithin, "the deletion held", func(st apiSync) bool {
		return st.LatestRevision == held && len(st.Errors) == 1 && strings.Contains(st.Errors[0], "confirm")
	})
	a.start() // same data dir and database, new process
	if code, body := a.do("POST", "/api/v1/sync/confirm", strings.NewReader(`{"revision":"`+held+`"}`)); code != 200 {
		t.Fatalf("confirm on a: %d %s", code, body)
	}
	b.waitSync(sshWithin, "the confirmed revision applied", func(st apiSync) bool {
		return st.Revision == held && len(st.Errors) == 0
	})
	for _, n := range []string{"cron1", "cron2"} {
		b.waitRunCond(n, sshWithin, "removed from Git and stopped", func(r apiRunFull) bool {
			return r.RemovedFromGit && r.Status != "pending"
		})
	}
	t.Logf("MEASURE two servers, one killed mid-way: %d tasks commit → done in %s; claim conflicts: a %d, b %d",
		multiTasks, total.Round(time.Millisecond), claimConflicts(a), claimConflicts(b))
}

// TestMeasure_multiServer measures the same waves of tasks on one server
// and on two servers sharing the database (none killed): total time and
// claim conflicts. It runs only with HOIST_MEASURE=1.
func TestMeasure_multiServer(t *testing.T) {
	if os.Getenv("HOIST_MEASURE") == "" {
		t.Skip("set HOIST_MEASURE=1 to measure")
	}
	for _, n := range []int{1, 2} {
		t.Run(fmt.Sprintf("servers=%d", n), func(t *testing.T) {
			e := newMultiEnv(t)
			var servers []*server
			for range n {
				servers = append(servers, e.start())
			}
			e.r.write("fleet.dstack.yml", e.fleetSpec())
			e.r.commit("ssh fleet of two hosts")
			e.waitFleetReady(servers[0])
			start := time.Now()
			e.runWaves(servers, -1)
			total := time.Since(start)
			e.checkExactlyOnce(servers[0])
			conflicts := 0
			for _, s := range servers {
				conflicts += claimConflicts(s)
			}
			t.Logf("MEASURE %d server(s): %d tasks (waves of %d) commit → done in %s; claim conflicts %d",
				n, multiTasks, len(e.hosts), total.Round(time.Millisecond), conflicts)
		})
	}
}
