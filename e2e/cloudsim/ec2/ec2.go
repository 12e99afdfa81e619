package ec2

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"net/http"
	"net/url"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"hoist/backends/offers"
	"hoist/e2e/cloudsim/sim"
)

// name is the provider's name in the simulator and its backend type.
const name = "aws"

// Credentials and identities the simulator accepts and shows.
const (
	// AccessKey and SecretKey are the only credentials accepted.
	AccessKey = "AKIAHOISTSIMULATOR01"
	SecretKey = "hoist-simulator-secret-access-key"
	// Account is the simulated AWS account id (owner of the sim images).
	Account = "123456789012"
	// defaultVPC is the id of each region's default VPC.
	defaultVPC = "vpc-0d5e1a0000000000"
)

// Images of the simulated accounts. Sim images log in as root (the
// simulator's sshd can only log in users that exist on this host); dstack's
// defaults (src/dstack/_internal/core/backends/aws/resources.py,
// get_image_id_and_username) log in as ubuntu.
const (
	SimCPUImage    = "hoist-sim-ubuntu-22.04"
	SimNVIDIAImage = "hoist-sim-ubuntu-22.04-nvidia"
)

type image struct {
	id, name, owner, created, user string
}

var images = []image{
	{"ami-0a1b2c3d4e5f60001", SimCPUImage, Account, "2026-01-10T00:00:00.000Z", "root"},
	{"ami-0a1b2c3d4e5f60002", SimNVIDIAImage, Account, "2026-01-10T00:00:00.000Z", "root"},
	{"ami-0d57ac0000000014a", "dstack-0.14", "142421590066", "2024-06-01T00:00:00.000Z", "ubuntu"},
	{"ami-0d1b0a5e00002501a", "Deep Learning Base OSS Nvidia Driver GPU AMI (Ubuntu 22.04) 20250101", "898082745236", "2025-01-01T00:00:00.000Z", "ubuntu"},
	{"ami-0d1b0a5e00002506a", "Deep Learning Base OSS Nvidia Driver GPU AMI (Ubuntu 22.04) 20250601", "898082745236", "2025-06-01T00:00:00.000Z", "ubuntu"},
}

// Provider is the simulated EC2. Its exported fields may be changed before
// Handler is called.
type Provider struct {
	// Regions are the regions Backend configures.
	Regions []string
	// ShutdownDelay is how long a terminated instance stays shutting-down.
	ShutdownDelay time.Duration
	// Logger receives one line per failed call; nil discards.
	Logger *slog.Logger

	// mu serializes the calls that create resources, so that idempotency
	// tokens and unique names hold under concurrent calls.
	mu sync.Mutex

	catOnce sync.Once
	cat     *offers.Catalog
	catErr  error
}

// New returns the simulated EC2 with its defaults.
func New() sim.Provider {
	return &Provider{Regions: []string{"us-east-1", "us-west-2"}, ShutdownDelay: 500 * time.Millisecond}
}

// Name returns "aws".
func (p *Provider) Name() string { return name }

// TLS returns false: the AWS SDK talks plain http to an http endpoint.
func (p *Provider) TLS() bool { return false }

// Backend returns a hoist backend entry in dstack's AWS shape
// (src/dstack/_internal/core/backends/aws/models.py) with the simulator's
// credentials and images.
func (p *Provider) Backend(s *sim.Sim, endpoint string) map[string]any {
	img := func(n string) map[string]any { return map[string]any{"name": n, "owner": Account, "user": "root"} }
	return map[string]any{
		"type":         name,
		"creds":        map[string]any{"type": "access_key", "access_key": AccessKey, "secret_key": SecretKey},
		"regions":      slices.Clone(p.Regions),
		"endpoint_url": endpoint,
		"os_images":    map[string]any{"cpu": img(SimCPUImage), "nvidia": img(SimNVIDIAImage)},
	}
}

// Interrupt reclaims spot instance id as EC2 does: shutting-down, then
// terminated, with state reason Server.SpotInstanceTermination
// (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/spot-interruptions.html).
func (p *Provider) Interrupt(s *sim.Sim, id string) error {
	r, ok := s.Get(name, id)
	if !ok || r.Kind != sim.KindInstance {
		return fmt.Errorf("ec2: no instance %s", id)
	}
	if !r.Spot {
		return fmt.Errorf("ec2: instance %s is not a spot instance", id)
	}
	return p.shutdown(s, id, "Server.SpotInstanceTermination: Spot instance termination", true)
}

