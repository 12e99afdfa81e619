package fake

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"hoist/agents/api"
	"hoist/backends"
	"hoist/backends/offers"
)

// instance is one fake instance: its shim's server and tasks.
type instance struct {
	b          *Backend
	id         string
	providerID string
	offer      offers.Offer
	tags       map[string]string
	spec       backends.InstanceSpec // as created
	internalIP string                // what it reports as its internal IP
	created    time.Time
	token      string
	shimURL    string
	srv        *httptest.Server

	unreachable atomic.Bool
	silent      atomic.Bool
	gone        atomic.Bool

	mu      sync.Mutex
	tasks   map[string]*task
	changed chan struct{} // closed and replaced on every task change
}

// task is one task of the fake shim: a runner instead of a container.
type task struct {
	spec   api.TaskSpec // as created
	info   api.TaskInfo
	runner *runner
	ports  []*httptest.Server
}

func startInstance(b *Backend, spec backends.InstanceSpec, offer offers.Offer, providerID string) (*instance, error) {
	tok, err := randomToken()
	if err != nil {
		return nil, err
	}
	in := &instance{b: b, id: spec.ID, providerID: providerID, offer: offer, tags: backends.CopyTags(spec.Tags),
		created: b.cfg.Now(), token: tok, tasks: map[string]*task{}, changed: make(chan struct{})}
	in.srv = httptest.NewServer(in.handler())
	in.shimURL = in.srv.URL
	return in, nil
}

func randomToken() (string, error) {
	var buf [16]byte
	if _, err := rand.Read(buf[:]); err != nil {
		return "", fmt.Errorf("token: %w", err)
	}
	return hex.EncodeToString(buf[:]), nil
}

func (in *instance) close() {
	in.gone.Store(true)
	in.mu.Lock()
	tasks := in.tasks
	in.tasks = map[string]*task{}
	in.mu.Unlock()
	for _, t := range tasks {
		t.close()
	}
	in.srv.CloseClientConnections()
	in.srv.Close()
}

// dropConnections closes every open connection to the instance's agents
// and its published ports, as a network partition does.
func (in *instance) dropConnections() {
	in.srv.CloseClientConnections()
	in.mu.Lock()
	defer in.mu.Unlock()
	for _, t := range in.tasks {
		t.runner.srv.CloseClientConnections()
		for _, s := range t.ports {
			s.CloseClientConnections()
		}
	}
}

func (in *instance) runner(id string) *runner {
	in.mu.Lock()
	defer in.mu.Unlock()
	if t, ok := in.tasks[id]; ok {
		return t.runner
	}
	return nil
}

// notifyLocked wakes the long-polls of task changes.
func (in *instance) notifyLocked() {
	close(in.changed)
	in.changed = make(chan struct{})
}

func (t *task) close() {
	t.runner.close()
	for _, s := range t.ports {
		s.CloseClientConnections()
		s.Close()
	}
}

// authorized checks the request's bearer token and answers 401 without it.
func authorized(w http.ResponseWriter, req *http.Request, token string) bool {
	if req.Header.Get("Authorization") == "Bearer "+token {
		return true
	}
	writeJSON(w, http.StatusUnauthorized, api.Error{Message: "missing or wrong token"})
	return false
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// decodeStrict decodes a JSON body and refuses unknown fields, as the
// agents do.
func decodeStrict(req *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(nil, req.Body, api.MaxJobSpecBytes))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

func (in *instance) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+api.HealthPath, func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, api.Health{Service: api.ShimService, Version: "fake", APIVersion: api.ShimAPIVersion})
	})
	mux.HandleFunc("GET /api/v1/host", in.handleHost)
	mux.HandleFunc("GET /api/v1/tasks", in.handleList)
	mux.HandleFunc("POST /api/v1/tasks", in.handleCreate)
	mux.HandleFunc("GET /api/v1/tasks/{id}", in.handleGet)
	mux.HandleFunc("POST /api/v1/tasks/{id}/terminate", in.handleTerminate)
	mux.HandleFunc("POST /api/v1/tasks/{id}/remove", in.handleRemove)
	mux.HandleFunc("GET /api/v1/tasks/{id}/logs", in.handleLogs)
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set(api.APIVersionHeader, strconv.Itoa(api.ShimAPIVersion))
		if !authorized(w, req, in.token) {
			return
		}
		mux.ServeHTTP(w, req)
	})
}

