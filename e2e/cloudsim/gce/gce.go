package gce

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"hoist/e2e/cloudsim/sim"
)

// Name is the provider's name in the simulator and hoist's backend type.
const Name = "gcp"

// Project is the one project the simulator serves; its service account may
// touch nothing else.
const Project = "hoist-sim"

// Sim images, named in the backend entry's os_images: the simulator boots
// any image, and its sshd logs in root.
const (
	ImageCPU    = "projects/" + Project + "/global/images/hoist-sim-cpu"
	ImageNVIDIA = "projects/" + Project + "/global/images/hoist-sim-nvidia"
)

// Regions and their zones, a few of the real ones
// (https://cloud.google.com/compute/docs/regions-zones).
var Regions = map[string][]string{
	"us-central1":  {"us-central1-a", "us-central1-b", "us-central1-c", "us-central1-f"},
	"europe-west4": {"europe-west4-a", "europe-west4-b", "europe-west4-c"},
	"us-east1":     {"us-east1-b", "us-east1-c", "us-east1-d"},
}

// regionNames is Regions' keys in a fixed order.
var regionNames = []string{"us-central1", "europe-west4", "us-east1"}

// Resource kinds of this provider besides sim.KindInstance and
// sim.KindVolume.
const (
	kindPolicy         = "resource_policy"
	kindServiceAccount = "service_account"
)

// Extra keys on sim resources.
const (
	extraDeleted     = "deleted"      // "true" once deleted (404 from then on)
	extraRequestID   = "request_id"   // the insert's requestId
	extraPolicies    = "policies"     // instance: resource policy links, space-separated
	extraDisks       = "disks"        // instance: attached disks, "deviceName=selfLink" space-separated
	extraDeviceName  = "device_name"  // volume: device name on AttachedTo
	extraTermination = "termination"  // instance: scheduling.instanceTerminationAction
	extraDiskType    = "disk_type"    // volume: disk type link
	extraDescription = "description"  // resource policy: description
	extraPlacement   = "availability" // resource policy: COLLOCATED etc.
)

// Provider is the simulated Compute Engine. Create it with New.
type Provider struct {
	mu       sync.Mutex
	ops      map[string]*operation // by operation name
	requests map[string]string     // requestId → operation name
	nextID   atomic.Uint64
	calls    atomic.Uint64 // counts throttled answers, to alternate 429 and 503
	saMu     sync.Mutex
	sa       map[*sim.Sim]*saKey
}

// New returns the simulated Compute Engine.
func New() sim.Provider {
	p := &Provider{ops: map[string]*operation{}, requests: map[string]string{}, sa: map[*sim.Sim]*saKey{}}
	p.nextID.Store(uint64(time.Now().UnixNano()) & 0x0fffffffffffffff)
	return p
}

// Name is "gcp".
func (p *Provider) Name() string { return Name }

// TLS is false: the Compute client and the token exchange speak plain http
// to a loopback endpoint.
func (p *Provider) TLS() bool { return false }

// Backend returns a hoist backend entry for the API at endpoint: dstack's
// GCP entry with a service-account key whose token_uri is the simulator.
func (p *Provider) Backend(s *sim.Sim, endpoint string) map[string]any {
	endpoint = strings.TrimSuffix(endpoint, "/")
	sa, err := p.serviceAccount(s)
	if err != nil {
		panic(fmt.Sprintf("gce: service account: %v", err))
	}
	return map[string]any{
		"type":       Name,
		"project_id": Project,
		"creds": map[string]any{
			"type": "service_account",
			"data": string(sa.json(endpoint + tokenPath)),
		},
		"regions":      []string{"us-central1", "europe-west4"},
		"endpoint_url": endpoint,
		"os_images": map[string]any{
			"cpu":    map[string]any{"name": ImageCPU, "user": "root"},
			"nvidia": map[string]any{"name": ImageNVIDIA, "user": "root"},
		},
	}
}

