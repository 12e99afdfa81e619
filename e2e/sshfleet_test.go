package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"hoist/e2e/testenv"
	"hoist/store"
)

// sshFleetName is the fleet the SSH scenarios commit.
const sshFleetName = "byoh"

// sshWithin bounds each wait of the SSH fleet scenarios.
const sshWithin = 90 * time.Second

// TestSSHFleet drives an SSH fleet (dstack's `type: fleet` with
// `ssh_config`) of two real OpenSSH servers on 127.0.0.2 and 127.0.0.3
// through one `hoist serve` and Git commits, phase by phase: both hosts
// become ready; a task pinned to the fleet runs on one of them through the
// shim; a host whose sshd comes back with a new host key is refused and no
// job lands there; killing the sshd of the host a task runs on marks it
// unreachable and the run's retry policy resubmits the task to the other
// host; a host removed from the spec is drained; after a server restart the
// remaining host is used as it is; a host whose key changed is not drained
// through the unverified connection, and says so.
func TestSSHFleet(t *testing.T) {
	t.Parallel() // mostly waits: runs beside the other slow tests (harness_test.go)
	e := newSSHFleetEnv(t, 2)
	s, r, hosts, client, user, fleetSpec := e.s, e.r, e.hosts, e.client, e.user, e.fleetSpec

	t.Log("phase: a fleet of two SSH hosts becomes ready")
	r.write("fleet.dstack.yml", fleetSpec(hosts...))
	r.commit("ssh fleet of two hosts")
	s.waitInstances(2*sshWithin, "both hosts idle and reachable", func(is map[string]apiInstance) bool {
		return len(is) == 2 && allInstances(is, func(i apiInstance) bool { return i.Status == "idle" && i.Reachable && i.Backend == "ssh" })
	})
	var fl struct {
		Status       string        `json:"status"`
		InstanceList []apiInstance `json:"instance_list"`
	}
	if code := s.getJSON("/api/v1/fleets/"+sshFleetName, &fl); code != 200 || fl.Status != "active" || len(fl.InstanceList) != 2 {
		t.Fatalf("GET /api/v1/fleets/%s: %d %+v", sshFleetName, code, fl)
	}
	recs := s.sshRecords()
	byHost := map[string]sshRecord{} // instance of each host, by hostname
	for _, rec := range recs {
		byHost[rec.Host.Hostname] = rec
	}
	for _, h := range hosts {
		rec, ok := byHost[h.IP]
		if !ok {
			t.Fatalf("no instance record for host %s: %+v", h.IP, recs)
		}
		if want := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(h.HostKey()))); rec.HostKey != want {
			t.Fatalf("host %s: recorded host key %q, want the sshd's %q (first contact)", h.IP, rec.HostKey, want)
		}
		if !pidAlive(readPidFile(filepath.Join(rec.Dir, "supervisor.pid"))) || !pidAlive(readPidFile(filepath.Join(rec.Dir, "shim.pid"))) {
			t.Fatalf("host %s: supervisor or shim not running in %s", h.IP, rec.Dir)
		}
	}
	hostOf := func(instance string) int { // index in hosts of an instance name
		for i, h := range hosts {
			if byHost[h.IP].Name == instance {
				return i
			}
		}
		t.Fatalf("instance %q is not one of the SSH fleet's: %+v", instance, byHost)
		return -1
	}

	t.Log("phase: a task pinned to the fleet runs on an SSH host through the shim")
	r.write("hello.dstack.yml", task("hello", "  - echo hello from the ssh fleet\n")+"fleets: ["+sshFleetName+"]\n")
	sha := r.commit("task on the ssh fleet")
	s.waitRun("hello", sha, "done", sshWithin)
	hello := s.sshRun("hello")
	if len(hello.Jobs) != 1 || hello.Jobs[0].Status != "done" {
		t.Fatalf("hello jobs: %+v", hello.Jobs)
	}
	hostOf(hello.Jobs[0].Instance)
	if got := s.logs("hello"); got != "hello from the ssh fleet\n" {
		t.Fatalf("hello logs: %q", got)
	}

	t.Log("phase: an sshd back with a new host key is refused")
	refused := hosts[1]
	oldKey := refused.HostKeyPEM(t)
	refusedRec := byHost[refused.IP]
	refused.RestartWithNewKey(t)
	s.waitInstances(sshWithin, refusedRec.Name+" unreachable with a host key error", func(is map[string]apiInstance) bool {
		i := is[refusedRec.Name]
		return !i.Reachable && strings.Contains(i.StatusMessage, "host key")
	})
	s.waitEvent(sshWithin, "instance", refusedRec.Name, func(e apiEvent) bool {
		return e.Type == "reachability" && strings.Contains(e.Message, "host key mismatch")
	})
	// A long task takes the other host; a second one finds no free host
	// (the refused one is not used) and fails for lack of capacity.
	r.write("blocker.dstack.yml", task("blocker", "  - echo start\n  - sleep 600\n")+
		"fleets: ["+sshFleetName+"]\nretry:\n  on_events: [interruption]\n  duration: 10m\n")
	sha = r.commit("a long task on the fleet")
	s.waitRun("blocker", sha, "running", sshWithin)
	blocker := s.sshRun("blocker")
	if got := blocker.Jobs[0].Instance; got != byHost[hosts[0].IP].Name {
		t.Fatalf("blocker runs on %q, want %q (the other host is refused)", got, byHost[hosts[0].IP].Name)
	}
	r.write("refused.dstack.yml", task("refused", "  - echo must not run\n")+"fleets: ["+sshFleetName+"]\n")
	sha = r.commit("a task that finds no free host")
	s.waitRun("refused", sha, "failed", sshWithin)
	if rr := s.sshRun("refused"); len(rr.Jobs) != 1 || rr.Jobs[0].TerminationReason != "failed_to_start_due_to_no_capacity" || rr.Jobs[0].Instance != "" {
		t.Fatalf("refused: %+v, want one job failed to start for lack of capacity and placed nowhere", rr.Jobs)
	}
	if rec := s.sshRecords()[refusedRec.ID]; rec.HostKey != refusedRec.HostKey {
		t.Fatalf("the changed host key was accepted: recorded %q, pinned was %q", rec.HostKey, refusedRec.HostKey)
	}
	if i := s.instances()[refusedRec.Name]; i.Reachable || i.Status != "idle" {
		t.Fatalf("refused host: %+v, want idle and unreachable", i)
	}
	refused.RestartWithKey(t, oldKey)
	s.waitInstances(sshWithin, refusedRec.Name+" reachable again with its own key", func(is map[string]apiInstance) bool {
		return is[refusedRec.Name].Reachable
	})

	t.Log("phase: killing the sshd of the host a task runs on; the retry policy resubmits it")
	victim := hostOf(blocker.Jobs[0].Instance)
	victimRec := byHost[hosts[victim].IP]
	other := byHost[hosts[1-victim].IP]
	hosts[victim].Kill()
	s.waitInstances(sshWithin, victimRec.Name+" unreachable", func(is map[string]apiInstance) bool {
		return !is[victimRec.Name].Reachable
	})
	blocker = s.waitSSHRun("blocker", 2*sshWithin, "resubmitted and running on "+other.Name, func(r sshRun) bool {
		return r.Status == "running" && len(r.Jobs) >= 2 && slices.ContainsFunc(r.Jobs, func(j sshJob) bool {
			return j.Status == "running" && j.Instance == other.Name
		})
	})
	var first sshJob
	for _, j := range blocker.Jobs {
		if j.SubmissionNum == 0 {
			first = j
		}
	}
	if first.Status != "failed" || first.TerminationReason != "instance_unreachable" {
		t.Fatalf("first submission: %+v, want failed with instance_unreachable", first)
	}
	s.waitEvent(sshWithin, "run", "blocker", func(e apiEvent) bool {
		return e.Type == "retrying" && strings.Contains(e.Message, "interruption")
	})

	t.Log("phase: a host removed from the spec is drained")
	hosts[victim].Restart(t)
	s.waitInstances(sshWithin, victimRec.Name+" reachable again", func(is map[string]apiInstance) bool {
		return is[victimRec.Name].Reachable
	})
	// The interrupted submission's container is still on the host (its
	// shim kept running while sshd was away): the drain must remove it.
	if ids := containersLabelled("hoist.instance=" + victimRec.ID); len(ids) == 0 {
		t.Fatalf("no container of the interrupted task on %s before the drain", victimRec.Name)
	}
	r.write("fleet.dstack.yml", fleetSpec(hosts[1-victim]))
	r.commit("remove a host from the fleet")
	s.waitInstances(2*sshWithin, victimRec.Name+" terminated", func(is map[string]apiInstance) bool {
		return is[victimRec.Name].Status == "terminated"
	})
	if ids := containersLabelled("hoist.instance=" + victimRec.ID); len(ids) > 0 {
		t.Fatalf("containers of the drained host left: %v", ids)
	}
	if _, err := os.Stat(victimRec.Dir); !os.IsNotExist(err) {
		t.Fatalf("the drained host's directory %s is still there: %v", victimRec.Dir, err)
	}
	if _, ok := s.sshRecords()[victimRec.ID]; ok {
		t.Fatalf("the ssh backend still keeps the drained instance %s", victimRec.ID)
	}
	if i := s.instances()[other.Name]; i.Status == "terminated" || i.Status == "terminating" {
		t.Fatalf("the host kept in the spec was drained too: %+v", i)
	}

	t.Log("phase: after a server restart the fleet is used as it is")
	supervisor := readPidFile(filepath.Join(other.Dir, "supervisor.pid"))
	s.restart()
	r.remove("blocker.dstack.yml")
	r.commit("remove the long task")
	s.waitRun("blocker", "", "terminated", sshWithin)
	r.write("after.dstack.yml", task("after", "  - echo after the restart\n")+"fleets: ["+sshFleetName+"]\n")
	sha = r.commit("a task after the restart")
	s.waitRun("after", sha, "done", sshWithin)
	if after := s.sshRun("after"); after.Jobs[0].Instance != other.Name || s.logs("after") != "after the restart\n" {
		t.Fatalf("after the restart: %+v, logs %q; want done on %s", after.Jobs, s.logs("after"), other.Name)
	}
	if pid := readPidFile(filepath.Join(other.Dir, "supervisor.pid")); pid != supervisor || !pidAlive(pid) {
		t.Fatalf("the shim's supervisor on %s changed from pid %d to %d: the restart redeployed a running host", other.Name, supervisor, pid)
	}

	t.Log("phase: a host with a changed key is not drained through an unverified connection")
	keeper := hosts[1-victim]
	keeper.RestartWithNewKey(t)
	r.write("fleet.dstack.yml", "type: fleet\nname: "+sshFleetName+"\nssh_config:\n  user: "+user+"\n  identity_file: "+client.Path+"\n  hosts: []\n")
	r.commit("remove the last host")
	s.waitInstances(sshWithin, other.Name+" terminating with the host key error", func(is map[string]apiInstance) bool {
		i := is[other.Name]
		return i.Status == "terminating" && strings.Contains(i.StatusMessage, "host key mismatch")
	})
	s.waitEvent(sshWithin, "instance", other.Name, func(e apiEvent) bool {
		return e.Type == "stalled" && strings.Contains(e.Message, "host key mismatch")
	})
	if !pidAlive(readPidFile(filepath.Join(other.Dir, "supervisor.pid"))) {
		t.Fatalf("the shim on %s was stopped through a connection with an unknown host key", other.Name)
	}
}

