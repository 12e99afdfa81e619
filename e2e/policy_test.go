package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A commit asking for the server's host (its root, its data directory, the
// Docker socket) or for a privileged container is refused at file:line
// with the setting that would allow it, and nothing of it is applied, with
// the default config; `hoist plan` through the API says the same.
func TestPolicy_hostMountsAndPrivilegedAreRefusedByDefault(t *testing.T) {
	r := newRepo(t)
	r.write("ok.dstack.yml", task("ok", "  - echo ok\n"))
	sha1 := r.commit("a harmless task")
	s := startServer(t, r.dir)
	s.waitRun("ok", sha1, "done", reconcileWait)

	r.write("root.dstack.yml", task("root", "  - ls /host\n")+"volumes:\n  - /:/host\n")
	r.write("data.dstack.yml", task("data", "  - cat /host/secret.key\n")+"volumes:\n  - instance_path: "+s.dataDir+"\n    path: /host\n")
	r.write("sock.dstack.yml", task("sock", "  - ls -l /docker.sock\n")+"volumes:\n  - /var/run/docker.sock:/docker.sock\n")
	r.write("priv.dstack.yml", task("priv", "  - id\n")+"privileged: true\n")
	r.write("ok.dstack.yml", task("ok", "  - echo changed\n"))
	bad := r.commit("ask for the host")
	st := s.waitSync(reconcileWait, "invalid at "+bad, func(st apiSync) bool { return st.Status == "invalid" && st.LatestRevision == bad })
	// task() writes 5 lines before what is appended: the volume item is
	// line 7, privileged line 6.
	want := []string{
		"data.dstack.yml:7:5: volumes[0]: instance path " + s.dataDir + " is never mountable: " + s.dataDir + " is the server's data directory",
		"priv.dstack.yml:6:13: privileged: privileged containers are not allowed on backend local: allow them with policy.privileged or policy.backends.local.privileged in the server config",
		"root.dstack.yml:7:5: volumes[0]: instance path / is never mountable",
		"sock.dstack.yml:7:5: volumes[0]: instance path /var/run/docker.sock is never mountable",
	}
	if len(st.Errors) < len(want) {
		t.Fatalf("sync errors = %q, want %d", st.Errors, len(want))
	}
	joined := strings.Join(st.Errors, "\n")
	for _, w := range want {
		if !strings.Contains(joined, w) {
			t.Errorf("sync errors lack %q:\n%s", w, joined)
		}
	}
	// Nothing of the refused revision is applied, not even its valid change.
	s.do("POST", "/api/v1/sync?wait=true", nil)
	if st := s.sync(); st.Revision != sha1 {
		t.Fatalf("applied revision = %.8s, want %.8s", st.Revision, sha1)
	}
	for _, n := range []string{"root", "data", "sock", "priv"} {
		if code, b := s.do("GET", "/api/v1/runs/"+n, nil); code != 404 {
			t.Errorf("run %s exists after a refused revision: %d %s", n, code, b)
		}
	}
	if run := s.getRun("ok"); run.Revision != sha1 || len(run.Jobs) != 1 {
		t.Errorf("the refused revision touched ok: %+v", run)
	}

	// A plan of the same files is refused the same way.
	body, _ := json.Marshal(map[string]any{"files": map[string]string{
		"root.dstack.yml": task("root", "  - ls /host\n") + "volumes:\n  - /:/host\n",
	}})
	code, b := s.do("POST", "/api/v1/plan", strings.NewReader(string(body)))
	if code != 200 || !strings.Contains(string(b), "root.dstack.yml:7:5: volumes[0]: instance path / is never mountable") {
		t.Errorf("POST /api/v1/plan = %d %s, want the positioned refusal", code, b)
	}
}

// With a path granted in the server config, a task mounts it read-only
// (writes fail, /proc/mounts says ro) and ends done; a grant with
// read_write mounts writable.
func TestPolicy_grantedPathIsMountedReadOnly(t *testing.T) {
	ro, rw := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(ro, "hello.txt"), []byte("hello from the host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "server.yml")
	conf := fmt.Sprintf("backends:\n  - type: local\npolicy:\n  instance_volumes:\n    - path: %s\n  backends:\n    local:\n      instance_volumes:\n        - path: %s\n          read_write: true\n", ro, rw)
	if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	r := newRepo(t)
	r.write("mount.dstack.yml", task("mount", strings.Join([]string{
		"  - cat /data/hello.txt",
		"  - if touch /data/new 2>/dev/null; then echo data writable; else echo data read-only; fi",
		"  - grep ' /data ' /proc/mounts | cut -d' ' -f4 | cut -d, -f1",
		"  - touch /scratch/out && echo scratch writable",
		"",
	}, "\n"))+fmt.Sprintf("volumes:\n  - %s:/data\n  - instance_path: %s\n    path: /scratch\n", ro, rw))
	sha := r.commit("mount granted paths")
	s := startServer(t, r.dir, "--config", cfg)
	s.waitRun("mount", sha, "done", reconcileWait)
	logs := s.logs("mount")
	if want := "hello from the host\ndata read-only\nro\nscratch writable\n"; logs != want {
		t.Fatalf("task output:\n%s\nwant:\n%s", logs, want)
	}
	if _, err := os.Stat(filepath.Join(ro, "new")); err == nil {
		t.Fatal("the task wrote into the read-only mount")
	}
	if _, err := os.Stat(filepath.Join(rw, "out")); err != nil {
		t.Fatalf("the read_write mount did not take the task's write: %v", err)
	}
}

// A run granted a path only on the backend it names is accepted, and it is
// placed only there: with no SSH host, it fails for want of capacity and
// never becomes a container on this host, where the path is not granted.
func TestPolicy_runNamingABackendNeedsOnlyItsGrantAndRunsOnlyThere(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(t.TempDir(), "server.yml")
	conf := fmt.Sprintf("backends:\n  - type: local\n  - type: ssh\npolicy:\n  backends:\n    ssh:\n      instance_volumes:\n        - path: %s\n", dir)
	if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	r := newRepo(t)
	// Only the fleet of this host exists.
	r.write("elsewhere.dstack.yml", task("elsewhere", "  - ls /data\n")+"backends: [remote]\nvolumes:\n  - "+dir+":/data\n")
	sha := r.commit("a path granted on ssh only")
	s := startServer(t, r.dir, "--config", cfg)
	s.waitRun("elsewhere", sha, "failed", reconcileWait)
	if st := s.sync(); st.Status != "synced" {
		t.Fatalf("sync = %+v, want the revision accepted", st)
	}
	var run struct {
		Jobs []struct {
			TerminationReason  string `json:"termination_reason"`
			TerminationMessage string `json:"termination_message"`
		} `json:"jobs"`
	}
	s.getJSON("/api/v1/runs/elsewhere", &run)
	if len(run.Jobs) != 1 || !strings.Contains(run.Jobs[0].TerminationReason, "no_capacity") {
		t.Fatalf("jobs = %+v, want one failed for want of capacity", run.Jobs)
	}
	out, _ := exec.Command("docker", "ps", "-aq", "--filter", "label=hoist.installation="+s.install).Output()
	if ids := strings.Fields(string(out)); len(ids) > 0 {
		t.Fatalf("containers were created on this host for a run naming remote: %v", ids)
	}
}
