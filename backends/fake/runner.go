package fake

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"hoist/agents/api"
)

// maxLongPoll bounds one long-poll request, as the real runner does.
const maxLongPoll = 30 * time.Second

// runner is the fake in-container agent of one task: the real runner API,
// with the job's commands run by Script.
type runner struct {
	in    *instance
	token string
	addr  string // its Unix socket, as TaskInfo.RunnerAddr ("unix://path")
	dir   string // holds the socket
	srv   *httptest.Server
	onEnd func(api.JobState) // called once when the job finishes

	mu       sync.Mutex
	spec     *api.JobSpec
	state    api.JobState
	changed  chan struct{} // closed and replaced on every state or log change
	cancel   context.CancelFunc
	done     chan struct{} // closed when the job has finished
	stopped  bool          // a stop was asked: its reason wins
	reason   string
	message  string
	logs     []api.LogLine // records from firstSeq on
	firstSeq int64
	nextSeq  int64
	ended    bool
	// SSH activity (GET api.SSHActivityPath), set by SetSSHConnections:
	// the connections open, and since when none is (the job's start
	// until one was opened).
	sshConns  int
	idleSince time.Time
}

func newRunner(in *instance) (*runner, error) {
	tok, err := randomToken()
	if err != nil {
		return nil, err
	}
	r := &runner{in: in, token: tok, changed: make(chan struct{}), done: make(chan struct{}), firstSeq: 1, nextSeq: 1}
	r.state = api.JobState{State: api.JobPending, Time: in.b.cfg.Now()}
	// Like the real runner, it answers on a Unix socket only.
	dir, err := os.MkdirTemp("", "hoist-fake-runner-")
	if err != nil {
		return nil, fmt.Errorf("fake runner: %w", err)
	}
	sock := filepath.Join(dir, "runner.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("fake runner: %w", err)
	}
	r.srv = httptest.NewUnstartedServer(r.handler())
	r.srv.Listener.Close()
	r.srv.Listener = ln
	r.srv.Start()
	r.addr, r.dir = api.UnixAddr(sock), dir
	return r, nil
}

func (r *runner) close() {
	<-r.stop(api.ReasonTerminatedByServer, "the task was removed")
	r.srv.CloseClientConnections()
	r.srv.Close()
	os.RemoveAll(r.dir)
}

// vanish ends the runner without recording the job's end, as a killed
// container does: its server stops and its job's script is cancelled.
func (r *runner) vanish() {
	r.mu.Lock()
	if !r.ended {
		r.ended = true
		if r.cancel != nil {
			r.cancel()
		}
		close(r.done)
		r.notifyLocked()
	}
	r.mu.Unlock()
	r.srv.CloseClientConnections()
	r.srv.Close()
	os.RemoveAll(r.dir)
}

// jobState returns the job's state once it was submitted.
func (r *runner) jobState() (api.JobState, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.state, r.spec != nil
}

func (r *runner) notifyLocked() {
	close(r.changed)
	r.changed = make(chan struct{})
}

// service answers a published port: Config.Service while the job runs,
// 503 otherwise.
func (r *runner) service() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		running := r.state.State == api.JobRunning
		r.mu.Unlock()
		if !running || r.in.silent.Load() {
			http.Error(w, "the job is not running", http.StatusServiceUnavailable)
			return
		}
		r.in.b.cfg.Service.ServeHTTP(w, req)
	})
}

func (r *runner) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+api.HealthPath, func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, api.Health{Service: api.RunnerService, Version: "fake", APIVersion: api.RunnerAPIVersion})
	})
	mux.HandleFunc("POST /api/v1/submit", r.handleSubmit)
	mux.HandleFunc("POST "+api.CodePath, r.handleCode)
	mux.HandleFunc("POST "+api.CodeBlobsPath, r.handleCode)
	mux.HandleFunc("POST /api/v1/run", r.handleRun)
	mux.HandleFunc("GET /api/v1/state", func(w http.ResponseWriter, _ *http.Request) {
		st, _ := r.jobState()
		writeJSON(w, http.StatusOK, st)
	})
	mux.HandleFunc("GET /api/v1/wait", r.handleWait)
	mux.HandleFunc("POST /api/v1/stop", r.handleStop)
	mux.HandleFunc("GET /api/v1/logs", r.handleLogs)
	mux.HandleFunc("POST /api/v1/logs/ack", r.handleAck)
	mux.HandleFunc("GET "+api.SSHActivityPath, func(w http.ResponseWriter, _ *http.Request) {
		r.mu.Lock()
		a := api.SSHActivity{Connections: r.sshConns}
		if a.Connections == 0 {
			a.IdleSince = r.idleSince
		}
		r.mu.Unlock()
		writeJSON(w, http.StatusOK, a)
	})
	mux.HandleFunc("GET /api/v1/metrics", func(w http.ResponseWriter, _ *http.Request) {
		var m api.Metrics
		if r.in.b.cfg.Metrics != nil {
			m = r.in.b.cfg.Metrics()
		}
		m.Time = r.in.b.cfg.Now()
		writeJSON(w, http.StatusOK, m)
	})
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if r.in.silent.Load() {
			_ = hold(req.Context())
			return
		}
		w.Header().Set(api.APIVersionHeader, strconv.Itoa(api.RunnerAPIVersion))
		if !authorized(w, req, r.token) {
			return
		}
		mux.ServeHTTP(w, req)
	})
}

