package arm

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"hoist/e2e/cloudsim/sim"
)

// Resource kinds of this provider besides sim.KindInstance and
// sim.KindVolume.
const (
	kindResourceGroup = "resource_group"
	kindNetwork       = "network"
)

// stateFailed is a VM whose provisioning failed (AllocationFailed): it
// exists, runs nothing, and waits to be deleted, as on Azure.
const stateFailed = "failed"

// Keys of sim.Resource.Extra.
const (
	extraID        = "id"             // the resource id as first spelled
	extraARMID     = "arm_id"         // the resource id, lower case, for lookups
	extraType      = "type"           // the resource type
	extraRG        = "resource_group" // the resource group
	extraBody      = "body"           // the resource's JSON as last PUT, with computed fields
	extraNIC       = "nic"            // a VM's network interface id
	extraPublicIP  = "public_ip"      // a VM's public IP address id, if any
	extraVM        = "vm"             // the sim id of the VM a NIC or public IP belongs to
	extraLUN       = "lun"            // an attached disk's LUN
	extraManagedBy = "managed_by"     // the id of the VM a disk is attached to
	extraState     = "provisioning"   // a failed VM's provisioningState
	extraErrCode   = "error_code"     // why a VM's provisioning failed
	extraErrMsg    = "error_message"
)

// live reports whether a resource still exists.
func live(r sim.Resource) bool {
	return r.State != sim.StateTerminated && r.State != sim.StateDeleted
}

// find returns the live resource of a kind with Resource Manager id id
// (case-insensitive, as Resource Manager ids are).
func (h *server) find(kind, id string) (sim.Resource, bool) {
	want := strings.ToLower(id)
	for _, r := range h.s.List(name, kind) {
		if r.Extra[extraARMID] == want && live(r) {
			return r, true
		}
	}
	return sim.Resource{}, false
}

func bodyOf(r sim.Resource) map[string]any {
	var m map[string]any
	_ = json.Unmarshal([]byte(r.Extra[extraBody]), &m)
	if m == nil {
		m = map[string]any{}
	}
	return m
}

func setBody(r *sim.Resource, m map[string]any) {
	b, _ := json.Marshal(m)
	if r.Extra == nil {
		r.Extra = map[string]string{}
	}
	r.Extra[extraBody] = string(b)
}

// obj returns m[key] as an object, creating it when absent.
func obj(m map[string]any, key string) map[string]any {
	v, _ := m[key].(map[string]any)
	if v == nil {
		v = map[string]any{}
		m[key] = v
	}
	return v
}

// remarshal decodes the JSON value v into out.
func remarshal(v, out any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}

func tagsOf(v any) map[string]string {
	var t map[string]string
	_ = remarshal(v, &t)
	return t
}

func newGUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// normLocation spells a location as Resource Manager returns it ("East US"
// is eastus).
func normLocation(l string) string {
	return strings.ToLower(strings.ReplaceAll(l, " ", ""))
}

// putGeneric creates or replaces a resource Resource Manager keeps as given
// (resource groups, virtual networks, network security groups); shape adds
// computed fields to the body.
func (h *server) putGeneric(w http.ResponseWriter, kind, typ, id, nm string, body map[string]any, shape func(map[string]any)) {
	h.p.mu.Lock()
	defer h.p.mu.Unlock()
	loc, _ := body["location"].(string)
	if loc == "" {
		writeError(w, errorf(http.StatusBadRequest, "LocationRequired", "The location property is required for this definition."))
		return
	}
	loc = normLocation(loc)
	body["id"], body["name"], body["type"], body["location"] = id, nm, typ, loc
	obj(body, "properties")["provisioningState"] = "Succeeded"
	if shape != nil {
		shape(body)
	}
	tags := tagsOf(body["tags"])
	simID := strings.ToLower(id)
	status := http.StatusOK
	if old, ok := h.s.Get(name, simID); ok {
		if !live(old) {
			status = http.StatusCreated
		}
		_, err := h.s.Update(name, simID, func(r *sim.Resource) error {
			r.State, r.TerminatedAt, r.Region, r.Tags = sim.StateAvailable, nil, loc, tags
			setBody(r, body)
			return nil
		})
		if err != nil {
			writeError(w, errorf(http.StatusInternalServerError, "InternalServerError", "%v", err))
			return
		}
	} else {
		r := sim.Resource{
			Provider: name, Kind: kind, ID: simID, Name: nm, State: sim.StateAvailable, Region: loc, Tags: tags,
			Extra: map[string]string{extraARMID: simID, extraID: id, extraType: typ},
		}
		setBody(&r, body)
		if _, err := h.s.Create(r); err != nil {
			writeError(w, errorf(http.StatusInternalServerError, "InternalServerError", "%v", err))
			return
		}
		status = http.StatusCreated
	}
	writeJSON(w, status, body)
}

// getGeneric answers a GET of a resource kept as given.
func (h *server) getGeneric(w http.ResponseWriter, kind, id string, missing *armError) {
	r, ok := h.find(kind, id)
	if !ok {
		writeError(w, missing)
		return
	}
	writeJSON(w, http.StatusOK, bodyOf(r))
}

