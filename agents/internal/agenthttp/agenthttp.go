package agenthttp

import (
	"crypto/subtle"
	"encoding/json"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"hoist/agents/api"
)

// WriteJSON answers with status and v encoded as JSON.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// MaxLongPoll bounds a long-poll request's wait.
const MaxLongPoll = 60 * time.Second

// LongPoll returns how long a long-poll request may wait: its query
// parameter key in milliseconds, at most MaxLongPoll (zero when absent or
// malformed).
func LongPoll(req *http.Request, key string) time.Duration {
	ms, _ := strconv.ParseInt(req.URL.Query().Get(key), 10, 64)
	return min(time.Duration(max(ms, 0))*time.Millisecond, MaxLongPoll)
}

// A Gate admits the requests that carry an agent's bearer token.
type Gate struct {
	// Token is what every request must carry as "Authorization: Bearer
	// <Token>"; empty admits every request.
	Token string
	// APIVersion is set in api.APIVersionHeader on every answer, refused
	// ones included, so a client can tell an agent of another version.
	APIVersion int
	// Logger receives one Refused line per refused request (method, path
	// and remote address; never what the request carried).
	Logger *slog.Logger
	// Refused is the log message of a refused request (a constant, e.g.
	// "shim_request_unauthorized").
	Refused string
	// Message is the error message a refused request gets with its 401.
	Message string
}

// Wrap returns next behind the gate: a request without the token gets 401
// and never reaches next.
func (g Gate) Wrap(next http.Handler) http.Handler {
	want := []byte("Bearer " + g.Token)
	version := strconv.Itoa(g.APIVersion)
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set(api.APIVersionHeader, version)
		if g.Token != "" && subtle.ConstantTimeCompare([]byte(req.Header.Get("Authorization")), want) != 1 {
			g.Logger.Warn(g.Refused, "method", req.Method, "path", req.URL.Path, "remote_addr", req.RemoteAddr)
			WriteJSON(w, http.StatusUnauthorized, api.Error{Message: g.Message})
			return
		}
		next.ServeHTTP(w, req)
	})
}