func (r *runner) handleSubmit(w http.ResponseWriter, req *http.Request) {
	var spec api.JobSpec
	if err := decodeStrict(req, &spec); err != nil {
		writeJSON(w, http.StatusBadRequest, api.Error{Message: "decode job spec: " + err.Error()})
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.state.State != api.JobPending {
		writeJSON(w, http.StatusConflict, api.Error{Message: "the job is " + r.state.State})
		return
	}
	r.spec = &spec
	writeJSON(w, http.StatusOK, r.state)
}

// handleCode takes a code manifest or blobs like the real runner, without
// a cache and without placing anything: a manifest is answered with every
// blob it names as missing, blobs with the code placed.
func (r *runner) handleCode(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	ok := r.spec != nil && r.state.State == api.JobPending
	r.mu.Unlock()
	if !ok {
		_, _ = io.Copy(io.Discard, req.Body)
		writeJSON(w, http.StatusConflict, api.Error{Message: "code needs a submitted job that has not run"})
		return
	}
	if req.URL.Path == api.CodeBlobsPath {
		_, _ = io.Copy(io.Discard, req.Body)
		writeJSON(w, http.StatusOK, api.CodeStatus{Placed: true})
		return
	}
	var m api.CodeManifest
	if err := decodeStrict(req, &m); err != nil {
		writeJSON(w, http.StatusBadRequest, api.Error{Message: "decode code manifest: " + err.Error()})
		return
	}
	var st api.CodeStatus
	seen := map[string]bool{}
	for _, e := range m.Entries {
		if e.Type == api.CodeEntryFile && !seen[e.SHA256] {
			seen[e.SHA256] = true
			st.Missing = append(st.Missing, e.SHA256)
		}
	}
	st.Placed = len(st.Missing) == 0
	writeJSON(w, http.StatusOK, st)
}

func (r *runner) handleRun(w http.ResponseWriter, _ *http.Request) {
	r.mu.Lock()
	if r.spec == nil || r.state.State != api.JobPending {
		r.mu.Unlock()
		writeJSON(w, http.StatusConflict, api.Error{Message: "no submitted job to run"})
		return
	}
	spec := *r.spec
	ctx, cancel := context.WithCancel(context.Background())
	if spec.MaxDuration > 0 {
		ctx, cancel = context.WithTimeout(context.Background(), spec.MaxDuration)
	}
	r.cancel = cancel
	r.state = api.JobState{State: api.JobRunning, Time: r.in.b.cfg.Now()}
	r.idleSince = r.state.Time
	r.notifyLocked()
	st := r.state
	r.mu.Unlock()
	go r.execute(ctx, spec)
	// A relative working dir is the image's (/ in the fake) joined with it.
	writeJSON(w, http.StatusOK, api.RunResponse{WorkingDir: path.Join("/", spec.WorkingDir), State: st})
}

// execute runs the job's script and records its end.
func (r *runner) execute(ctx context.Context, spec api.JobSpec) {
	env := map[string]string{"HOIST_RUN_NAME": spec.RunName, "HOIST_JOB_ID": spec.JobID}
	if c := spec.Cluster; c != nil {
		// The cluster variables the real runner exports (a subset).
		env["DSTACK_NODE_RANK"], env["DSTACK_NODES_NUM"] = strconv.Itoa(c.NodeRank), strconv.Itoa(c.NodesNum)
		env["DSTACK_MASTER_NODE_IP"], env["DSTACK_NODES_IPS"] = c.MasterIP, strings.Join(c.NodesIPs, "\n")
	}
	for k, v := range spec.Env {
		env[k] = v
	}
	for k, v := range spec.Secrets {
		env[k] = v
	}
	code := Script(ctx, spec.Commands, env, r.write)
	r.mu.Lock()
	st := api.JobState{State: api.JobDone, ExitCode: &code, Time: r.in.b.cfg.Now()}
	switch {
	case r.stopped:
		st.State, st.TerminationReason, st.TerminationMessage = api.JobTerminated, r.reason, r.message
		if st.TerminationReason == "" {
			st.TerminationReason = api.ReasonTerminatedByServer
		}
	case code == -1:
		st.State, st.TerminationReason = api.JobTerminated, api.ReasonMaxDurationExceeded
	case code != 0:
		st.State, st.TerminationReason = api.JobFailed, api.ReasonContainerExitedWithError
	default:
		st.TerminationReason = api.ReasonDoneByRunner
	}
	r.finishLocked(st)
	r.mu.Unlock()
}

// finishLocked records the job's final state once.
func (r *runner) finishLocked(st api.JobState) {
	if r.ended {
		return
	}
	r.ended, r.state = true, st
	if r.cancel != nil {
		r.cancel()
	}
	close(r.done)
	r.notifyLocked()
	if r.onEnd != nil {
		go r.onEnd(st)
	}
}

// write appends one log record.
func (r *runner) write(stream string, data []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.logs = append(r.logs, api.LogLine{Seq: r.nextSeq, Time: r.in.b.cfg.Now(), Stream: stream, Data: data})
	r.nextSeq++
	r.notifyLocked()
}

// stop ends the job with reason (a job not yet started ends at once) and
// returns a channel closed once it has finished.
func (r *runner) stop(reason, message string) <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ended {
		return r.done
	}
	if reason == "" {
		reason = api.ReasonTerminatedByServer
	}
	r.stopped, r.reason, r.message = true, reason, message
	if r.cancel != nil {
		r.cancel()
	} else {
		r.finishLocked(api.JobState{State: api.JobTerminated, TerminationReason: reason, TerminationMessage: message, Time: r.in.b.cfg.Now()})
	}
	return r.done
}

