package verda

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"hoist/e2e/cloudsim/sim"
)

// Name is the provider's name in the simulator and hoist's backend type.
const Name = "verda"

// The client credentials the simulator accepts (dstack's creds type
// api_key).
const (
	ClientID     = "hoist-sim"
	ClientSecret = "hoist-sim-secret"
)

// Locations are the simulator's location codes, Verda's Finnish and
// Icelandic data centres.
var Locations = []string{"FIN-01", "FIN-02", "FIN-03", "ICE-01"}

// InstanceTypes are the instance types the simulator knows, a few of
// Verda's (https://verda.com/pricing): every one is available in every
// location, spot and on demand, unless the capacity fault says otherwise.
var InstanceTypes = []string{
	"CPU.4V.16G", "CPU.8V.32G", "CPU.16V.64G", "CPU.32V.128G", "CPU.64V.256G", "CPU.120V.480G", "CPU.180V.720G",
	"1V100.6V", "2V100.10V", "4V100.20V", "8V100.48V",
	"1A6000.10V", "1RTX6000ADA.10V", "1L40S.20V",
	"1A100.22V", "1A100.40S.22V", "8A100.176V", "1H100.80S.30V", "8H100.80S.176V", "1H200.141S.44V",
	"1B200.30V", "1B300.30V", "2B300.60V", "4B300.120V",
}

// Resource kinds of this provider besides sim.KindInstance.
const (
	kindSSHKey = "ssh_key"
	kindScript = "script"
)

// Extra keys on sim resources.
const (
	extraDescription = "description"
	extraHostname    = "hostname"
	extraKeys        = "ssh_key_ids" // space-separated
	extraScript      = "startup_script_id"
	extraDeleted     = "deleted" // "true" once deleted (404 from then on)
	extraContent     = "content" // an SSH key's key, a script's text
	extraOSVolume    = "os_volume"
)

// tokenTTL is how long an access token lives.
const tokenTTL = time.Hour

// Provider is the simulated Verda API. Create it with New.
type Provider struct {
	mu     sync.Mutex
	tokens map[string]time.Time // access token → expiry
	// refresh are the refresh tokens handed out.
	refresh map[string]bool
	// vmu serializes volume attaches, detaches and deletes (the choice of
	// a free disk target).
	vmu sync.Mutex
}

// New returns the simulated Verda API.
func New() sim.Provider {
	return &Provider{tokens: map[string]time.Time{}, refresh: map[string]bool{}}
}

// Name is "verda".
func (p *Provider) Name() string { return Name }

// TLS is false: the API is plain http on a loopback address.
func (p *Provider) TLS() bool { return false }

// Backend returns a hoist backend entry for the API at endpoint: dstack's
// Verda entry with the simulator's client credentials.
func (p *Provider) Backend(s *sim.Sim, endpoint string) map[string]any {
	return map[string]any{
		"type":         Name,
		"creds":        map[string]any{"type": "api_key", "client_id": ClientID, "client_secret": ClientSecret},
		"regions":      []string{"FIN-01", "FIN-02", "FIN-03"},
		"endpoint_url": strings.TrimSuffix(endpoint, "/") + "/v1",
	}
}

// Interrupt reclaims spot instance id as Verda does: the VM halts and the
// instance stays, discontinued.
func (p *Provider) Interrupt(s *sim.Sim, id string) error {
	r, ok := s.Get(Name, id)
	if !ok || r.Kind != sim.KindInstance || r.Extra[extraDeleted] == "true" {
		return fmt.Errorf("verda: instance %s: not found", id)
	}
	if !r.Spot {
		return fmt.Errorf("verda: instance %s is not a spot instance", id)
	}
	return s.Reclaim(Name, id)
}

// An apiError is Verda's error body.
type apiError struct {
	status  int
	Code    string `json:"code"`
	Message string `json:"message"`
}

