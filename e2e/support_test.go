package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"hoist/e2e/testenv"
)

// refusedTask asks for what hoist does not do (a capacity reservation):
// the revision must be refused at the field's line.
const refusedTask = "type: task\nname: train\nimage: " + testenv.BusyboxImage +
	"\ncommands:\n  - echo must not run\nreservation: r-1\n"

const refusedError = "train.dstack.yml:6:14: reservation: not supported yet by hoist: `reservation`"

// TestSupport_refusedFieldIsRefusedAndNothingApplied: a commit adding a
// task with a refused field (`reservation`) (and changing another task) is
// rejected at file:line:col by the sync, the server's plan and `hoist
// validate` alike; the applied revision, the runs and the other task stay as
// they were.
func TestSupport_refusedFieldIsRefusedAndNothingApplied(t *testing.T) {
	r := newRepo(t)
	r.write("hello.dstack.yml", task("hello", "  - echo hello\n"))
	sha1 := r.commit("add hello")
	granted := t.TempDir()
	s := startServer(t, r.dir, "--config", policyConfig(t, false, granted))
	s.waitRun("hello", sha1, "done", 60*time.Second)

	r.write("hello.dstack.yml", task("hello", "  - echo changed\n"))
	r.write("train.dstack.yml", refusedTask)
	bad := r.commit("train on two nodes")
	waitFor(t, 30*time.Second, func() string { return "sync to be invalid" }, func() bool { return s.sync().Status == "invalid" })
	st := s.sync()
	if st.Revision != sha1 || st.LatestRevision != bad {
		t.Fatalf("sync = %+v: the applied revision must stay %s", st, sha1)
	}
	if len(st.Errors) != 1 || !strings.HasPrefix(st.Errors[0], refusedError) {
		t.Fatalf("sync errors = %q, want one starting %q", st.Errors, refusedError)
	}

	// Nothing was applied: no run train, hello not replaced.
	if code, b := s.do("GET", "/api/v1/runs/train", nil); code != 404 {
		t.Fatalf("GET /api/v1/runs/train = %d %s, want 404", code, b)
	}
	var hello apiRun
	if s.getJSON("/api/v1/runs/hello", &hello); hello.Revision != sha1 || hello.Status != "done" || countRuns(t, s) != 1 {
		t.Fatalf("run hello = %+v (%d runs), want the one run of %s, done", hello, countRuns(t, s), sha1)
	}
	if got := s.logs("hello"); got != "hello\n" {
		t.Fatalf("hello logs = %q: it was re-run", got)
	}

	// The server's plan says the same.
	body, _ := json.Marshal(map[string]map[string]string{"files": {"train.dstack.yml": refusedTask}})
	code, b := s.do("POST", "/api/v1/plan", bytes.NewReader(body))
	var p struct {
		Valid  bool     `json:"valid"`
		Errors []string `json:"errors"`
	}
	if code != 200 || json.Unmarshal(b, &p) != nil || p.Valid || len(p.Errors) != 1 || !strings.HasPrefix(p.Errors[0], refusedError) {
		t.Fatalf("POST /api/v1/plan = %d %s, want invalid with %q", code, b, refusedError)
	}

	// So does `hoist validate`, run in the repository.
	cmd := exec.Command(filepath.Join(bin, "hoist"), "validate", ".")
	cmd.Dir = r.dir
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.HasPrefix(string(out), refusedError) {
		t.Fatalf("hoist validate: %v\n%s\nwant exit 1 and %q", err, out, refusedError)
	}

	// Mounting a directory of the instance instead is accepted and runs.
	r.write("train.dstack.yml", strings.Replace(refusedTask, "reservation: r-1", "volumes:\n  - instance_path: "+granted+"\n    path: /data", 1))
	fixed := r.commit("train on an instance volume")
	s.waitRun("train", fixed, "done", 60*time.Second)
}