// sshFleetEnv is a `hoist serve` with the default backends (the SSH one
// keeping its host directories in a test directory) on a fresh repository,
// and n real sshd on 127.0.0.2, 127.0.0.3, … authorizing one client key.
type sshFleetEnv struct {
	s      *server
	r      *repo
	hosts  []*testenv.SSHD
	client testenv.SSHKey
	user   string
}

func newSSHFleetEnv(t *testing.T, n int) *sshFleetEnv {
	t.Helper()
	testenv.Docker(t)
	keys := t.TempDir()
	client := testenv.NewSSHKey(t, keys, "id_ed25519")
	var hosts []*testenv.SSHD
	for i := range n {
		hosts = append(hosts, testenv.StartSSHD(t, "127.0.0."+strconv.Itoa(i+2), client.Signer.PublicKey()))
	}
	return startSSHFleetServer(t, hosts, client)
}

// startSSHFleetServer starts the `hoist serve` of an sshFleetEnv whose
// sshd (hosts, authorizing client) already run.
func startSSHFleetServer(t *testing.T, hosts []*testenv.SSHD, client testenv.SSHKey) *sshFleetEnv {
	t.Helper()
	keys := filepath.Dir(client.Path)
	remote := t.TempDir()
	// Registered after the sshd and before the server: runs after the
	// server stopped (and removed its containers), before the sshd die.
	t.Cleanup(func() { reapShims(t, remote) })
	cfg := filepath.Join(keys, "hoist.yaml")
	writeTestFile(t, cfg, fmt.Sprintf(`backends:
  - name: local
    type: local
  - name: ssh
    type: ssh
    remote_dir: %s
    connect_timeout: 2s
    drain_grace: 2s
`, remote))

	r := newRepo(t)
	r.write("README.md", "specs\n")
	r.commit("empty")
	// Instances are re-checked every resync (3 s, not 30 s), and a silent
	// runner fails its job after 6 s (not 2 min), to keep the test short.
	// The backend's records live in the database (encrypted under the
	// secret key); a Postgres one lets the test read them while the
	// server runs.
	env := []string{store.SecretKeyEnv + "=" + e2eSecretKey}
	s := startServerEnv(t, "", env, r.dir, "--config", cfg, "--resync-interval", "3s", "--unreachable-grace", "6s", "--db", testenv.Postgres(t))
	// The login user is root when the test runs as root; a throwaway sshd
	// started by another user can only log that user in.
	return &sshFleetEnv{s: s, r: r, hosts: hosts, client: client, user: testenv.LoginUser(t)}
}

