package vastai

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"hoist/e2e/cloudsim/sim"
)

// stateStopped is the state of an instance the market stopped (outbid):
// it keeps its disk until destroyed.
const stateStopped = "stopped"

// Extra keys of an instance.
const (
	extraLabel     = "label"
	extraStatusMsg = "status_msg"
	extraPorts     = "ports"
	extraBid       = "is_bid"
)

// createRequest is the body of PUT /asks/<id>/ (vast.py create instance).
type createRequest struct {
	ClientID       string            `json:"client_id"`
	Image          string            `json:"image"`
	Disk           float64           `json:"disk"`
	Label          *string           `json:"label"`
	Price          *float64          `json:"price"`
	Env            map[string]string `json:"env"`
	User           *string           `json:"user"`
	Onstart        *string           `json:"onstart"`
	Args           []string          `json:"args"`
	Runtype        string            `json:"runtype"`
	ImageLogin     *string           `json:"image_login"`
	PythonUTF8     bool              `json:"python_utf8"`
	LangUTF8       bool              `json:"lang_utf8"`
	UseJupyterLab  bool              `json:"use_jupyter_lab"`
	JupyterDir     *string           `json:"jupyter_dir"`
	CreateFrom     *string           `json:"create_from"`
	Force          bool              `json:"force"`
	Extra          *string           `json:"extra"`
	CancelUnavail  *bool             `json:"cancel_unavail"`
	TemplateHashID *string           `json:"template_hash_id"`
}

// portKey is an env key publishing a port: "-p 10022:10022" (vast.py's
// parse_env).
var portKey = regexp.MustCompile(`^-p (\d+):(\d+)(/tcp|/udp)?$`)

func (p *Provider) create(s *sim.Sim, r *http.Request) (any, *apiError) {
	var req createRequest
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return nil, errorf(http.StatusBadRequest, "invalid_args", "invalid request: %v", err)
	}
	askID := r.PathValue("id")
	a, ok := findAsk(askID)
	switch {
	case !ok:
		return nil, errorf(http.StatusNotFound, "no_such_ask", "Instance type by id %s is not available.", askID)
	case req.ClientID != "me":
		return nil, errorf(http.StatusBadRequest, "invalid_args", "client_id must be \"me\"")
	case req.Image == "":
		return nil, errorf(http.StatusBadRequest, "invalid_args", "image is required")
	case req.Disk <= 0:
		return nil, errorf(http.StatusBadRequest, "invalid_args", "disk must be positive")
	case req.Runtype != "args" || req.Onstart == nil || *req.Onstart == "":
		// The simulator runs containers only as runtype args (the
		// entrypoint in onstart, dstack's api_client.py).
		return nil, errorf(http.StatusBadRequest, "invalid_args", "the simulator runs runtype \"args\" with an onstart entrypoint, got runtype %q", req.Runtype)
	}
	price, _ := number(a["dph_total"])
	if req.Price != nil {
		minBid, ok := number(a["min_bid"])
		if !ok {
			return nil, errorf(http.StatusBadRequest, "invalid_args", "ask %s takes no bids", askID)
		}
		if *req.Price < minBid {
			return nil, errorf(http.StatusBadRequest, "invalid_args", "bid price %g is below the minimum bid %g", *req.Price, minBid)
		}
		price = *req.Price
	}
	spec := sim.PodSpec{Image: req.Image, Command: append([]string{*req.Onstart}, req.Args...), Env: map[string]string{}}
	var ports []string
	for k, v := range req.Env {
		if m := portKey.FindStringSubmatch(k); m != nil {
			if m[1] != m[2] {
				return nil, errorf(http.StatusBadRequest, "invalid_args", "the simulator publishes a port on the same host port: %q", k)
			}
			port, _ := strconv.Atoi(m[2])
			spec.Ports = append(spec.Ports, port)
			ports = append(ports, m[2])
			continue
		}
		if strings.HasPrefix(k, "-") {
			return nil, errorf(http.StatusBadRequest, "invalid_args", "unsupported docker option %q", k)
		}
		spec.Env[k] = v
	}
	slices.Sort(spec.Ports)
	slices.Sort(ports)
	if req.ImageLogin != nil && *req.ImageLogin != "" {
		f := strings.Fields(*req.ImageLogin)
		if len(f) != 5 || f[0] != "-u" || f[2] != "-p" {
			return nil, errorf(http.StatusBadRequest, "invalid_args", "image_login: want \"-u USER -p PASSWORD REGISTRY\"")
		}
		spec.RegistryUsername, spec.RegistryPassword = f[1], f[3]
	}
	if !s.Take(askID) {
		return nil, errorf(http.StatusBadRequest, "no_such_ask", "Instance type by id %s is not available.", askID)
	}
	label := ""
	if req.Label != nil {
		label = *req.Label
	}
	geo, _ := a["geolocation"].(string)
	extra := map[string]string{extraLabel: label, extraPorts: strings.Join(ports, ",")}
	if req.Price != nil {
		extra[extraBid] = "1"
	}
	res, err := s.Create(sim.Resource{
		Provider: Name, Kind: KindPod, ID: strconv.FormatInt(p.next.Add(1), 10), Name: label,
		State: sim.StatePending, Region: geo, InstanceType: askID, Image: req.Image, Spot: req.Price != nil,
		Price: price, SizeGB: int(req.Disk), User: "root", Extra: extra,
	})
	if err != nil {
		return nil, errorf(http.StatusInternalServerError, "server_error", "%v", err)
	}
	go p.start(s, res.ID, spec)
	id, _ := strconv.ParseInt(res.ID, 10, 64)
	return map[string]any{"success": true, "new_contract": id}, nil
}

