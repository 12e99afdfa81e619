package gcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	compute "cloud.google.com/go/compute/apiv1"
	"cloud.google.com/go/compute/apiv1/computepb"
	"github.com/google/uuid"

	"hoist/backends"
	"hoist/backends/offers"
	"hoist/backends/vm"
)

// Provider is the GCP vm.Provider (with volumes and placement groups) over
// Google's Compute REST clients.
type Provider struct {
	backend        string
	project        string
	regions        []string
	network        string
	publicIPs      bool
	serviceAccount string
	labels         map[string]string // the entry's tags as labels
	cpuImage       vm.OSImage
	gpuImage       vm.OSImage
	logger         *slog.Logger
	now            func() time.Time

	instances     *compute.InstancesClient
	disks         *compute.DisksClient
	policies      *compute.ResourcePoliciesClient
	regionsClient *compute.RegionsClient
	zonesClient   *compute.ZonesClient
	firewalls     *compute.FirewallsClient
	hostKeys      vm.HostKeyCache // host keys read from the serial console, by ref

	mu       sync.Mutex
	firewall map[string]bool     // firewall rules known to exist, by name
	zones    map[string][]string // zones of a region, from regions.get
}

// Compile-time guards.
var (
	_ vm.Provider          = (*Provider)(nil)
	_ vm.VolumeProvider    = (*Provider)(nil)
	_ vm.PlacementProvider = (*Provider)(nil)
)

// operationWait is how long Launch waits for the insert's operation, as
// dstack does; past it the instance is assumed to be being created.
const operationWait = 30 * time.Second

// hostKeyWait is how long a running instance whose serial console shows no
// host keys yet stays pending before hoist trusts the first key it sees.
const hostKeyWait = 2 * time.Minute

// runnerTag is the network tag of hoist's instances, the target of the SSH
// firewall rule.
const runnerTag = "hoist-runner-instance"

// gatewayTag is the network tag of gateways' instances, the target of the
// HTTP(S) firewall rule (dstack's dstack-gateway-instance).
const gatewayTag = "hoist-gateway-instance"

// requestNamespace makes requestIds (UUIDs, as Compute Engine requires)
// from hoist ids.
var requestNamespace = uuid.MustParse("7d4a3f0e-54c5-4a57-9d3c-1f3b9c6f0a61")

// requestID is the idempotency token of one mutation: the same for the same
// id and scope, so that a retried call is not done twice
// (https://cloud.google.com/compute/docs/api/how-tos/api-requests-responses#request_id).
func requestID(id, scope string) *string {
	s := uuid.NewSHA1(requestNamespace, []byte(id+"\x00"+scope)).String()
	return &s
}

// ref is "zone/name", enough to get or delete an instance or a disk.
func ref(zone, name string) string { return zone + "/" + name }

func parseRef(r string) (zone, name string, err error) {
	zone, name, ok := strings.Cut(r, "/")
	if !ok || zone == "" || name == "" || strings.Contains(name, "/") {
		return "", "", backends.Stalled(fmt.Errorf("gcp: bad ref %q (want zone/name)", r))
	}
	return zone, name, nil
}

// isZone reports whether loc is a zone (us-central1-a) rather than a
// region (us-central1).
func isZone(loc string) bool {
	i := strings.LastIndexByte(loc, '-')
	return i > 0 && len(loc)-i == 2 && loc[i+1] >= 'a' && loc[i+1] <= 'z'
}

// regionOf returns the region of a zone, or loc itself for a region.
func regionOf(loc string) string {
	if isZone(loc) {
		return loc[:strings.LastIndexByte(loc, '-')]
	}
	return loc
}

// lastSegment returns what follows the last slash of a link.
func lastSegment(s string) string { return s[strings.LastIndexByte(s, '/')+1:] }

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// regionZones returns the zones of region (regions.get, kept).
func (p *Provider) regionZones(ctx context.Context, region string) ([]string, error) {
	p.mu.Lock()
	zs, ok := p.zones[region]
	p.mu.Unlock()
	if ok {
		return zs, nil
	}
	r, err := p.regionsClient.Get(ctx, &computepb.GetRegionRequest{Project: p.project, Region: region})
	if err != nil {
		return nil, fmt.Errorf("gcp: region %s: %w", region, classify(err))
	}
	for _, z := range r.GetZones() {
		zs = append(zs, lastSegment(z))
	}
	slices.Sort(zs)
	p.mu.Lock()
	p.zones[region] = zs
	p.mu.Unlock()
	return zs, nil
}

