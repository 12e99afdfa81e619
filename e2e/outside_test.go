package e2e

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestOutsideKill_containerEndIsReportedWithItsReason kills and removes a
// running job's container behind hoist's back, as `docker kill` and
// `docker rm -f` do: the job fails with the container's own reason at the
// next observation, not as instance_unreachable after the runner's grace
// (two minutes here, the default).
func TestOutsideKill_containerEndIsReportedWithItsReason(t *testing.T) {
	r := newRepo(t)
	r.write("placeholder.dstack.yml", task("placeholder", "  - echo ok\n"))
	r.commit("start")
	s := startServer(t, r.dir)
	tests := []struct {
		name, run   string
		docker      []string
		wantMessage []string // one of them
		wantExit    *int
	}{
		{"docker kill", "killed", []string{"kill"}, []string{"killed (SIGKILL) from outside"}, ptr(137)},
		// rm -f kills first: the shim sees the exit (137), or the
		// container already gone.
		{"docker rm -f", "removed", []string{"rm", "-f"}, []string{"killed (SIGKILL) from outside", "removed from outside"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r.write(tt.run+".dstack.yml", task(tt.run, "  - echo started\n  - sleep 300\n"))
			sha := r.commit("add " + tt.run)
			running := s.waitRun(tt.run, sha, "running", 60*time.Second)
			waitFor(t, 10*time.Second, func() string { return tt.run + " to print started" }, func() bool { return s.logs(tt.run) == "started\n" })
			out, err := exec.Command("docker", "ps", "-q", "--filter", "label=hoist.installation="+s.install,
				"--filter", "label=hoist.task-id="+running.Jobs[0].SubmissionID).Output()
			ids := strings.Fields(string(out))
			if err != nil || len(ids) != 1 {
				t.Fatalf("containers of job %s: %q, %v; want one", running.Jobs[0].SubmissionID, ids, err)
			}
			if out, err := exec.Command("docker", append(tt.docker, ids[0])...).CombinedOutput(); err != nil {
				t.Fatalf("docker %s: %v: %s", strings.Join(tt.docker, " "), err, out)
			}
			start := time.Now()
			s.waitRun(tt.run, sha, "failed", 30*time.Second)
			var run struct {
				Jobs []struct {
					ExitCode           *int   `json:"exit_code"`
					TerminationReason  string `json:"termination_reason"`
					TerminationMessage string `json:"termination_message"`
				} `json:"jobs"`
			}
			if code := s.getJSON("/api/v1/runs/"+tt.run, &run); code != 200 || len(run.Jobs) == 0 {
				t.Fatalf("GET run %s: %d %+v", tt.run, code, run)
			}
			j := run.Jobs[0]
			t.Logf("%s: failed after %v: %s: %s", tt.name, time.Since(start).Round(time.Millisecond), j.TerminationReason, j.TerminationMessage)
			if j.TerminationReason != "container_exited_with_error" {
				t.Errorf("termination reason %q, want container_exited_with_error", j.TerminationReason)
			}
			if !slices.ContainsFunc(tt.wantMessage, func(m string) bool { return strings.Contains(j.TerminationMessage, m) }) {
				t.Errorf("termination message %q says none of %q", j.TerminationMessage, tt.wantMessage)
			}
			if tt.wantExit != nil && (j.ExitCode == nil || *j.ExitCode != *tt.wantExit) {
				t.Errorf("exit code %v, want %d", j.ExitCode, *tt.wantExit)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }
