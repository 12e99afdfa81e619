package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"hoist/e2e/testenv"
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
	if len(deliveries(s.logText())) == 0 {
		t.Fatalf("the server logged no code delivery:\n%s", s.logText())
	}

	// A task of files only; the next commit changes its spec and nothing it
	// brings: the instance's code cache holds every blob, and none travels.
	cfgOnly := func(round string) string {
		return task("cfgonly", "  - cat /etc/settings.txt\n") + "files: [../conf/settings.txt:/etc/settings.txt]\nenv: [ROUND=" + round + "]\n"
	}
	r.write("specs/cfgonly.dstack.yml", cfgOnly("1"))
	sha3 := r.commit("a task of files only")
	s.waitRun("cfgonly", sha3, "done", 60*time.Second)
	before := len(deliveries(s.logText()))
	r.write("specs/cfgonly.dstack.yml", cfgOnly("2"))
	sha4 := r.commit("the task of files only, round 2")
	s.waitRun("cfgonly", sha4, "done", 60*time.Second)
	if got, want := s.logs("cfgonly"), "settings v2\n"; got != want {
		t.Fatalf("logs of the files-only task = %q, want %q", got, want)
	}
	if d := deliveries(s.logText()); len(d) != before+1 || d[len(d)-1]["blobs_sent"] != "0" {
		t.Fatalf("the second run of the same files sent blobs again, not taken from the instance's cache: %v", d[before:])
	}
}

// deliveries returns the key=value pairs of every job_code_delivered line
// of the server's log.
func deliveries(log string) []map[string]string {
	var out []map[string]string
	for _, line := range strings.Split(log, "\n") {
		if !strings.Contains(line, "msg=job_code_delivered") {
			continue
		}
		kv := map[string]string{}
		for _, f := range strings.Fields(line) {
			if k, v, ok := strings.Cut(f, "="); ok {
				kv[k] = v
			}
		}
		out = append(out, kv)
	}
	return out
}