// Launch creates the instance zone by zone in the offer's region (or in the
// offer's zone), as dstack does (src/dstack/_internal/core/backends/gcp/compute.py,
// create_instance): a zone without capacity means the next one; every zone
// without capacity is backends.ErrNoCapacity.
func (p *Provider) Launch(ctx context.Context, req vm.LaunchRequest) (vm.Machine, error) {
	if err := p.ensureFirewall(ctx, false); err != nil {
		return vm.Machine{}, err
	}
	if req.Gateway {
		if err := p.ensureFirewall(ctx, true); err != nil {
			return vm.Machine{}, err
		}
	}
	zones := []string{req.Offer.Region}
	if !isZone(req.Offer.Region) {
		var err error
		if zones, err = p.regionZones(ctx, req.Offer.Region); err != nil {
			return vm.Machine{}, err
		}
	}
	var noCapacity []string
	for _, zone := range zones {
		m, err := p.insert(ctx, zone, req)
		if err == nil {
			return m, nil
		}
		if !errors.Is(err, backends.ErrNoCapacity) {
			return vm.Machine{}, err
		}
		p.log().Info("zone_no_capacity", "zone", zone, "instance_type", req.Offer.Instance, "error", err)
		noCapacity = append(noCapacity, err.Error())
	}
	return vm.Machine{}, fmt.Errorf("gcp: %s in %s: %w: %s", req.Offer.Instance, req.Offer.Region,
		backends.ErrNoCapacity, strings.Join(noCapacity, "; "))
}

func (p *Provider) log() *slog.Logger {
	if p.logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return p.logger.With("backend", p.backend)
}

// instanceResource is the instance Launch inserts in zone: dstack's
// instances.insert body (boot disk from the image, metadata ssh-keys and
// user-data, labels, spot scheduling, external NAT, resource policies).
func (p *Provider) instanceResource(zone string, req vm.LaunchRequest) *computepb.Instance {
	img := p.cpuImage
	gpu := req.Offer.GPUCount > 0 && (req.Offer.GPUVendor == "" || req.Offer.GPUVendor == offers.VendorNVIDIA)
	if gpu {
		img = p.gpuImage
	}
	boot := &computepb.AttachedDiskInitializeParams{
		SourceImage: ptr(img.Name),
		DiskType:    ptr("zones/" + zone + "/diskTypes/pd-balanced"),
	}
	if req.Offer.DiskGB > 0 {
		boot.DiskSizeGb = ptr(int64(req.Offer.DiskGB))
	}
	in := &computepb.Instance{
		Name:        ptr(req.Name),
		MachineType: ptr("zones/" + zone + "/machineTypes/" + req.Offer.Instance),
		Labels:      p.labelsOf(req.Tags),
		Disks: []*computepb.AttachedDisk{{
			Boot: ptr(true), AutoDelete: ptr(true), Type: ptr("PERSISTENT"), InitializeParams: boot,
		}},
		Metadata: &computepb.Metadata{Items: []*computepb.Items{
			// https://cloud.google.com/compute/docs/connect/add-ssh-keys#metadata
			{Key: ptr("ssh-keys"), Value: ptr(req.User + ":" + strings.TrimSpace(req.PublicKey))},
		}},
		Tags: &computepb.Tags{Items: networkTags(req.Gateway)},
		NetworkInterfaces: []*computepb.NetworkInterface{{
			Network: ptr("global/networks/" + p.network),
		}},
	}
	if req.UserData != "" {
		in.Metadata.Items = append(in.Metadata.Items, &computepb.Items{Key: ptr("user-data"), Value: ptr(req.UserData)})
	}
	if p.publicIPs {
		in.NetworkInterfaces[0].AccessConfigs = []*computepb.AccessConfig{{
			Name: ptr("External NAT"), Type: ptr("ONE_TO_ONE_NAT"), NetworkTier: ptr("PREMIUM"),
		}}
	}
	if p.serviceAccount != "" {
		in.ServiceAccounts = []*computepb.ServiceAccount{{
			Email: ptr(p.serviceAccount), Scopes: []string{"https://www.googleapis.com/auth/cloud-platform"},
		}}
	}
	switch {
	case req.Offer.Spot:
		// dstack's spot scheduling: stopped, not deleted, when preempted.
		in.Scheduling = &computepb.Scheduling{ProvisioningModel: ptr("SPOT"), InstanceTerminationAction: ptr("STOP")}
	case gpu || hasPrefix(req.Offer.Instance, "a2-", "a3-", "a4-", "g2-", "g4-"):
		// GPU machines cannot live-migrate.
		in.Scheduling = &computepb.Scheduling{OnHostMaintenance: ptr("TERMINATE")}
	}
	if req.PlacementGroup != "" {
		region, name, _ := strings.Cut(req.PlacementGroup, "/")
		in.ResourcePolicies = []string{"projects/" + p.project + "/regions/" + region + "/resourcePolicies/" + name}
	}
	return in
}

