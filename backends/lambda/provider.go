package lambda

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"hoist/backends"
	"hoist/backends/offers"
	"hoist/backends/vm"
)

// markerLen is the length of the installation marker in instance names.
const markerLen = 6

// Compile-time guard: the driver's part of the cloud-VM engine.
var _ vm.Provider = (*Provider)(nil)

// Provider is the vm.Provider of Lambda Cloud. Refs are Lambda's instance
// ids.
type Provider struct {
	backend  string
	api      *client
	regions  []string
	cpuImage vm.OSImage
	gpuImage vm.OSImage
	recs     backends.Records
	recName  string // the records' backend name: <backend>.names
	now      func() time.Time

	mu    sync.Mutex // guards types
	types typesCache
}

// typesCache is the last GET /instance-types, for the offers' availability.
type typesCache struct {
	at    time.Time
	types map[string]instanceTypeEntry
}

// typesTTL is how long an /instance-types answer serves offers.
const typesTTL = 15 * time.Second

// nameRecord is what the driver keeps of an instance it launches, under
// its Lambda name: Lambda has no tags, so the ownership tags are here.
type nameRecord struct {
	// ID is hoist's instance id.
	ID string `json:"id"`
	// LambdaID is Lambda's instance id once the launch returned it.
	LambdaID string `json:"lambda_id,omitempty"`
	// Tags are the ownership tags of the launch.
	Tags map[string]string `json:"tags"`
	// UpdatedAt is when the record was last written.
	UpdatedAt time.Time `json:"updated_at"`
}

// staleAfter is how long a record may go without a live instance of its
// name before List deletes it and its SSH key: longer than any launch
// takes to show the instance in GET /instances.
const staleAfter = 10 * time.Minute

// marker returns the installation marker of names: 6 hex digits of
// SHA-256 of the installation's id.
func marker(installation string) string {
	sum := sha256.Sum256([]byte(installation))
	return hex.EncodeToString(sum[:])[:markerLen]
}

// instanceName is the Lambda name (and SSH key name) of a launch.
func instanceName(req vm.LaunchRequest) string {
	return req.Name + "-" + marker(req.Tags[backends.TagInstallation])
}

func (p *Provider) putRecord(ctx context.Context, name string, r nameRecord) error {
	r.UpdatedAt = p.now().UTC()
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return p.recs.PutBackendRecord(ctx, p.recName, name, b)
}

func (p *Provider) records(ctx context.Context) (map[string]nameRecord, error) {
	raw, err := p.recs.ListBackendRecords(ctx, p.recName)
	if err != nil {
		return nil, err
	}
	out := make(map[string]nameRecord, len(raw))
	for name, b := range raw {
		var r nameRecord
		if json.Unmarshal(b, &r) == nil {
			out[name] = r
		}
	}
	return out, nil
}

// Launch launches one instance named instanceName(req) with its own SSH
// key registered under the same name. It is idempotent on the name (and so
// on req.ID): an instance of that name that Lambda still lists is returned.
// The record holding the ownership tags is written first, so that a launch
// whose answer is lost is still found by List.
func (p *Provider) Launch(ctx context.Context, req vm.LaunchRequest) (vm.Machine, error) {
	if req.Gateway {
		return vm.Machine{}, errNoGateways
	}
	name := instanceName(req)
	rec := nameRecord{ID: req.ID, Tags: backends.CopyTags(req.Tags)}
	if err := p.putRecord(ctx, name, rec); err != nil {
		return vm.Machine{}, backends.Transient(fmt.Errorf("lambda: record %s: %w", name, err))
	}
	all, err := p.api.instances(ctx)
	if err != nil {
		return vm.Machine{}, classify(err)
	}
	for _, in := range all {
		if in.Name == name && in.Status != "terminated" {
			return p.machine(in, rec.Tags), nil
		}
	}
	if err := p.ensureKey(ctx, name, req.PublicKey); err != nil {
		return vm.Machine{}, err
	}
	img := p.cpuImage
	if req.Offer.GPUCount > 0 {
		img = p.gpuImage
	}
	lr := launchRequest{
		RegionName: req.Offer.Region, InstanceTypeName: req.Offer.Instance, SSHKeyNames: []string{name},
		FileSystemNames: []string{}, Quantity: 1, Name: name,
	}
	if img.Name != "" {
		lr.Image = &launchImage{Family: img.Name}
	}
	id, err := p.api.launch(ctx, lr)
	if err != nil {
		err = classify(err)
		if errors.Is(err, backends.ErrNoCapacity) || backends.IsStalled(err) {
			// Nothing was launched: the key and the record go.
			p.cleanup(ctx, name)
		}
		return vm.Machine{}, err
	}
	rec.LambdaID = id
	if err := p.putRecord(ctx, name, rec); err != nil {
		return vm.Machine{}, backends.Transient(fmt.Errorf("lambda: record %s: %w", name, err))
	}
	return vm.Machine{
		Ref: id, State: vm.StatePending, Region: req.Offer.Region, InstanceType: req.Offer.Instance,
		Tags: backends.CopyTags(rec.Tags), CreatedAt: p.now().UTC(),
	}, nil
}