// start starts the pod of instance id (pulling its image first) and
// records the outcome: running on its address, or the start failure as a
// Docker create failure in status_msg.
func (p *Provider) start(s *sim.Sim, id string, spec sim.PodSpec) {
	addr, err := s.StartPod(Name, id, spec)
	res, _ := s.Update(Name, id, func(r *sim.Resource) error {
		if r.State != sim.StatePending {
			return nil
		}
		if err != nil {
			r.Extra[extraStatusMsg] = "Error response from daemon: failed to create task for container: OCI runtime create failed: " + err.Error()
			r.Message = err.Error()
			return nil
		}
		r.State, r.Address = sim.StateRunning, addr
		return nil
	})
	if err == nil && res.State != sim.StateRunning {
		_ = s.StopPod(Name, id) // destroyed or stopped while it started
	}
}

// live returns the instances not destroyed, oldest first.
func live(s *sim.Sim) []sim.Resource {
	var out []sim.Resource
	for _, r := range s.List(Name, KindPod) {
		if r.State != sim.StateTerminated {
			out = append(out, r)
		}
	}
	return out
}

// instanceJSON is an instance as GET /instances/ shows it (vast.py show
// instances; dstack's compute.py reads actual_status, status_msg,
// public_ipaddr, ports and the three states).
func instanceJSON(s *sim.Sim, r sim.Resource) map[string]any {
	a, _ := findAsk(r.InstanceType)
	m := map[string]any{
		"id": mustInt(r.ID), "label": r.Extra[extraLabel], "machine_id": a["machine_id"], "host_id": a["host_id"],
		"gpu_name": a["gpu_name"], "num_gpus": a["num_gpus"], "gpu_ram": a["gpu_ram"],
		"cpu_cores_effective": a["cpu_cores_effective"], "cpu_ram": a["cpu_ram"], "disk_space": r.SizeGB,
		"geolocation": r.Region, "dph_total": r.Price, "is_bid": r.Spot, "min_bid": a["min_bid"],
		"image_uuid": r.Image, "start_date": float64(r.CreatedAt.UnixNano()) / 1e9,
		"intended_status": "running", "cur_state": "running", "next_state": "running",
		"actual_status": "loading", "status_msg": "Pulling image " + r.Image,
		"public_ipaddr": nil, "ports": map[string]any{}, "direct_port_count": a["direct_port_count"],
		"ssh_host": nil, "ssh_port": nil,
	}
	switch {
	case r.State == stateStopped:
		m["intended_status"], m["cur_state"], m["next_state"] = "stopped", "stopped", "stopped"
		m["actual_status"], m["status_msg"] = "exited", "Instance stopped: outbid"
	case r.Extra[extraStatusMsg] != "":
		m["actual_status"], m["status_msg"] = "created", r.Extra[extraStatusMsg]
	case r.State == sim.StateRunning:
		m["public_ipaddr"] = r.Address
		ps, err := s.PodState(Name, r.ID)
		switch {
		case err != nil:
			m["actual_status"], m["status_msg"] = "offline", err.Error()
		case ps.Running:
			ports := map[string]any{}
			for _, port := range strings.Split(r.Extra[extraPorts], ",") {
				if port != "" {
					ports[port+"/tcp"] = []map[string]string{{"HostIp": "0.0.0.0", "HostPort": port}}
				}
			}
			m["actual_status"], m["status_msg"], m["ports"] = "running", "success, running "+r.Image, ports
		default:
			msg := ps.Message
			if ps.ExitCode != nil {
				msg = strings.TrimSpace(fmt.Sprintf("Exited (%d) %s", *ps.ExitCode, msg))
			}
			m["actual_status"], m["status_msg"] = "exited", msg
		}
	}
	return m
}