// fleetSpec is the SSH fleet's spec with the given hosts.
func (e *sshFleetEnv) fleetSpec(hs ...*testenv.SSHD) string {
	var b strings.Builder
	fmt.Fprintf(&b, "type: fleet\nname: %s\nssh_config:\n  user: %s\n  identity_file: %s\n  hosts:\n", sshFleetName, e.user, e.client.Path)
	for _, h := range hs {
		fmt.Fprintf(&b, "    - hostname: %s\n      port: %d\n", h.IP, h.Port)
	}
	return b.String()
}

// TestMeasure_sshFleet measures, through `hoist serve` and Git in one run:
// a fleet commit → both SSH hosts ready (agents uploaded, shim up), and a
// one-line task's commit → done on an SSH host next to the same on the
// local backend. It runs only with HOIST_MEASURE=1.
func TestMeasure_sshFleet(t *testing.T) {
	if os.Getenv("HOIST_MEASURE") == "" {
		t.Skip("set HOIST_MEASURE=1 to measure")
	}
	e := newSSHFleetEnv(t, 2)
	e.r.write("fleet.dstack.yml", e.fleetSpec(e.hosts...))
	start := time.Now()
	e.r.commit("ssh fleet of two hosts")
	e.s.waitInstances(2*sshWithin, "both hosts idle and reachable", func(is map[string]apiInstance) bool {
		return len(is) == 2 && allInstances(is, func(i apiInstance) bool { return i.Status == "idle" && i.Reachable })
	})
	ready := time.Since(start)
	const rounds = 5
	var sshT, localT []time.Duration
	for i := range rounds {
		for _, m := range []struct {
			fleet string
			into  *[]time.Duration
		}{{sshFleetName, &sshT}, {"local", &localT}} {
			name := fmt.Sprintf("m-%s-%d", m.fleet, i)
			e.r.write(name+".dstack.yml", task(name, "  - echo hi\n")+"fleets: ["+m.fleet+"]\n")
			start := time.Now()
			sha := e.r.commit(name)
			e.s.waitRun(name, sha, "done", sshWithin)
			*m.into = append(*m.into, time.Since(start))
			if j := e.s.sshRun(name).Jobs; len(j) != 1 || (m.fleet == sshFleetName) != strings.HasPrefix(j[0].Instance, sshFleetName+"-") {
				t.Fatalf("%s ran on %+v, want the %s fleet", name, j, m.fleet)
			}
		}
	}
	t.Logf("MEASURE fleet commit → 2 SSH hosts ready (agents uploaded, shim up): %s", ready.Round(time.Millisecond))
	t.Logf("MEASURE one-line task commit → done, SSH host: %v (median %s)", rounded(sshT), median(sshT).Round(time.Millisecond))
	t.Logf("MEASURE one-line task commit → done, local backend: %v (median %s)", rounded(localT), median(localT).Round(time.Millisecond))
}