func hasPrefix(s string, prefixes ...string) bool {
	for _, pre := range prefixes {
		if strings.HasPrefix(s, pre) {
			return true
		}
	}
	return false
}

// insert creates the instance in one zone and waits up to operationWait for
// the operation.
func (p *Provider) insert(ctx context.Context, zone string, req vm.LaunchRequest) (vm.Machine, error) {
	if req.PlacementGroup != "" {
		if region, _, _ := strings.Cut(req.PlacementGroup, "/"); region != regionOf(zone) {
			return vm.Machine{}, backends.Stalled(fmt.Errorf("gcp: placement group %s is not in the region of zone %s", req.PlacementGroup, zone))
		}
	}
	m := vm.Machine{Ref: ref(zone, req.Name), Region: regionOf(zone), State: vm.StatePending, InstanceType: req.Offer.Instance}
	op, err := p.instances.Insert(ctx, &computepb.InsertInstanceRequest{
		Project: p.project, Zone: zone, InstanceResource: p.instanceResource(zone, req), RequestId: requestID(req.ID, zone),
	})
	if err != nil {
		if code, reason := apiError(err); code == 409 && reason == "alreadyExists" {
			// An earlier launch of this id created it (its requestId
			// forgotten by now): take it if it is ours.
			got, gerr := p.Get(ctx, m.Ref)
			if gerr == nil && got.Tags[backends.TagInstance] == req.ID {
				return got, nil
			}
		}
		return vm.Machine{}, fmt.Errorf("gcp: insert %s in %s: %w", req.Name, zone, classifyInsert(err))
	}
	if err := p.wait(ctx, op, operationWait); err != nil {
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			// dstack: a slow operation is an instance being created.
			m.Message = "the insert operation is still running"
			return m, nil
		}
		return vm.Machine{}, fmt.Errorf("gcp: insert %s in %s: %w", req.Name, zone, err)
	}
	return m, nil
}

// wait polls op until it is done, at most d: the client's Operation.Wait,
// except that a failed poll (throttling, 5xx) is retried rather than taken
// for the operation's result. It returns the operation's error classified
// (classifyOperation), or context.DeadlineExceeded past d.
func (p *Provider) wait(ctx context.Context, op *compute.Operation, d time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	pause := 500 * time.Millisecond
	for !op.Done() {
		err := op.Poll(ctx)
		if op.Done() {
			break
		}
		if err != nil && ctx.Err() == nil && backends.KindOf(classify(err)) != backends.KindTransient {
			return classify(err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pause):
		}
		pause = min(2*pause, 5*time.Second)
	}
	pb := op.Proto()
	if pb.GetError() == nil || len(pb.GetError().GetErrors()) == 0 {
		return nil
	}
	var errs []opError
	var msgs []string
	for _, e := range pb.GetError().GetErrors() {
		errs = append(errs, opError{e.GetCode(), e.GetMessage()})
		msgs = append(msgs, e.GetCode()+": "+e.GetMessage())
	}
	err := fmt.Errorf("operation %s: %s", pb.GetName(), strings.Join(msgs, "; "))
	return classifyOperation(pb.GetHttpErrorStatusCode(), errs, err)
}