// Interrupt preempts spot instance id (its numeric id or zone/name) as
// Compute Engine does with instanceTerminationAction STOP: the VM halts and
// the instance stays, TERMINATED, with a compute.instances.preempted
// operation in its zone.
func (p *Provider) Interrupt(s *sim.Sim, id string) error {
	r, ok := p.findInstanceByID(s, id)
	if !ok {
		return fmt.Errorf("gce: instance %s: not found", id)
	}
	if !r.Spot {
		return fmt.Errorf("gce: instance %s is not a spot instance", id)
	}
	if err := s.Reclaim(Name, r.ID); err != nil {
		return err
	}
	p.newOp(s, scopeZone(r.Zone), "compute.instances.preempted", instanceLink(r.Zone, r.Name), r.ID, nil)
	return nil
}

// Handler serves the Compute API under /compute/v1/ and the token endpoint.
func (p *Provider) Handler(s *sim.Sim) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+tokenPath, func(w http.ResponseWriter, r *http.Request) { p.token(s, w, r) })
	h := func(pattern, op string, fn func(*sim.Sim, *http.Request) (proto.Message, *apiError)) {
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			if e := p.authorize(s, r); e != nil {
				writeError(w, e)
				return
			}
			fault := s.Inject(Name, op, op == "instances.insert")
			switch fault {
			case sim.FaultThrottle:
				if len(s.Faults().ErrorKinds) == 0 {
					// A bare error_rate keeps its old answers.
					writeError(w, p.throttled())
				} else {
					writeError(w, rateLimited)
				}
				return
			case sim.FaultTransient:
				writeError(w, backendError)
				return
			case sim.FaultTimeout:
				s.Hold(r)
			case sim.FaultCapacity:
				r = r.WithContext(context.WithValue(r.Context(), noCapacityKey{}, true))
			}
			m, e := fn(s, r)
			if fault == sim.FaultLost {
				// Done, but the answer never arrives.
				s.Hold(r)
			}
			if e != nil {
				writeError(w, e)
				return
			}
			writeProto(w, m)
		})
	}
	const base = "/compute/v1/projects/{project}"
	h("GET "+base+"/regions/{region}", "regions.get", p.getRegion)
	h("GET "+base+"/zones", "zones.list", p.listZones)
	h("GET "+base+"/zones/{zone}", "zones.get", p.getZone)

	h("POST "+base+"/zones/{zone}/instances", "instances.insert", p.mutation(p.insertInstance))
	h("GET "+base+"/zones/{zone}/instances", "instances.list", p.listInstances)
	h("GET "+base+"/aggregated/instances", "instances.aggregatedList", p.aggregatedInstances)
	h("GET "+base+"/zones/{zone}/instances/{name}", "instances.get", p.getInstance)
	h("DELETE "+base+"/zones/{zone}/instances/{name}", "instances.delete", p.mutation(p.deleteInstance))
	h("GET "+base+"/zones/{zone}/instances/{name}/serialPort", "instances.getSerialPortOutput", p.serialPort)
	h("POST "+base+"/zones/{zone}/instances/{name}/attachDisk", "instances.attachDisk", p.mutation(p.attachDisk))
	h("POST "+base+"/zones/{zone}/instances/{name}/detachDisk", "instances.detachDisk", p.mutation(p.detachDisk))

	h("POST "+base+"/zones/{zone}/disks", "disks.insert", p.mutation(p.insertDisk))
	h("GET "+base+"/zones/{zone}/disks", "disks.list", p.listDisks)
	h("GET "+base+"/aggregated/disks", "disks.aggregatedList", p.aggregatedDisks)
	h("GET "+base+"/zones/{zone}/disks/{name}", "disks.get", p.getDisk)
	h("DELETE "+base+"/zones/{zone}/disks/{name}", "disks.delete", p.mutation(p.deleteDisk))

	h("POST "+base+"/regions/{region}/resourcePolicies", "resourcePolicies.insert", p.mutation(p.insertPolicy))
	h("GET "+base+"/regions/{region}/resourcePolicies/{name}", "resourcePolicies.get", p.getPolicy)
	h("GET "+base+"/aggregated/resourcePolicies", "resourcePolicies.aggregatedList", p.aggregatedPolicies)
	h("DELETE "+base+"/regions/{region}/resourcePolicies/{name}", "resourcePolicies.delete", p.mutation(p.deletePolicy))

	h("POST "+base+"/global/firewalls", "firewalls.insert", p.mutation(p.insertFirewall))
	h("GET "+base+"/global/firewalls/{name}", "firewalls.get", p.getFirewall)

	h("GET "+base+"/global/operations/{op}", "globalOperations.get", p.getOp)
	h("GET "+base+"/zones/{zone}/operations/{op}", "zoneOperations.get", p.getOp)
	h("GET "+base+"/regions/{region}/operations/{op}", "regionOperations.get", p.getOp)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, &apiError{Code: http.StatusNotFound, Reason: "notFound",
			Message: fmt.Sprintf("The requested URL %s was not found on this server.", r.URL.Path)})
	})
	return mux
}

