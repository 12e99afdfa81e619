package vultr

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"hoist/e2e/cloudsim/sim"
)

// Name is the provider's name in the simulator and hoist's backend type.
const Name = "vultr"

// APIKey is the only API key the simulator accepts.
const APIKey = "hoist-sim-vultr-key"

// Regions are the simulated regions (Vultr's region ids).
var Regions = []string{"ewr", "ord", "ams"}

// A plan is one entry of GET /v2/plans or /v2/plans-metal.
type plan struct {
	ID          string   `json:"id"`
	VCPUCount   int      `json:"vcpu_count,omitempty"`
	CPUCount    int      `json:"cpu_count,omitempty"`
	CPUThreads  int      `json:"cpu_threads,omitempty"`
	CPUModel    string   `json:"cpu_model,omitempty"`
	RAM         int      `json:"ram"`
	Disk        int      `json:"disk"`
	DiskCount   int      `json:"disk_count"`
	Bandwidth   int      `json:"bandwidth"`
	MonthlyCost float64  `json:"monthly_cost"`
	Type        string   `json:"type"`
	GPUVRAM     int      `json:"gpu_vram_gb,omitempty"`
	GPUType     string   `json:"gpu_type,omitempty"`
	Locations   []string `json:"locations"`
}

// Plans are the cloud plans (a subset of Vultr's, with its ids and monthly
// prices) and MetalPlans the bare-metal ones.
var (
	Plans = []plan{
		{ID: "vc2-1c-2gb", VCPUCount: 1, RAM: 2048, Disk: 55, DiskCount: 1, Bandwidth: 2048, MonthlyCost: 10, Type: "vc2", Locations: Regions},
		{ID: "vc2-2c-4gb", VCPUCount: 2, RAM: 4096, Disk: 80, DiskCount: 1, Bandwidth: 3072, MonthlyCost: 20, Type: "vc2", Locations: Regions},
		{ID: "vhf-2c-4gb", VCPUCount: 2, RAM: 4096, Disk: 128, DiskCount: 1, Bandwidth: 3072, MonthlyCost: 24, Type: "vhf", Locations: Regions},
		{ID: "vcg-a16-6c-64g-16vram", VCPUCount: 6, RAM: 65536, Disk: 350, DiskCount: 1, Bandwidth: 6144, MonthlyCost: 343, Type: "vcg", GPUVRAM: 16, GPUType: "NVIDIA_A16", Locations: []string{"ewr", "ord"}},
		{ID: "vcg-a100-12c-120g-80vram", VCPUCount: 12, RAM: 122880, Disk: 1400, DiskCount: 1, Bandwidth: 10240, MonthlyCost: 1750, Type: "vcg", GPUVRAM: 80, GPUType: "NVIDIA_A100", Locations: []string{"ewr"}},
		// A plan dstack does not offer (vdc is not in its plan regex).
		{ID: "vdc-4c-16gb", VCPUCount: 4, RAM: 16384, Disk: 110, DiskCount: 1, Bandwidth: 4096, MonthlyCost: 60, Type: "vdc", Locations: Regions},
	}
	MetalPlans = []plan{
		{ID: "vbm-8c-132gb", CPUCount: 8, CPUThreads: 16, CPUModel: "E-2288G", RAM: 131072, Disk: 1920, DiskCount: 2, Bandwidth: 5120, MonthlyCost: 350, Type: "SSD", Locations: []string{"ewr", "ams"}},
		{ID: "vbm-112c-2048gb-8-h100-gpu", CPUCount: 112, CPUThreads: 224, CPUModel: "Platinum 8480+", RAM: 2097152, Disk: 3840, DiskCount: 8, Bandwidth: 15360, MonthlyCost: 17520, Type: "NVMe", Locations: []string{"ewr"}},
	}
)

const (
	kindVPC = "vpc"

	extraPlanType = "plan_type" // instance | bare_metal
	extraTags     = "tags"      // JSON list of the instance's tags
	extraVPC      = "vpc"       // the attached VPC's id
	extraSubnet   = "subnet"    // VPC: v4_subnet
	extraMask     = "mask"      // VPC: v4_subnet_mask
	extraImage    = "image_id"  // image_id or os_id
	extraDeleted  = "deleted"   // "true" once deleted (404 from then on)
)

// Provider is the Vultr API of one simulator.
type Provider struct {
	n atomic.Uint64
}

// New returns the simulated Vultr API.
func New() sim.Provider { return &Provider{} }

