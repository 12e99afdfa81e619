package arm

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"hoist/e2e/cloudsim/sim"
)

// The identities the simulator accepts: one tenant, one subscription, one
// service principal (client id and secret).
const (
	TenantID       = "7f3c2a10-5e1d-4c8b-9a60-0000000a2e01"
	SubscriptionID = "0b5e7d21-3f4a-4e6c-8d90-0000000a2e02"
	ClientID       = "4c9d1e33-6a7b-4f2d-b1c0-0000000a2e03"
	ClientSecret   = "hoist-cloudsim-azure-secret"
)

// ResourceGroup is the resource group the Backend entry names.
const ResourceGroup = "hoist-sim"

// Image is the image reference (publisher:offer:sku:version) the Backend
// entry names for both os_images; the simulator boots any image the same way.
const Image = "hoist-sim:ubuntu:22_04:latest"

// Regions are the Azure locations the Backend entry configures.
var Regions = []string{"eastus", "westus2"}

// provider is the simulated Azure. mu serializes every change, so that two
// concurrent PUTs of one VM name create one VM.
type provider struct {
	mu sync.Mutex
}

// New returns the simulated Azure.
func New() sim.Provider { return &provider{} }

// Name returns "azure".
func (p *provider) Name() string { return name }

const name = "azure"

// TLS returns true: azidentity refuses an authority that is not https and
// azcore sends bearer tokens only over https.
func (p *provider) TLS() bool { return true }

// Handler serves the identity platform and Resource Manager on one listener.
func (p *provider) Handler(s *sim.Sim) http.Handler { return &server{p: p, s: s} }

// Backend returns a hoist server-config entry for the simulator at endpoint:
// the Resource Manager endpoint is also the authority host.
func (p *provider) Backend(s *sim.Sim, endpoint string) map[string]any {
	image := map[string]any{"name": Image, "user": "root"}
	return map[string]any{
		"type":            "azure",
		"tenant_id":       TenantID,
		"subscription_id": SubscriptionID,
		"creds": map[string]any{
			"type":          "client",
			"client_id":     ClientID,
			"client_secret": ClientSecret,
		},
		"resource_group": ResourceGroup,
		"regions":        append([]string(nil), Regions...),
		"endpoint_url":   endpoint,
		"os_images":      map[string]any{"cpu": image, "nvidia": image},
	}
}

// Interrupt evicts spot VM id the way Azure does with evictionPolicy Delete:
// the VM, its network interface and public IP are deleted
// (https://learn.microsoft.com/azure/virtual-machines/spot-vms#eviction-policy).
func (p *provider) Interrupt(s *sim.Sim, id string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	r, ok := s.Get(name, id)
	if !ok || r.Kind != sim.KindInstance {
		return fmt.Errorf("arm: no virtual machine %s", id)
	}
	if !r.Spot {
		return fmt.Errorf("arm: virtual machine %s is not a spot VM", id)
	}
	if !live(r) {
		return fmt.Errorf("arm: virtual machine %s is already gone", id)
	}
	return p.deleteVM(s, r, true)
}

// An armError is Resource Manager's error response,
// {"error":{"code","message"}}, with its HTTP status.
type armError struct {
	status  int
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *armError) Error() string { return e.Code + ": " + e.Message }

func errorf(status int, code, format string, args ...any) *armError {
	return &armError{status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

func writeError(w http.ResponseWriter, e *armError) {
	w.Header().Set("x-ms-error-code", e.Code)
	writeJSON(w, e.status, map[string]any{"error": e})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// server is the handler of one Sim.
type server struct {
	p *provider
	s *sim.Sim
}

func (h *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	segs := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	switch {
	case len(segs) >= 1 && strings.EqualFold(segs[0], "subscriptions"):
		h.arm(w, r, segs)
	case len(segs) == 3 && segs[0] == "common" && segs[1] == "discovery" && segs[2] == "instance":
		h.instanceDiscovery(w, r)
	case len(segs) == 4 && segs[1] == "v2.0" && segs[2] == ".well-known" && segs[3] == "openid-configuration":
		h.openIDConfiguration(w, r, segs[0])
	case len(segs) == 4 && segs[1] == "oauth2" && segs[2] == "v2.0" && segs[3] == "token":
		h.token(w, r, segs[0])
	default:
		writeError(w, errorf(http.StatusNotFound, "NotFound", "no route for %s %s", r.Method, r.URL.Path))
	}
}

// baseURL is the absolute URL of the simulator as the client reached it:
// poll URLs must be absolute.
func baseURL(r *http.Request) string { return "https://" + r.Host }
