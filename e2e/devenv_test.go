package e2e

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"hoist/e2e/testenv"
)

// TestDevEnvironment_ideLinkAndInactivityStop: a dev environment with
// `ide: vscode` runs its init and stays up; its run carries dstack's VS
// Code link to the directory the runner reported (the busybox image has no
// WORKDIR: /), shown on its page with the SSH hint and printed by `hoist
// attach`; while attached it outlives its inactivity_duration, and once
// detached for that long it is terminated with
// inactivity_duration_exceeded and dstack's message, and its run fails, as
// dstack's does.
func TestDevEnvironment_ideLinkAndInactivityStop(t *testing.T) {
	t.Parallel() // mostly waits: runs beside the other slow tests (harness_test.go)
	r := newRepo(t)
	r.write("dev.dstack.yml", "type: dev-environment\nname: dev\nimage: "+testenv.BusyboxImage+
		"\nide: vscode\ninit:\n  - echo init ran\ninactivity_duration: 15s\n")
	sha := r.commit("a dev environment attached once")
	s := startServer(t, r.dir, "--metrics-interval", "1s")

	s.waitRun("dev", sha, "running", 60*time.Second)
	const link = "vscode://vscode-remote/ssh-remote+dev/"
	var run struct {
		IDEURL string `json:"ide_url"`
	}
	waitFor(t, 30*time.Second, func() string { return "ide_url " + link + ", last " + run.IDEURL }, func() bool {
		s.getJSON("/api/v1/runs/dev", &run)
		return run.IDEURL == link
	})
	if code, b := s.do("GET", "/runs/dev", nil); code != 200 || !strings.Contains(string(b), `href="`+link+`"`) ||
		!strings.Contains(string(b), "hoist attach dev") {
		t.Fatalf("GET /runs/dev = %d, want the IDE link and the SSH hint:\n%.3000s", code, b)
	}
	waitFor(t, 30*time.Second, func() string { return "dev's init to print" }, func() bool { return s.logs("dev") == "init ran\n" })

	// Attached, the environment outlives its inactivity_duration; the
	// attachment prints the IDE link.
	u := newCLIUser(t, s)
	a := u.attach("dev")
	if a.out.IDEURL != link {
		t.Errorf("hoist attach printed ide_url %q, want %q", a.out.IDEURL, link)
	}
	time.Sleep(20 * time.Second)
	var attachedRun struct {
		Status string `json:"status"`
	}
	s.getJSON("/api/v1/runs/dev", &attachedRun)
	if attachedRun.Status != "running" {
		t.Fatalf("attached for 20 s, dev is %s; want running past its inactivity_duration of 15 s", attachedRun.Status)
	}
	if err := a.stop(); err != nil {
		t.Fatalf("hoist attach: %v; stderr:\n%s", err, a.stderr.String())
	}

	began := time.Now()
	var full struct {
		Status            string `json:"status"`
		TerminationReason string `json:"termination_reason"`
		Jobs              []struct {
			Status             string `json:"status"`
			TerminationReason  string `json:"termination_reason"`
			TerminationMessage string `json:"termination_message"`
		} `json:"jobs"`
	}
	waitFor(t, 90*time.Second, func() string { return fmt.Sprintf("dev to end for inactivity, last %+v", full) }, func() bool {
		s.getJSON("/api/v1/runs/dev", &full)
		return isFinishedStatus(full.Status)
	})
	if full.Status != "failed" || full.TerminationReason != "job_failed" || len(full.Jobs) != 1 ||
		full.Jobs[0].Status != "terminated" || full.Jobs[0].TerminationReason != "inactivity_duration_exceeded" {
		t.Fatalf("run %+v, want failed (job_failed) with its job terminated for inactivity_duration_exceeded", full)
	}
	m := regexp.MustCompile(`^The job was inactive for (\d+) seconds, exceeding the inactivity_duration of 15 seconds$`).FindStringSubmatch(full.Jobs[0].TerminationMessage)
	if m == nil {
		t.Fatalf("termination message %q, want dstack's", full.Jobs[0].TerminationMessage)
	}
	if secs, _ := strconv.Atoi(m[1]); secs < 15 {
		t.Errorf("stopped after %d s without connections, want at least 15", secs)
	}
	if d := time.Since(began); d < 15*time.Second {
		t.Errorf("dev ended %s after the attachment closed, before its inactivity_duration of 15 s", d.Round(time.Second))
	}
	t.Logf("dev environment ended %s after the attachment closed", time.Since(began).Round(time.Second))
}
