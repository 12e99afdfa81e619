package arm

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"

	"hoist/e2e/cloudsim/sim"
)

// Resource types, as Resource Manager spells them in "type".
const (
	typeVM             = "Microsoft.Compute/virtualMachines"
	typeDisk           = "Microsoft.Compute/disks"
	typeVNet           = "Microsoft.Network/virtualNetworks"
	typeNSG            = "Microsoft.Network/networkSecurityGroups"
	typeNIC            = "Microsoft.Network/networkInterfaces"
	typePublicIP       = "Microsoft.Network/publicIPAddresses"
	typeResourceGroups = "Microsoft.Resources/resourceGroups"
)

// arm routes a Resource Manager request (path starting /subscriptions/):
// authentication, throttling, then the resource.
func (h *server) arm(w http.ResponseWriter, r *http.Request, segs []string) {
	if e := h.authorize(r); e != nil {
		writeError(w, e)
		return
	}
	if len(segs) < 3 || !strings.EqualFold(segs[1], SubscriptionID) {
		writeError(w, errorf(http.StatusNotFound, "SubscriptionNotFound", "The subscription '%s' could not be found.", at(segs, 1)))
		return
	}
	create := r.Method == http.MethodPut && strings.EqualFold(operation(segs), "virtualMachines")
	switch h.s.Inject(name, r.Method+" "+operation(segs), create) {
	case sim.FaultThrottle:
		// Resource Manager throttling
		// (https://learn.microsoft.com/azure/azure-resource-manager/management/request-limits-and-throttling).
		w.Header().Set("Retry-After", "1")
		writeError(w, errorf(http.StatusTooManyRequests, "TooManyRequests",
			"The request is being throttled as the limit has been reached for operation type - %s.", operation(segs)))
		return
	case sim.FaultTransient:
		writeError(w, errorf(http.StatusInternalServerError, "InternalServerError", "Encountered internal server error. Please try again."))
		return
	case sim.FaultTimeout:
		h.s.Hold(r)
	case sim.FaultCapacity:
		r = r.WithContext(context.WithValue(r.Context(), noCapacityKey{}, true))
	case sim.FaultLost:
		// Carried out, but the answer never arrives.
		w = &discard{header: http.Header{}}
		defer h.s.Hold(r)
	}
	var body map[string]any
	if r.Method == http.MethodPut || r.Method == http.MethodPatch || r.Method == http.MethodPost {
		raw, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err == nil && len(strings.TrimSpace(string(raw))) > 0 {
			err = json.Unmarshal(raw, &body)
		}
		if err != nil {
			writeError(w, errorf(http.StatusBadRequest, "InvalidRequestContent", "The request content was invalid and could not be deserialized: %v", err))
			return
		}
		if body == nil {
			body = map[string]any{}
		}
	}
	sub := "/subscriptions/" + SubscriptionID
	lower := func(i int) string { return strings.ToLower(at(segs, i)) }
	switch {
	// /subscriptions/{s}/providers/Microsoft.Compute/virtualMachines|disks
	case lower(2) == "providers" && len(segs) == 5 && lower(3) == "microsoft.compute":
		h.list(w, r, "", segs[3]+"/"+segs[4])
	// /subscriptions/{s}/providers/Microsoft.Compute/locations/{l}/operations/{id}
	case lower(2) == "providers" && len(segs) == 8 && lower(4) == "locations" && lower(6) == "operations":
		h.operationStatus(w, r, segs[7])
	case lower(2) == "resourcegroups" && len(segs) == 4:
		h.resourceGroup(w, r, sub+"/resourceGroups/"+segs[3], segs[3], body)
	case lower(2) == "resourcegroups" && len(segs) >= 7 && lower(4) == "providers":
		rg := segs[3]
		if _, ok := h.find(kindResourceGroup, rgID(rg)); !ok {
			writeError(w, errorf(http.StatusNotFound, "ResourceGroupNotFound", "Resource group '%s' could not be found.", rg))
			return
		}
		typ := canonicalType(segs[5] + "/" + segs[6])
		if len(segs) == 7 {
			h.list(w, r, rg, typ)
			return
		}
		id := sub + "/resourceGroups/" + rg + "/providers/" + typ + "/" + segs[7]
		switch {
		case len(segs) == 8 && typ == typeVM:
			h.vm(w, r, rg, segs[7], id, body)
		case len(segs) == 9 && typ == typeVM && lower(8) == "instanceview" && r.Method == http.MethodGet:
			h.vmInstanceView(w, r, id)
		case len(segs) == 8 && typ == typeDisk:
			h.disk(w, r, rg, segs[7], id, body)
		case len(segs) == 8 && (typ == typeVNet || typ == typeNSG):
			h.network(w, r, typ, segs[7], id, body)
		case len(segs) == 8 && (typ == typeNIC || typ == typePublicIP) && r.Method == http.MethodGet:
			h.vmNetwork(w, r, typ, id)
		case len(segs) == 10 && typ == typeVNet && lower(8) == "subnets" && r.Method == http.MethodGet:
			h.subnet(w, r, id, segs[9])
		default:
			writeError(w, errorf(http.StatusBadRequest, "InvalidResourceType", "The simulator does not serve %s %s.", r.Method, r.URL.Path))
		}
	default:
		writeError(w, errorf(http.StatusBadRequest, "InvalidResourceType", "The simulator does not serve %s %s.", r.Method, r.URL.Path))
	}
}

