package e2e

import (
	"fmt"
	"testing"
	"time"
)

// webService is a busybox httpd service; page is what it serves at /, or
// "" for a replica that never answers its probe.
func webService(page string) string {
	cmds := "  - sleep 3600\n"
	if page != "" {
		cmds = fmt.Sprintf("  - mkdir -p /www && echo %s > /www/index.html\n  - busybox httpd -f -p 8000 -h /www\n", page)
	}
	return fmt.Sprintf("type: service\nname: web\nimage: hoist-e2e/busybox:latest\nport: 8000\ncommands:\n%s"+
		"probes:\n  - type: http\n    url: /\n    interval: 1s\n    ready_after: 2\n", cmds)
}

// TestRollingDeployment_waitsForProbes: a rolling deployment retires the
// old run only once the new replicas pass their probes; a new revision
// whose replicas never answer leaves the old one serving.
func TestRollingDeployment_waitsForProbes(t *testing.T) {
	t.Parallel() // mostly waits: runs beside the other slow tests (harness_test.go)
	r := newRepo(t)
	r.write("web.dstack.yml", webService("v1"))
	v1 := r.commit("web v1")
	s := startServer(t, r.dir, "--resync-interval", "2s")
	s.waitRun("web", v1, "running", 60*time.Second)

	active := func() map[string]string {
		var runs []apiRun
		s.getJSON("/api/v1/runs", &runs)
		out := map[string]string{}
		for _, run := range runs {
			if run.Name == "web" {
				out[run.Revision] = run.Status
			}
		}
		return out
	}

	// v2 never answers: it runs, but v1 keeps serving.
	r.write("web.dstack.yml", webService(""))
	v2 := r.commit("web v2 without a server")
	s.waitRun("web", v2, "running", 60*time.Second)
	time.Sleep(5 * time.Second) // several probe intervals
	if got := active(); got[v1] != "running" {
		t.Fatalf("runs = %v: v1 must keep serving while v2's probes fail", got)
	}

	// v3 answers: once ready, the older runs are retired.
	r.write("web.dstack.yml", webService("v3"))
	v3 := r.commit("web v3")
	s.waitRun("web", v3, "running", 60*time.Second)
	waitFor(t, 60*time.Second, func() string { return fmt.Sprintf("v1 and v2 to be retired (runs: %v)", active()) }, func() bool {
		got := active()
		return got[v1] == "terminated" && got[v2] == "terminated" && got[v3] == "running"
	})
}