// ensureKey registers pub under name, replacing a key of that name that
// differs (a launch of the same instance id with a new key).
func (p *Provider) ensureKey(ctx context.Context, name, pub string) error {
	keys, err := p.api.sshKeys(ctx)
	if err != nil {
		return classify(err)
	}
	pub = strings.TrimSpace(pub)
	for _, k := range keys {
		if k.Name != name {
			continue
		}
		if sameKey(k.PublicKey, pub) {
			return nil
		}
		if err := p.api.deleteSSHKey(ctx, k.ID); err != nil && !notFound(err) {
			return classify(err)
		}
	}
	if _, err := p.api.addSSHKey(ctx, name, pub); err != nil {
		return classify(err)
	}
	return nil
}

// sameKey compares two authorized_keys lines by type and key, ignoring
// the comment.
func sameKey(a, b string) bool {
	fa, fb := strings.Fields(a), strings.Fields(b)
	return len(fa) >= 2 && len(fb) >= 2 && fa[0] == fb[0] && fa[1] == fb[1]
}

// cleanup deletes the SSH key and the record of name, best effort: what
// is left is retried by the next Delete of the instance.
func (p *Provider) cleanup(ctx context.Context, name string) error {
	keys, err := p.api.sshKeys(ctx)
	if err != nil {
		return classify(err)
	}
	for _, k := range keys {
		if k.Name == name {
			if err := p.api.deleteSSHKey(ctx, k.ID); err != nil && !notFound(err) {
				return classify(err)
			}
		}
	}
	if err := p.recs.DeleteBackendRecord(ctx, p.recName, name); err != nil {
		return backends.Transient(err)
	}
	return nil
}

// state maps Lambda's instance status to the engine's
// (https://docs.lambda.ai/api/cloud#getInstance: booting, active,
// unhealthy, terminating, terminated, preempted).
func state(status string) string {
	switch status {
	case "active", "unhealthy":
		return vm.StateRunning
	case "terminating":
		return vm.StateStopping
	case "terminated", "preempted":
		return vm.StateGone
	}
	return vm.StatePending
}

func (p *Provider) machine(in instance, tags map[string]string) vm.Machine {
	m := vm.Machine{
		Ref: in.ID, State: state(in.Status), Address: in.IP, PrivateAddress: in.PrivateIP,
		Region: in.Region.Name, InstanceType: in.InstanceType.Name, Tags: backends.CopyTags(tags),
		Interrupted: in.Status == "preempted",
	}
	if in.Status == "unhealthy" {
		m.Message = "Lambda reports the instance unhealthy"
	}
	return m
}

// Get observes instance ref; Lambda's 404 wraps ErrNotFound.
func (p *Provider) Get(ctx context.Context, ref string) (vm.Machine, error) {
	in, err := p.api.instance(ctx, ref)
	if err != nil {
		return vm.Machine{}, classify(err)
	}
	var tags map[string]string
	if b, ok, err := p.recs.GetBackendRecord(ctx, p.recName, in.Name); err == nil && ok {
		var r nameRecord
		if json.Unmarshal(b, &r) == nil {
			tags = r.Tags
		}
	}
	return p.machine(in, tags), nil
}