// TestSupport_honouredFieldsReachTheJob proves fields the support table
// calls honoured end to end: env, working_dir, shell and an instance volume
// (instance_path, path) of a task, a task's entrypoint and ports, and a dev
// environment's init; an
// advisory field is a warning on the revision and the run.
func TestSupport_honouredFieldsReachTheJob(t *testing.T) {
	host := t.TempDir()
	if err := os.WriteFile(filepath.Join(host, "in.txt"), []byte("from the host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A shell of the job's own: it announces itself, then runs sh.
	if err := os.WriteFile(filepath.Join(host, "myshell"), []byte("#!/bin/sh\necho my shell\nexec /bin/sh \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	r := newRepo(t)
	r.write("fields.dstack.yml", task("fields", "  - echo A=$A\n  - pwd\n  - cat in.txt\n  - echo from the job > out.txt\n")+
		"env:\n  - A=one two\nworking_dir: /mnt/vol\nvolumes:\n  - instance_path: "+host+"\n    path: /mnt/vol\npriority: 5\n"+
		"shell: /mnt/vol/myshell\n")
	// A task's port is published on the instance at its local_port.
	hostPort := unusedPort(t)
	r.write("web.dstack.yml", task("web", "  - mkdir -p /www && echo served > /www/index.html\n  - busybox httpd -f -p 8000 -h /www\n")+
		"ports:\n  - "+hostPort+":8000\n")
	// An entrypoint runs without a shell, the commands as its arguments.
	r.write("entry.dstack.yml", task("entry", "  - a b\n  - $HOME\n")+"entrypoint: echo 'from entrypoint'\n")
	r.write("dev.dstack.yml", "type: dev-environment\nname: dev\nimage: "+testenv.BusyboxImage+"\ninit:\n  - echo init ran\n")
	sha := r.commit("honoured fields")
	s := startServer(t, r.dir, "--config", policyConfig(t, false, host))

	s.waitRun("fields", sha, "done", 60*time.Second)
	if got, want := s.logs("fields"), "my shell\nA=one two\n/mnt/vol\nfrom the host\n"; got != want {
		t.Fatalf("logs = %q, want %q", got, want)
	}
	if b, err := os.ReadFile(filepath.Join(host, "out.txt")); err != nil || string(b) != "from the job\n" {
		t.Fatalf("out.txt on the instance = %q, %v: the job did not write through the volume", b, err)
	}

	var web json.RawMessage
	waitFor(t, 60*time.Second, func() string { return "run web to be running: " + string(web) }, func() bool {
		var st struct{ Status string }
		s.getJSON("/api/v1/runs/web", &web)
		if json.Unmarshal(web, &st) == nil && isFinishedStatus(st.Status) {
			t.Fatalf("run web finished: %s", web)
		}
		return st.Status == "running"
	})
	waitFor(t, 30*time.Second, func() string { return "the task's port " + hostPort + " to answer" }, func() bool {
		code, err := httpGet("http://127.0.0.1:" + hostPort + "/")
		return err == nil && code == 200
	})

	s.waitRun("entry", sha, "done", 60*time.Second)
	if got, want := s.logs("entry"), "from entrypoint a b $HOME\n"; got != want {
		t.Fatalf("entry logs = %q, want %q", got, want)
	}

	// priority orders only waiting multi-node runs, not this task: a
	// warning on the revision and the run, in the API and on their pages.
	const warning = "fields.dstack.yml:15:11: priority: `priority` orders only a multi-node run"
	var rev struct {
		Warnings []string `json:"warnings"`
	}
	if s.getJSON("/api/v1/revisions/"+sha, &rev); len(rev.Warnings) != 1 || !strings.HasPrefix(rev.Warnings[0], warning) {
		t.Fatalf("revision warnings = %q, want one starting %q", rev.Warnings, warning)
	}
	var run struct {
		Warnings []string `json:"warnings"`
	}
	if s.getJSON("/api/v1/runs/fields", &run); len(run.Warnings) != 1 || !strings.HasPrefix(run.Warnings[0], warning) {
		t.Fatalf("run warnings = %q, want one starting %q", run.Warnings, warning)
	}
	for _, page := range []string{"/history/" + sha, "/runs/fields"} {
		if code, b := s.do("GET", page, nil); code != 200 || !strings.Contains(string(b), "fields.dstack.yml:15:11: priority:") {
			t.Fatalf("GET %s = %d, want the warning in the page:\n%.2000s", page, code, b)
		}
	}
	var dev struct{ Warnings []string }
	if s.getJSON("/api/v1/runs/dev", &dev) == 200 && len(dev.Warnings) != 0 {
		t.Fatalf("run dev has warnings %q: they belong to fields.dstack.yml", dev.Warnings)
	}

	s.waitRun("dev", sha, "running", 60*time.Second)
	waitFor(t, 30*time.Second, func() string { return "dev's init to print" }, func() bool { return s.logs("dev") == "init ran\n" })
}

// TestSupport_privilegedReachesTheContainer proves `privileged: true` is
// given to Docker: the job sees every capability where the Engine can start
// privileged containers; where it cannot (an unprivileged Docker host, like
// some CI machines), the job fails creating its container for exactly that
// reason, which only a privileged container meets.
func TestSupport_privilegedReachesTheContainer(t *testing.T) {
	r := newRepo(t)
	r.write("priv.dstack.yml", task("priv", "  - grep CapEff /proc/self/status\n")+"privileged: true\n")
	sha := r.commit("a privileged task")
	s := startServer(t, r.dir, "--config", policyConfig(t, true))
	var run struct {
		Revision string `json:"revision"`
		Status   string `json:"status"`
		Jobs     []struct {
			TerminationReason  string `json:"termination_reason"`
			TerminationMessage string `json:"termination_message"`
		} `json:"jobs"`
	}
	waitFor(t, 60*time.Second, func() string { return "priv to finish, last " + run.Status }, func() bool {
		s.getJSON("/api/v1/runs/priv", &run)
		return run.Revision == sha && isFinishedStatus(run.Status)
	})
	switch {
	case run.Status == "done":
		// Every capability bit set (38 or more, by kernel), where Docker's
		// default set is 00000000a80425fb: a privileged container.
		if got := s.logs("priv"); !strings.HasPrefix(got, "CapEff:") || !strings.Contains(got, "3fffffffff") && !strings.Contains(got, "ffffffffff") {
			t.Fatalf("logs = %q, want every capability", got)
		}
	case len(run.Jobs) == 1 && run.Jobs[0].TerminationReason == "creating_container_error" &&
		strings.Contains(run.Jobs[0].TerminationMessage, "apply caps"):
		t.Logf("this Docker Engine cannot start privileged containers: %s", run.Jobs[0].TerminationMessage)
	default:
		t.Fatalf("run = %+v, want done with every capability, or failed applying the capabilities", run)
	}
}

// unusedPort returns a free port of 127.0.0.1 below the kernel's ephemeral
// range (32768 and up), so that ports Docker and other tests pick for
// themselves meanwhile cannot take it.
func unusedPort(t *testing.T) string {
	t.Helper()
	for i := 0; i < 100; i++ {
		p := strconv.Itoa(20000 + rand.IntN(10000))
		if l, err := net.Listen("tcp", "127.0.0.1:"+p); err == nil {
			l.Close()
			return p
		}
	}
	t.Fatal("no free port in 20000-29999")
	return ""
}

// policyConfig writes a server config for the local backend whose policy
// allows privileged runs when privileged is set and mounts rwPaths
// read-write, and returns its path.
func policyConfig(t *testing.T, privileged bool, rwPaths ...string) string {
	t.Helper()
	conf := fmt.Sprintf("backends:\n  - type: local\npolicy:\n  privileged: %t\n  instance_volumes:\n", privileged)
	for _, p := range rwPaths {
		conf += fmt.Sprintf("    - path: %s\n      read_write: true\n", p)
	}
	if len(rwPaths) == 0 {
		conf += "    []\n"
	}
	p := filepath.Join(t.TempDir(), "server.yml")
	if err := os.WriteFile(p, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
