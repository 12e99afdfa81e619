package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"hoist/e2e/testenv"
	"hoist/store/blob"
)

// fanoutProvider is a CUE provider generating a three-job DAG: a writes
// out/data.txt (its artifact), then b and c read it; `fail` makes a exit 1.
const fanoutProvider = `providers:
  - name: fanout
    schema:
      type: object
      additionalProperties: false
      properties:
        fail: {type: boolean}
        word: {type: string}
      required: [word]
    cue: |
      parameters: {fail: *false | bool, word: string}
      _exit: [if parameters.fail {"exit 1"}, "true"][0]
      jobs: [{
        name: "a"
        image: "` + testenv.BusyboxImage + `"
        commands: ["mkdir -p out", "echo \(parameters.word) from a > out/data.txt", _exit]
        artifacts: ["out"]
        resources: {cpu: "1..", memory: "0.1GB.."}
      }, for n in ["b", "c"] {
        name: n
        image: "` + testenv.BusyboxImage + `"
        commands: ["echo \(n) saw $(cat out/data.txt)"]
        depends_on: ["a"]
        resources: {cpu: "1..", memory: "0.1GB.."}
      }]
`

// wfJob is a job of a workflow run as GET /api/v1/runs/{name} returns it.
type wfJob struct {
	ID                 string `json:"id"`
	JobNum             int    `json:"job_num"`
	WorkflowJob        string `json:"workflow_job"`
	SubmissionNum      int    `json:"submission_num"`
	Status             string `json:"status"`
	StatusMessage      string `json:"status_message"`
	TerminationReason  string `json:"termination_reason"`
	TerminationMessage string `json:"termination_message"`
	Revision           string `json:"revision"`
	StartedAt          string `json:"started_at"`
	FinishedAt         string `json:"finished_at"`
}

// wfRun is a workflow run with its jobs.
type wfRun struct {
	Name     string  `json:"name"`
	Type     string  `json:"type"`
	Status   string  `json:"status"`
	Revision string  `json:"revision"`
	Jobs     []wfJob `json:"jobs"`
}

// workflowRun reads run name.
func (s *server) workflowRun(name string) wfRun {
	s.t.Helper()
	var r wfRun
	if code := s.getJSON("/api/v1/runs/"+name, &r); code != 200 {
		s.t.Fatalf("GET run %s: %d", name, code)
	}
	return r
}

// jobsByName maps a workflow run's jobs of revision rev by their names.
func (r wfRun) jobsByName() map[string]wfJob {
	out := map[string]wfJob{}
	for _, j := range r.Jobs {
		if j.Revision == "" && j.WorkflowJob != "" {
			out[j.WorkflowJob] = j
		}
	}
	return out
}