// A call is one API request being served.
type call struct {
	p      *Provider
	s      *sim.Sim
	form   url.Values
	region string
	id     string // request id
	// noCapacity is an injected capacity fault: a RunInstances that would
	// create instances fails with InsufficientInstanceCapacity (one that
	// repeats a client token still returns its instances).
	noCapacity bool
}

// transientError is one of EC2's server errors
// (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/errors-overview.html#api-error-codes-table-server):
// InternalError (500) or Unavailable (503), one or the other at random.
func transientError() *apiError {
	if mrand.IntN(2) == 0 {
		return errorf(http.StatusInternalServerError, "InternalError", "An internal error has occurred.")
	}
	return errorf(http.StatusServiceUnavailable, "Unavailable", "The server is overloaded and can't handle the request.")
}

type handlerFunc func(c *call) ([]node, *apiError)

var handlers = map[string]handlerFunc{
	"RunInstances":                  (*call).runInstances,
	"DescribeInstances":             (*call).describeInstances,
	"TerminateInstances":            (*call).terminateInstances,
	"GetConsoleOutput":              (*call).getConsoleOutput,
	"CreateTags":                    (*call).createTags,
	"DeleteTags":                    (*call).deleteTags,
	"DescribeImages":                (*call).describeImages,
	"DescribeAvailabilityZones":     (*call).describeAvailabilityZones,
	"DescribeRegions":               (*call).describeRegions,
	"ImportKeyPair":                 (*call).importKeyPair,
	"DeleteKeyPair":                 (*call).deleteKeyPair,
	"DescribeSecurityGroups":        (*call).describeSecurityGroups,
	"CreateSecurityGroup":           (*call).createSecurityGroup,
	"AuthorizeSecurityGroupIngress": (*call).authorizeSecurityGroupIngress,
	"CreatePlacementGroup":          (*call).createPlacementGroup,
	"DeletePlacementGroup":          (*call).deletePlacementGroup,
	"DescribePlacementGroups":       (*call).describePlacementGroups,
	"CreateVolume":                  (*call).createVolume,
	"DescribeVolumes":               (*call).describeVolumes,
	"AttachVolume":                  (*call).attachVolume,
	"DetachVolume":                  (*call).detachVolume,
	"DeleteVolume":                  (*call).deleteVolume,
	"DescribeVpcs":                  (*call).describeVpcs,
	"DescribeSubnets":               (*call).describeSubnets,
}

// Handler serves the EC2 Query API: POST / with a form-encoded Action,
// signed with SigV4 by the simulator's access key.
func (p *Provider) Handler(s *sim.Sim) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reqID := uuid()
		fail := func(e *apiError) {
			if p.Logger != nil {
				p.Logger.Debug("ec2 call failed", "code", e.code, "message", e.message)
			}
			writeError(w, reqID, e)
		}
		if r.Method != http.MethodPost {
			fail(badRequest("InvalidAction", "The EC2 Query API takes POST requests."))
			return
		}
		if err := r.ParseForm(); err != nil {
			fail(badRequest("MalformedQueryString", err.Error()))
			return
		}
		key, region := credential(r.Header.Get("Authorization"))
		if key != AccessKey {
			fail(errorf(http.StatusUnauthorized, "AuthFailure", "AWS was not able to validate the provided access credentials"))
			return
		}
		action := r.PostForm.Get("Action")
		fault := s.Inject(name, action, action == "RunInstances")
		switch fault {
		case sim.FaultThrottle:
			fail(errorf(http.StatusServiceUnavailable, "RequestLimitExceeded", "Request limit exceeded."))
			return
		case sim.FaultTransient:
			fail(transientError())
			return
		case sim.FaultTimeout:
			s.Hold(r)
		}
		h := handlers[action]
		if h == nil {
			fail(badRequest("InvalidAction", fmt.Sprintf("The action %s is not valid for this web service.", action)))
			return
		}
		c := &call{p: p, s: s, form: r.PostForm, region: region, id: reqID, noCapacity: fault == sim.FaultCapacity}
		out, e := h(c)
		if fault == sim.FaultLost {
			// Done, but the answer never arrives.
			s.Hold(r)
		}
		if e != nil {
			fail(e)
			return
		}
		respond(w, action, reqID, out...)
	})
}

// credential returns the access key and region of a SigV4 Authorization
// header ("AWS4-HMAC-SHA256 Credential=AKID/20260101/us-east-1/ec2/aws4_request, ...").
func credential(auth string) (key, region string) {
	_, rest, ok := strings.Cut(auth, "Credential=")
	if !ok {
		return "", ""
	}
	rest, _, _ = strings.Cut(rest, ",")
	parts := strings.Split(strings.TrimSpace(rest), "/")
	if len(parts) < 3 {
		return parts[0], ""
	}
	return parts[0], parts[2]
}