// apiInstance is an instance as GET /api/v1/instances returns it.
type apiInstance struct {
	Name          string `json:"name"`
	Fleet         string `json:"fleet"`
	Backend       string `json:"backend"`
	Status        string `json:"status"`
	StatusMessage string `json:"status_message"`
	Reachable     bool   `json:"reachable"`
}

// apiEvent is an event as GET /api/v1/events returns it.
type apiEvent struct {
	Kind    string `json:"kind"`
	Name    string `json:"name"`
	Type    string `json:"type"`
	Message string `json:"message"`
}

type sshJob struct {
	SubmissionNum     int    `json:"submission_num"`
	Status            string `json:"status"`
	TerminationReason string `json:"termination_reason"`
	Instance          string `json:"instance"`
}

type sshRun struct {
	Status string   `json:"status"`
	Jobs   []sshJob `json:"jobs"`
}

// sshRecord is what the ssh backend keeps about an instance in the
// store's backend records.
type sshRecord struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	Host struct {
		Hostname string
		Port     int
	} `json:"host"`
	HostKey string `json:"host_key"`
	Dir     string `json:"dir"`
}

// instances returns the SSH fleet's instances by name.
func (s *server) instances() map[string]apiInstance {
	s.t.Helper()
	var is []apiInstance
	if code := s.getJSON("/api/v1/instances?fleet="+sshFleetName, &is); code != 200 {
		s.t.Fatalf("GET /api/v1/instances: %d", code)
	}
	out := map[string]apiInstance{}
	for _, i := range is {
		out[i.Name] = i
	}
	return out
}

