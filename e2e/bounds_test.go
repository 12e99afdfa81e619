package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// refusedWithin commits nothing itself: it waits until revision sha is
// refused, returns how long that took from since, and checks that one of
// the errors contains want.
func (s *server) refusedWithin(sha string, since time.Time, want string) time.Duration {
	s.t.Helper()
	waitFor(s.t, 30*time.Second, func() string { return "revision " + sha[:8] + " to be refused" }, func() bool {
		st := s.sync()
		return st.LatestRevision == sha && st.Status == "invalid"
	})
	took := time.Since(since)
	st := s.sync()
	if !strings.Contains(strings.Join(st.Errors, "\n"), want) {
		s.t.Fatalf("errors of %s = %q, want one containing %q", sha[:8], st.Errors, want)
	}
	return took
}

// TestBounds_hugeSpecsAreRefusedAndTheNextCommitSyncs commits what used
// to wedge the sync worker for minutes (a 3-million-item CUE comprehension,
// an 80,000-item YAML list, a 50 MB spec): each is refused naming the
// limit, the first two within a second, the commit after each syncs, and SIGTERM stops the
// server promptly while a slow CUE evaluation runs.
func TestBounds_hugeSpecsAreRefusedAndTheNextCommitSyncs(t *testing.T) {
	r := newRepo(t)
	r.write("hello.dstack.yml", task("hello", "  - echo hello\n"))
	first := r.commit("add hello")
	s := startServer(t, r.dir, "--validate-timeout", "1s")
	s.waitRun("hello", first, "done", 60*time.Second)

	var list strings.Builder
	list.WriteString("type: task\nname: big\ncommands:\n")
	for i := 0; i < 80_000; i++ {
		fmt.Fprintf(&list, "  - %d\n", i)
	}
	attacks := []struct {
		name, file, content, want string
		// fast: refused within a second of the commit (a 50 MB file takes
		// longer to reach the validator: Git must inflate it first).
		fast bool
	}{
		{"3-million-item CUE comprehension", "big.cue",
			"package x\nimport \"list\"\nt: {type: \"task\", commands: [for i in list.Range(0, 3000000, 1) {\"echo \\(i)\"}]}\n",
			"big.cue:3:30: comprehension iterates over 3000000 values, more than the limit of 10000 per list", true},
		{"80k-item YAML list", "big.dstack.yml", list.String(),
			"big.dstack.yml:3:1: commands: 80000 items, more than the limit of 10000 per list", true},
		{"50 MB spec", "huge.dstack.yml", "type: task\nname: huge\ncommands:\n  - echo " + strings.Repeat("x", 50<<20) + "\n",
			"huge.dstack.yml:1:1: file is 52428842 bytes, more than the limit of 1 MiB per spec file", false},
	}
	for i, a := range attacks {
		r.write(a.file, a.content)
		bad := r.commit("add " + a.name)
		took := s.refusedWithin(bad, time.Now(), a.want)
		t.Logf("%s refused %v after the commit", a.name, took)
		if a.fast && took > time.Second {
			t.Errorf("%s refused only after %v", a.name, took)
		}
		// The next commit is seen and synced.
		r.git("rm", "-q", a.file)
		name := fmt.Sprintf("after-%d", i)
		r.write(name+".dstack.yml", task(name, "  - echo next\n"))
		next := r.commit("remove " + a.name)
		s.waitRun(name, next, "done", 60*time.Second)
		if st := s.sync(); st.Status != "synced" || st.Revision != next {
			t.Fatalf("after %s: sync = %+v, want synced at %s", a.name, st, next)
		}
	}

	// A CUE evaluation the static check cannot size runs into the
	// deadline; SIGTERM still stops the server within its shutdown timeout.
	r.write("slow.cue", "package x\nimport (\"list\"\n\"strings\")\n"+
		"n: len(strings.Split(strings.Repeat(\"a,\", 300000), \",\"))\n"+
		"t: {type: \"task\", commands: [for i in list.Range(0, n, 1) {\"echo \\(i)\"}]}\n")
	slow := r.commit("slow CUE")
	s.refusedWithin(slow, time.Now(), "CUE evaluation stopped at the revision's deadline")
	r.write("slow.cue", "package x\nimport (\"list\"\n\"strings\")\n"+
		"n: len(strings.Split(strings.Repeat(\"b,\", 300000), \",\"))\n"+
		"t: {type: \"task\", commands: [for i in list.Range(0, n, 1) {\"echo \\(i)\"}]}\n")
	r.commit("slow CUE again")
	time.Sleep(300 * time.Millisecond) // the evaluation is under way
	start := time.Now()
	s.stop()
	if took := time.Since(start); took > 6*time.Second {
		t.Errorf("SIGTERM took %v to stop the server", took)
	} else {
		t.Logf("SIGTERM stopped the server in %v", took)
	}
	if !strings.Contains(s.logText(), "hoist stopped") {
		t.Errorf("the server did not stop cleanly:\n%s", s.logText())
	}
}