// TestSupport_reposURLIsFetchedWithATokenFromAProjectSecret proves a
// `repos` entry with a `url` brings a second repository, served over Git's
// smart HTTP on loopback behind a token: the server fetches it with the
// token a user set as the project secret HOIST_GIT_TOKEN_<HOST> (`hoist
// secret set`), at the default branch, at a `branch` and at a `hash`; the
// next spec commit's run sees what was pushed since; a url the server
// cannot fetch (missing, or refused for want of a token) fails the job
// with a message naming repos[0].url and the cause; and the token appears
// in no log.
func TestSupport_reposURLIsFetchedWithATokenFromAProjectSecret(t *testing.T) {
	const token = "tok-3f9a1c27e6"
	lib := newRepo(t)
	lib.write("data.txt", "lib v1\n")
	lib.write("bin/tool.sh", "echo tool\n")
	v1 := lib.commit("lib v1")
	lib.git("branch", "stable")
	lib.write("data.txt", "lib on stable\n")
	lib.git("checkout", "-q", "stable")
	lib.commit("stable")
	lib.git("checkout", "-q", "main")
	root := t.TempDir()
	bare := filepath.Join(root, "lib.git")
	lib.git("clone", "-q", "--bare", lib.dir, bare)
	base := testenv.ServeGit(t, root, token)

	r := newRepo(t)
	r.write("README.md", "url repos\n")
	r.commit("init")
	s := startServer(t, r.dir)
	cmd := exec.Command(filepath.Join(bin, "hoist"), "secret", "set", "HOIST_GIT_TOKEN_127_0_0_1")
	cmd.Env = append(os.Environ(), "HOIST_SERVER="+s.url, "HOIST_TOKEN="+s.token)
	cmd.Stdin = strings.NewReader(token + "\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("hoist secret set: %v\n%s", err, out)
	}

	spec := func(name, repo, round string) string {
		return task(name, "  - cat lib/data.txt\n  - test ! -e lib/.git\n") + "working_dir: /work\nrepos:\n" + repo + "env: [ROUND=" + round + "]\n"
	}
	url := base + "/lib.git"
	r.write("urlmain.dstack.yml", spec("urlmain", "  - url: "+url+"\n    path: lib\n", "1"))
	r.write("urlbranch.dstack.yml", spec("urlbranch", "  - url: "+url+"\n    branch: stable\n    path: lib\n", "1"))
	r.write("urlhash.dstack.yml", spec("urlhash", "  - url: "+url+"\n    hash: "+v1+"\n    path: lib\n", "1"))
	r.write("urlmissing.dstack.yml", spec("urlmissing", "  - url: "+base+"/nothere.git\n    path: lib\n", "1"))
	// The same server by another host name, for which no secret is set.
	noauth := strings.Replace(url, "127.0.0.1", "localhost", 1)
	r.write("urlnoauth.dstack.yml", spec("urlnoauth", "  - url: "+noauth+"\n    path: lib\n", "1"))
	sha1 := r.commit("runs of a url repo")

	s.waitRun("urlmain", sha1, "done", 90*time.Second)
	if got := s.logs("urlmain"); got != "lib v1\n" {
		t.Fatalf("urlmain logs = %q, want the default branch's data", got)
	}
	s.waitRun("urlbranch", sha1, "done", 90*time.Second)
	if got := s.logs("urlbranch"); got != "lib on stable\n" {
		t.Fatalf("urlbranch logs = %q, want the branch's data", got)
	}
	failed := s.waitRun("urlmissing", sha1, "failed", 90*time.Second)
	var jobs []struct {
		TerminationMessage string `json:"termination_message"`
	}
	s.getJSON("/api/v1/runs/urlmissing/jobs", &jobs)
	if len(jobs) == 0 || !strings.Contains(jobs[0].TerminationMessage, "repos[0].url "+base+"/nothere.git") {
		t.Fatalf("urlmissing: run %+v jobs %+v: want a message naming repos[0].url", failed, jobs)
	}
	t.Logf("urlmissing: %s", jobs[0].TerminationMessage)
	s.waitRun("urlnoauth", sha1, "failed", 90*time.Second)
	jobs = nil
	s.getJSON("/api/v1/runs/urlnoauth/jobs", &jobs)
	if len(jobs) == 0 || !strings.Contains(jobs[0].TerminationMessage, "repos[0].url "+noauth) ||
		!strings.Contains(jobs[0].TerminationMessage, "authentication required") || !strings.Contains(jobs[0].TerminationMessage, "HOIST_GIT_TOKEN_LOCALHOST") {
		t.Fatalf("urlnoauth jobs %+v: want a message naming repos[0].url, the refusal and the secret to set", jobs)
	}
	t.Logf("urlnoauth: %s", jobs[0].TerminationMessage)

	// Upstream moves on; the next spec commit's runs see it, except the
	// one pinned to a hash.
	lib.write("data.txt", "lib v2\n")
	lib.commit("lib v2")
	lib.git("push", "-q", bare, "main")
	r.write("urlmain.dstack.yml", spec("urlmain", "  - url: "+url+"\n    path: lib\n", "2"))
	r.write("urlhash.dstack.yml", spec("urlhash", "  - url: "+url+"\n    hash: "+v1+"\n    path: lib\n", "2"))
	sha2 := r.commit("round 2")
	s.waitRun("urlmain", sha2, "done", 90*time.Second)
	if got := s.logs("urlmain"); got != "lib v2\n" {
		t.Fatalf("urlmain logs after the push = %q, want lib v2", got)
	}
	s.waitRun("urlhash", sha2, "done", 90*time.Second)
	if got := s.logs("urlhash"); got != "lib v1\n" {
		t.Fatalf("urlhash logs = %q, want the pinned commit's data", got)
	}
	if strings.Contains(s.logText(), token) {
		t.Fatal("the token is in the server's log")
	}
}