func (in *instance) handleHost(w http.ResponseWriter, _ *http.Request) {
	o := in.offer
	h := api.HostInfo{Hostname: in.providerID, OS: "linux", Arch: "amd64", CPUs: o.CPUs,
		MemoryBytes: int64(o.MemoryGB * (1 << 30)), DiskBytes: int64(o.DiskGB * (1 << 30)), DiskFreeBytes: int64(o.DiskGB * (1 << 30)),
		ShimVersion: "fake", DockerVersion: "fake"}
	for i := range o.GPUCount {
		h.GPUs = append(h.GPUs, api.GPU{Vendor: o.GPUVendor, Index: i, Name: o.GPUName, MemoryBytes: int64(o.GPUMemoryGB * (1 << 30))})
		h.GPUVendor = o.GPUVendor
	}
	writeJSON(w, http.StatusOK, h)
}

func (in *instance) handleList(w http.ResponseWriter, _ *http.Request) {
	in.mu.Lock()
	list := api.TaskList{Tasks: []api.TaskInfo{}}
	for _, t := range in.tasks {
		list.Tasks = append(list.Tasks, t.infoLocked())
	}
	in.mu.Unlock()
	writeJSON(w, http.StatusOK, list)
}

// infoLocked is the task's info with the runner's job state.
func (t *task) infoLocked() api.TaskInfo {
	info := t.info
	if st, ok := t.runner.jobState(); ok {
		info.Job = &st
	}
	return info
}

func (in *instance) handleCreate(w http.ResponseWriter, req *http.Request) {
	var spec api.TaskSpec
	if err := decodeStrict(req, &spec); err != nil {
		writeJSON(w, http.StatusBadRequest, api.Error{Message: "decode task: " + err.Error()})
		return
	}
	if spec.ID == "" || strings.ContainsAny(spec.ID, "/ ") {
		writeJSON(w, http.StatusBadRequest, api.Error{Message: fmt.Sprintf("bad task id %q", spec.ID)})
		return
	}
	if spec.Image == "" {
		writeJSON(w, http.StatusBadRequest, api.Error{Message: "image is required"})
		return
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if _, ok := in.tasks[spec.ID]; ok {
		writeJSON(w, http.StatusConflict, api.Error{Message: "task " + spec.ID + " exists"})
		return
	}
	r, err := newRunner(in)
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, api.Error{Message: err.Error()})
		return
	}
	name := spec.Name
	if name == "" {
		name = "hoist-" + spec.ID
	}
	t := &task{spec: spec, runner: r, info: api.TaskInfo{ID: spec.ID, Status: api.TaskRunning, ContainerID: "fake-" + spec.ID,
		ContainerName: name, RunnerAddr: r.addr, RunnerToken: r.token, Updated: in.b.cfg.Now()}}
	if in.b.cfg.Runtime == backends.RuntimeRunner {
		// As a pod: an address of its own.
		n := in.b.tasks.Add(1)
		t.info.InternalIP = fmt.Sprintf("10.1.%d.%d", n/256, n%256)
	}
	for _, p := range spec.Ports {
		s := httptest.NewServer(r.service())
		_, port, _ := net.SplitHostPort(s.Listener.Addr().String())
		n, _ := strconv.Atoi(port)
		t.ports = append(t.ports, s)
		if in.b.cfg.Runtime == backends.RuntimeRunner {
			// As the Kubernetes pod shim: nothing published on a host,
			// the port answers at an address of the Conn's.
			t.info.Ports = append(t.info.Ports, api.PortMapping{Container: p.Container, Addr: s.Listener.Addr().String()})
			continue
		}
		t.info.Ports = append(t.info.Ports, api.PortMapping{Host: n, Container: p.Container})
	}
	r.onEnd = func(st api.JobState) { in.jobEnded(spec.ID, st) }
	if e, ok := in.b.taskError(spec.Image); ok {
		t.info.Status, t.info.RunnerAddr, t.info.RunnerToken = api.TaskTerminated, "", ""
		t.info.TerminationReason, t.info.TerminationMessage = e.reason, e.message
	} else if msg := in.b.volumeMountError(in.id, spec.NetworkVolumes); msg != "" {
		t.info.Status, t.info.RunnerAddr, t.info.RunnerToken = api.TaskTerminated, "", ""
		t.info.TerminationReason, t.info.TerminationMessage = api.ReasonExecutorError, msg
	}
	in.tasks[spec.ID] = t
	in.notifyLocked()
	answer := t.info
	answer.Status = api.TaskPending
	writeJSON(w, http.StatusOK, answer)
}