// Get observes an instance with instances.get and, once it runs, reads its
// host keys from the serial console (once; they are kept).
func (p *Provider) Get(ctx context.Context, r string) (vm.Machine, error) {
	zone, name, err := parseRef(r)
	if err != nil {
		return vm.Machine{}, err
	}
	in, err := p.instances.Get(ctx, &computepb.GetInstanceRequest{Project: p.project, Zone: zone, Instance: name})
	if err != nil {
		return vm.Machine{}, fmt.Errorf("gcp: get %s: %w", r, classify(err))
	}
	m := p.machine(in)
	if m.State == vm.StateRunning {
		keys, err := p.consoleHostKeys(ctx, zone, name)
		if err != nil {
			return vm.Machine{}, err
		}
		m.HostKeys = keys
		if len(keys) == 0 && p.now().Sub(parseTime(in.GetLastStartTimestamp())) < hostKeyWait {
			m.State, m.Message = vm.StatePending, "waiting for the SSH host keys on the serial console"
		}
	}
	return m, nil
}

// machine maps an instance to what the engine sees
// (https://cloud.google.com/compute/docs/instances/instance-life-cycle).
func (p *Provider) machine(in *computepb.Instance) vm.Machine {
	zone := lastSegment(in.GetZone())
	m := vm.Machine{
		// The region, as the catalog's rows and the offers name it (the
		// price, a volume's region); the zone is in the ref.
		Ref:          ref(zone, in.GetName()),
		Region:       regionOf(zone),
		InstanceType: lastSegment(in.GetMachineType()),
		Tags:         tagsOf(in.GetLabels()),
		Message:      in.GetStatusMessage(),
		CreatedAt:    parseTime(in.GetCreationTimestamp()),
	}
	if nics := in.GetNetworkInterfaces(); len(nics) > 0 {
		m.Address = nics[0].GetNetworkIP()
		m.PrivateAddress = m.Address
		if p.publicIPs {
			m.Address = ""
			if acs := nics[0].GetAccessConfigs(); len(acs) > 0 {
				m.Address = acs[0].GetNatIP()
			}
		}
	}
	spot := in.GetScheduling().GetProvisioningModel() == "SPOT" || in.GetScheduling().GetPreemptible()
	switch in.GetStatus() {
	case "PROVISIONING", "STAGING", "PENDING":
		m.State = vm.StatePending
	case "RUNNING":
		m.State = vm.StateRunning
	case "TERMINATED", "STOPPED", "SUSPENDED":
		// hoist never stops its instances: a spot one stopped was
		// preempted (instanceTerminationAction STOP).
		m.State, m.Interrupted = vm.StateGone, spot
	default: // STOPPING, SUSPENDING, REPAIRING, PENDING_STOP
		m.State, m.Interrupted = vm.StateStopping, spot && in.GetStatus() == "STOPPING"
	}
	return m
}

func parseTime(s string) time.Time {
	t, _ := time.Parse(time.RFC3339, s)
	return t
}

// consoleHostKeys returns the sshd host keys cloud-init printed on the
// serial console (vm.ParseHostKeys), remembered once seen; nil while the
// console shows none yet.
func (p *Provider) consoleHostKeys(ctx context.Context, zone, name string) ([]string, error) {
	r := ref(zone, name)
	return p.hostKeys.Get(r, func() (string, error) {
		out, err := p.instances.GetSerialPortOutput(ctx, &computepb.GetSerialPortOutputInstanceRequest{
			Project: p.project, Zone: zone, Instance: name, Port: ptr(int32(1)),
		})
		if err != nil {
			return "", fmt.Errorf("gcp: serial console of %s: %w", r, classify(err))
		}
		return out.GetContents(), nil
	})
}