// throttled is the answer to a call the fault injection fails: alternately
// 429 rateLimitExceeded and 503 backendError, Compute Engine's throttling and
// transient errors (https://cloud.google.com/compute/docs/api/rest-api-rate-limits).
// Injected faults as Compute Engine answers them
// (https://cloud.google.com/compute/docs/api/handling-errors): throttling
// is 429 rateLimitExceeded, a server error 503 backendError.
var (
	rateLimited  = &apiError{Code: http.StatusTooManyRequests, Reason: "rateLimitExceeded", Message: "Rate Limit Exceeded"}
	backendError = &apiError{Code: http.StatusServiceUnavailable, Reason: "backendError", Message: "The service is currently unavailable."}
)

// noCapacityKey marks, in a request's context, an injected capacity fault:
// an instances.insert that would create an instance ends in a stockout
// (one that repeats a requestId still answers its operation).
type noCapacityKey struct{}

// noCapacity reports an injected capacity fault on r.
func noCapacity(r *http.Request) bool {
	v, _ := r.Context().Value(noCapacityKey{}).(bool)
	return v
}

// throttled is the answer to a bare error_rate's failures (no
// error_kinds): 429 rateLimitExceeded and 503 backendError in turn.
func (p *Provider) throttled() *apiError {
	if p.calls.Add(1)%2 == 1 {
		return rateLimited
	}
	return backendError
}

// An apiError is Compute Engine's synchronous error
// (https://cloud.google.com/compute/docs/api/handling-errors).
type apiError struct {
	Code    int
	Reason  string
	Message string
}

var statusNames = map[int]string{
	400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
	409: "ALREADY_EXISTS", 412: "FAILED_PRECONDITION", 429: "RESOURCE_EXHAUSTED", 500: "INTERNAL",
	503: "UNAVAILABLE",
}