// Name implements sim.Provider.
func (p *Provider) Name() string { return Name }

// TLS implements sim.Provider: the API is plain HTTP on loopback.
func (p *Provider) TLS() bool { return false }

// Backend implements sim.Provider: dstack's vultr backend entry plus
// endpoint_url.
func (p *Provider) Backend(_ *sim.Sim, endpoint string) map[string]any {
	return map[string]any{
		"type":         Name,
		"creds":        map[string]any{"type": "api_key", "api_key": APIKey},
		"regions":      []string{"ewr", "ord"},
		"endpoint_url": strings.TrimSuffix(endpoint, "/"),
	}
}

// Interrupt implements sim.Provider: Vultr has no spot instances.
func (p *Provider) Interrupt(_ *sim.Sim, id string) error {
	return fmt.Errorf("vultr: instance %s: Vultr has no spot instances", id)
}

// apiError is Vultr's error body.
type apiError struct {
	Error  string `json:"error"`
	Status int    `json:"status"`
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, apiError{Error: msg, Status: code})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// Handler implements sim.Provider: the API under /v2/.
func (p *Provider) Handler(s *sim.Sim) http.Handler {
	mux := http.NewServeMux()
	h := func(pattern, op string, fn func(*sim.Sim, http.ResponseWriter, *http.Request)) {
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "Bearer "+APIKey {
				writeError(w, http.StatusUnauthorized, "Invalid API key.")
				return
			}
			if s.Call(Name, op) {
				writeError(w, http.StatusTooManyRequests, "Rate limit reached - please try your request again later.")
				return
			}
			fn(s, w, r)
		})
	}
	h("GET /v2/account", "account.get", func(_ *sim.Sim, w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"account": map[string]any{"name": "hoist-sim", "email": "sim@example.com", "acls": []string{"manage_users", "subscriptions"}}})
	})
	h("GET /v2/regions", "regions.list", p.listRegions)
	h("GET /v2/regions/{region}/availability", "regions.availability", p.availability)
	h("GET /v2/plans", "plans.list", func(s *sim.Sim, w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"plans": Plans, "meta": meta(len(Plans), "")})
	})
	h("GET /v2/plans-metal", "plans.listMetal", func(s *sim.Sim, w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"plans_metal": MetalPlans, "meta": meta(len(MetalPlans), "")})
	})
	h("GET /v2/vpcs", "vpcs.list", p.listVPCs)
	h("POST /v2/vpcs", "vpcs.create", p.createVPC)
	for _, k := range []kind{instances, bareMetals} {
		h("POST /v2/"+k.path, k.path+".create", func(s *sim.Sim, w http.ResponseWriter, r *http.Request) { p.create(s, w, r, k) })
		h("GET /v2/"+k.path, k.path+".list", func(s *sim.Sim, w http.ResponseWriter, r *http.Request) { p.list(s, w, r, k) })
		h("GET /v2/"+k.path+"/{id}", k.path+".get", func(s *sim.Sim, w http.ResponseWriter, r *http.Request) { p.get(s, w, r, k) })
		h("DELETE /v2/"+k.path+"/{id}", k.path+".delete", func(s *sim.Sim, w http.ResponseWriter, r *http.Request) { p.delete(s, w, r, k) })
	}
	h("POST /v2/bare-metals/{id}/vpcs/attach", "bare-metals.attachVPC", p.attachVPC)
	h("GET /v2/bare-metals/{id}/vpcs", "bare-metals.listVPCs", p.bareMetalVPCs)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "Invalid API path.")
	})
	return mux
}

// A kind is cloud instances or bare-metal servers: their path, the key of
// one in a body, of a list, and the plans they launch.
type kind struct {
	path, one, many string
	plans           []plan
}

var (
	instances  = kind{path: "instances", one: "instance", many: "instances", plans: Plans}
	bareMetals = kind{path: "bare-metals", one: "bare_metal", many: "bare_metals", plans: MetalPlans}
)

func (p *Provider) newID() string {
	n := p.n.Add(1)
	t := uint64(time.Now().UnixNano())
	return fmt.Sprintf("%08x-%04x-%04x-%04x-%012x", uint32(t>>32), uint16(t>>16), uint16(t), uint16(n>>48), n&0xffffffffffff)
}

// meta is the list metadata: total and the next page's cursor.
func meta(total int, next string) map[string]any {
	return map[string]any{"total": total, "links": map[string]string{"next": next, "prev": ""}}
}