func errorf(status int, code, format string, args ...any) *apiError {
	return &apiError{status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, e *apiError) { writeJSON(w, e.status, e) }

// writeID answers a created resource's id as plain text, as Verda does.
func writeID(w http.ResponseWriter, id string) {
	w.Header().Set("Content-Type", "text/plain")
	w.WriteHeader(http.StatusAccepted)
	_, _ = io.WriteString(w, id)
}

// Handler serves the API under /v1/.
func (p *Provider) Handler(s *sim.Sim) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/oauth2/token", func(w http.ResponseWriter, r *http.Request) {
		if s.Call(Name, "token") {
			writeError(w, errorf(http.StatusTooManyRequests, "too_many_requests", "Rate limit exceeded, try again later"))
			return
		}
		p.token(w, r)
	})
	h := func(pattern, op string, fn func(*sim.Sim, http.ResponseWriter, *http.Request) *apiError) {
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			if e := p.authorize(r); e != nil {
				writeError(w, e)
				return
			}
			if s.Call(Name, op) {
				writeError(w, errorf(http.StatusTooManyRequests, "too_many_requests", "Rate limit exceeded, try again later"))
				return
			}
			if e := fn(s, w, r); e != nil {
				writeError(w, e)
			}
		})
	}
	h("GET /v1/instance-availability", "instance-availability", availability)
	h("GET /v1/ssh-keys", "ssh-keys.list", listOf(kindSSHKey))
	h("POST /v1/ssh-keys", "ssh-keys.create", createSSHKey)
	h("DELETE /v1/ssh-keys", "ssh-keys.delete", deleteSSHKeys)
	h("GET /v1/scripts", "scripts.list", listOf(kindScript))
	h("POST /v1/scripts", "scripts.create", createScript)
	h("DELETE /v1/scripts/{id}", "scripts.delete", deleteScript)
	h("GET /v1/instances", "instances.list", listInstances)
	h("GET /v1/instances/{id}", "instances.get", getInstance)
	h("POST /v1/instances", "instances.create", createInstance)
	h("PUT /v1/instances", "instances.action", instanceAction)
	h("GET /v1/volumes", "volumes.list", listVolumes)
	h("GET /v1/volumes/{id}", "volumes.get", getVolume)
	h("POST /v1/volumes", "volumes.create", p.createVolume)
	h("PUT /v1/volumes", "volumes.action", p.volumeAction)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, errorf(http.StatusNotFound, "not_found", "%s %s is not a Verda API call", r.Method, r.URL.Path))
	})
	return mux
}

// token is POST /oauth2/token: client_credentials or refresh_token, as JSON
// or as a form.
func (p *Provider) token(w http.ResponseWriter, r *http.Request) {
	var req struct {
		GrantType    string `json:"grant_type"`
		ClientID     string `json:"client_id"`
		ClientSecret string `json:"client_secret"`
		RefreshToken string `json:"refresh_token"`
	}
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if ct == "application/x-www-form-urlencoded" {
		if err := r.ParseForm(); err != nil {
			writeError(w, errorf(http.StatusBadRequest, "invalid_request", "%v", err))
			return
		}
		req.GrantType, req.ClientID, req.ClientSecret, req.RefreshToken = r.PostForm.Get("grant_type"),
			r.PostForm.Get("client_id"), r.PostForm.Get("client_secret"), r.PostForm.Get("refresh_token")
	} else if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeError(w, errorf(http.StatusBadRequest, "invalid_request", "body: %v", err))
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch req.GrantType {
	case "client_credentials":
		if req.ClientID != ClientID || req.ClientSecret != ClientSecret {
			writeError(w, errorf(http.StatusUnauthorized, "unauthorized_request", "Invalid client id or client secret"))
			return
		}
	case "refresh_token":
		if !p.refresh[req.RefreshToken] {
			writeError(w, errorf(http.StatusUnauthorized, "unauthorized_request", "Invalid refresh token"))
			return
		}
	default:
		writeError(w, errorf(http.StatusBadRequest, "invalid_request", "grant_type %q is not supported", req.GrantType))
		return
	}
	access, refresh := newID(), newID()
	p.tokens[access] = time.Now().Add(tokenTTL)
	p.refresh[refresh] = true
	writeJSON(w, http.StatusOK, map[string]any{
		"access_token": access, "refresh_token": refresh, "expires_in": int(tokenTTL.Seconds()),
		"token_type": "Bearer", "scope": "cloud-api-v1",
	})
}

