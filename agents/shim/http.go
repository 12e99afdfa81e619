package shim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"hoist/agents/api"
	"hoist/agents/internal/agenthttp"
)

// Handler returns the shim's HTTP API (see package api for the paths).
// Every request, the health check included, must carry Config.Token as a
// bearer token; any other gets 401 and is logged (without what it carried).
func (s *Shim) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+api.HealthPath, s.handleHealth)
	mux.HandleFunc("GET /api/v1/host", s.handleHost)
	mux.HandleFunc("GET /api/v1/tasks", s.handleList)
	mux.HandleFunc("POST /api/v1/tasks", s.handleCreate)
	mux.HandleFunc("GET /api/v1/tasks/{id}", s.handleGet)
	mux.HandleFunc("POST /api/v1/tasks/{id}/terminate", s.handleTerminate)
	mux.HandleFunc("POST /api/v1/tasks/{id}/remove", s.handleRemove)
	mux.HandleFunc("GET /api/v1/tasks/{id}/logs", s.handleLogs)
	return agenthttp.Gate{Token: s.cfg.Token, APIVersion: api.ShimAPIVersion, Logger: s.log,
		Refused: "shim_request_unauthorized", Message: "missing or wrong shim token"}.Wrap(mux)
}

func writeError(w http.ResponseWriter, err error) {
	status := http.StatusInternalServerError
	switch {
	case errors.Is(err, errNotFound):
		status = http.StatusNotFound
	case errors.Is(err, errConflict):
		status = http.StatusConflict
	case errors.Is(err, errInvalid):
		status = http.StatusBadRequest
	}
	agenthttp.WriteJSON(w, status, api.Error{Message: err.Error()})
}

func (s *Shim) handleHealth(w http.ResponseWriter, _ *http.Request) {
	agenthttp.WriteJSON(w, http.StatusOK, api.Health{Service: api.ShimService, Version: s.cfg.Version, APIVersion: api.ShimAPIVersion})
}

func (s *Shim) handleHost(w http.ResponseWriter, req *http.Request) {
	agenthttp.WriteJSON(w, http.StatusOK, s.HostInfo(req.Context()))
}

func (s *Shim) handleList(w http.ResponseWriter, _ *http.Request) {
	agenthttp.WriteJSON(w, http.StatusOK, s.ListTasks())
}

func (s *Shim) handleCreate(w http.ResponseWriter, req *http.Request) {
	var spec api.TaskSpec
	dec := json.NewDecoder(http.MaxBytesReader(w, req.Body, 4<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&spec); err != nil {
		writeError(w, fmt.Errorf("decode task spec: %v: %w", err, errInvalid))
		return
	}
	info, err := s.CreateTask(spec)
	if err != nil {
		writeError(w, err)
		return
	}
	agenthttp.WriteJSON(w, http.StatusOK, info)
}

func (s *Shim) handleGet(w http.ResponseWriter, req *http.Request) {
	id := req.PathValue("id")
	q := req.URL.Query()
	var info api.TaskInfo
	var err error
	if status := q.Get("wait_for"); status != "" {
		if api.TaskStatusRank(status) < 0 {
			writeError(w, fmt.Errorf("wait_for %q: %w", status, errInvalid))
			return
		}
		info, err = s.WaitTask(req.Context(), id, status, agenthttp.LongPoll(req, "timeout_ms"))
		if errors.Is(err, context.Canceled) {
			return
		}
	} else {
		info, err = s.GetTask(id)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	agenthttp.WriteJSON(w, http.StatusOK, info)
}

func (s *Shim) handleTerminate(w http.ResponseWriter, req *http.Request) {
	var tr api.TerminateRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, req.Body, 1<<20)).Decode(&tr); err != nil {
		writeError(w, fmt.Errorf("decode terminate request: %v: %w", err, errInvalid))
		return
	}
	info, err := s.TerminateTask(req.Context(), req.PathValue("id"), tr.Reason, tr.Message, time.Duration(tr.GraceMillis)*time.Millisecond)
	if err != nil {
		writeError(w, err)
		return
	}
	agenthttp.WriteJSON(w, http.StatusOK, info)
}

func (s *Shim) handleRemove(w http.ResponseWriter, req *http.Request) {
	if err := s.RemoveTask(req.Context(), req.PathValue("id")); err != nil {
		writeError(w, err)
		return
	}
	agenthttp.WriteJSON(w, http.StatusOK, struct{}{})
}