// Delete deletes an instance (with its boot disk, autoDelete); one Compute
// Engine no longer knows is success. The operation is not awaited, as in
// dstack.
func (p *Provider) Delete(ctx context.Context, r string) error {
	zone, name, err := parseRef(r)
	if err != nil {
		return err
	}
	_, err = p.instances.Delete(ctx, &computepb.DeleteInstanceRequest{Project: p.project, Zone: zone, Instance: name})
	if err = classify(err); err != nil && !errors.Is(err, backends.ErrNotFound) {
		return fmt.Errorf("gcp: delete %s: %w", r, err)
	}
	p.hostKeys.Forget(r)
	return nil
}

// List returns the instances carrying all of tags in the configured regions
// (every region without regions), with one aggregated list filtered on
// their labels.
func (p *Provider) List(ctx context.Context, tags map[string]string) ([]vm.Machine, error) {
	req := &computepb.AggregatedListInstancesRequest{Project: p.project}
	if f := labelFilter(tags); f != "" {
		req.Filter = ptr(f)
	}
	var out []vm.Machine
	it := p.instances.AggregatedList(ctx, req)
	for {
		pair, err := it.Next()
		if isDone(err) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("gcp: list instances: %w", classify(err))
		}
		for _, in := range pair.Value.GetInstances() {
			m := p.machine(in)
			if !vm.InRegions(m.Region, p.regions) || !backends.MatchTags(in.GetLabels(), encodeTags(tags)) {
				continue
			}
			out = append(out, m)
		}
	}
	return out, nil
}

// networkTags are the network tags of an instance: the runner tag, and the
// gateway tag for a gateway's instance.
func networkTags(gateway bool) []string {
	if gateway {
		return []string{runnerTag, gatewayTag}
	}
	return []string{runnerTag}
}

// ensureFirewall creates, once per backend, the firewall rule that lets
// SSH reach hoist's instances on the network, as dstack does
// (src/dstack/_internal/core/backends/gcp/resources.py,
// create_runner_firewall_rules: dstack-ssh-in-<network>, INGRESS tcp:22 from
// 0.0.0.0/0 to the runner tag); with gateway, the rule that lets HTTP and
// HTTPS reach gateways' instances (same file, create_gateway_firewall_rules:
// tcp:80 and 443 from 0.0.0.0/0 to the gateway tag). A rule that exists
// (409) is fine.
func (p *Provider) ensureFirewall(ctx context.Context, gateway bool) error {
	name, desc, tag, ports := "hoist-ssh-in-"+p.network, "SSH to hoist's instances (network tag "+runnerTag+")", runnerTag, []string{"22"}
	if gateway {
		name, desc, tag, ports = "hoist-gateway-in-"+p.network, "HTTP and HTTPS to hoist's gateways (network tag "+gatewayTag+")", gatewayTag, []string{"80", "443"}
	}
	if len(name) > 63 {
		name = strings.TrimRight(name[:63], "-")
	}
	p.mu.Lock()
	done := p.firewall[name]
	p.mu.Unlock()
	if done {
		return nil
	}
	op, err := p.firewalls.Insert(ctx, &computepb.InsertFirewallRequest{
		Project: p.project, RequestId: requestID(name, "firewall"),
		FirewallResource: &computepb.Firewall{
			Name:         ptr(name),
			Description:  ptr(desc),
			Network:      ptr("global/networks/" + p.network),
			Direction:    ptr("INGRESS"),
			SourceRanges: []string{"0.0.0.0/0"},
			TargetTags:   []string{tag},
			Allowed:      []*computepb.Allowed{{IPProtocol: ptr("tcp"), Ports: ports}},
		},
	})
	if err != nil {
		if code, _ := apiError(err); code != 409 {
			return fmt.Errorf("gcp: firewall rule %s: %w", name, classify(err))
		}
	} else if err := p.wait(ctx, op, operationWait); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("gcp: firewall rule %s: %w", name, err)
	}
	p.mu.Lock()
	p.firewall[name] = true
	p.mu.Unlock()
	return nil
}