// authorize checks the bearer token.
func (p *Provider) authorize(r *http.Request) *apiError {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	p.mu.Lock()
	exp, known := p.tokens[tok]
	p.mu.Unlock()
	if !ok || !known || time.Now().After(exp) {
		return errorf(http.StatusUnauthorized, "unauthorized_request", "Invalid or expired access token")
	}
	return nil
}

// Expire makes every access token handed out so far invalid, as their
// expiry would (tests of the driver's renewal).
func (p *Provider) Expire() {
	p.mu.Lock()
	defer p.mu.Unlock()
	clear(p.tokens)
}

// newID returns a random UUID (version 4).
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// availability is GET /instance-availability?is_spot=: the instance types
// that can be had now in each location ([{location_code,
// availabilities}]). A type whose capacity fault is used up is left out.
func availability(s *sim.Sim, w http.ResponseWriter, r *http.Request) *apiError {
	if v := r.URL.Query().Get("is_spot"); v != "" {
		if _, err := strconv.ParseBool(v); err != nil {
			return errorf(http.StatusBadRequest, "invalid_request", "is_spot: %q is not a boolean", v)
		}
	}
	f := s.Faults()
	var avail []string
	for _, t := range InstanceTypes {
		if n, limited := f.Capacity[t]; !limited || n > 0 {
			avail = append(avail, t)
		}
	}
	type loc struct {
		LocationCode   string   `json:"location_code"`
		Availabilities []string `json:"availabilities"`
	}
	out := []loc{}
	for _, l := range Locations {
		out = append(out, loc{LocationCode: l, Availabilities: append([]string{}, avail...)})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// decode reads a JSON body strictly.
func decode(r *http.Request, v any) *apiError {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return errorf(http.StatusBadRequest, "invalid_request", "body: %v", err)
	}
	return nil
}

// live returns the provider's resources of kind not deleted.
func live(s *sim.Sim, kind string) []sim.Resource {
	var out []sim.Resource
	for _, r := range s.List(Name, kind) {
		if r.Extra[extraDeleted] != "true" {
			out = append(out, r)
		}
	}
	return out
}

// listOf is GET /ssh-keys and GET /scripts: [{id, name, ...}].
func listOf(kind string) func(*sim.Sim, http.ResponseWriter, *http.Request) *apiError {
	return func(s *sim.Sim, w http.ResponseWriter, r *http.Request) *apiError {
		out := []map[string]any{}
		for _, res := range live(s, kind) {
			m := map[string]any{"id": res.ID, "name": res.Name}
			if kind == kindSSHKey {
				m["key"] = res.Extra[extraContent]
			} else {
				m["script"] = res.Extra[extraContent]
			}
			out = append(out, m)
		}
		writeJSON(w, http.StatusOK, out)
		return nil
	}
}

func createSSHKey(s *sim.Sim, w http.ResponseWriter, r *http.Request) *apiError {
	var req struct {
		Name string `json:"name"`
		Key  string `json:"key"`
	}
	if e := decode(r, &req); e != nil {
		return e
	}
	if req.Name == "" || !strings.HasPrefix(req.Key, "ssh-") && !strings.HasPrefix(req.Key, "ecdsa-") {
		return errorf(http.StatusBadRequest, "invalid_request", "name and a public key are required")
	}
	res, err := s.Create(sim.Resource{Provider: Name, Kind: kindSSHKey, ID: newID(), Name: req.Name, State: sim.StateAvailable,
		Extra: map[string]string{extraContent: strings.TrimSpace(req.Key)}})
	if err != nil {
		return errorf(http.StatusInternalServerError, "server_error", "%v", err)
	}
	writeID(w, res.ID)
	return nil
}

// deleteSSHKeys is DELETE /ssh-keys {keys: [ids]}.
func deleteSSHKeys(s *sim.Sim, w http.ResponseWriter, r *http.Request) *apiError {
	var req struct {
		Keys []string `json:"keys"`
	}
	if e := decode(r, &req); e != nil {
		return e
	}
	for _, id := range req.Keys {
		if e := markDeleted(s, kindSSHKey, id); e != nil {
			return e
		}
	}
	w.WriteHeader(http.StatusOK)
	return nil
}

func markDeleted(s *sim.Sim, kind, id string) *apiError {
	res, ok := s.Get(Name, id)
	if !ok || res.Kind != kind || res.Extra[extraDeleted] == "true" {
		return errorf(http.StatusNotFound, "not_found", "Invalid %s id %s", strings.ReplaceAll(kind, "_", " "), id)
	}
	if _, err := s.Update(Name, id, func(r *sim.Resource) error {
		r.Extra[extraDeleted], r.State = "true", sim.StateDeleted
		return nil
	}); err != nil {
		return errorf(http.StatusInternalServerError, "server_error", "%v", err)
	}
	return nil
}

func createScript(s *sim.Sim, w http.ResponseWriter, r *http.Request) *apiError {
	var req struct {
		Name   string `json:"name"`
		Script string `json:"script"`
	}
	if e := decode(r, &req); e != nil {
		return e
	}
	if req.Name == "" || req.Script == "" {
		return errorf(http.StatusBadRequest, "invalid_request", "name and script are required")
	}
	res, err := s.Create(sim.Resource{Provider: Name, Kind: kindScript, ID: newID(), Name: req.Name, State: sim.StateAvailable,
		Extra: map[string]string{extraContent: req.Script}})
	if err != nil {
		return errorf(http.StatusInternalServerError, "server_error", "%v", err)
	}
	writeID(w, res.ID)
	return nil
}

func deleteScript(s *sim.Sim, w http.ResponseWriter, r *http.Request) *apiError {
	if e := markDeleted(s, kindScript, r.PathValue("id")); e != nil {
		return e
	}
	w.WriteHeader(http.StatusOK)
	return nil
}

// status maps the simulator's state onto Verda's instance statuses.
func status(r sim.Resource) string {
	switch r.State {
	case sim.StatePending:
		return "provisioning"
	case sim.StateRunning:
		return "running"
	case sim.StateTerminated:
		return "discontinued"
	}
	return "offline"
}

// instanceJSON is an instance as GET /instances shows it.
func instanceJSON(r sim.Resource) map[string]any {
	keys := strings.Fields(r.Extra[extraKeys])
	if keys == nil {
		keys = []string{}
	}
	var ip any
	if r.Address != "" && r.State == sim.StateRunning {
		ip = r.Address
	}
	return map[string]any{
		"id":                r.ID,
		"instance_type":     r.InstanceType,
		"image":             r.Image,
		"price_per_hour":    r.Price,
		"hostname":          r.Extra[extraHostname],
		"description":       r.Extra[extraDescription],
		"ip":                ip,
		"status":            status(r),
		"created_at":        r.CreatedAt.Format(time.RFC3339Nano),
		"ssh_key_ids":       keys,
		"startup_script_id": r.Extra[extraScript],
		"os_volume_id":      r.Extra[extraOSVolume],
		"location":          r.Region,
		"is_spot":           r.Spot,
	}
}

func listInstances(s *sim.Sim, w http.ResponseWriter, r *http.Request) *apiError {
	want := r.URL.Query().Get("status")
	out := []map[string]any{}
	for _, res := range live(s, sim.KindInstance) {
		if want == "" || status(res) == want {
			out = append(out, instanceJSON(res))
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func getInstance(s *sim.Sim, w http.ResponseWriter, r *http.Request) *apiError {
	res, ok := s.Get(Name, r.PathValue("id"))
	if !ok || res.Kind != sim.KindInstance || res.Extra[extraDeleted] == "true" {
		return errorf(http.StatusNotFound, "not_found", "Invalid instance id")
	}
	writeJSON(w, http.StatusOK, instanceJSON(res))
	return nil
}

// createInstance is POST /instances: the instance is deployed with the
// given SSH keys authorized for root and booted; its id is the answer.
func createInstance(s *sim.Sim, w http.ResponseWriter, r *http.Request) *apiError {
	var req struct {
		InstanceType    string   `json:"instance_type"`
		Image           string   `json:"image"`
		SSHKeyIDs       []string `json:"ssh_key_ids"`
		Hostname        string   `json:"hostname"`
		Description     string   `json:"description"`
		StartupScriptID string   `json:"startup_script_id,omitempty"`
		Pricing         string   `json:"pricing,omitempty"`
		IsSpot          bool     `json:"is_spot"`
		LocationCode    string   `json:"location_code"`
		Contract        string   `json:"contract,omitempty"`
		OSVolume        *struct {
			Name string `json:"name"`
			Size int    `json:"size"`
		} `json:"os_volume,omitempty"`
	}
	if e := decode(r, &req); e != nil {
		return e
	}
	switch {
	case !slices.Contains(InstanceTypes, req.InstanceType):
		return errorf(http.StatusBadRequest, "invalid_request", "Invalid instance type %q", req.InstanceType)
	case req.LocationCode != "" && !slices.Contains(Locations, req.LocationCode):
		return errorf(http.StatusBadRequest, "invalid_request", "Invalid location code %q", req.LocationCode)
	case req.Image == "" || req.Hostname == "":
		return errorf(http.StatusBadRequest, "invalid_request", "image and hostname are required")
	case req.OSVolume != nil && req.OSVolume.Size < 50 && req.OSVolume.Size != 0:
		return errorf(http.StatusBadRequest, "invalid_request", "The OS volume must be at least 50 GB")
	}
	var keys []string
	for _, id := range req.SSHKeyIDs {
		k, ok := s.Get(Name, id)
		if !ok || k.Kind != kindSSHKey || k.Extra[extraDeleted] == "true" {
			return errorf(http.StatusBadRequest, "invalid_request", "Invalid ssh key id %s", id)
		}
		keys = append(keys, k.Extra[extraContent])
	}
	if req.StartupScriptID != "" {
		sc, ok := s.Get(Name, req.StartupScriptID)
		if !ok || sc.Kind != kindScript || sc.Extra[extraDeleted] == "true" {
			return errorf(http.StatusBadRequest, "invalid_request", "Invalid startup script id %s", req.StartupScriptID)
		}
	}
	loc := req.LocationCode
	if loc == "" {
		loc = Locations[0]
	}
	if !s.Take(req.InstanceType) {
		return errorf(http.StatusServiceUnavailable, "service_unavailable",
			"No capacity available for instance type %s in location %s", req.InstanceType, loc)
	}
	size := 50
	if req.OSVolume != nil && req.OSVolume.Size > 0 {
		size = req.OSVolume.Size
	}
	res, err := s.Create(sim.Resource{
		Provider: Name, Kind: sim.KindInstance, ID: newID(), Name: req.Hostname, State: sim.StatePending,
		Region: loc, InstanceType: req.InstanceType, Image: req.Image, Spot: req.IsSpot, SizeGB: size,
		User: "root", AuthorizedKeys: keys,
		Extra: map[string]string{
			extraHostname: req.Hostname, extraDescription: req.Description,
			extraKeys: strings.Join(req.SSHKeyIDs, " "), extraScript: req.StartupScriptID, extraOSVolume: newID(),
		},
	})
	if err != nil {
		return errorf(http.StatusInternalServerError, "server_error", "%v", err)
	}
	if err := s.Boot(Name, res.ID); err != nil {
		return errorf(http.StatusInternalServerError, "server_error", "%v", err)
	}
	writeID(w, res.ID)
	return nil
}

// instanceAction is PUT /instances {action, id: [ids], delete_permanently}:
// only delete, which detaches the instance's volumes. One id answers 202 or its error; several answer 207 with a
// result per instance.
func instanceAction(s *sim.Sim, w http.ResponseWriter, r *http.Request) *apiError {
	var req struct {
		Action            string          `json:"action"`
		ID                json.RawMessage `json:"id"`
		VolumeIDs         []string        `json:"volume_ids,omitempty"`
		DeletePermanently bool            `json:"delete_permanently,omitempty"`
	}
	if e := decode(r, &req); e != nil {
		return e
	}
	var ids []string
	if err := json.Unmarshal(req.ID, &ids); err != nil {
		var one string
		if err := json.Unmarshal(req.ID, &one); err != nil {
			return errorf(http.StatusBadRequest, "invalid_request", "id: a list of instance ids is required")
		}
		ids = []string{one}
	}
	if req.Action != "delete" {
		return errorf(http.StatusBadRequest, "invalid_request", "action %q is not supported by the simulator", req.Action)
	}
	if len(ids) == 0 {
		return errorf(http.StatusBadRequest, "invalid_request", "id: a list of instance ids is required")
	}
	type result struct {
		InstanceID string `json:"instanceId"`
		Action     string `json:"action"`
		Status     string `json:"status"`
		Error      string `json:"error,omitempty"`
		StatusCode int    `json:"statusCode"`
	}
	var results []result
	var last *apiError
	for _, id := range ids {
		e := deleteInstance(s, id)
		res := result{InstanceID: id, Action: req.Action, Status: "success", StatusCode: http.StatusAccepted}
		if e != nil {
			res.Status, res.Error, res.StatusCode = "error", e.Message, e.status
			last = e
		}
		results = append(results, res)
	}
	switch {
	case len(ids) == 1 && last != nil:
		return last
	case len(ids) == 1:
		w.WriteHeader(http.StatusAccepted)
	case last == nil:
		w.WriteHeader(http.StatusAccepted)
	default:
		writeJSON(w, http.StatusMultiStatus, results)
	}
	return nil
}

// deleteInstance deletes one instance: a provisioning one cannot be yet
// (dstack's "Can't discontinue a provisioning instance").
func deleteInstance(s *sim.Sim, id string) *apiError {
	res, ok := s.Get(Name, id)
	if !ok || res.Kind != sim.KindInstance || res.Extra[extraDeleted] == "true" {
		return errorf(http.StatusNotFound, "not_found", "Invalid instance id")
	}
	if res.State == sim.StatePending && res.Message == "" && !stuck(s, res) {
		return errorf(http.StatusBadRequest, "invalid_request", "Can't discontinue a provisioning instance")
	}
	detachAll(s, id)
	if err := s.Halt(Name, id); err != nil {
		return errorf(http.StatusInternalServerError, "server_error", "%v", err)
	}
	if _, err := s.Update(Name, id, func(r *sim.Resource) error {
		r.Extra[extraDeleted] = "true"
		return nil
	}); err != nil {
		return errorf(http.StatusInternalServerError, "server_error", "%v", err)
	}
	return nil
}

// stuck says whether a pending instance has been pending for longer than a
// boot takes, so that a VM that never comes up can be deleted.
func stuck(s *sim.Sim, r sim.Resource) bool {
	return s.Now().Sub(r.CreatedAt) > 30*time.Second
}
