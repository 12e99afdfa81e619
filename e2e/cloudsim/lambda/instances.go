package lambda

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"

	"hoist/e2e/cloudsim/sim"
)

// status is Lambda's instance status of a simulated VM's state.
func status(state string) string {
	switch state {
	case sim.StateRunning:
		return "active"
	case sim.StateStopping:
		return "terminating"
	case sim.StateTerminated:
		return "terminated"
	}
	return "booting"
}

// instanceJSON is an instance object (https://docs.lambda.ai/api/cloud#getInstance).
func instanceJSON(r sim.Resource) map[string]any {
	m := map[string]any{
		"id":                r.ID,
		"name":              r.Name,
		"status":            status(r.State),
		"ssh_key_names":     strings.Fields(r.Extra[extraKeyNames]),
		"file_system_names": []string{},
		"region":            regionJSON(r.Region),
		"is_reserved":       false,
	}
	if t := catalog()[r.InstanceType]; t != nil {
		m["instance_type"] = typeJSON(t)
	} else {
		m["instance_type"] = map[string]any{"name": r.InstanceType}
	}
	if r.State == sim.StateRunning {
		// Lambda shows the address once the instance is active.
		m["ip"], m["private_ip"], m["hostname"] = r.Address, r.Address, strings.ReplaceAll(r.Address, ".", "-")
	}
	return m
}

// live returns the instances not terminated, oldest first.
func live(s *sim.Sim) []sim.Resource {
	var out []sim.Resource
	for _, r := range s.List(Name, sim.KindInstance) {
		if r.State != sim.StateTerminated {
			out = append(out, r)
		}
	}
	return out
}

func (p *Provider) listInstances(s *sim.Sim, r *http.Request) (any, *apiError) {
	out := []map[string]any{}
	for _, res := range live(s) {
		out = append(out, instanceJSON(res))
	}
	return out, nil
}

func notFound(what string) *apiError {
	return &apiError{status: http.StatusNotFound, Code: "global/object-does-not-exist",
		Message: what + " not found", Suggestion: "Check the ID and try again."}
}

func (p *Provider) getInstance(s *sim.Sim, r *http.Request) (any, *apiError) {
	res, ok := s.Get(Name, r.PathValue("id"))
	if !ok || res.Kind != sim.KindInstance || res.State == sim.StateTerminated {
		return nil, notFound("Instance")
	}
	return instanceJSON(res), nil
}

func decode(r *http.Request, v any) *apiError {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return errorf(http.StatusBadRequest, "global/invalid-parameters", "Invalid request body: %v", err)
	}
	return nil
}

// launchRequest is the body of POST /instance-operations/launch.
type launchRequest struct {
	RegionName       string            `json:"region_name"`
	InstanceTypeName string            `json:"instance_type_name"`
	SSHKeyNames      []string          `json:"ssh_key_names"`
	FileSystemNames  []string          `json:"file_system_names"`
	Quantity         *int              `json:"quantity"`
	Name             *string           `json:"name"`
	Image            map[string]string `json:"image"`
	UserData         string            `json:"user_data"`
	Tags             []map[string]any  `json:"tags"`
}

func (p *Provider) launch(s *sim.Sim, r *http.Request) (any, *apiError) {
	var req launchRequest
	if e := decode(r, &req); e != nil {
		return nil, e
	}
	t := catalog()[req.InstanceTypeName]
	switch {
	case t == nil:
		return nil, errorf(http.StatusBadRequest, "global/invalid-parameters", "Invalid instance type %q", req.InstanceTypeName)
	case !slices.Contains(t.regions, req.RegionName):
		return nil, errorf(http.StatusBadRequest, "global/invalid-parameters", "Invalid region %q for instance type %s", req.RegionName, req.InstanceTypeName)
	case len(req.SSHKeyNames) != 1:
		return nil, errorf(http.StatusBadRequest, "global/invalid-parameters", "Exactly one SSH key name must be given")
	case req.Quantity != nil && *req.Quantity != 1:
		return nil, errorf(http.StatusBadRequest, "global/invalid-parameters", "quantity must be 1")
	case len(req.FileSystemNames) > 0:
		return nil, errorf(http.StatusBadRequest, "global/invalid-parameters", "the simulator has no file systems")
	case req.Name != nil && len(*req.Name) > 64:
		return nil, errorf(http.StatusBadRequest, "global/invalid-parameters", "name must be at most 64 characters")
	}
	user := "ubuntu"
	image := ""
	if req.Image != nil {
		image = req.Image["family"] + req.Image["id"]
		if image == ImageRoot {
			user = "root"
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	key, ok := findKey(s, req.SSHKeyNames[0])
	if !ok {
		return nil, errorf(http.StatusBadRequest, "global/invalid-parameters", "SSH key %q does not exist", req.SSHKeyNames[0])
	}
	if !s.Take(req.InstanceTypeName) {
		return nil, &apiError{status: http.StatusBadRequest, Code: "instance-operations/launch/insufficient-capacity",
			Message:    "Not enough capacity to fulfill launch request.",
			Suggestion: "Choose an instance type with more availability, or try again later."}
	}
	name := ""
	if req.Name != nil {
		name = *req.Name
	}
	res, err := s.Create(sim.Resource{
		Provider: Name, Kind: sim.KindInstance, ID: p.newID(), Name: name, State: sim.StatePending,
		Region: req.RegionName, InstanceType: req.InstanceTypeName, Image: image, Price: t.offer.Price,
		User: user, AuthorizedKeys: []string{key.Extra[extraPublicKey]},
		Extra: map[string]string{extraKeyNames: req.SSHKeyNames[0], extraImage: image},
	})
	if err != nil {
		return nil, errorf(http.StatusInternalServerError, "global/unknown", "%v", err)
	}
	if err := s.Boot(Name, res.ID); err != nil {
		return nil, errorf(http.StatusInternalServerError, "global/unknown", "%v", err)
	}
	return map[string]any{"instance_ids": []string{res.ID}}, nil
}

func (p *Provider) terminate(s *sim.Sim, r *http.Request) (any, *apiError) {
	var req struct {
		InstanceIDs []string `json:"instance_ids"`
	}
	if e := decode(r, &req); e != nil {
		return nil, e
	}
	if len(req.InstanceIDs) == 0 {
		return nil, errorf(http.StatusBadRequest, "global/invalid-parameters", "instance_ids is required")
	}
	for _, id := range req.InstanceIDs {
		res, ok := s.Get(Name, id)
		if !ok || res.Kind != sim.KindInstance || res.State == sim.StateTerminated {
			return nil, notFound("Instance " + id)
		}
	}
	out := []map[string]any{}
	for _, id := range req.InstanceIDs {
		if err := s.Halt(Name, id); err != nil {
			return nil, errorf(http.StatusInternalServerError, "global/unknown", "%v", err)
		}
		res, _ := s.Get(Name, id)
		m := instanceJSON(res)
		m["status"] = "terminating"
		out = append(out, m)
	}
	return map[string]any{"terminated_instances": out}, nil
}