// jobEnded ends the task of a finished job, as a container ends with its
// entrypoint.
func (in *instance) jobEnded(id string, st api.JobState) {
	in.mu.Lock()
	defer in.mu.Unlock()
	t, ok := in.tasks[id]
	if !ok || t.info.Terminated() {
		return
	}
	t.info.Status, t.info.ExitCode, t.info.Updated = api.TaskTerminated, st.ExitCode, in.b.cfg.Now()
	t.info.TerminationReason, t.info.TerminationMessage = st.TerminationReason, st.TerminationMessage
	if st.State == api.JobDone {
		t.info.TerminationReason = api.ReasonDoneByRunner
	}
	in.notifyLocked()
}

func (in *instance) lookup(w http.ResponseWriter, id string) (*task, bool) {
	t, ok := in.tasks[id]
	if !ok {
		writeJSON(w, http.StatusNotFound, api.Error{Message: "no task " + id})
	}
	return t, ok
}

func (in *instance) handleGet(w http.ResponseWriter, req *http.Request) {
	id := req.PathValue("id")
	q := req.URL.Query()
	waitFor := q.Get("wait_for")
	ms, _ := strconv.Atoi(q.Get("timeout_ms"))
	deadline := time.NewTimer(time.Duration(ms) * time.Millisecond)
	defer deadline.Stop()
	for {
		in.mu.Lock()
		t, ok := in.lookup(w, id)
		if !ok {
			in.mu.Unlock()
			return
		}
		info, changed := t.infoLocked(), in.changed
		in.mu.Unlock()
		if waitFor == "" || info.Terminated() || api.TaskStatusRank(info.Status) >= api.TaskStatusRank(waitFor) {
			writeJSON(w, http.StatusOK, info)
			return
		}
		select {
		case <-changed:
		case <-deadline.C:
			writeJSON(w, http.StatusOK, info)
			return
		case <-req.Context().Done():
			return
		}
	}
}

func (in *instance) handleTerminate(w http.ResponseWriter, req *http.Request) {
	var tr api.TerminateRequest
	if err := decodeStrict(req, &tr); err != nil {
		writeJSON(w, http.StatusBadRequest, api.Error{Message: "decode terminate: " + err.Error()})
		return
	}
	id := req.PathValue("id")
	in.mu.Lock()
	t, ok := in.lookup(w, id)
	in.mu.Unlock()
	if !ok {
		return
	}
	<-t.runner.stop(tr.Reason, tr.Message)
	in.mu.Lock()
	if !t.info.Terminated() {
		t.info.Status, t.info.Updated = api.TaskTerminated, in.b.cfg.Now()
		t.info.TerminationReason, t.info.TerminationMessage = tr.Reason, tr.Message
		in.notifyLocked()
	}
	info := t.infoLocked()
	in.mu.Unlock()
	writeJSON(w, http.StatusOK, info)
}

func (in *instance) handleRemove(w http.ResponseWriter, req *http.Request) {
	id := req.PathValue("id")
	in.mu.Lock()
	t, ok := in.lookup(w, id)
	if !ok {
		in.mu.Unlock()
		return
	}
	if !t.info.Terminated() {
		in.mu.Unlock()
		writeJSON(w, http.StatusConflict, api.Error{Message: "task " + id + " is not terminated"})
		return
	}
	delete(in.tasks, id)
	in.notifyLocked()
	in.mu.Unlock()
	t.close()
	w.WriteHeader(http.StatusNoContent)
}

func (in *instance) handleLogs(w http.ResponseWriter, req *http.Request) {
	in.mu.Lock()
	t, ok := in.lookup(w, req.PathValue("id"))
	in.mu.Unlock()
	if !ok {
		return
	}
	after, _ := strconv.ParseInt(req.URL.Query().Get("after_seq"), 10, 64)
	limit, _ := strconv.Atoi(req.URL.Query().Get("limit"))
	lines, _ := t.runner.read(after, limit)
	var b []byte
	for _, l := range lines {
		b = api.AppendFrame(b, l)
	}
	w.Header().Set("Content-Type", api.LogFramesContentType)
	_, _ = w.Write(b)
}

// errSilent is what a silent runner's held request ends with.
var errSilent = errors.New("fake runner is silent")

// hold blocks a request to a silent runner until its caller gives up.
func hold(ctx context.Context) error {
	<-ctx.Done()
	return errSilent
}