// deleteGeneric deletes a resource kept as given; gone is 204, as on Azure.
func (h *server) deleteGeneric(w http.ResponseWriter, kind, id string) {
	h.p.mu.Lock()
	defer h.p.mu.Unlock()
	r, ok := h.find(kind, id)
	if !ok {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	h.markDeleted(r.ID)
	w.WriteHeader(http.StatusOK)
}

func (h *server) markDeleted(simID string) {
	now := h.s.Now().UTC()
	_, _ = h.s.Update(name, simID, func(r *sim.Resource) error {
		r.State, r.TerminatedAt = sim.StateDeleted, &now
		return nil
	})
}

// resourceGroup serves /subscriptions/{s}/resourcegroups/{rg}
// (https://learn.microsoft.com/rest/api/resources/resource-groups).
func (h *server) resourceGroup(w http.ResponseWriter, r *http.Request, id, rg string, body map[string]any) {
	missing := errorf(http.StatusNotFound, "ResourceGroupNotFound", "Resource group '%s' could not be found.", rg)
	switch r.Method {
	case http.MethodPut:
		h.putGeneric(w, kindResourceGroup, typeResourceGroups, id, rg, body, nil)
	case http.MethodGet:
		h.getGeneric(w, kindResourceGroup, id, missing)
	case http.MethodHead:
		if _, ok := h.find(kindResourceGroup, id); ok {
			w.WriteHeader(http.StatusNoContent)
		} else {
			w.WriteHeader(http.StatusNotFound)
		}
	case http.MethodDelete:
		h.deleteGeneric(w, kindResourceGroup, id)
	default:
		writeError(w, errorf(http.StatusMethodNotAllowed, "MethodNotAllowed", "%s is not allowed on resource groups.", r.Method))
	}
}

// network serves virtual networks and network security groups, kept as
// given; a virtual network's inline subnets get their ids
// (https://learn.microsoft.com/rest/api/virtualnetwork/virtual-networks).
func (h *server) network(w http.ResponseWriter, r *http.Request, typ, nm, id string, body map[string]any) {
	switch r.Method {
	case http.MethodPut:
		h.putGeneric(w, kindNetwork, typ, id, nm, body, func(b map[string]any) {
			subnets, _ := obj(b, "properties")["subnets"].([]any)
			for _, s := range subnets {
				sn, ok := s.(map[string]any)
				if !ok {
					continue
				}
				sname, _ := sn["name"].(string)
				sn["id"], sn["type"] = id+"/subnets/"+sname, typeVNet+"/subnets"
				obj(sn, "properties")["provisioningState"] = "Succeeded"
			}
		})
	case http.MethodGet:
		h.getGeneric(w, kindNetwork, id, notFound(id))
	case http.MethodDelete:
		h.deleteGeneric(w, kindNetwork, id)
	default:
		writeError(w, errorf(http.StatusMethodNotAllowed, "MethodNotAllowed", "%s is not allowed on %s.", r.Method, typ))
	}
}

// subnet answers GET of a subnet of a virtual network.
func (h *server) subnet(w http.ResponseWriter, r *http.Request, vnetID, subnet string) {
	if sn, ok := h.findSubnet(vnetID + "/subnets/" + subnet); ok {
		writeJSON(w, http.StatusOK, sn)
		return
	}
	writeError(w, notFound(vnetID+"/subnets/"+subnet))
}

// findSubnet returns the subnet with id id, if its virtual network has it.
func (h *server) findSubnet(id string) (map[string]any, bool) {
	vnetID, _, ok := strings.Cut(strings.ToLower(id), "/subnets/")
	if !ok {
		return nil, false
	}
	vnet, ok := h.find(kindNetwork, vnetID)
	if !ok {
		return nil, false
	}
	subnets, _ := obj(bodyOf(vnet), "properties")["subnets"].([]any)
	for _, s := range subnets {
		sn, _ := s.(map[string]any)
		if sid, _ := sn["id"].(string); strings.EqualFold(sid, id) {
			return sn, true
		}
	}
	return nil, false
}

// vmNetwork answers GET of the network interface or public IP address a
// VM's networkInterfaceConfigurations created: the address is the sim VM's.
func (h *server) vmNetwork(w http.ResponseWriter, r *http.Request, typ, id string) {
	res, ok := h.find(kindNetwork, id)
	if !ok {
		writeError(w, notFound(id))
		return
	}
	b := bodyOf(res)
	vm, _ := h.s.Get(name, res.Extra[extraVM])
	props := obj(b, "properties")
	if typ == typePublicIP {
		if vm.Address != "" {
			props["ipAddress"] = vm.Address
		}
	} else if cfgs, _ := props["ipConfigurations"].([]any); len(cfgs) > 0 && vm.Address != "" {
		cfg, _ := cfgs[0].(map[string]any)
		obj(cfg, "properties")["privateIPAddress"] = vm.Address
	}
	writeJSON(w, http.StatusOK, b)
}

// list answers a list of a resource type in a resource group (every group
// for rg ""): {"value": [...]}, one page.
func (h *server) list(w http.ResponseWriter, r *http.Request, rg, typ string) {
	if r.Method != http.MethodGet {
		writeError(w, errorf(http.StatusMethodNotAllowed, "MethodNotAllowed", "%s is not allowed on a list.", r.Method))
		return
	}
	typ = canonicalType(typ)
	kind := kindNetwork
	switch typ {
	case typeVM:
		kind = sim.KindInstance
	case typeDisk:
		kind = sim.KindVolume
	}
	value := []any{}
	for _, res := range h.s.List(name, kind) {
		if !live(res) || res.Extra[extraType] != typ || (rg != "" && !strings.EqualFold(res.Extra[extraRG], rg)) {
			continue
		}
		switch typ {
		case typeVM:
			value = append(value, h.vmView(r, res, false, false))
		case typeDisk:
			value = append(value, diskView(res))
		default:
			value = append(value, bodyOf(res))
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"value": value})
}