func mustInt(s string) int64 {
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}

func (p *Provider) listInstances(s *sim.Sim, r *http.Request) (any, *apiError) {
	out := []map[string]any{}
	for _, res := range live(s) {
		out = append(out, instanceJSON(s, res))
	}
	return map[string]any{"instances": out}, nil
}

// instance returns the live instance of the request's id.
func instance(s *sim.Sim, r *http.Request) (sim.Resource, *apiError) {
	id := r.PathValue("id")
	res, ok := s.Get(Name, id)
	if !ok || res.Kind != KindPod || res.State == sim.StateTerminated {
		return sim.Resource{}, errorf(http.StatusNotFound, "no_such_instance", "Instance %s not found.", id)
	}
	return res, nil
}

func (p *Provider) getInstance(s *sim.Sim, r *http.Request) (any, *apiError) {
	res, e := instance(s, r)
	if e != nil {
		return nil, e
	}
	return map[string]any{"instances": instanceJSON(s, res)}, nil
}

func (p *Provider) destroy(s *sim.Sim, r *http.Request) (any, *apiError) {
	res, e := instance(s, r)
	if e != nil {
		return nil, e
	}
	if err := s.StopPod(Name, res.ID); err != nil {
		return nil, errorf(http.StatusInternalServerError, "server_error", "%v", err)
	}
	if _, err := s.Update(Name, res.ID, func(r *sim.Resource) error {
		now := s.Now().UTC()
		r.State, r.TerminatedAt = sim.StateTerminated, &now
		return nil
	}); err != nil {
		return nil, errorf(http.StatusInternalServerError, "server_error", "%v", err)
	}
	return map[string]any{"success": true}, nil
}

// Interrupt stops bid instance id as Vast.ai does when it is outbid: the
// container stops and the instance shows cur_state, intended_status and
// next_state "stopped" until it is destroyed.
func (p *Provider) Interrupt(s *sim.Sim, id string) error {
	res, ok := s.Get(Name, id)
	switch {
	case !ok || res.Kind != KindPod || res.State == sim.StateTerminated:
		return fmt.Errorf("vastai: %w: instance %s", sim.ErrNotFound, id)
	case !res.Spot:
		return fmt.Errorf("vastai: instance %s is not a bid instance", id)
	}
	// The state first: an API call between the two must not see a
	// stopped container of an instance that is not marked outbid.
	if _, err := s.Update(Name, id, func(r *sim.Resource) error {
		r.State, r.Interrupted = stateStopped, true
		return nil
	}); err != nil {
		return err
	}
	return s.StopPod(Name, id)
}