// page cuts items by the request's per_page (default 100, as Vultr) and
// cursor (an opaque token: here the base64 of the offset) and returns the
// next cursor, or Vultr's message for a bad per_page or cursor.
func page[T any](r *http.Request, items []T) (_ []T, next, bad string) {
	per := 100
	if v := r.URL.Query().Get("per_page"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 500 {
			return nil, "", "Invalid per_page value."
		}
		per = n
	}
	off := 0
	if c := r.URL.Query().Get("cursor"); c != "" {
		b, err := base64.RawURLEncoding.DecodeString(c)
		if err == nil {
			off, err = strconv.Atoi(strings.TrimPrefix(string(b), "next__"))
		}
		if err != nil || off < 0 || off > len(items) {
			return nil, "", "Invalid cursor."
		}
	}
	end := min(off+per, len(items))
	if end < len(items) {
		next = base64.RawURLEncoding.EncodeToString([]byte("next__" + strconv.Itoa(end)))
	}
	return items[off:end], next, ""
}

func (p *Provider) listRegions(_ *sim.Sim, w http.ResponseWriter, _ *http.Request) {
	var out []map[string]any
	for _, id := range Regions {
		out = append(out, map[string]any{"id": id, "city": id, "country": "US", "continent": "North America", "options": []string{"ddos_protection"}})
	}
	writeJSON(w, http.StatusOK, map[string]any{"regions": out, "meta": meta(len(out), "")})
}

// availability answers GET /v2/regions/{region}/availability: the plans
// that can be deployed there now (of the query's type: all, vbm or a cloud
// plan type), leaving out those the fault injection sold out (capacity 0).
func (p *Provider) availability(s *sim.Sim, w http.ResponseWriter, r *http.Request) {
	region := r.PathValue("region")
	if !slices.Contains(Regions, region) {
		writeError(w, http.StatusNotFound, "Invalid region.")
		return
	}
	typ := r.URL.Query().Get("type")
	capacity := s.Faults().Capacity
	out := []string{}
	add := func(pl plan, metal bool) {
		if n, limited := capacity[pl.ID]; limited && n <= 0 || !slices.Contains(pl.Locations, region) {
			return
		}
		if typ == "" || typ == "all" || metal && typ == "vbm" || !metal && typ == pl.Type {
			out = append(out, pl.ID)
		}
	}
	for _, pl := range Plans {
		add(pl, false)
	}
	for _, pl := range MetalPlans {
		add(pl, true)
	}
	writeJSON(w, http.StatusOK, map[string]any{"available_plans": out})
}

func vpcView(r sim.Resource) map[string]any {
	mask, _ := strconv.Atoi(r.Extra[extraMask])
	return map[string]any{"id": r.ID, "region": r.Region, "description": r.Name, "v4_subnet": r.Extra[extraSubnet],
		"v4_subnet_mask": mask, "date_created": r.CreatedAt.Format(time.RFC3339)}
}

func (p *Provider) listVPCs(s *sim.Sim, w http.ResponseWriter, r *http.Request) {
	var all []map[string]any
	for _, v := range s.List(Name, kindVPC) {
		all = append(all, vpcView(v))
	}
	items, next, bad := page(r, all)
	if bad != "" {
		writeError(w, http.StatusBadRequest, bad)
		return
	}
	if items == nil {
		items = []map[string]any{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"vpcs": items, "meta": meta(len(all), next)})
}