func (r *runner) handleWait(w http.ResponseWriter, req *http.Request) {
	ms, _ := strconv.ParseInt(req.URL.Query().Get("timeout_ms"), 10, 64)
	timer := time.NewTimer(min(time.Duration(ms)*time.Millisecond, maxLongPoll))
	defer timer.Stop()
	select {
	case <-r.done:
	case <-timer.C:
	case <-req.Context().Done():
		return
	}
	st, _ := r.jobState()
	writeJSON(w, http.StatusOK, st)
}

func (r *runner) handleStop(w http.ResponseWriter, req *http.Request) {
	var sr api.StopRequest
	if err := decodeStrict(req, &sr); err != nil {
		writeJSON(w, http.StatusBadRequest, api.Error{Message: "decode stop request: " + err.Error()})
		return
	}
	select {
	case <-r.stop(sr.Reason, sr.Message):
	case <-req.Context().Done():
		return
	}
	st, _ := r.jobState()
	writeJSON(w, http.StatusOK, st)
}

// read returns up to limit records after seq, and whether they end the
// job's log (it has finished and nothing follows).
func (r *runner) read(after int64, limit int) ([]api.LogLine, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if limit <= 0 {
		limit = 1000
	}
	var out []api.LogLine
	for _, l := range r.logs {
		if l.Seq > after && len(out) < limit {
			out = append(out, l)
		}
	}
	last := after
	if len(out) > 0 {
		last = out[len(out)-1].Seq
	}
	return out, r.ended && last >= r.nextSeq-1
}

func (r *runner) handleLogs(w http.ResponseWriter, req *http.Request) {
	q := req.URL.Query()
	after, _ := strconv.ParseInt(q.Get("after_seq"), 10, 64)
	if s := q.Get("since"); s != "" && after == 0 {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			writeJSON(w, http.StatusBadRequest, api.Error{Message: "since: " + err.Error()})
			return
		}
		r.mu.Lock()
		for _, l := range r.logs {
			if l.Time.Before(t) {
				after = l.Seq
			}
		}
		r.mu.Unlock()
	}
	limit, _ := strconv.Atoi(q.Get("limit"))
	ms, _ := strconv.ParseInt(q.Get("wait_ms"), 10, 64)
	if wait := min(time.Duration(ms)*time.Millisecond, maxLongPoll); wait > 0 {
		timer := time.NewTimer(wait)
		defer timer.Stop()
	poll:
		for {
			r.mu.Lock()
			ready, changed := r.ended || r.nextSeq-1 > after, r.changed
			r.mu.Unlock()
			if ready {
				break
			}
			select {
			case <-changed:
			case <-timer.C:
				break poll
			case <-req.Context().Done():
				return
			}
		}
	}
	lines, end := r.read(after, limit)
	if end {
		w.Header().Set(api.LogEndHeader, "true")
	}
	r.mu.Lock()
	w.Header().Set(api.LogFirstSeqHeader, strconv.FormatInt(r.firstSeq, 10))
	r.mu.Unlock()
	if q.Get("format") == "frames" {
		var b []byte
		for _, l := range lines {
			b = api.AppendFrame(b, l)
		}
		w.Header().Set("Content-Type", api.LogFramesContentType)
		_, _ = w.Write(b)
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	enc := json.NewEncoder(w)
	for _, l := range lines {
		_ = enc.Encode(l)
	}
}

func (r *runner) handleAck(w http.ResponseWriter, req *http.Request) {
	var ar api.AckRequest
	if err := decodeStrict(req, &ar); err != nil {
		writeJSON(w, http.StatusBadRequest, api.Error{Message: "decode ack: " + err.Error()})
		return
	}
	r.mu.Lock()
	var kept int64
	i := 0
	for i < len(r.logs) && r.logs[i].Seq <= ar.Seq {
		i++
	}
	r.logs = r.logs[i:]
	if len(r.logs) > 0 {
		r.firstSeq = r.logs[0].Seq
	} else {
		r.firstSeq = max(r.firstSeq, min(ar.Seq, r.nextSeq-1)+1)
	}
	for _, l := range r.logs {
		kept += int64(len(l.Data))
	}
	resp := api.AckResponse{FirstSeq: r.firstSeq, KeptBytes: kept}
	r.mu.Unlock()
	writeJSON(w, http.StatusOK, resp)
}