// operation names a request for fault injection: the resource type (and
// sub-resource) it is about, e.g. "virtualMachines", "virtualMachines/instanceView",
// "operations", "resourcegroups".
func operation(segs []string) string {
	switch {
	case len(segs) >= 7 && strings.EqualFold(segs[4], "providers"):
		if len(segs) >= 9 {
			return segs[6] + "/" + segs[8]
		}
		return segs[6]
	case len(segs) >= 7 && strings.EqualFold(segs[2], "providers"):
		return segs[6]
	case len(segs) >= 5 && strings.EqualFold(segs[2], "providers"):
		return segs[4]
	}
	return at(segs, 2)
}

// canonicalType spells a resource type as Resource Manager returns it
// (paths are case-insensitive).
func canonicalType(t string) string {
	for _, c := range []string{typeVM, typeDisk, typeVNet, typeNSG, typeNIC, typePublicIP} {
		if strings.EqualFold(c, t) {
			return c
		}
	}
	return t
}

func at(segs []string, i int) string {
	if i < len(segs) {
		return segs[i]
	}
	return ""
}

func rgID(rg string) string { return "/subscriptions/" + SubscriptionID + "/resourceGroups/" + rg }

// notFound is Resource Manager's answer for a resource that does not exist.
func notFound(id string) *armError {
	typ, rg := "", ""
	segs := strings.Split(strings.Trim(id, "/"), "/")
	if len(segs) >= 8 {
		typ, rg = segs[5]+"/"+segs[6]+"/"+segs[7], segs[3]
	}
	return errorf(http.StatusNotFound, "ResourceNotFound",
		"The Resource '%s' under resource group '%s' was not found. For more details please go to https://aka.ms/ARMResourceNotFoundFix", typ, rg)
}

// noCapacityKey marks, in a request's context, an injected capacity fault:
// a VM PUT that creates a VM ends in AllocationFailed.
type noCapacityKey struct{}

// noCapacity reports an injected capacity fault on r.
func noCapacity(r *http.Request) bool {
	v, _ := r.Context().Value(noCapacityKey{}).(bool)
	return v
}

// discard is a ResponseWriter that drops the answer of a call whose answer
// is lost.
type discard struct{ header http.Header }

func (d *discard) Header() http.Header         { return d.header }
func (d *discard) Write(b []byte) (int, error) { return len(b), nil }
func (d *discard) WriteHeader(int)             {}
