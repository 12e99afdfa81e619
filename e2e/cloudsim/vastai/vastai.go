package vastai

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"hoist/e2e/cloudsim/sim"
)

// Name is the provider's name in the simulator and hoist's backend type.
const Name = "vastai"

// APIKey is the one API key the simulator accepts.
const APIKey = "cloudsim0123456789abcdef0123456789abcdef0123456789abcdef01234567"

// KindPod is the resource kind of an instance (a simulated pod).
const KindPod = sim.KindPod

// basePath is where the API is served, as https://console.vast.ai/api/v0.
const basePath = "/api/v0"

// Provider is the simulated Vast.ai.
type Provider struct {
	next  atomic.Int64 // the last contract id given
	fails atomic.Int64 // failed calls, alternating 429 and 502
}

// New returns the simulated Vast.ai.
func New() sim.Provider {
	p := &Provider{}
	p.next.Store(20_000_000 + time.Now().UnixMilli()%10_000_000)
	return p
}

// Name is "vastai".
func (p *Provider) Name() string { return Name }

// TLS is false: the driver speaks plain http to a loopback endpoint.
func (p *Provider) TLS() bool { return false }

// Backend returns dstack's vastai entry for the API at endpoint.
func (p *Provider) Backend(s *sim.Sim, endpoint string) map[string]any {
	return map[string]any{
		"type":            Name,
		"creds":           map[string]any{"type": "api_key", "api_key": APIKey},
		"community_cloud": true,
		"endpoint_url":    strings.TrimSuffix(endpoint, "/") + basePath,
	}
}

// An apiError is Vast.ai's error answer and its HTTP status; text, when
// set, is sent as a plain-text body instead (Vast.ai's 429).
type apiError struct {
	status int
	text   string
	Code   string `json:"error,omitempty"`
	Msg    string `json:"msg"`
}

func errorf(status int, code, format string, args ...any) *apiError {
	return &apiError{status: status, Code: code, Msg: fmt.Sprintf(format, args...)}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, e *apiError) {
	if e.text != "" {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(e.status)
		_, _ = w.Write([]byte(e.text))
		return
	}
	writeJSON(w, e.status, map[string]any{"success": false, "error": e.Code, "msg": e.Msg})
}

// authorized accepts the key as a Bearer token or as the api_key query
// parameter (https://docs.vast.ai/api-reference/authentication).
func authorized(r *http.Request) bool {
	return r.Header.Get("Authorization") == "Bearer "+APIKey || r.URL.Query().Get("api_key") == APIKey
}

// Handler serves the API under /api/v0.
func (p *Provider) Handler(s *sim.Sim) http.Handler {
	mux := http.NewServeMux()
	h := func(pattern, op string, fn func(*sim.Sim, *http.Request) (any, *apiError)) {
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			if !authorized(r) {
				writeError(w, errorf(http.StatusUnauthorized, "auth_error", "Invalid user key"))
				return
			}
			if s.Call(Name, op) {
				// Vast.ai's throttling is a plain-text 429
				// (https://docs.vast.ai/api-reference/rate-limits-and-errors);
				// every other failure is a gateway error.
				if p.fails.Add(1)%2 == 1 {
					writeError(w, &apiError{status: http.StatusTooManyRequests, text: "API requests too frequent"})
				} else {
					writeError(w, &apiError{status: http.StatusBadGateway, text: "<html><body><h1>502 Bad Gateway</h1></body></html>"})
				}
				return
			}
			v, e := fn(s, r)
			if e != nil {
				writeError(w, e)
				return
			}
			writeJSON(w, http.StatusOK, v)
		})
	}
	h("POST "+basePath+"/bundles/", "bundles", p.bundles)
	h("PUT "+basePath+"/asks/{id}/", "create", p.create)
	h("GET "+basePath+"/instances/", "instances.list", p.listInstances)
	h("GET "+basePath+"/instances/{id}/", "instances.get", p.getInstance)
	h("DELETE "+basePath+"/instances/{id}/", "destroy", p.destroy)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, errorf(http.StatusNotFound, "not_found", "%s %s: no such endpoint", r.Method, r.URL.Path))
	})
	return mux
}

func (p *Provider) bundles(s *sim.Sim, r *http.Request) (any, *apiError) {
	var q map[string]any
	if err := json.NewDecoder(r.Body).Decode(&q); err != nil {
		return nil, errorf(http.StatusBadRequest, "invalid_args", "invalid query: %v", err)
	}
	asks, err := search(q)
	if err != nil {
		return nil, errorf(http.StatusBadRequest, "invalid_args", "invalid query: %v", err)
	}
	if asks == nil {
		asks = []map[string]any{}
	}
	return map[string]any{"offers": asks}, nil
}
