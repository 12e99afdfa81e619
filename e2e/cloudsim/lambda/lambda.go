package lambda

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"hoist/backends/offers"
	"hoist/e2e/cloudsim/sim"
)

// Name is the provider's name in the simulator and hoist's backend type.
const Name = "lambda"

// APIKey is the one API key the simulator accepts.
const APIKey = "secret_cloudsim_0123456789abcdef"

// ImageRoot is the simulator's image family whose login user is root (the
// machine running the simulator has no ubuntu user); Lambda's default image
// logs in as ubuntu.
const ImageRoot = "cloudsim-root"

// KindSSHKey is the resource kind of an account's SSH key.
const KindSSHKey = "ssh_key"

// basePath is where the API is served, as https://cloud.lambda.ai/api/v1.
const basePath = "/api/v1"

// Extra keys of the simulator's resources.
const (
	extraPublicKey = "public_key"
	extraKeyNames  = "ssh_key_names"
	extraImage     = "image"
)

// Provider is the simulated Lambda Cloud.
type Provider struct {
	next atomic.Uint64
	mu   sync.Mutex // serializes launches and key changes (names are unique)
}

// New returns the simulated Lambda Cloud.
func New() sim.Provider {
	p := &Provider{}
	p.next.Store(uint64(time.Now().UnixNano()) & 0xffffffffffff)
	return p
}

// Name is "lambda".
func (p *Provider) Name() string { return Name }

// TLS is false: the driver speaks plain http to a loopback endpoint.
func (p *Provider) TLS() bool { return false }

// Backend returns dstack's lambda entry for the API at endpoint, logging in
// as root through the cloudsim-root image.
func (p *Provider) Backend(s *sim.Sim, endpoint string) map[string]any {
	return map[string]any{
		"type":         Name,
		"creds":        map[string]any{"type": "api_key", "api_key": APIKey},
		"regions":      []string{"us-east-1", "us-west-1"},
		"endpoint_url": strings.TrimSuffix(endpoint, "/") + basePath,
		"os_images": map[string]any{
			"cpu":    map[string]any{"name": ImageRoot, "user": "root"},
			"nvidia": map[string]any{"name": ImageRoot, "user": "root"},
		},
	}
}

// Interrupt fails: Lambda has no spot instances.
func (p *Provider) Interrupt(s *sim.Sim, id string) error {
	return fmt.Errorf("lambda: no spot instances to interrupt (%s)", id)
}

func (p *Provider) newID() string { return fmt.Sprintf("%032x", p.next.Add(1)) }

// An apiError is Lambda's error body and its HTTP status.
type apiError struct {
	status     int
	Code       string `json:"code"`
	Message    string `json:"message"`
	Suggestion string `json:"suggestion,omitempty"`
}

func errorf(status int, code, format string, args ...any) *apiError {
	return &apiError{status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, e *apiError) {
	writeJSON(w, e.status, map[string]any{"error": e})
}

// Handler serves the API under /api/v1.
func (p *Provider) Handler(s *sim.Sim) http.Handler {
	mux := http.NewServeMux()
	h := func(pattern, op string, fn func(*sim.Sim, *http.Request) (any, *apiError)) {
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "Bearer "+APIKey {
				writeError(w, &apiError{status: http.StatusUnauthorized, Code: "global/invalid-api-key",
					Message: "API key was invalid, expired, or deleted.", Suggestion: "Check your API key or create a new one, then try again."})
				return
			}
			if s.Call(Name, op) {
				writeError(w, errorf(http.StatusTooManyRequests, "global/rate-limited", "Too many requests. Please slow down."))
				return
			}
			v, e := fn(s, r)
			if e != nil {
				writeError(w, e)
				return
			}
			writeJSON(w, http.StatusOK, map[string]any{"data": v})
		})
	}
	h("GET "+basePath+"/instance-types", "instance-types", p.instanceTypes)
	h("GET "+basePath+"/instances", "instances.list", p.listInstances)
	h("GET "+basePath+"/instances/{id}", "instances.get", p.getInstance)
	h("POST "+basePath+"/instance-operations/launch", "launch", p.launch)
	h("POST "+basePath+"/instance-operations/terminate", "terminate", p.terminate)
	h("GET "+basePath+"/ssh-keys", "ssh-keys.list", p.listKeys)
	h("POST "+basePath+"/ssh-keys", "ssh-keys.add", p.addKey)
	h("DELETE "+basePath+"/ssh-keys/{id}", "ssh-keys.delete", p.deleteKey)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, errorf(http.StatusNotFound, "global/object-does-not-exist", "%s %s: no such endpoint", r.Method, r.URL.Path))
	})
	return mux
}

// instanceType is one type of the catalog: its specs, price and regions.
type instanceType struct {
	offer   offers.Offer
	regions []string
}

// catalog returns the instance types of the embedded catalog's lambda rows,
// by name.
var catalog = sync.OnceValue(func() map[string]*instanceType {
	m := map[string]*instanceType{}
	c, err := offers.Embedded()
	if err != nil {
		return m
	}
	for _, o := range c.All() {
		if o.Backend != Name || o.Spot {
			continue
		}
		t := m[o.Instance]
		if t == nil {
			t = &instanceType{offer: o}
			m[o.Instance] = t
		}
		if !slices.Contains(t.regions, o.Region) {
			t.regions = append(t.regions, o.Region)
		}
	}
	for _, t := range m {
		slices.Sort(t.regions)
	}
	return m
})

// typeJSON is an instance_type object.
func typeJSON(t *instanceType) map[string]any {
	o := t.offer
	gpuDesc := ""
	if o.GPUCount > 0 {
		gpuDesc = fmt.Sprintf("%s (%g GB)", o.GPUName, o.GPUMemoryGB)
	}
	return map[string]any{
		"name":                 o.Instance,
		"description":          strings.TrimSpace(fmt.Sprintf("%dx %s", o.GPUCount, gpuDesc)),
		"gpu_description":      gpuDesc,
		"price_cents_per_hour": int(o.Price*100 + 0.5),
		"specs": map[string]any{
			"vcpus":       o.CPUs,
			"memory_gib":  int(o.MemoryGB),
			"storage_gib": int(o.DiskGB),
			"gpus":        o.GPUCount,
		},
	}
}

func regionJSON(name string) map[string]any {
	return map[string]any{"name": name, "description": name}
}

// capacityLeft reports whether the simulator's capacity faults leave room
// for one more instance of typ.
func capacityLeft(s *sim.Sim, typ string) bool {
	n, limited := s.Faults().Capacity[typ]
	return !limited || n > 0
}

func (p *Provider) instanceTypes(s *sim.Sim, r *http.Request) (any, *apiError) {
	out := map[string]any{}
	for name, t := range catalog() {
		regions := []map[string]any{}
		if capacityLeft(s, name) {
			for _, rg := range t.regions {
				regions = append(regions, regionJSON(rg))
			}
		}
		out[name] = map[string]any{"instance_type": typeJSON(t), "regions_with_capacity_available": regions}
	}
	return out, nil
}
