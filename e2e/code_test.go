package e2e

import (
	"strings"
	"testing"
	"time"
)

// TestSupport_codeFromTheSpecRepositoryReachesTheRun proves `repos` with a
// local path and `files` bring the spec repository's content at the applied
// commit into the run (paths relative to the spec file, which sits in a
// subdirectory), that the next commit's run sees the next content, and that
// a task without `repos` gets no code and runs in / (the busybox image has
// no WORKDIR), as dstack documents for working_dir. A run of code the
// instance received before takes it from the instance's code cache.
func TestSupport_codeFromTheSpecRepositoryReachesTheRun(t *testing.T) {
	r := newRepo(t)
	spec := func(round string) string {
		return task("code", "  - echo repo=$DSTACK_REPO_DIR wd=$DSTACK_WORKING_DIR\n  - pwd\n  - cat app/data.txt\n"+
			"  - cat /etc/settings.txt\n  - cat cfg/settings.txt\n  - test -f specs/code.dstack.yml\n") +
			"working_dir: /work\nrepos: [..]\nfiles:\n  - ../conf/settings.txt:/etc/settings.txt\n  - local_path: ../conf\n    path: cfg\n" +
			"env:\n  - ROUND=" + round + "\n"
	}
	r.write("specs/code.dstack.yml", spec("1"))
	r.write("specs/nocode.dstack.yml", task("nocode", "  - pwd\n  - echo repo=$DSTACK_REPO_DIR\n  - if [ -e app ] || [ -e /work ]; then echo has code; else echo no code; fi\n"))
	r.write("app/data.txt", "data v1\n")
	r.write("conf/settings.txt", "settings v1\n")
	sha1 := r.commit("code v1")
	// What the working tree holds beyond the commit never reaches a run.
	r.write("app/data.txt", "uncommitted\n")
	s := startServer(t, r.dir)

	s.waitRun("code", sha1, "done", 60*time.Second)
	if got, want := s.logs("code"), "repo=/work wd=/work\n/work\ndata v1\nsettings v1\nsettings v1\n"; got != want {
		t.Fatalf("logs at the first commit = %q, want %q", got, want)
	}
	s.waitRun("nocode", sha1, "done", 60*time.Second)
	if got, want := s.logs("nocode"), "/\nrepo=\nno code\n"; got != want {
		t.Fatalf("logs of the task without repos = %q, want %q", got, want)
	}

	r.write("app/data.txt", "data v2\n")
	r.write("conf/settings.txt", "settings v2\n")
	r.write("specs/code.dstack.yml", spec("2"))
	sha2 := r.commit("code v2")
	s.waitRun("code", sha2, "done", 60*time.Second)
	if got, want := s.logs("code"), "repo=/work wd=/work\n/work\ndata v2\nsettings v2\nsettings v2\n"; got != want {
		t.Fatalf("logs at the second commit = %q, want %q", got, want)
	}
	if !strings.Contains(s.logText(), "job_code_uploaded") {
		t.Fatalf("the server logged no code upload:\n%s", s.logText())
	}

	// A task of files only; the next commit changes its spec and nothing it
	// brings: the instance's code cache holds the archive, and no upload
	// travels.
	cfgOnly := func(round string) string {
		return task("cfgonly", "  - cat /etc/settings.txt\n") + "files: [../conf/settings.txt:/etc/settings.txt]\nenv: [ROUND=" + round + "]\n"
	}
	r.write("specs/cfgonly.dstack.yml", cfgOnly("1"))
	sha3 := r.commit("a task of files only")
	s.waitRun("cfgonly", sha3, "done", 60*time.Second)
	uploads := strings.Count(s.logText(), "job_code_uploaded")
	r.write("specs/cfgonly.dstack.yml", cfgOnly("2"))
	sha4 := r.commit("the task of files only, round 2")
	s.waitRun("cfgonly", sha4, "done", 60*time.Second)
	if got, want := s.logs("cfgonly"), "settings v2\n"; got != want {
		t.Fatalf("logs of the files-only task = %q, want %q", got, want)
	}
	if n := strings.Count(s.logText(), "job_code_uploaded"); n != uploads || !strings.Contains(s.logText(), "job_code_cached") {
		t.Fatalf("the second run of the same files uploaded them again (%d uploads, were %d), not taken from the instance's cache", n, uploads)
	}
}
