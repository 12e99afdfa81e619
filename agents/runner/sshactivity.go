package runner

import (
	"net/http"

	"hoist/agents/api"
	"hoist/agents/internal/agenthttp"
)

// SSHActivity reports the job's SSH connections, counting those that
// completed authentication, for dstack's inactivity_duration. IdleSince is
// the later of when the last connection closed and when the job started
// running; it is zero while a connection is open, and before the job runs
// when no connection ever closed.
func (r *Runner) SSHActivity() api.SSHActivity {
	s := r.ssh
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := len(s.conns); n > 0 {
		return api.SSHActivity{Connections: n}
	}
	idle := s.lastClosed
	if s.started.After(idle) {
		idle = s.started
	}
	return api.SSHActivity{IdleSince: idle}
}

func (r *Runner) handleSSHActivity(w http.ResponseWriter, _ *http.Request) {
	agenthttp.WriteJSON(w, http.StatusOK, r.SSHActivity())
}