func (s *server) waitInstances(within time.Duration, what string, cond func(map[string]apiInstance) bool) {
	s.t.Helper()
	var last map[string]apiInstance
	waitFor(s.t, within, func() string { return fmt.Sprintf("instances: %s (last: %+v)", what, last) }, func() bool {
		last = s.instances()
		return cond(last)
	})
}

// waitEvent waits for an event of the object kind/name that satisfies cond.
func (s *server) waitEvent(within time.Duration, kind, name string, cond func(apiEvent) bool) {
	s.t.Helper()
	var last []apiEvent
	waitFor(s.t, within, func() string { return fmt.Sprintf("an event of %s %s (last: %+v)", kind, name, last) }, func() bool {
		last = nil
		s.getJSON("/api/v1/events?kind="+kind+"&name="+name, &last)
		return slices.ContainsFunc(last, cond)
	})
}

func (s *server) sshRun(name string) sshRun {
	s.t.Helper()
	var r sshRun
	if code := s.getJSON("/api/v1/runs/"+name, &r); code != 200 {
		s.t.Fatalf("GET /api/v1/runs/%s: %d", name, code)
	}
	return r
}

func (s *server) waitSSHRun(name string, within time.Duration, what string, cond func(sshRun) bool) sshRun {
	s.t.Helper()
	var r sshRun
	waitFor(s.t, within, func() string { return fmt.Sprintf("run %s %s (last: %+v)", name, what, r) }, func() bool {
		r = sshRun{}
		return s.getJSON("/api/v1/runs/"+name, &r) == 200 && cond(r)
	})
	return r
}

// sshRecords reads the records of the backend named "ssh" from the
// server's database, by instance id.
func (s *server) sshRecords() map[string]sshRecord {
	s.t.Helper()
	return backendRecords(s.t, s.dbDSN(), "ssh")
}

// dbDSN is the --db the server was started with.
func (s *server) dbDSN() string {
	s.t.Helper()
	if i := slices.Index(s.args, "--db"); i >= 0 && i+1 < len(s.args) {
		return s.args[i+1]
	}
	s.t.Fatal("the server runs without --db: its records are not readable while it runs")
	return ""
}

// e2eSecretKey is the HOIST_SECRET_KEY of the servers of the tests that
// read the database: records are encrypted under it, and servers sharing a
// database must share it.
const e2eSecretKey = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"

// backendRecords reads the instance records of a backend from the database
// at dsn (Postgres: the servers keep running), by instance id.
func backendRecords(t testing.TB, dsn, backend string) map[string]sshRecord {
	t.Helper()
	key, err := store.ParseSecretKey(e2eSecretKey)
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(t.Context(), dsn, store.Options{SecretKey: key})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	recs, err := st.ListBackendRecords(t.Context(), backend)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]sshRecord{}
	for id, b := range recs {
		var rec sshRecord
		if err := json.Unmarshal(b, &rec); err != nil {
			t.Fatalf("record %s: %v", id, err)
		}
		out[rec.ID] = rec
	}
	return out
}

func allInstances(is map[string]apiInstance, f func(apiInstance) bool) bool {
	for _, i := range is {
		if !f(i) {
			return false
		}
	}
	return true
}

func writeTestFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func readPidFile(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

// pidAlive reports whether pid runs and is not a zombie.
func pidAlive(pid int) bool {
	if pid <= 1 {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	st := string(b)
	i := strings.LastIndexByte(st, ')')
	return i >= 0 && len(st) > i+2 && st[i+2] != 'Z'
}

// reapShims kills, by PID, the supervisors and shims the SSH backend started
// under remote (also when a test failed half-way).
func reapShims(t *testing.T, remote string) {
	// Supervisors first, so that none restarts its shim.
	sup, _ := filepath.Glob(filepath.Join(remote, "*", "supervisor.pid"))
	shim, _ := filepath.Glob(filepath.Join(remote, "*", "shim.pid"))
	for _, p := range append(sup, shim...) {
		if pid := readPidFile(p); pidAlive(pid) {
			t.Logf("reaping %s (pid %d)", p, pid)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

func containersLabelled(label string) []string {
	out, _ := exec.Command("docker", "ps", "-aq", "--filter", "label="+label).Output()
	return strings.Fields(string(out))
}