func writeError(w http.ResponseWriter, e *apiError) {
	body := map[string]any{"error": map[string]any{
		"code":    e.Code,
		"message": e.Message,
		"errors":  []map[string]string{{"message": e.Message, "domain": "global", "reason": e.Reason}},
		"status":  statusNames[e.Code],
	}}
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	if e.Code == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="https://accounts.google.com/", error="invalid_token"`)
	}
	w.WriteHeader(e.Code)
	_ = json.NewEncoder(w).Encode(body)
}

func writeProto(w http.ResponseWriter, m proto.Message) {
	b, err := protojson.Marshal(m)
	if err != nil {
		writeError(w, &apiError{Code: 500, Reason: "internalError", Message: err.Error()})
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	_, _ = w.Write(b)
}

func decodeBody(r *http.Request, m proto.Message) *apiError {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		return badRequest("invalid", "Invalid JSON payload received. "+err.Error())
	}
	if err := protojson.Unmarshal(b, m); err != nil {
		return badRequest("invalid", "Invalid JSON payload received. "+err.Error())
	}
	return nil
}

func badRequest(reason, msg string) *apiError {
	return &apiError{Code: http.StatusBadRequest, Reason: reason, Message: msg}
}

func notFound(what string) *apiError {
	return &apiError{Code: http.StatusNotFound, Reason: "notFound",
		Message: fmt.Sprintf("The resource '%s' was not found", what)}
}

// checkScope checks the project, zone or region of a request path.
func checkScope(r *http.Request) *apiError {
	if p := r.PathValue("project"); p != Project {
		return &apiError{Code: http.StatusForbidden, Reason: "forbidden",
			Message: fmt.Sprintf("Required 'compute.projects.get' permission for 'projects/%s'", p)}
	}
	if z := r.PathValue("zone"); z != "" && regionOf(z) == "" {
		return &apiError{Code: http.StatusBadRequest, Reason: "invalid",
			Message: fmt.Sprintf("Invalid value for field 'zone': '%s'. Unknown zone.", z)}
	}
	if rg := r.PathValue("region"); rg != "" && Regions[rg] == nil {
		return &apiError{Code: http.StatusBadRequest, Reason: "invalid",
			Message: fmt.Sprintf("Invalid value for field 'region': '%s'. Unknown region.", rg)}
	}
	return nil
}

// regionOf returns the region of a known zone, "" for an unknown one.
func regionOf(zone string) string {
	for rg, zones := range Regions {
		for _, z := range zones {
			if z == zone {
				return rg
			}
		}
	}
	return ""
}

// Names of instances, disks and policies are RFC 1035 labels
// (https://cloud.google.com/compute/docs/naming-resources).
var nameRE = regexp.MustCompile(`^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$`)

// Label keys and values (https://cloud.google.com/compute/docs/labeling-resources).
var (
	labelKeyRE   = regexp.MustCompile(`^[a-z][_a-z0-9-]{0,62}$`)
	labelValueRE = regexp.MustCompile(`^[_a-z0-9-]{0,63}$`)
)

func checkName(field, name string) *apiError {
	if !nameRE.MatchString(name) {
		return badRequest("invalid", fmt.Sprintf("Invalid value for field '%s': '%s'. Must be a match of regex '(?:[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?)'", field, name))
	}
	return nil
}

func checkLabels(labels map[string]string) *apiError {
	if len(labels) > 64 {
		return badRequest("invalid", "Invalid value for field 'resource.labels': too many labels (at most 64).")
	}
	for k, v := range labels {
		if !labelKeyRE.MatchString(k) || !labelValueRE.MatchString(v) {
			return badRequest("invalid", fmt.Sprintf("Invalid value for field 'resource.labels': '%s=%s'. Label keys and values must match '[a-z][_a-z0-9-]{0,62}' and '[_a-z0-9-]{0,63}'.", k, v))
		}
	}
	return nil
}

// requestIDRE is a UUID, the form Compute Engine requires of requestId.
var requestIDRE = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// lastSegment returns what follows the last slash of a link or path.
func lastSegment(s string) string {
	if i := strings.LastIndexByte(s, '/'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// Links as Compute Engine writes them: the selfLink host is fixed, as the
// real one is whatever endpoint the client used.
const linkBase = "https://www.googleapis.com/compute/v1/projects/" + Project

func zoneLink(zone string) string           { return linkBase + "/zones/" + zone }
func regionLink(region string) string       { return linkBase + "/regions/" + region }
func instanceLink(zone, name string) string { return zoneLink(zone) + "/instances/" + name }
func diskLink(zone, name string) string     { return zoneLink(zone) + "/disks/" + name }
func policyLink(region, name string) string {
	return regionLink(region) + "/resourcePolicies/" + name
}

func timestamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000-07:00") }

func (p *Provider) newID() string { return strconv.FormatUint(p.nextID.Add(1+rand.Uint64N(1000)), 10) }