// catalog returns the embedded offer catalog the simulator prices
// instances from.
func (p *Provider) catalog() (*offers.Catalog, error) {
	p.catOnce.Do(func() { p.cat, p.catErr = offers.Embedded() })
	return p.cat, p.catErr
}

// --- request parsing -------------------------------------------------------

// list returns the values of a flattened 1-based list: prefix.1, prefix.2, ...
func (c *call) list(prefix string) []string {
	var out []string
	for i := 1; ; i++ {
		v, ok := c.form[prefix+"."+strconv.Itoa(i)]
		if !ok {
			return out
		}
		out = append(out, v[0])
	}
}

// members returns the prefixes of a flattened 1-based list of structures
// (prefix.1, prefix.2, ...), as far as one has a field.
func (c *call) members(prefix string) []string {
	var out []string
	for i := 1; ; i++ {
		p := prefix + "." + strconv.Itoa(i) + "."
		found := false
		for k := range c.form {
			if strings.HasPrefix(k, p) {
				found = true
				break
			}
		}
		if !found {
			return out
		}
		out = append(out, p)
	}
}

func (c *call) get(k string) string { return c.form.Get(k) }

func (c *call) intParam(k string, def int) (int, *apiError) {
	v := c.form.Get(k)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, badRequest("InvalidParameterValue", fmt.Sprintf("Invalid value '%s' for %s", v, k))
	}
	return n, nil
}

// A filter is one Filter.N of a Describe call.
type filter struct {
	name   string
	values []string
}

func (c *call) filters() []filter {
	var out []filter
	for _, p := range c.members("Filter") {
		out = append(out, filter{name: c.get(p + "Name"), values: c.list(p + "Value")})
	}
	return out
}

// match reports whether v matches one of the filter's values (EC2 filter
// values take * and ? wildcards).
func (f filter) match(v string) bool {
	for _, want := range f.values {
		if ok, _ := path.Match(want, v); ok || want == v {
			return true
		}
	}
	return false
}

// matchTags applies a tag:<key> or tag-key filter; ok is false for other
// filters.
func (f filter) matchTags(tags map[string]string) (matched, ok bool) {
	if k, isTag := strings.CutPrefix(f.name, "tag:"); isTag {
		v, has := tags[k]
		return has && f.match(v), true
	}
	if f.name == "tag-key" {
		for k := range tags {
			if f.match(k) {
				return true, true
			}
		}
		return false, true
	}
	return false, false
}

// matches applies the call's filters to one resource: tag:<key> and
// tag-key to its tags, every other filter to the value field returns for
// the filter's name. A filter field does not know is refused, as EC2 does
// (InvalidParameterValue), whether or not the resource matched so far.
func (c *call) matches(tags map[string]string, field func(name string) (value string, known bool)) (bool, *apiError) {
	ok := true
	for _, f := range c.filters() {
		if m, isTag := f.matchTags(tags); isTag {
			ok = ok && m
			continue
		}
		v, known := field(f.name)
		if !known {
			return false, badFilter(f)
		}
		ok = ok && f.match(v)
	}
	return ok, nil
}

func badFilter(f filter) *apiError {
	return badRequest("InvalidParameterValue", fmt.Sprintf("The filter '%s' is invalid", f.name))
}

// tagSpecs returns the tags of TagSpecification.N for resourceType.
func (c *call) tagSpecs(resourceType string) map[string]string {
	tags := map[string]string{}
	for _, p := range c.members("TagSpecification") {
		if c.get(p+"ResourceType") != resourceType {
			continue
		}
		for _, t := range c.members(p + "Tag") {
			tags[c.get(t+"Key")] = c.get(t + "Value")
		}
	}
	if len(tags) == 0 {
		return nil
	}
	return tags
}

// --- helpers ---------------------------------------------------------------

func randHex(n int) string {
	b := make([]byte, (n+1)/2)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)[:n]
}

// newID returns an EC2-style id: prefix-<17 hex>.
func newID(prefix string) string { return prefix + "-0" + randHex(16) }

func uuid() string {
	h := randHex(32)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func isoTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// zones are a region's availability zones in the simulator.
func zones(region string) []string {
	return []string{region + "a", region + "b", region + "c"}
}

// regionOf returns the resources of kind in the call's region.
func (c *call) regional(kind string) []sim.Resource {
	var out []sim.Resource
	for _, r := range c.s.List(name, kind) {
		if r.Region == c.region {
			out = append(out, r)
		}
	}
	return out
}