func (p *Provider) createVPC(s *sim.Sim, w http.ResponseWriter, r *http.Request) {
	var in struct {
		Region       string `json:"region"`
		Description  string `json:"description"`
		V4Subnet     string `json:"v4_subnet"`
		V4SubnetMask int    `json:"v4_subnet_mask"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		writeError(w, http.StatusBadRequest, "Invalid JSON body.")
		return
	}
	if !slices.Contains(Regions, in.Region) {
		writeError(w, http.StatusBadRequest, "Invalid region.")
		return
	}
	n := len(s.List(Name, kindVPC))
	if in.V4Subnet == "" {
		in.V4Subnet, in.V4SubnetMask = fmt.Sprintf("10.%d.96.0", n%250), 20
	}
	res, err := s.Create(sim.Resource{Provider: Name, Kind: kindVPC, ID: p.newID(), Name: in.Description, State: sim.StateAvailable,
		Region: in.Region, Extra: map[string]string{extraSubnet: in.V4Subnet, extraMask: strconv.Itoa(in.V4SubnetMask)}})
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	writeJSON(w, http.StatusCreated, map[string]any{"vpc": vpcView(res)})
}

// createReq is the body of POST /v2/instances and /v2/bare-metals.
type createReq struct {
	Region    string   `json:"region"`
	Plan      string   `json:"plan"`
	Label     string   `json:"label"`
	Hostname  string   `json:"hostname"`
	Tags      []string `json:"tags"`
	OsID      int      `json:"os_id"`
	ImageID   string   `json:"image_id"`
	UserData  string   `json:"user_data"`
	AttachVPC []string `json:"attach_vpc"`
}

func (p *Provider) create(s *sim.Sim, w http.ResponseWriter, r *http.Request, k kind) {
	var in createReq
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		writeError(w, http.StatusBadRequest, "Invalid JSON body.")
		return
	}
	if !slices.Contains(Regions, in.Region) {
		writeError(w, http.StatusBadRequest, "Invalid region.")
		return
	}
	i := slices.IndexFunc(k.plans, func(pl plan) bool { return pl.ID == in.Plan })
	if i < 0 {
		writeError(w, http.StatusBadRequest, "Invalid plan.")
		return
	}
	if !slices.Contains(k.plans[i].Locations, in.Region) {
		writeError(w, http.StatusBadRequest, "Plan is not available in the selected location.")
		return
	}
	if in.OsID == 0 && in.ImageID == "" {
		writeError(w, http.StatusBadRequest, "You must provide one of os_id, iso_id, app_id, image_id or snapshot_id.")
		return
	}
	if in.UserData != "" {
		if _, err := base64.StdEncoding.DecodeString(in.UserData); err != nil {
			writeError(w, http.StatusBadRequest, "Invalid user_data: it must be base64 encoded.")
			return
		}
	}
	for _, id := range in.AttachVPC {
		if v, ok := s.Get(Name, id); !ok || v.Kind != kindVPC || v.Region != in.Region {
			writeError(w, http.StatusBadRequest, "Invalid VPC ID.")
			return
		}
	}
	if !s.Take(in.Plan) {
		// Vultr answers a sold-out plan with 400 and this message.
		writeError(w, http.StatusBadRequest, "Unable to create instance: This plan is currently out of stock in this location.")
		return
	}
	tags, _ := json.Marshal(in.Tags)
	image := in.ImageID
	if image == "" {
		image = "os:" + strconv.Itoa(in.OsID)
	}
	vpc := ""
	if len(in.AttachVPC) > 0 {
		vpc = in.AttachVPC[0]
	}
	res, err := s.Create(sim.Resource{
		Provider: Name, Kind: sim.KindInstance, ID: p.newID(), Name: in.Label, State: sim.StatePending,
		Region: in.Region, InstanceType: in.Plan, Image: image, Tags: tagMap(in.Tags),
		Price: k.plans[i].MonthlyCost / 730, User: "root", UserData: in.UserData,
		Extra: map[string]string{extraPlanType: k.one, extraTags: string(tags), extraVPC: vpc, extraImage: image},
	})
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	if err := s.Boot(Name, res.ID); err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	res, _ = s.Get(Name, res.ID)
	writeJSON(w, http.StatusAccepted, map[string]any{k.one: view(res)})
}

// tagMap reads "key=value" tags into the simulator's tag map (a tag
// without "=" maps to "").
func tagMap(tags []string) map[string]string {
	if len(tags) == 0 {
		return nil
	}
	m := map[string]string{}
	for _, t := range tags {
		k, v, _ := strings.Cut(t, "=")
		m[k] = v
	}
	return m
}

// find returns the live instance of kind k with id.
func find(s *sim.Sim, id string, k kind) (sim.Resource, bool) {
	r, ok := s.Get(Name, id)
	if !ok || r.Kind != sim.KindInstance || r.Extra[extraPlanType] != k.one || r.Extra[extraDeleted] == "true" {
		return sim.Resource{}, false
	}
	return r, true
}

// view renders an instance as Vultr does.
func view(r sim.Resource) map[string]any {
	status, power, server := "pending", "running", "installingbooting"
	switch r.State {
	case sim.StateRunning:
		status, server = "active", "ok"
	case sim.StateStopping, sim.StateTerminated:
		status, power, server = "active", "stopped", "none"
	}
	var tags []string
	_ = json.Unmarshal([]byte(r.Extra[extraTags]), &tags)
	if tags == nil {
		tags = []string{}
	}
	mainIP, internal := "0.0.0.0", ""
	if r.Address != "" && r.State != sim.StateTerminated {
		mainIP = r.Address
		if r.Extra[extraVPC] != "" {
			// The simulator's VMs have one address, on loopback: it is
			// both the public and the VPC address.
			internal = r.Address
		}
	}
	v := map[string]any{
		"id": r.ID, "os": "Docker on Ubuntu 22.04", "plan": r.InstanceType, "main_ip": mainIP, "region": r.Region,
		"date_created": r.CreatedAt.Format(time.RFC3339), "status": status, "power_status": power,
		"server_status": server, "label": r.Name, "internal_ip": internal, "tags": tags, "image_id": r.Extra[extraImage],
		"v6_main_ip": "", "features": []string{},
	}
	if vpc := r.Extra[extraVPC]; vpc != "" {
		v["vpcs"] = []map[string]any{{"id": vpc, "ip_address": internal}}
	}
	return v
}

func (p *Provider) get(s *sim.Sim, w http.ResponseWriter, r *http.Request, k kind) {
	res, ok := find(s, r.PathValue("id"), k)
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Sprintf("Invalid %s-id.", strings.ReplaceAll(k.one, "_", "-")))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{k.one: view(res)})
}

func (p *Provider) list(s *sim.Sim, w http.ResponseWriter, r *http.Request, k kind) {
	q := r.URL.Query()
	var all []map[string]any
	for _, res := range s.List(Name, sim.KindInstance) {
		if res.Extra[extraPlanType] != k.one || res.Extra[extraDeleted] == "true" {
			continue
		}
		if l := q.Get("label"); l != "" && res.Name != l {
			continue
		}
		if rg := q.Get("region"); rg != "" && res.Region != rg {
			continue
		}
		v := view(res)
		if t := q.Get("tag"); t != "" && !slices.Contains(v["tags"].([]string), t) {
			continue
		}
		all = append(all, v)
	}
	items, next, bad := page(r, all)
	if bad != "" {
		writeError(w, http.StatusBadRequest, bad)
		return
	}
	if items == nil {
		items = []map[string]any{}
	}
	writeJSON(w, http.StatusOK, map[string]any{k.many: items, "meta": meta(len(all), next)})
}

func (p *Provider) delete(s *sim.Sim, w http.ResponseWriter, r *http.Request, k kind) {
	res, ok := find(s, r.PathValue("id"), k)
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Sprintf("Invalid %s-id.", strings.ReplaceAll(k.one, "_", "-")))
		return
	}
	if err := s.Halt(Name, res.ID); err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	if _, err := s.Update(Name, res.ID, func(x *sim.Resource) error {
		x.Extra[extraDeleted] = "true"
		return nil
	}); err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (p *Provider) attachVPC(s *sim.Sim, w http.ResponseWriter, r *http.Request) {
	res, ok := find(s, r.PathValue("id"), bareMetals)
	if !ok {
		writeError(w, http.StatusNotFound, "Invalid bare-metal-id.")
		return
	}
	var in struct {
		VPCID string `json:"vpc_id"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		writeError(w, http.StatusBadRequest, "Invalid JSON body.")
		return
	}
	if v, ok := s.Get(Name, in.VPCID); !ok || v.Kind != kindVPC || v.Region != res.Region {
		writeError(w, http.StatusBadRequest, "Invalid VPC ID.")
		return
	}
	if _, err := s.Update(Name, res.ID, func(x *sim.Resource) error {
		x.Extra[extraVPC] = in.VPCID
		return nil
	}); err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// bareMetalVPCs answers GET /v2/bare-metals/{id}/vpcs: the server's VPC and
// its address there (bare-metal bodies carry no internal_ip).
func (p *Provider) bareMetalVPCs(s *sim.Sim, w http.ResponseWriter, r *http.Request) {
	res, ok := find(s, r.PathValue("id"), bareMetals)
	if !ok {
		writeError(w, http.StatusNotFound, "Invalid bare-metal-id.")
		return
	}
	vpcs := []map[string]any{}
	if id := res.Extra[extraVPC]; id != "" {
		ip := ""
		if res.State != sim.StateTerminated {
			ip = res.Address
		}
		vpcs = append(vpcs, map[string]any{"id": id, "mac_address": "5a:00:04:00:00:01", "ip_address": ip})
	}
	writeJSON(w, http.StatusOK, map[string]any{"vpcs": vpcs, "meta": meta(len(vpcs), "")})
}