// hoistCLI runs the hoist CLI against s in dir and returns its output.
func (s *server) hoistCLI(dir string, args ...string) (string, error) {
	s.t.Helper()
	cmd := exec.Command(filepath.Join(bin, "hoist"), args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "HOIST_URL="+s.url, "HOIST_TOKEN="+s.token)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestWorkflows_cueProviderDAGRunsInOrderWithArtifacts is a CUE provider's
// three-job DAG (a → b, a → c) through Git on this host: `hoist plan` lists
// the three jobs before anything runs; b and c start after a is done and
// read a's artifact, placed in their working directories; the artifact can
// be listed and downloaded (`hoist artifacts get`); the run page draws the
// DAG. A commit making a fail fails b and c with the reason, naming a.
func TestWorkflows_cueProviderDAGRunsInOrderWithArtifacts(t *testing.T) {
	r := newRepo(t)
	r.write(".dstack/providers.yaml", fanoutProvider)
	r.write(".dstack/workflows.yaml", "workflows:\n  - name: dag\n    provider: fanout\n    word: hello\n")
	s := startServer(t, r.dir)

	out, err := s.hoistCLI(r.dir, "plan", ".")
	if err != nil {
		t.Fatalf("hoist plan: %v\n%s", err, out)
	}
	for _, want := range []string{"create  workflow  dag", "job a", "job b", "after a", "artifacts out", "job c"} {
		if !strings.Contains(strings.Join(strings.Fields(out), " "), strings.Join(strings.Fields(want), " ")) {
			t.Errorf("hoist plan lacks %q:\n%s", want, out)
		}
	}

	start := time.Now()
	sha := r.commit("a workflow of a CUE provider")
	s.waitRun("dag", sha, "done", 90*time.Second)
	t.Logf("MEASURE three-job DAG commit → done %s", time.Since(start).Round(time.Millisecond))
	jobs := s.workflowRun("dag").jobsByName()
	a, b, c := jobs["a"], jobs["b"], jobs["c"]
	for _, j := range []wfJob{a, b, c} {
		if j.Status != "done" {
			t.Fatalf("jobs: %+v, want all done", jobs)
		}
	}
	if b.StartedAt < a.FinishedAt || c.StartedAt < a.FinishedAt {
		t.Errorf("b or c started before a finished: a %s, b %s, c %s", a.FinishedAt, b.StartedAt, c.StartedAt)
	}
	for name, j := range map[string]wfJob{"b": b, "c": c} {
		if got, want := s.jobLogs("dag", j.ID), name+" saw hello from a\n"; got != want {
			t.Errorf("%s's logs = %q, want %q", name, got, want)
		}
	}

	var arts []struct {
		JobNum int    `json:"job_num"`
		Path   string `json:"path"`
		Size   int64  `json:"size"`
	}
	if code := s.getJSON("/api/v1/runs/dag/artifacts", &arts); code != 200 || len(arts) != 1 || arts[0].Path != "out/data.txt" || arts[0].JobNum != a.JobNum {
		t.Fatalf("artifacts: %d %+v, want a's out/data.txt", code, arts)
	}
	dl := t.TempDir()
	if out, err := s.hoistCLI(r.dir, "artifacts", "get", "dag", "--job", fmt.Sprint(a.JobNum), "-o", dl); err != nil {
		t.Fatalf("hoist artifacts get: %v\n%s", err, out)
	}
	if b, err := os.ReadFile(filepath.Join(dl, "out", "data.txt")); err != nil || string(b) != "hello from a\n" {
		t.Fatalf("downloaded out/data.txt = %q, %v", b, err)
	}
	code, page := s.do("GET", "/runs/dag", nil)
	for _, want := range []string{`data-testid="workflow-dag"`, `data-testid="dag-status-b"`, "done"} {
		if code != 200 || !strings.Contains(string(page), want) {
			t.Errorf("run page (%d) lacks %s", code, want)
		}
	}

	r.write(".dstack/workflows.yaml", "workflows:\n  - name: dag\n    provider: fanout\n    word: hello\n    fail: true\n")
	sha = r.commit("a fails")
	s.waitRun("dag", sha, "failed", 90*time.Second)
	jobs = s.workflowRun("dag").jobsByName()
	if jobs["a"].Status != "failed" {
		t.Fatalf("a: %+v, want failed", jobs["a"])
	}
	for _, n := range []string{"b", "c"} {
		j := jobs[n]
		if j.Status != "failed" || j.TerminationReason != "dependency_failed" || !strings.Contains(j.TerminationMessage+j.StatusMessage, "dependency a failed") {
			t.Errorf("%s: %+v, want failed for its dependency a", n, j)
		}
		if j.StartedAt != "" {
			t.Errorf("%s started although a failed: %+v", n, j)
		}
	}
}

// TestWorkflows_providerOfAnotherRepositoryOverGitDaemon is a workflow
// whose provider lives in a second repository served by `git daemon` on
// loopback: the server fetches it, the plan names the commit it used, the
// workflow runs; a workflow whose parameters break that provider's schema
// is refused at its path:line:col and nothing of it runs.
func TestWorkflows_providerOfAnotherRepositoryOverGitDaemon(t *testing.T) {
	lib := newRepo(t)
	lib.write(".dstack/providers.yaml", fanoutProvider)
	libSHA := lib.commit("the fanout provider")
	root := t.TempDir()
	lib.git("clone", "-q", "--bare", lib.dir, filepath.Join(root, "providers.git"))
	port := fmt.Sprint(freePortOn(t, "127.0.0.1"))
	daemon := exec.Command("git", "daemon", "--reuseaddr", "--export-all", "--listen=127.0.0.1", "--port="+port, "--base-path="+root, root)
	if err := daemon.Start(); err != nil {
		t.Fatalf("git daemon: %v", err)
	}
	t.Cleanup(func() { _ = daemon.Process.Kill(); _ = daemon.Wait() })
	waitFor(t, 10*time.Second, func() string { return "git daemon to listen" }, func() bool {
		c, err := net.Dial("tcp", "127.0.0.1:"+port)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	url := "git://127.0.0.1:" + port + "/providers.git"

	r := newRepo(t)
	r.write(".dstack/workflows.yaml", "workflows:\n  - name: remote\n    provider: {repo: '"+url+"', name: fanout}\n    word: far\n")
	s := startServer(t, r.dir)
	sha := r.commit("a workflow of another repository's provider")
	s.waitRun("remote", sha, "done", 90*time.Second)
	jobs := s.workflowRun("remote").jobsByName()
	if got, want := s.jobLogs("remote", jobs["b"].ID), "b saw far from a\n"; got != want {
		t.Errorf("b's logs = %q, want %q", got, want)
	}
	var revs []struct {
		SHA  string `json:"sha"`
		Plan struct {
			Changes []struct {
				Name   string `json:"name"`
				Detail string `json:"detail"`
			} `json:"changes"`
		} `json:"plan"`
	}
	s.getJSON("/api/v1/revisions", &revs)
	if len(revs) == 0 || revs[0].SHA != sha || len(revs[0].Plan.Changes) == 0 ||
		!strings.Contains(revs[0].Plan.Changes[0].Detail, "provider at commit "+libSHA[:12]) {
		t.Errorf("the plan does not name the provider's commit %.12s: %+v", libSHA, revs)
	}

	r.write(".dstack/workflows.yaml", "workflows:\n  - name: remote\n    provider: {repo: '"+url+"', name: fanout}\n    word: far\n"+
		"  - name: broken\n    provider: {repo: '"+url+"', name: fanout}\n    wrod: typo\n")
	bad := r.commit("parameters the provider's schema refuses")
	st := s.waitSync(60*time.Second, "the revision to be rejected", func(st apiSync) bool { return st.LatestRevision == bad && st.Status == "invalid" })
	for _, want := range []string{
		`.dstack/workflows.yaml:5:5: workflows[1]: field "word" is required by provider fanout's schema`,
		`.dstack/workflows.yaml:7:5: workflows[1].wrod: field "wrod" not allowed by provider fanout's schema (did you mean "word"?)`,
	} {
		if !strings.Contains(strings.Join(st.Errors, "\n"), want) {
			t.Errorf("errors %q lack %q", st.Errors, want)
		}
	}
	if code, _ := s.do("GET", "/api/v1/runs/broken", nil); code != 404 {
		t.Errorf("the refused workflow has a run: %d", code)
	}
}

// curlProvider is the documentation's `curl` provider as a program: its
// schema requires `url` and `output`; its program reads the workflow on
// stdin and prints one job that downloads url to output, keeping output's
// folder as the job's artifact. It reads only its own folder (`inputs`).
const curlProvider = `providers:
  - name: curl
    image: ` + testenv.BusyboxImage + `
    commands:
      - sh providers/curl/main.sh
    inputs: [providers/curl]
    schema: providers/curl/schema.yaml
`

const curlSchema = `type: object
additionalProperties: false
properties:
  url: {type: string}
  output: {type: string}
  artifacts: {type: array, items: {type: string}}
required: [url, output]
`

// curlMain is the provider's program: POSIX sh and busybox, as any
// language reading JSON on stdin and printing JSON would do.
const curlMain = `doc=$(cat)
url=$(echo "$doc" | sed -n 's/.*"url":"\([^"]*\)".*/\1/p')
out=$(echo "$doc" | sed -n 's/.*"output":"\([^"]*\)".*/\1/p')
dir=$(dirname "$out")
echo "curl provider: $url to $out" >&2
echo "[{\"name\": \"download\", \"image\": \"` + testenv.BusyboxImage + `\", \"commands\": [\"mkdir -p $dir\", \"wget -q -O $out $url\"], \"artifacts\": [\"$dir\"], \"resources\": {\"cpu\": \"1..\", \"memory\": \"1GB..\"}}]"
`

// TestWorkflows_tinyshakespeareProgramProviderOnAContainerCloud is the
// documentation's example end to end on the simulated RunPod (whose pods
// run on the host network, so a job reaches a file served on loopback):
// the `curl` program provider runs first, its output is in the workflow's
// logs and becomes the `download` job, which fetches the file; the
// artifact data/input.txt is downloaded with `hoist artifacts get`. A
// commit outside the provider's inputs leaves the workflow as it is (its
// output is kept per input hash); changing a parameter runs it again. A
// workflow breaking the provider's schema is refused at its path:line:col.
func TestWorkflows_tinyshakespeareProgramProviderOnAContainerCloud(t *testing.T) {
	e := newCloudEnv(t, "runpod", "2s")
	r, s := e.r, e.s
	const text = "First Citizen:\nBefore we proceed any further, hear me speak.\n"
	srvDir := t.TempDir()
	writeTestFile(t, filepath.Join(srvDir, "input.txt"), text)
	port := freePortOn(t, "127.0.0.1")
	fileServer := exec.Command("busybox", "httpd", "-f", "-p", fmt.Sprintf("127.0.0.1:%d", port), "-h", srvDir)
	if err := fileServer.Start(); err != nil {
		t.Fatalf("file server: %v", err)
	}
	t.Cleanup(func() { _ = fileServer.Process.Kill(); _ = fileServer.Wait() })
	url := fmt.Sprintf("http://127.0.0.1:%d/input.txt", port)

	r.write("fleet.dstack.yml", "type: fleet\nname: pods\nnodes: 0..2\nbackends: [runpod]\nresources:\n  cpu: 1..\n  memory: 1GB..\n")
	r.write(".dstack/providers.yaml", curlProvider)
	r.write("providers/curl/schema.yaml", curlSchema)
	r.write("providers/curl/main.sh", curlMain)
	wf := func(output string) string {
		return "workflows:\n  - name: tinyshakespeare\n    provider: curl\n    url: " + url + "\n    output: " + output + "\n    artifacts:\n      - data\n"
	}
	// A provider whose program prints something other than jobs.
	r.write(".dstack/providers.yaml", curlProvider+"  - name: liar\n    image: "+testenv.BusyboxImage+"\n    commands: [\"echo name: x\"]\n")
	r.write(".dstack/workflows.yaml", wf("data/input.txt")+"  - name: lies\n    provider: liar\n")
	start := time.Now()
	sha := r.commit("the tinyshakespeare workflow")
	s.waitRunCond("tinyshakespeare", 2*cloudWithin, "done", func(r apiRunFull) bool {
		if r.Status == "failed" {
			t.Fatalf("the workflow failed: %+v\n%s", r, s.logs("tinyshakespeare"))
		}
		return r.Revision == sha && r.Status == "done"
	})
	t.Logf("MEASURE program provider workflow commit → done %s", time.Since(start).Round(time.Millisecond))
	jobs := s.workflowRun("tinyshakespeare").jobsByName()
	prov, dl := jobs["provider"], jobs["download"]
	if prov.Status != "done" || dl.Status != "done" {
		t.Fatalf("jobs %+v, want the provider's and download done", jobs)
	}
	if logs := s.jobLogs("tinyshakespeare", prov.ID); !strings.Contains(logs, "curl provider: "+url+" to data/input.txt") || !strings.Contains(logs, `"name": "download"`) {
		t.Errorf("the provider's logs lack its stderr or its output: %q", logs)
	}
	dir := t.TempDir()
	if out, err := s.hoistCLI(r.dir, "artifacts", "get", "tinyshakespeare", "data/input.txt", "--job", fmt.Sprint(dl.JobNum), "-o", dir); err != nil {
		t.Fatalf("hoist artifacts get: %v\n%s", err, out)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "data", "input.txt")); err != nil || string(b) != text {
		t.Fatalf("data/input.txt = %q, %v; want the served file", b, err)
	}

	lies := s.waitRunCond("lies", 2*cloudWithin, "failed", func(r apiRunFull) bool { return r.Status == "failed" })
	var liesRun apiRun
	s.getJSON("/api/v1/runs/lies", &liesRun)
	if want := "the provider's output: provider output:1:1: expected a list of jobs, got mapping"; liesRun.StatusMessage != want || len(lies.Jobs) != 1 {
		t.Errorf("a provider printing no jobs: %q with %d jobs, want %q and the provider's job only", liesRun.StatusMessage, len(lies.Jobs), want)
	}

	// A commit the provider does not read: same input, same jobs, no run.
	r.write("README.md", "tinyshakespeare\n")
	sha2 := r.commit("a readme")
	s.waitSync(60*time.Second, "the readme commit to be applied", func(st apiSync) bool { return st.Revision == sha2 })
	if run := s.workflowRun("tinyshakespeare"); run.Revision != sha || len(run.Jobs) != 2 {
		_, revs := s.do("GET", "/api/v1/revisions?limit=1", nil)
		t.Errorf("a commit outside the provider's inputs changed the workflow: %+v\n%s", run, revs)
	}
	// `hoist plan` of the work tree sends what the provider reads too (its
	// schema file, its inputs): the plan agrees there is nothing to do.
	if out, err := s.hoistCLI(r.dir, "plan", ".", "--detailed-exitcode"); err != nil {
		t.Errorf("hoist plan of the applied work tree: %v\n%s", err, out)
	}
	// A new parameter is a new input: the provider runs again.
	r.write(".dstack/workflows.yaml", wf("data/tiny.txt"))
	r.write(".dstack/providers.yaml", curlProvider)
	sha3 := r.commit("another output")
	s.waitRun("tinyshakespeare", sha3, "done", 2*cloudWithin)
	if jobs := s.workflowRun("tinyshakespeare").jobsByName(); jobs["provider"].Status != "done" {
		t.Errorf("the provider did not run again for a new parameter: %+v", jobs)
	}

	r.write(".dstack/workflows.yaml", "workflows:\n  - name: tinyshakespeare\n    provider: curl\n    url: 7\n")
	bad := r.commit("parameters breaking the schema")
	st := s.waitSync(60*time.Second, "the revision to be rejected", func(st apiSync) bool { return st.LatestRevision == bad && st.Status == "invalid" })
	joined := strings.Join(st.Errors, "\n")
	for _, want := range []string{
		`.dstack/workflows.yaml:2:5: workflows[0]: field "output" is required by provider curl's schema`,
		`.dstack/workflows.yaml:4:10: workflows[0].url: invalid value 7 (int): want string`,
	} {
		if !strings.Contains(joined, want) {
			t.Errorf("errors lack %q:\n%s", want, joined)
		}
	}
	if run := s.workflowRun("tinyshakespeare"); run.Revision != sha3 {
		t.Errorf("the refused revision changed the workflow: %+v", run)
	}
}

// TestWorkflows_aJobReachesItsMaster is a CUE provider's two jobs on this
// host: `client` names `server` as its master, starts once the server
// runs, and reaches it at $DSTACK_MASTER_NODE_IP (both on host
// networking, as a multi-node run's nodes); the server prints the line.
func TestWorkflows_aJobReachesItsMaster(t *testing.T) {
	port := freePortOn(t, "127.0.0.1")
	r := newRepo(t)
	r.write(".dstack/providers.yaml", fmt.Sprintf(`providers:
  - name: pair
    cue: |
      parameters: {}
      jobs: [{
        name: "server"
        image: "%[1]s"
        commands: ["mkfifo /tmp/nc-in; exec 3<>/tmp/nc-in; nc -l -p %[2]d <&3"]
        resources: {cpu: "1..", memory: "0.1GB.."}
      }, {
        name: "client"
        image: "%[1]s"
        master: "server"
        commands: ["for i in $(seq 100); do echo hello master $DSTACK_MASTER_NODE_IP | nc $DSTACK_MASTER_NODE_IP %[2]d && exit 0; sleep 0.2; done; exit 1"]
        resources: {cpu: "1..", memory: "0.1GB.."}
      }]
`, testenv.BusyboxImage, port))
	r.write(".dstack/workflows.yaml", "workflows:\n  - name: pair\n    provider: pair\n")
	s := startServer(t, r.dir)
	sha := r.commit("a job and its master")
	s.waitRunCond("pair", 90*time.Second, "done", func(run apiRunFull) bool {
		if run.Status == "failed" {
			t.Fatalf("the pair failed: %+v\n%s", run, s.logs("pair"))
		}
		return run.Revision == sha && run.Status == "done"
	})
	jobs := s.workflowRun("pair").jobsByName()
	if got := s.jobLogs("pair", jobs["server"].ID); got != "hello master 127.0.0.1\n" {
		t.Errorf("the server received %q, want the client's line", got)
	}
}

// TestWorkflows_artifactsInAnS3CompatibleStore runs the CUE provider's
// DAG on a server whose artifacts live in a real S3-compatible store
// (MinIO on loopback, e2e/testenv/minio.sh): a's artifact is written
// there under the configured prefix, b reads it, and the API serves it.
func TestWorkflows_artifactsInAnS3CompatibleStore(t *testing.T) {
	s3 := testenv.S3(t)
	prefix := fmt.Sprintf("e2e-%d", time.Now().UnixNano())
	cfg := filepath.Join(t.TempDir(), "hoist.yaml")
	writeTestFile(t, cfg, fmt.Sprintf("backends:\n  - type: local\nartifacts:\n  store: s3\n  s3:\n    endpoint: %s\n    region: us-east-1\n"+
		"    bucket: %s\n    prefix: %s\n    access_key_id: %s\n    secret_access_key: %s\n    path_style: true\n",
		s3.Endpoint, s3.Bucket, prefix, s3.AccessKey, s3.SecretKey))
	r := newRepo(t)
	r.write(".dstack/providers.yaml", fanoutProvider)
	r.write(".dstack/workflows.yaml", "workflows:\n  - name: dag\n    provider: fanout\n    word: bucket\n")
	s := startServer(t, r.dir, "--config", cfg)
	sha := r.commit("a workflow whose artifacts go to S3")
	s.waitRun("dag", sha, "done", 90*time.Second)
	jobs := s.workflowRun("dag").jobsByName()
	if got, want := s.jobLogs("dag", jobs["b"].ID), "b saw bucket from a\n"; got != want {
		t.Errorf("b's logs = %q, want %q", got, want)
	}
	st, err := blob.OpenS3(t.Context(), blob.S3Config{Endpoint: s3.Endpoint, Region: "us-east-1", Bucket: s3.Bucket, Prefix: prefix,
		AccessKeyID: s3.AccessKey, SecretAccessKey: s3.SecretKey, PathStyle: true})
	if err != nil {
		t.Fatal(err)
	}
	objs, err := st.List(t.Context(), "artifacts/")
	if err != nil || len(objs) != 1 || !strings.HasSuffix(objs[0].Key, "/0/out/data.txt") {
		t.Fatalf("objects under %s: %+v, %v; want a's out/data.txt", prefix, objs, err)
	}
	code, body := s.do("GET", "/api/v1/runs/dag/artifacts/0/out/data.txt", nil)
	if code != 200 || string(body) != "bucket from a\n" {
		t.Fatalf("download: %d %q", code, body)
	}
	t.Cleanup(func() { _ = st.DeletePrefix(context.Background(), "") })
}
