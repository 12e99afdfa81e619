package shimserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"hoist/agents/api"
	"hoist/backends/offers"
)

// Errors a Tasks wraps, answered as the docker shim answers them: 404, 409
// and 400.
var (
	ErrNotFound = errors.New("not found")
	ErrConflict = errors.New("conflict")
	ErrInvalid  = errors.New("invalid")
)

// Tasks is what an in-server shim implements: the shim API's calls on its
// tasks. Every method must be safe for concurrent use.
type Tasks interface {
	// HostInfo describes the instance.
	HostInfo() api.HostInfo
	// ListTasks lists the instance's tasks.
	ListTasks(ctx context.Context) (api.TaskList, error)
	// CreateTask starts a task; an existing id is ErrConflict, a spec
	// the provider cannot honour is ErrInvalid.
	CreateTask(ctx context.Context, spec api.TaskSpec) (api.TaskInfo, error)
	// GetTask observes a task; an unknown id is ErrNotFound.
	GetTask(ctx context.Context, id string) (api.TaskInfo, error)
	// WaitTask returns once the task has reached status (by
	// api.TaskStatusRank) or timeout has passed, with the task as it is.
	WaitTask(ctx context.Context, id, status string, timeout time.Duration) (api.TaskInfo, error)
	// TerminateTask stops the task with reason and message, giving its
	// job grace to exit.
	TerminateTask(ctx context.Context, id, reason, message string, grace time.Duration) (api.TaskInfo, error)
	// RemoveTask forgets a terminated task and removes what is left of
	// it; a task not terminated is ErrConflict.
	RemoveTask(ctx context.Context, id string) error
}

// maxLongPoll bounds a long-poll request's wait, as the docker shim does.
const maxLongPoll = 60 * time.Second

// Handler returns the shim API of tasks, reporting version as the shim's.
// It needs no token: it is only reachable inside the server, through a
// Conn's HTTP client (InProcess).
func Handler(tasks Tasks, version string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+api.HealthPath, func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, api.Health{Service: api.ShimService, Version: version, APIVersion: api.ShimAPIVersion})
	})
	mux.HandleFunc("GET /api/v1/host", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, http.StatusOK, tasks.HostInfo()) })
	mux.HandleFunc("GET /api/v1/tasks", func(w http.ResponseWriter, req *http.Request) {
		l, err := tasks.ListTasks(req.Context())
		answer(w, l, err)
	})
	mux.HandleFunc("POST /api/v1/tasks", func(w http.ResponseWriter, req *http.Request) {
		var spec api.TaskSpec
		dec := json.NewDecoder(http.MaxBytesReader(w, req.Body, 4<<20))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&spec); err != nil {
			writeError(w, fmt.Errorf("decode task spec: %v: %w", err, ErrInvalid))
			return
		}
		info, err := tasks.CreateTask(req.Context(), spec)
		answer(w, info, err)
	})
	mux.HandleFunc("GET /api/v1/tasks/{id}", func(w http.ResponseWriter, req *http.Request) {
		id, q := req.PathValue("id"), req.URL.Query()
		if status := q.Get("wait_for"); status != "" {
			if api.TaskStatusRank(status) < 0 {
				writeError(w, fmt.Errorf("wait_for %q: %w", status, ErrInvalid))
				return
			}
			info, err := tasks.WaitTask(req.Context(), id, status, longPoll(q.Get("timeout_ms")))
			if errors.Is(err, context.Canceled) {
				return
			}
			answer(w, info, err)
			return
		}
		info, err := tasks.GetTask(req.Context(), id)
		answer(w, info, err)
	})
	mux.HandleFunc("POST /api/v1/tasks/{id}/terminate", func(w http.ResponseWriter, req *http.Request) {
		var tr api.TerminateRequest
		if err := json.NewDecoder(http.MaxBytesReader(w, req.Body, 1<<20)).Decode(&tr); err != nil {
			writeError(w, fmt.Errorf("decode terminate request: %v: %w", err, ErrInvalid))
			return
		}
		info, err := tasks.TerminateTask(req.Context(), req.PathValue("id"), tr.Reason, tr.Message, time.Duration(tr.GraceMillis)*time.Millisecond)
		answer(w, info, err)
	})
	mux.HandleFunc("POST /api/v1/tasks/{id}/remove", func(w http.ResponseWriter, req *http.Request) {
		answer(w, struct{}{}, tasks.RemoveTask(req.Context(), req.PathValue("id")))
	})
	mux.HandleFunc("GET /api/v1/tasks/{id}/logs", func(w http.ResponseWriter, req *http.Request) {
		// The job log lives in the task's container until it is removed,
		// but nothing can read it once the runner has exited: the server
		// reads the runner's log while the job runs and drains it before
		// it removes the task.
		if _, err := tasks.GetTask(req.Context(), req.PathValue("id")); err != nil {
			writeError(w, err)
			return
		}
		w.Header().Set("Content-Type", api.LogFramesContentType)
		w.WriteHeader(http.StatusOK)
	})
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set(api.APIVersionHeader, fmt.Sprint(api.ShimAPIVersion))
		mux.ServeHTTP(w, req)
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, err error) {
	status := http.StatusInternalServerError
	switch {
	case errors.Is(err, ErrNotFound):
		status = http.StatusNotFound
	case errors.Is(err, ErrConflict):
		status = http.StatusConflict
	case errors.Is(err, ErrInvalid):
		status = http.StatusBadRequest
	}
	writeJSON(w, status, api.Error{Message: err.Error()})
}

func answer(w http.ResponseWriter, v any, err error) {
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// longPoll reads a timeout_ms parameter: zero when absent or malformed, at
// most maxLongPoll.
func longPoll(ms string) time.Duration {
	var n int64
	if _, err := fmt.Sscan(ms, &n); err != nil || n < 0 {
		return 0
	}
	return min(time.Duration(n)*time.Millisecond, maxLongPoll)
}

// OfferHost describes an instance that is a reservation of offer o (a
// slice of a Kubernetes node, a container cloud's machine) as the shim API
// reports a host: the offer's CPUs, memory, disk and GPUs.
func OfferHost(id string, o offers.Offer, version string) api.HostInfo {
	h := api.HostInfo{Hostname: id, OS: "linux", Arch: offers.GoArch(o.CPUArch), CPUs: o.CPUs,
		MemoryBytes: int64(o.MemoryGB * (1 << 30)), DiskBytes: int64(o.DiskGB * (1 << 30)), ShimVersion: version}
	if o.GPUCount > 0 {
		h.GPUVendor = strings.ToLower(o.GPUVendor)
		if h.GPUVendor == "" {
			h.GPUVendor = "nvidia"
		}
		for i := range o.GPUCount {
			h.GPUs = append(h.GPUs, api.GPU{Vendor: h.GPUVendor, Index: i, Name: o.GPUName, MemoryBytes: int64(o.GPUMemoryGB * (1 << 30))})
		}
	}
	return h
}
