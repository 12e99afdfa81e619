package agenthttp_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"hoist/agents/api"
	"hoist/agents/internal/agenthttp"
)

func TestGate(t *testing.T) {
	tests := []struct {
		name, token, auth string
		want              int
		logged            bool
	}{
		{"the right token is admitted", "secret", "Bearer secret", http.StatusOK, false},
		{"a wrong token is refused and logged", "secret", "Bearer other", http.StatusUnauthorized, true},
		{"no token is refused and logged", "secret", "", http.StatusUnauthorized, true},
		{"an empty gate token admits every request", "", "", http.StatusOK, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs strings.Builder
			reached := false
			h := agenthttp.Gate{Token: tt.token, APIVersion: 7, Logger: slog.New(slog.NewTextHandler(&logs, nil)),
				Refused: "agent_request_unauthorized", Message: "wrong token"}.Wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				reached = true
				agenthttp.WriteJSON(w, http.StatusOK, struct{}{})
			}))
			req := httptest.NewRequest(http.MethodGet, "/api/v1/x", nil)
			if tt.auth != "" {
				req.Header.Set("Authorization", tt.auth)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tt.want || reached != (tt.want == http.StatusOK) {
				t.Errorf("status %d (handler reached: %v), want %d", rec.Code, reached, tt.want)
			}
			if got := rec.Header().Get(api.APIVersionHeader); got != "7" {
				t.Errorf("%s = %q, want 7 on every answer", api.APIVersionHeader, got)
			}
			if got := strings.Contains(logs.String(), "agent_request_unauthorized"); got != tt.logged {
				t.Errorf("logged = %v, want %v:\n%s", got, tt.logged, logs.String())
			}
			if strings.Contains(logs.String(), "other") {
				t.Errorf("the log holds what the request carried:\n%s", logs.String())
			}
			if rec.Header().Get("Content-Type") != "application/json" {
				t.Errorf("Content-Type = %q, want JSON", rec.Header().Get("Content-Type"))
			}
		})
	}
}

func TestLongPoll(t *testing.T) {
	tests := []struct {
		name, query string
		want        time.Duration
	}{
		{"absent is no wait", "", 0},
		{"milliseconds", "?timeout_ms=1500", 1500 * time.Millisecond},
		{"capped at MaxLongPoll", "?timeout_ms=3600000", agenthttp.MaxLongPoll},
		{"malformed is no wait", "?timeout_ms=soon", 0},
		{"negative is no wait", "?timeout_ms=-5", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodGet, "/api/v1/wait"+tt.query, nil)
			if got := agenthttp.LongPoll(req, "timeout_ms"); got != tt.want {
				t.Errorf("LongPoll = %v, want %v", got, tt.want)
			}
		})
	}
}
