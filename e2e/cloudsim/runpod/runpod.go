package runpod

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vektah/gqlparser/v2/gqlerror"
	"github.com/vektah/gqlparser/v2/parser"

	"github.com/vektah/gqlparser/v2/ast"

	"hoist/e2e/cloudsim/sim"
)

// Name is the provider's name in the simulator and hoist's backend type.
const Name = "runpod"

// APIKey is the one API key the simulator accepts.
const APIKey = "rpa_CLOUDSIM0123456789ABCDEF"

// graphqlPath is where the API is served, as https://api.runpod.io/graphql.
const graphqlPath = "/graphql"

// Resource kinds of the simulated RunPod.
const (
	// KindPod is a pod (sim.StartPod runs its container).
	KindPod = sim.KindPod
	// KindRegistryAuth is a saved container registry credential.
	KindRegistryAuth = "registry_auth"
)

// Provider is the simulated RunPod.
type Provider struct {
	next atomic.Uint64
	mu   sync.Mutex // serializes pod and registry-auth changes
}

// New returns the simulated RunPod.
func New() sim.Provider {
	p := &Provider{}
	p.next.Store(uint64(time.Now().UnixNano()) & 0xffffffffff)
	return p
}

// Name is "runpod".
func (p *Provider) Name() string { return Name }

// TLS is false: the driver speaks plain http to a loopback endpoint.
func (p *Provider) TLS() bool { return false }

// Backend returns dstack's runpod entry for the API at endpoint, with the
// community cloud allowed and no region restriction.
func (p *Provider) Backend(s *sim.Sim, endpoint string) map[string]any {
	return map[string]any{
		"type":            Name,
		"creds":           map[string]any{"type": "api_key", "api_key": APIKey},
		"community_cloud": true,
		"endpoint_url":    strings.TrimSuffix(endpoint, "/") + graphqlPath,
	}
}

// newID returns a pod id in RunPod's form (14 lowercase alphanumerics).
func (p *Provider) newID() string {
	const digits = "0123456789abcdefghijklmnopqrstuvwxyz"
	n := p.next.Add(1)
	b := make([]byte, 14)
	for i := len(b) - 1; i >= 0; i-- {
		b[i] = digits[n%36]
		n /= 36
	}
	return string(b)
}

// authorized accepts the key as RunPod does: an "Authorization: Bearer"
// header or the api_key query parameter (dstack's and runpod-python's way).
func authorized(r *http.Request) bool {
	return r.Header.Get("Authorization") == "Bearer "+APIKey || r.URL.Query().Get("api_key") == APIKey
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeErrors(w http.ResponseWriter, status int, errs gqlerror.List) {
	writeJSON(w, status, map[string]any{"errors": errs})
}

// opName names a request for the simulator's stats: its first top-level
// field (gpuTypes, pod, podFindAndDeployOnDemand, ...).
func opName(q string) string {
	doc, err := parser.ParseQuery(&ast.Source{Input: q})
	if err != nil || len(doc.Operations) == 0 {
		return "invalid"
	}
	for _, f := range fields(doc.Operations[0].SelectionSet) {
		return f.Name
	}
	return "empty"
}

// Handler serves POST /graphql. A bad key is HTTP 401; the injected error
// rate answers HTTP 429; a query that does not parse or validate is HTTP
// 400 with errors[] and no data; anything else is HTTP 200 with data and,
// when a field failed (out of stock, pod not found to terminate),
// errors[] carrying the message, path and extensions.code, as RunPod's
// Apollo server answers.
func (p *Provider) Handler(s *sim.Sim) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+graphqlPath, func(w http.ResponseWriter, r *http.Request) {
		if !authorized(r) {
			writeErrors(w, http.StatusUnauthorized, gqlerror.List{apiError("UNAUTHENTICATED", "Unauthorized")})
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, 4<<20))
		if err != nil {
			writeErrors(w, http.StatusBadRequest, gqlerror.List{apiError("BAD_REQUEST", "%v", err)})
			return
		}
		var req request
		if err := json.Unmarshal(body, &req); err != nil {
			writeErrors(w, http.StatusBadRequest, gqlerror.List{apiError("BAD_REQUEST", "invalid JSON body: %v", err)})
			return
		}
		if s.Call(Name, opName(req.Query)) {
			writeErrors(w, http.StatusTooManyRequests, gqlerror.List{apiError("TOO_MANY_REQUESTS", "Too many requests, please slow down.")})
			return
		}
		data, errs := execute(req, p.root(s))
		if data == nil {
			for _, e := range errs {
				if e.Extensions == nil {
					e.Extensions = map[string]any{"code": "GRAPHQL_VALIDATION_FAILED"}
				}
			}
			writeErrors(w, http.StatusBadRequest, errs)
			return
		}
		out := map[string]any{"data": data}
		if len(errs) > 0 {
			out["errors"] = errs
		}
		writeJSON(w, http.StatusOK, out)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeErrors(w, http.StatusNotFound, gqlerror.List{apiError("NOT_FOUND", "%s %s: no such endpoint", r.Method, r.URL.Path)})
	})
	return mux
}

