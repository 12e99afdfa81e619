package runner

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"hoist/agents/api"
	"hoist/agents/internal/agenthttp"
)

// Handler returns the runner's HTTP API (see package api for the paths).
// With Config.Token set, every request, the health check included, must
// carry it as a bearer token; any other gets 401 and is logged.
func (r *Runner) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+api.HealthPath, r.handleHealth)
	mux.HandleFunc("POST /api/v1/submit", r.handleSubmit)
	mux.HandleFunc("POST "+api.CodePath, r.handleCode)
	mux.HandleFunc("POST "+api.CodeBlobsPath, r.handleCodeBlobs)
	mux.HandleFunc("POST /api/v1/run", r.handleRun)
	mux.HandleFunc("GET /api/v1/state", r.handleState)
	mux.HandleFunc("GET /api/v1/wait", r.handleWait)
	mux.HandleFunc("POST /api/v1/stop", r.handleStop)
	mux.HandleFunc("GET /api/v1/logs", r.handleLogs)
	mux.HandleFunc("POST /api/v1/logs/ack", r.handleAck)
	mux.HandleFunc("GET /api/v1/logs/stream", r.handleLogStream)
	mux.HandleFunc("GET /api/v1/metrics", r.handleMetrics)
	mux.HandleFunc("GET "+api.SSHPath, r.handleSSH)
	mux.HandleFunc("GET "+api.SSHActivityPath, r.handleSSHActivity)
	mux.HandleFunc("GET "+api.ArtifactsPath, r.handleArtifacts)
	// Only admitted requests touch the runner: a stranger's calls must not
	// keep it alive.
	touched := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.touch()
		mux.ServeHTTP(w, req)
		r.touch()
	})
	return agenthttp.Gate{Token: r.cfg.Token, APIVersion: api.RunnerAPIVersion, Logger: r.log,
		Refused: "runner_request_unauthorized", Message: "missing or wrong runner token"}.Wrap(touched)
}

func writeError(w http.ResponseWriter, err error) {
	status := http.StatusBadRequest
	if errors.Is(err, errConflict) {
		status = http.StatusConflict
	}
	agenthttp.WriteJSON(w, status, api.Error{Message: err.Error()})
}

func (r *Runner) handleHealth(w http.ResponseWriter, _ *http.Request) {
	agenthttp.WriteJSON(w, http.StatusOK, api.Health{Service: api.RunnerService, Version: r.cfg.Version, APIVersion: api.RunnerAPIVersion})
}

func (r *Runner) handleSubmit(w http.ResponseWriter, req *http.Request) {
	var spec api.JobSpec
	dec := json.NewDecoder(http.MaxBytesReader(w, req.Body, api.MaxJobSpecBytes))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&spec); err != nil {
		writeError(w, fmt.Errorf("decode job spec: %w", err))
		return
	}
	if err := r.Submit(spec); err != nil {
		writeError(w, err)
		return
	}
	agenthttp.WriteJSON(w, http.StatusOK, r.State())
}

func (r *Runner) handleCode(w http.ResponseWriter, req *http.Request) {
	var m api.CodeManifest
	dec := json.NewDecoder(http.MaxBytesReader(w, req.Body, api.MaxCodeManifestBytes))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		writeError(w, fmt.Errorf("decode code manifest: %w", err))
		return
	}
	st, err := r.ReceiveCodeManifest(m)
	if err != nil {
		writeError(w, err)
		return
	}
	agenthttp.WriteJSON(w, http.StatusOK, st)
}

func (r *Runner) handleCodeBlobs(w http.ResponseWriter, req *http.Request) {
	st, err := r.ReceiveCodeBlobs(http.MaxBytesReader(w, req.Body, api.MaxCodeArchiveBytes))
	if err != nil {
		writeError(w, err)
		return
	}
	agenthttp.WriteJSON(w, http.StatusOK, st)
}

func (r *Runner) handleRun(w http.ResponseWriter, _ *http.Request) {
	resp, err := r.Run()
	if err != nil {
		writeError(w, err)
		return
	}
	agenthttp.WriteJSON(w, http.StatusOK, resp)
}

func (r *Runner) handleState(w http.ResponseWriter, _ *http.Request) {
	agenthttp.WriteJSON(w, http.StatusOK, r.State())
}

func (r *Runner) handleWait(w http.ResponseWriter, req *http.Request) {
	timer := time.NewTimer(agenthttp.LongPoll(req, "timeout_ms"))
	defer timer.Stop()
	for {
		st, changed := r.waitChange()
		if st.Finished() {
			agenthttp.WriteJSON(w, http.StatusOK, st)
			return
		}
		select {
		case <-changed:
		case <-timer.C:
			agenthttp.WriteJSON(w, http.StatusOK, st)
			return
		case <-req.Context().Done():
			return
		}
	}
}

