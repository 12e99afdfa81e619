package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"hoist/e2e/testenv"
)

// remove deletes a file from the work tree (commit it with r.commit).
func (r *repo) remove(name string) {
	r.t.Helper()
	if err := os.Remove(filepath.Join(r.dir, name)); err != nil {
		r.t.Fatal(err)
	}
}

// service writes a service spec of busybox httpd answering on port 8000.
func serviceSpec(name string, replicas int, extra string) string {
	return fmt.Sprintf("type: service\nname: %s\nimage: %s\nport: 8000\nreplicas: %d\ncommands:\n  - busybox httpd -f -p 8000%s\n",
		name, testenv.BusyboxImage, replicas, extra)
}

// currentJobs returns the submissions of the run itself (not of earlier
// runs of the same name, which the API marks with their revision).
func currentJobs(r apiRunFull) []apiJobFull {
	var out []apiJobFull
	for _, j := range r.Jobs {
		if j.Revision == "" {
			out = append(out, j)
		}
	}
	return out
}

func countStatus(jobs []apiJobFull, status string) int {
	n := 0
	for _, j := range jobs {
		if j.Status == status {
			n++
		}
	}
	return n
}

// apiRunFull is a run as GET /api/v1/runs/{name} returns it, with what the
// reconcile tests check beyond the skeleton's fields.
type apiRunFull struct {
	Name              string       `json:"name"`
	Type              string       `json:"type"`
	Status            string       `json:"status"`
	TerminationReason string       `json:"termination_reason"`
	Revision          string       `json:"revision"`
	RemovedFromGit    bool         `json:"removed_from_git"`
	Jobs              []apiJobFull `json:"jobs"`
}

type apiJobFull struct {
	SubmissionID      string `json:"submission_id"`
	SubmissionNum     int    `json:"submission_num"`
	Status            string `json:"status"`
	TerminationReason string `json:"termination_reason"`
	Revision          string `json:"revision"`
}

// waitRunCond waits until run name satisfies cond and returns it.
func (s *server) waitRunCond(name string, within time.Duration, what string, cond func(apiRunFull) bool) apiRunFull {
	s.t.Helper()
	var r apiRunFull
	var last string
	waitFor(s.t, within, func() string { return fmt.Sprintf("run %s: %s (last: %s)", name, what, last) }, func() bool {
		r = apiRunFull{}
		if s.getJSON("/api/v1/runs/"+name, &r) != 200 {
			last = "not found"
			return false
		}
		var js []string
		for _, j := range r.Jobs {
			js = append(js, fmt.Sprintf("%s#%d@%.7s", j.Status, j.SubmissionNum, j.Revision))
		}
		last = fmt.Sprintf("%s@%.8s jobs [%s]", r.Status, r.Revision, strings.Join(js, " "))
		return cond(r)
	})
	return r
}

// waitSync waits until /api/v1/sync satisfies cond.
func (s *server) waitSync(within time.Duration, what string, cond func(apiSync) bool) apiSync {
	s.t.Helper()
	var st apiSync
	waitFor(s.t, within, func() string { return fmt.Sprintf("sync %s (last: %+v)", what, st) }, func() bool {
		st = s.sync()
		return cond(st)
	})
	return st
}

// numberedTask prints "line N" every 100 ms for n lines.
func numberedTask(name string, n int) string {
	return task(name, fmt.Sprintf("  - i=0; while [ $i -lt %d ]; do echo line $i; i=$((i+1)); sleep 0.1; done\n", n))
}
