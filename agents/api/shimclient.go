package api

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// ShimClient talks to one shim.
type ShimClient struct{ c agentClient }

// NewShimClient returns a client of the shim at baseURL ("http://host:port"
// or "host:port"). hc may dial through a tunnel; nil means http.DefaultClient.
func NewShimClient(baseURL string, hc *http.Client) *ShimClient {
	return &ShimClient{c: newAgentClient(baseURL, hc, ShimService, ShimAPIVersion)}
}

// WithToken returns a client that authenticates with token, the shim's
// bearer token, on every request, the health check included. A client whose
// http.Client adds the token itself (a backend's Conn) needs none.
func (s *ShimClient) WithToken(token string) *ShimClient {
	c := *s
	c.c.token = token
	return &c
}

// Health asks the shim's health check. It fails with ErrIncompatibleAgent when
// the agent is not a shim of ShimAPIVersion.
func (s *ShimClient) Health(ctx context.Context) (Health, error) { return s.c.health(ctx) }

// HostInfo describes the shim's host.
func (s *ShimClient) HostInfo(ctx context.Context) (HostInfo, error) {
	var h HostInfo
	err := s.c.do(ctx, http.MethodGet, "/api/v1/host", nil, &h)
	return h, err
}

// CreateTask asks the shim to run spec. It returns at once, in status
// pending; the shim prepares, pulls, creates and starts in the background.
// An existing id fails with ErrConflict.
func (s *ShimClient) CreateTask(ctx context.Context, spec TaskSpec) (TaskInfo, error) {
	var t TaskInfo
	err := s.c.do(ctx, http.MethodPost, "/api/v1/tasks", spec, &t)
	return t, err
}

// GetTask returns the task's current state; an unknown id fails with ErrNotFound.
func (s *ShimClient) GetTask(ctx context.Context, id string) (TaskInfo, error) {
	var t TaskInfo
	err := s.c.do(ctx, http.MethodGet, "/api/v1/tasks/"+url.PathEscape(id), nil, &t)
	return t, err
}

// WaitTask long-polls until the task has reached status (or a later one; a
// terminated task always ends the wait) and returns it. It returns ctx's
// error when ctx ends first.
func (s *ShimClient) WaitTask(ctx context.Context, id, status string) (TaskInfo, error) {
	for {
		q := url.Values{"wait_for": {status}, "timeout_ms": {millis(s.c.longPoll())}}
		var t TaskInfo
		if err := s.c.do(ctx, http.MethodGet, "/api/v1/tasks/"+url.PathEscape(id)+"?"+q.Encode(), nil, &t); err != nil {
			return t, err
		}
		if t.Terminated() || TaskStatusRank(t.Status) >= TaskStatusRank(status) {
			return t, nil
		}
		if err := ctx.Err(); err != nil {
			return t, err
		}
	}
}

// ListTasks returns every task the shim knows, terminated ones included.
func (s *ShimClient) ListTasks(ctx context.Context) ([]TaskInfo, error) {
	l, err := s.TaskList(ctx)
	return l.Tasks, err
}

// TaskList returns the tasks and the hoist-labelled containers that belong
// to no task (found after a restart; never killed).
func (s *ShimClient) TaskList(ctx context.Context) (TaskList, error) {
	var l TaskList
	err := s.c.do(ctx, http.MethodGet, "/api/v1/tasks", nil, &l)
	return l, err
}

// TerminateTask stops the task's container: SIGTERM, then SIGKILL after
// grace (0: at once). It returns once the container has stopped. Terminating
// a terminated task changes nothing.
func (s *ShimClient) TerminateTask(ctx context.Context, id, reason, message string, grace time.Duration) (TaskInfo, error) {
	var t TaskInfo
	req := TerminateRequest{Reason: reason, Message: message, GraceMillis: grace.Milliseconds()}
	err := s.c.do(ctx, http.MethodPost, "/api/v1/tasks/"+url.PathEscape(id)+"/terminate", req, &t)
	return t, err
}

// RemoveTask removes a terminated task's container and files; it fails with
// ErrConflict while the task is not terminated, and with ErrNotFound for an
// unknown id.
func (s *ShimClient) RemoveTask(ctx context.Context, id string) error {
	return s.c.do(ctx, http.MethodPost, "/api/v1/tasks/"+url.PathEscape(id)+"/remove", nil, nil)
}

// TaskLogs reads the job log the task's runner left on the shim's host: up
// to limit records with Seq > afterSeq (frames only, no waiting). It works
// after the runner has exited, until RemoveTask; while the task runs, read
// the runner's logs instead.
func (s *ShimClient) TaskLogs(ctx context.Context, id string, afterSeq int64, limit int) ([]LogLine, error) {
	q := url.Values{"after_seq": {strconv.FormatInt(afterSeq, 10)}, "limit": {strconv.Itoa(limit)}}
	resp, err := s.c.send(ctx, http.MethodGet, "/api/v1/tasks/"+url.PathEscape(id)+"/logs?"+q.Encode(), nil, "")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return readFrames(resp)
}