func (r *Runner) handleStop(w http.ResponseWriter, req *http.Request) {
	var sr api.StopRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, req.Body, 1<<20)).Decode(&sr); err != nil {
		writeError(w, fmt.Errorf("decode stop request: %w", err))
		return
	}
	done := r.Stop(time.Duration(sr.GraceMillis)*time.Millisecond, sr.Reason, sr.Message)
	select {
	case <-done:
	case <-req.Context().Done():
		return
	}
	agenthttp.WriteJSON(w, http.StatusOK, r.State())
}

func (r *Runner) handleMetrics(w http.ResponseWriter, _ *http.Request) {
	agenthttp.WriteJSON(w, http.StatusOK, r.Metrics())
}

// handleLogs serves records after after_seq (or read at or after since),
// as frames or JSON lines, waiting up to wait_ms for the first one.
func (r *Runner) handleLogs(w http.ResponseWriter, req *http.Request) {
	q := req.URL.Query()
	after, _ := strconv.ParseInt(q.Get("after_seq"), 10, 64)
	if s := q.Get("since"); s != "" && after == 0 {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			writeError(w, fmt.Errorf("since: %w", err))
			return
		}
		if after, err = r.logs.seqAt(t); err != nil {
			agenthttp.WriteJSON(w, http.StatusInternalServerError, api.Error{Message: err.Error()})
			return
		}
	}
	limit, _ := strconv.Atoi(q.Get("limit"))
	if limit <= 0 {
		limit = 1000
	}
	maxBytes, _ := strconv.Atoi(q.Get("max_bytes"))
	maxBytes = min(max(maxBytes, 128<<10), 64<<20)
	if q.Get("max_bytes") == "" {
		maxBytes = 4 << 20
	}
	if wait := agenthttp.LongPoll(req, "wait_ms"); wait > 0 {
		timer := time.NewTimer(wait)
		defer timer.Stop()
	poll:
		for {
			last, closed, changed := r.logs.status()
			if last > after || closed {
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
	frames, end, err := r.logs.read(after, limit, maxBytes)
	if err != nil {
		agenthttp.WriteJSON(w, http.StatusInternalServerError, api.Error{Message: err.Error()})
		return
	}
	if end {
		// The log closes a moment before the final state is recorded; a
		// reader told "end" must find the job finished.
		select {
		case <-r.done:
		case <-req.Context().Done():
			return
		}
		w.Header().Set(api.LogEndHeader, "true")
	}
	w.Header().Set(api.LogFirstSeqHeader, strconv.FormatInt(r.logs.firstSeq(), 10))
	if q.Get("format") == "frames" {
		w.Header().Set("Content-Type", api.LogFramesContentType)
		w.Header().Set("Content-Length", strconv.Itoa(len(frames)))
		_, _ = w.Write(frames)
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	br := bufio.NewReader(bytesReader(frames))
	enc := json.NewEncoder(w)
	for {
		l, err := api.ReadFrame(br)
		if err != nil {
			return
		}
		_ = enc.Encode(l)
	}
}

func (r *Runner) handleAck(w http.ResponseWriter, req *http.Request) {
	var ar api.AckRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, req.Body, 1<<20)).Decode(&ar); err != nil {
		writeError(w, fmt.Errorf("decode ack: %w", err))
		return
	}
	kept := r.logs.ack(ar.Seq)
	agenthttp.WriteJSON(w, http.StatusOK, api.AckResponse{FirstSeq: r.logs.firstSeq(), KeptBytes: kept})
}

// handleLogStream streams the records after after_seq as JSON lines, live,
// until the job has finished and its last record was sent (for people and
// curl; the Go client long-polls /api/v1/logs instead).
func (r *Runner) handleLogStream(w http.ResponseWriter, req *http.Request) {
	after, _ := strconv.ParseInt(req.URL.Query().Get("after_seq"), 10, 64)
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Cache-Control", "no-store")
	rc := http.NewResponseController(w)
	enc := json.NewEncoder(w)
	for {
		_, closed, changed := r.logs.status()
		frames, end, err := r.logs.read(after, 10000, 1<<20)
		if err != nil {
			return
		}
		br := bufio.NewReader(bytesReader(frames))
		for {
			l, err := api.ReadFrame(br)
			if err != nil {
				break
			}
			if err := enc.Encode(l); err != nil {
				return
			}
			after = l.Seq
		}
		if err := rc.Flush(); err != nil {
			return
		}
		if end || (closed && len(frames) == 0) {
			return
		}
		if len(frames) > 0 {
			continue
		}
		select {
		case <-changed:
		case <-req.Context().Done():
			return
		}
	}
}