// Delete terminates instance ref (gone is success), then deletes its SSH
// key and record, found by the record's Lambda id when Lambda no longer
// knows the instance.
func (p *Provider) Delete(ctx context.Context, ref string) error {
	name := ""
	in, err := p.api.instance(ctx, ref)
	switch {
	case err == nil:
		name = in.Name
		if in.Status != "terminated" && in.Status != "terminating" {
			if err := p.api.terminate(ctx, ref); err != nil && !notFound(err) {
				return classify(err)
			}
		}
	case notFound(err):
	default:
		return classify(err)
	}
	recs, err := p.records(ctx)
	if err != nil {
		return backends.Transient(err)
	}
	if name == "" {
		for n, r := range recs {
			if r.LambdaID == ref {
				name = n
			}
		}
	}
	if _, ours := recs[name]; name == "" || !ours {
		return nil // not launched by this installation: its key is not ours
	}
	return p.cleanup(ctx, name)
}

// List returns the instances this installation launched (a record under
// their name, which carries the installation's marker) whose tags carry
// all of tags. Instances without a record are never listed.
func (p *Provider) List(ctx context.Context, tags map[string]string) ([]vm.Machine, error) {
	recs, err := p.records(ctx)
	if err != nil {
		return nil, backends.Transient(err)
	}
	all, err := p.api.instances(ctx)
	if err != nil {
		return nil, classify(err)
	}
	var out []vm.Machine
	live := map[string]bool{}
	for _, in := range all {
		if in.Status != "terminated" {
			live[in.Name] = true
		}
		r, ok := recs[in.Name]
		if !ok || !strings.HasSuffix(in.Name, "-"+marker(r.Tags[backends.TagInstallation])) {
			continue
		}
		if !backends.MatchTags(r.Tags, tags) {
			continue
		}
		out = append(out, p.machine(in, r.Tags))
	}
	// Records whose instance is gone (terminated outside hoist, a launch
	// that never happened) go with their SSH key once stale.
	for name, r := range recs {
		if !live[name] && p.now().Sub(r.UpdatedAt) > staleAfter {
			if err := p.cleanup(ctx, name); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// availability returns, by instance type, the regions with capacity now
// (GET /instance-types, cached for typesTTL).
func (p *Provider) availability(ctx context.Context) (map[string]instanceTypeEntry, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.types.types != nil && p.now().Sub(p.types.at) < typesTTL {
		return p.types.types, nil
	}
	t, err := p.api.instanceTypes(ctx)
	if err != nil {
		return nil, classify(err)
	}
	p.types = typesCache{at: p.now(), types: t}
	return t, nil
}

// Backend is the lambda backend: the cloud-VM engine's, with offers that
// carry Lambda's live availability.
type Backend struct {
	*vm.Backend
	prov *Provider
}

// Compile-time guards: the capabilities this driver has.
var (
	_ backends.Backend   = (*Backend)(nil)
	_ backends.Connector = (*Backend)(nil)
)

// errNoGateways refuses gateways: the driver does not open TCP 80 and 443
// in Lambda's firewall (neither does dstack, which has no Lambda gateways).
var errNoGateways = backends.Stalled(errors.New("lambda: gateways are not supported on Lambda: hoist does not open ports in its firewall"))

// StartGateway refuses: see errNoGateways. (The engine's would run the
// gateway on a VM whose ports 80 and 443 are closed.)
func (b *Backend) StartGateway(ctx context.Context, inst backends.Instance, spec backends.GatewayProcess) (backends.GatewayEndpoint, error) {
	return backends.GatewayEndpoint{}, errNoGateways
}

// Offers returns the catalog offers (the engine's) marked available where
// GET /instance-types lists the region among the type's
// regions_with_capacity_available and not_available elsewhere; available
// offers come first, each group cheapest first as the catalog orders it.
func (b *Backend) Offers(ctx context.Context, q offers.Query) ([]offers.Offer, error) {
	// The limit applies after the reordering: the cheapest offer may have
	// no capacity while the next has.
	limit := q.Limit
	q.Limit = 0
	out, err := b.Backend.Offers(ctx, q)
	if err != nil || len(out) == 0 {
		return out, err
	}
	types, err := b.prov.availability(ctx)
	if err != nil {
		return nil, fmt.Errorf("lambda: instance types: %w", err)
	}
	avail := make([]offers.Offer, 0, len(out))
	var rest []offers.Offer
	for _, o := range out {
		o.Availability = offers.AvailabilityNotAvailable
		for _, r := range types[o.Instance].RegionsWithCapacityAvailable {
			if r.Name == o.Region {
				o.Availability = offers.AvailabilityAvailable
			}
		}
		if o.Availability == offers.AvailabilityAvailable {
			avail = append(avail, o)
		} else {
			rest = append(rest, o)
		}
	}
	out = append(avail, rest...)
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}
