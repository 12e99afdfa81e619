package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

const reconcileWait = 90 * time.Second

// TestReconcile_gitOps drives one `hoist serve` through the reconciler's
// user-visible behaviour with real Git and real Docker, phase by phase
// (one server, so the default run stays lean): create, in-place update and
// replace of a task and a service; a broken commit while they run; a server
// restart in the middle of a task's output; deletes; a mass deletion held
// for confirmation.
func TestReconcile_gitOps(t *testing.T) {
	t.Parallel() // mostly waits: runs beside the other slow tests (harness_test.go)
	r := newRepo(t)
	longV1 := task("long", "  - echo start\n  - sleep 300\n")
	r.write("long.dstack.yml", longV1)
	r.write("web.dstack.yml", serviceSpec("web", 1, ""))
	sha1 := r.commit("add long and web")
	s := startServer(t, r.dir)
	start := time.Now()
	phase := func(name string) { t.Logf("phase at %s: %s", time.Since(start).Round(time.Millisecond), name) }

	phase("create")
	long := s.waitRunCond("long", reconcileWait, "running at "+sha1, func(r apiRunFull) bool {
		return r.Revision == sha1 && r.Status == "running"
	})
	web := s.waitRunCond("web", reconcileWait, "running with 1 replica", func(r apiRunFull) bool {
		return r.Revision == sha1 && r.Status == "running" && countStatus(currentJobs(r), "running") == 1
	})
	longJob, webJob := long.Jobs[0].SubmissionID, web.Jobs[0].SubmissionID

	phase("in-place updates (task priority, service replicas)")
	r.write("long.dstack.yml", longV1+"priority: 5\n")
	r.write("web.dstack.yml", serviceSpec("web", 2, ""))
	sha2 := r.commit("priority and replicas")
	long = s.waitRunCond("long", reconcileWait, "updated in place to "+sha2, func(r apiRunFull) bool { return r.Revision == sha2 })
	if js := currentJobs(long); long.Status != "running" || len(js) != 1 || js[0].SubmissionID != longJob {
		t.Fatalf("a priority change restarted the task: %+v, want job %s still running", long, longJob)
	}
	web = s.waitRunCond("web", reconcileWait, "two running replicas at "+sha2, func(r apiRunFull) bool {
		return r.Revision == sha2 && countStatus(currentJobs(r), "running") == 2
	})
	if !slices.ContainsFunc(currentJobs(web), func(j apiJobFull) bool { return j.SubmissionID == webJob && j.Status == "running" }) {
		t.Fatalf("scaling up replaced the first replica: %+v", web.Jobs)
	}

	phase("replace (task commands, service commands)")
	r.write("long.dstack.yml", task("long", "  - echo start2\n  - sleep 300\n")+"priority: 5\n")
	r.write("web.dstack.yml", serviceSpec("web", 2, " -v"))
	sha3 := r.commit("new commands")
	long = s.waitRunCond("long", reconcileWait, "replaced and running at "+sha3, func(r apiRunFull) bool {
		return r.Revision == sha3 && r.Status == "running"
	})
	if js := currentJobs(long); len(js) != 1 || js[0].SubmissionID == longJob {
		t.Fatalf("changed commands did not replace the task: %+v", long.Jobs)
	}
	waitFor(t, 10*time.Second, func() string { return "the replaced task's output" }, func() bool { return s.logs("long") == "start2\n" })
	// A rolling deployment: the new replicas run, then the old ones stop.
	web = s.waitRunCond("web", reconcileWait, "replaced with two running replicas at "+sha3+" and the old ones stopped", func(r apiRunFull) bool {
		return r.Revision == sha3 && countStatus(currentJobs(r), "running") == 2 && !slices.ContainsFunc(r.Jobs, func(j apiJobFull) bool {
			return j.Revision != "" && !isFinishedStatus(j.Status)
		})
	})
	for _, j := range web.Jobs {
		if j.Revision == "" && j.SubmissionID == webJob {
			t.Fatalf("the replaced service kept an old replica: %+v", web.Jobs)
		}
	}
	longJob = currentJobs(long)[0].SubmissionID
	webJobs := jobIDs(currentJobs(web))

	phase("broken commit while they run")
	r.write("broken.dstack.yml", "type: task\nname: broken\nimage: x\ncomands:\n  - echo\n")
	r.write("web.dstack.yml", serviceSpec("web", 1, " -v"))
	bad := r.commit("broken spec and a valid change")
	st := s.waitSync(reconcileWait, "invalid at "+bad, func(st apiSync) bool { return st.Status == "invalid" && st.LatestRevision == bad })
	if st.Revision != sha3 || len(st.Errors) == 0 || !strings.HasPrefix(st.Errors[0], "broken.dstack.yml:4:1: ") {
		t.Fatalf("sync = %+v, want %s applied and an error at broken.dstack.yml:4:1", st, sha3)
	}
	// Give the server a chance to (wrongly) act on the rejected revision.
	s.do("POST", "/api/v1/sync?wait=true", nil)
	long, web = s.getRun("long"), s.getRun("web")
	if long.Revision != sha3 || long.Status != "running" || currentJobs(long)[0].SubmissionID != longJob {
		t.Fatalf("the broken revision touched long: %+v", long)
	}
	if web.Revision != sha3 || !slices.Equal(jobIDs(currentJobs(web)), webJobs) || countStatus(currentJobs(web), "running") != 2 {
		t.Fatalf("the broken revision's valid change was applied to web: %+v", web)
	}
	r.write("broken.dstack.yml", task("broken", "  - echo fixed\n"))
	fixed := r.commit("fix spec")
	s.waitRun("broken", fixed, "done", reconcileWait)
	web = s.waitRunCond("web", reconcileWait, "scaled down to one replica at "+fixed, func(r apiRunFull) bool {
		return r.Revision == fixed && countStatus(currentJobs(r), "running") == 1
	})
	if web.Status != "running" {
		t.Fatalf("scaling down stopped the service: %+v", web)
	}

	phase("server restart in the middle of a task's output")
	const lines = 50
	r.write("count.dstack.yml", numberedTask("count", lines))
	shaCount := r.commit("count")
	waitFor(t, reconcileWait, func() string { return "count to print line 10" }, func() bool {
		var run apiRunFull
		return s.getJSON("/api/v1/runs/count", &run) == 200 && run.Revision == shaCount && strings.Contains(s.logs("count"), "line 10\n")
	})
	runsBefore := countRuns(t, s)
	if before := s.logs("count"); strings.Contains(before, fmt.Sprintf("line %d\n", lines-1)) {
		t.Fatalf("count finished before the restart; the test needs a restart mid-output:\n%s", before)
	}
	s.restart()
	count := s.waitRunCond("count", reconcileWait, "done", func(r apiRunFull) bool { return r.Status == "done" })
	if len(count.Jobs) != 1 || count.Jobs[0].SubmissionNum != 0 {
		t.Fatalf("count after restart has jobs %+v, want its one first submission", count.Jobs)
	}
	var want strings.Builder
	for i := 0; i < lines; i++ {
		fmt.Fprintf(&want, "line %d\n", i)
	}
	if got := s.logs("count"); got != want.String() {
		t.Fatalf("logs across the restart:\n%s\nwant every line once, in order", got)
	}
	if n := countRuns(t, s); n != runsBefore {
		t.Fatalf("runs after restart = %d, want %d", n, runsBefore)
	}
	long, web = s.getRun("long"), s.getRun("web")
	if long.Status != "running" || currentJobs(long)[0].SubmissionID != longJob || countStatus(currentJobs(web), "running") != 1 {
		t.Fatalf("the restart resubmitted running jobs: long %+v web %+v", long, web)
	}

	phase("delete the task, then the service")
	r.remove("long.dstack.yml")
	r.commit("remove long")
	long = s.waitRunCond("long", reconcileWait, "terminated and removed", func(r apiRunFull) bool {
		return r.Status == "terminated" && r.RemovedFromGit
	})
	if long.Revision != sha3 {
		t.Fatalf("the removed run's revision = %s, want %s (its last spec)", long.Revision, sha3)
	}
	r.remove("web.dstack.yml")
	r.commit("remove web")
	s.waitRunCond("web", reconcileWait, "terminated and removed", func(r apiRunFull) bool {
		return r.Status == "terminated" && r.RemovedFromGit && countStatus(r.Jobs, "running") == 0
	})

	phase("mass deletion is held")
	for _, n := range []string{"m1", "m2", "m3"} {
		r.write(n+".dstack.yml", task(n, "  - sleep 300\n"))
	}
	shaM := r.commit("three sleepers")
	ids := map[string]string{}
	for _, n := range []string{"m1", "m2", "m3"} {
		run := s.waitRunCond(n, reconcileWait, "running", func(r apiRunFull) bool { return r.Revision == shaM && r.Status == "running" })
		ids[n] = run.Jobs[0].SubmissionID
	}
	r.remove("m1.dstack.yml")
	r.remove("m2.dstack.yml")
	held := r.commit("remove two of three")
	st = s.waitSync(reconcileWait, "held at "+held, func(st apiSync) bool {
		return st.LatestRevision == held && len(st.Errors) > 0 && strings.HasPrefix(st.Errors[0], "held: ")
	})
	if st.Revision == held {
		t.Fatalf("a held revision was applied: %+v", st)
	}
	if !st.Held || len(st.HeldReasons) != 1 || st.Errors[0] != "held: "+st.HeldReasons[0] {
		t.Fatalf("held plan: held %v, reasons %q, errors %q", st.Held, st.HeldReasons, st.Errors)
	}
	s.do("POST", "/api/v1/sync?wait=true", nil)
	for _, n := range []string{"m1", "m2", "m3"} {
		if run := s.getRun(n); run.Status != "running" || run.RemovedFromGit || run.Jobs[0].SubmissionID != ids[n] {
			t.Fatalf("%s changed while the deletion is held: %+v", n, run)
		}
	}

	phase("confirmation applies the held deletion")
	code, body := s.do("POST", "/api/v1/sync/confirm", strings.NewReader(`{"revision":"`+held+`"}`))
	if code/100 != 2 {
		t.Fatalf("POST /api/v1/sync/confirm = %d %s", code, body)
	}
	for _, n := range []string{"m1", "m2"} {
		s.waitRunCond(n, reconcileWait, "terminated after confirmation", func(r apiRunFull) bool { return r.Status == "terminated" && r.RemovedFromGit })
	}
	if st := s.waitSync(reconcileWait, "synced at "+held, func(st apiSync) bool { return st.Revision == held }); st.Status != "synced" || len(st.Errors) != 0 || st.Held {
		t.Fatalf("sync after confirmation = %+v", st)
	}
	if run := s.getRun("m3"); run.Status != "running" || run.Jobs[0].SubmissionID != ids["m3"] {
		t.Fatalf("confirmation touched m3: %+v", run)
	}
}

// run returns the run named name as the API shows it.
func (s *server) getRun(name string) apiRunFull {
	s.t.Helper()
	var r apiRunFull
	if code := s.getJSON("/api/v1/runs/"+name, &r); code != 200 {
		s.t.Fatalf("GET /api/v1/runs/%s: %d", name, code)
	}
	return r
}

func jobIDs(js []apiJobFull) []string {
	var ids []string
	for _, j := range js {
		ids = append(ids, j.SubmissionID)
	}
	slices.Sort(ids)
	return ids
}

func isFinishedStatus(status string) bool {
	return status == "done" || status == "failed" || status == "terminated" || status == "aborted"
}