// root returns the top-level fields of queries and mutations.
func (p *Provider) root(s *sim.Sim) map[string]resolver {
	return map[string]resolver{
		"myself":                   func(map[string]any) (any, *gqlerror.Error) { return p.myself(s), nil },
		"pod":                      func(a map[string]any) (any, *gqlerror.Error) { return p.pod(s, a) },
		"gpuTypes":                 func(a map[string]any) (any, *gqlerror.Error) { return gpuTypes(s, a), nil },
		"dataCenters":              func(map[string]any) (any, *gqlerror.Error) { return dataCentersJSON(), nil },
		"countryCodes":             func(map[string]any) (any, *gqlerror.Error) { return countryCodes(), nil },
		"podFindAndDeployOnDemand": func(a map[string]any) (any, *gqlerror.Error) { return p.deploy(s, a, false) },
		"podRentInterruptable":     func(a map[string]any) (any, *gqlerror.Error) { return p.deploy(s, a, true) },
		"podEditJob":               func(a map[string]any) (any, *gqlerror.Error) { return p.editJob(s, a) },
		"podTerminate":             func(a map[string]any) (any, *gqlerror.Error) { return p.terminate(s, a) },
		"saveRegistryAuth":         func(a map[string]any) (any, *gqlerror.Error) { return p.saveRegistryAuth(s, a) },
		"deleteRegistryAuth":       func(a map[string]any) (any, *gqlerror.Error) { return p.deleteRegistryAuth(s, a) },
		"createNetworkVolume":      func(a map[string]any) (any, *gqlerror.Error) { return p.createVolume(s, a) },
		"deleteNetworkVolume":      func(a map[string]any) (any, *gqlerror.Error) { return p.deleteVolume(s, a) },
	}
}

// myself is the account: its pods (not terminated), network volumes and
// registry auths.
func (p *Provider) myself(s *sim.Sim) map[string]any {
	return map[string]any{
		"id":    "user_cloudsim",
		"email": "cloudsim@example.com",
		"pods": resolver(func(map[string]any) (any, *gqlerror.Error) {
			out := []map[string]any{}
			for _, r := range s.List(Name, KindPod) {
				if r.State != sim.StateTerminated {
					out = append(out, podJSON(s, r))
				}
			}
			return out, nil
		}),
		"networkVolumes": resolver(func(map[string]any) (any, *gqlerror.Error) { return networkVolumes(s), nil }),
		"containerRegistryCreds": resolver(func(map[string]any) (any, *gqlerror.Error) {
			out := []map[string]any{}
			for _, r := range registryAuths(s) {
				out = append(out, map[string]any{"id": r.ID, "name": r.Name})
			}
			return out, nil
		}),
	}
}

// input returns the "input" argument of a field as an object.
func input(args map[string]any) map[string]any {
	m, _ := args["input"].(map[string]any)
	if m == nil {
		m = map[string]any{}
	}
	return m
}

func str(m map[string]any, k string) string {
	s, _ := m[k].(string)
	return s
}

func num(m map[string]any, k string) (float64, bool) {
	switch v := m[k].(type) {
	case int:
		return float64(v), true
	case int64:
		return float64(v), true
	case float64:
		return v, true
	case json.Number:
		f, err := v.Float64()
		return f, err == nil
	}
	return 0, false
}

func integer(m map[string]any, k string, def int) int {
	if f, ok := num(m, k); ok {
		return int(f)
	}
	return def
}

func internal(err error) *gqlerror.Error {
	return apiError("INTERNAL_SERVER_ERROR", "%v", err)
}
