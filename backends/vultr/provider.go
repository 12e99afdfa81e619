package vultr

import (
	"context"
	"encoding/base64"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/vultr/govultr/v3"

	"hoist/backends"
	"hoist/backends/vm"
)

// Provider is the vm.Provider of Vultr over govultr.
type Provider struct {
	backend string
	c       *govultr.Client // retries throttling and 5xx (govultr's default)
	create  *govultr.Client // for creates: no retries
	regions []string
	now     func() time.Time

	mu        sync.Mutex
	vpcs      map[string]string        // hoist's VPC id by region
	launching map[string]chan struct{} // launches under way, by instance id

	plans plansCache
}

var _ vm.Provider = (*Provider)(nil)

// Image choices of dstack's driver
// (src/dstack/_internal/core/backends/vultr/api_client.py): the Docker
// marketplace image for cloud and bare-metal plans, Ubuntu 22.04 for cloud
// GPU plans.
const (
	dockerImage = "docker"
	ubuntuOSID  = 1743
)

// withDocker adds the Docker Engine (Ubuntu's docker.io) to a #cloud-config
// for the plain Ubuntu image of cloud GPU plans: the engine takes a VM over
// only when Docker answers (the Docker image has it, Ubuntu does not), and
// the shim maps the GPUs' device nodes into containers itself when Docker
// has no NVIDIA runtime.
func withDocker(userData string) string {
	if !strings.HasPrefix(userData, "#cloud-config") || strings.Contains(userData, "\npackages:") {
		return userData
	}
	if !strings.HasSuffix(userData, "\n") {
		userData += "\n"
	}
	return userData + "package_update: true\npackages:\n  - docker.io\n"
}

// Ref prefixes: a Ref is "<kind>/<id>", the kind telling which API the
// machine lives under.
const (
	refInstance  = "instance"
	refBareMetal = "bare-metal"
)

// isBareMetal says whether a plan is a bare-metal plan.
func isBareMetal(plan string) bool { return strings.HasPrefix(plan, "vbm-") }

// vpcDescription is the description of hoist's VPC in region, the key it
// is found by (dstack's is dstack-vpc-<region>).
func vpcDescription(region string) string { return "hoist-vpc-" + region }

// encodeTags turns ownership tags into Vultr's string tags, "key=value",
// sorted.
func encodeTags(tags map[string]string) []string {
	out := make([]string, 0, len(tags))
	for _, k := range slices.Sorted(maps.Keys(tags)) {
		out = append(out, k+"="+tags[k])
	}
	return out
}

// decodeTags reads "key=value" tags back; other tags are left out.
func decodeTags(tags []string) map[string]string {
	out := map[string]string{}
	for _, t := range tags {
		if k, v, ok := strings.Cut(t, "="); ok && k != "" {
			out[k] = v
		}
	}
	return out
}

// Launch creates the instance or bare-metal server of req.Offer in its
// region's VPC, tagged with the ownership tags. Vultr has no idempotency
// token, so Launch is idempotent on req.ID by the hoist.instance tag: an
// instance that carries it is returned instead of a second one (launches
// of one id in this process are serialized).
func (p *Provider) Launch(ctx context.Context, req vm.LaunchRequest) (vm.Machine, error) {
	if req.Offer.Spot {
		return vm.Machine{}, backends.Stalled(fmt.Errorf("vultr: %s: Vultr has no spot instances", req.Offer.Instance))
	}
	if req.PlacementGroup != "" {
		return vm.Machine{}, backends.Stalled(fmt.Errorf("vultr: placement groups are not supported"))
	}
	unlock, err := p.lockLaunch(ctx, req.ID)
	if err != nil {
		return vm.Machine{}, err
	}
	defer unlock()
	tags := maps.Clone(req.Tags)
	if tags == nil {
		tags = map[string]string{}
	}
	if _, ok := tags[backends.TagInstance]; !ok {
		tags[backends.TagInstance] = req.ID
	}
	idTag := backends.TagInstance + "=" + tags[backends.TagInstance]
	metal := isBareMetal(req.Offer.Instance)
	found, err := p.list(ctx, metal, idTag)
	if err != nil {
		return vm.Machine{}, err
	}
	found = slices.DeleteFunc(found, func(m vm.Machine) bool {
		return m.Tags[backends.TagInstallation] != tags[backends.TagInstallation]
	})
	region := req.Offer.Region
	vpc, err := p.ensureVPC(ctx, region)
	if err != nil {
		return vm.Machine{}, err
	}
	if len(found) > 0 {
		m := found[0]
		if metal {
			// An earlier Launch may have stopped between the create
			// and the attach.
			if err := p.ensureAttached(ctx, m.Ref, vpc); err != nil {
				return vm.Machine{}, err
			}
		}
		return m, nil
	}
	userData := base64.StdEncoding.EncodeToString([]byte(req.UserData))
	if metal {
		cctx, c := track(ctx)
		bm, _, err := p.create.BareMetalServer.Create(cctx, &govultr.BareMetalCreate{
			Region: region, Plan: req.Offer.Instance, Label: req.Name, Hostname: req.Name,
			ImageID: dockerImage, UserData: userData, Tags: encodeTags(tags),
		})
		if err != nil {
			return vm.Machine{}, classifyCreate(c, "create bare-metal "+req.Offer.Instance+" in "+region, err)
		}
		m := p.bareMetal(bm, "")
		if err := p.attachVPC(ctx, m.Ref, vpc); err != nil {
			return vm.Machine{}, err
		}
		return m, nil
	}
	in := &govultr.InstanceCreateReq{
		Region: region, Plan: req.Offer.Instance, Label: req.Name, Hostname: req.Name,
		UserData: userData, Tags: encodeTags(tags), AttachVPC: []string{vpc},
	}
	if strings.HasPrefix(req.Offer.Instance, "vcg-") {
		in.OsID = ubuntuOSID
		in.UserData = base64.StdEncoding.EncodeToString([]byte(withDocker(req.UserData)))
	} else {
		in.ImageID = dockerImage
	}
	cctx, c := track(ctx)
	inst, _, err := p.create.Instance.Create(cctx, in)
	if err != nil {
		return vm.Machine{}, classifyCreate(c, "create instance "+req.Offer.Instance+" in "+region, err)
	}
	return p.instance(inst), nil
}

// lockLaunch serializes launches of one instance id, so that a second one
// sees the first's instance by its tag.
func (p *Provider) lockLaunch(ctx context.Context, id string) (func(), error) {
	for {
		p.mu.Lock()
		ch, busy := p.launching[id]
		if !busy {
			ch = make(chan struct{})
			p.launching[id] = ch
			p.mu.Unlock()
			return func() {
				p.mu.Lock()
				delete(p.launching, id)
				p.mu.Unlock()
				close(ch)
			}, nil
		}
		p.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, backends.Transient(ctx.Err())
		}
	}
}

// ensureVPC returns the id of hoist's VPC in region: the one described
// hoist-vpc-<region> (GET /v2/vpcs, every page), else a new one (POST
// /v2/vpcs), as dstack's driver does. VPCs are shared by the backend's
// instances in the region and kept.
func (p *Provider) ensureVPC(ctx context.Context, region string) (string, error) {
	p.mu.Lock()
	id, ok := p.vpcs[region]
	p.mu.Unlock()
	if ok {
		return id, nil
	}
	desc := vpcDescription(region)
	opts := &govultr.ListOptions{PerPage: 500}
	for id == "" {
		ctx, c := track(ctx)
		vpcs, meta, _, err := p.c.VPC.List(ctx, opts)
		if err != nil {
			return "", classify(c, "list VPCs", err)
		}
		for _, v := range vpcs {
			if v.Region == region && v.Description == desc {
				id = v.ID
				break
			}
		}
		if meta == nil || meta.Links == nil || meta.Links.Next == "" {
			break
		}
		opts.Cursor = meta.Links.Next
	}
	if id == "" {
		ctx, c := track(ctx)
		v, _, err := p.c.VPC.Create(ctx, &govultr.VPCReq{Region: region, Description: desc})
		if err != nil {
			return "", classify(c, "create VPC "+desc, err)
		}
		id = v.ID
	}
	p.mu.Lock()
	if prev, ok := p.vpcs[region]; ok {
		id = prev
	} else {
		p.vpcs[region] = id
	}
	p.mu.Unlock()
	return id, nil
}

// attachVPC attaches a bare-metal server to the VPC (POST
// /v2/bare-metals/{id}/vpcs/attach): govultr's create request has no
// attach_vpc for bare metal.
func (p *Provider) attachVPC(ctx context.Context, ref, vpc string) error {
	_, id, _ := strings.Cut(ref, "/")
	ctx, c := track(ctx)
	return classify(c, "attach bare-metal "+id+" to VPC "+vpc, p.c.BareMetalServer.AttachVPC(ctx, id, vpc))
}

// ensureAttached attaches a bare-metal server to the VPC unless GET
// /v2/bare-metals/{id}/vpcs shows it attached.
func (p *Provider) ensureAttached(ctx context.Context, ref, vpc string) error {
	_, id, _ := strings.Cut(ref, "/")
	lctx, c := track(ctx)
	vpcs, _, err := p.c.BareMetalServer.ListVPCInfo(lctx, id)
	if err != nil {
		return classify(c, "list VPCs of bare-metal "+id, err)
	}
	if slices.ContainsFunc(vpcs, func(v govultr.VPCInfo) bool { return v.ID == vpc }) {
		return nil
	}
	return p.attachVPC(ctx, ref, vpc)
}

// Get observes a machine: GET /v2/instances/{id} or /v2/bare-metals/{id}
// (and its VPC address); 404 wraps ErrNotFound.
func (p *Provider) Get(ctx context.Context, ref string) (vm.Machine, error) {
	kind, id, ok := strings.Cut(ref, "/")
	if !ok || id == "" {
		return vm.Machine{}, backends.Stalled(fmt.Errorf("vultr: %q is not a machine ref", ref))
	}
	if kind == refBareMetal {
		gctx, c := track(ctx)
		bm, _, err := p.c.BareMetalServer.Get(gctx, id)
		if err != nil {
			return vm.Machine{}, classify(c, "get bare-metal "+id, err)
		}
		private, err := p.bareMetalVPCAddress(ctx, id)
		if err != nil {
			return vm.Machine{}, err
		}
		return p.bareMetal(bm, private), nil
	}
	ctx, c := track(ctx)
	in, _, err := p.c.Instance.Get(ctx, id)
	if err != nil {
		return vm.Machine{}, classify(c, "get instance "+id, err)
	}
	return p.instance(in), nil
}

// bareMetalVPCAddress is a bare-metal server's address in its VPC (GET
// /v2/bare-metals/{id}/vpcs); "" when it has none yet.
func (p *Provider) bareMetalVPCAddress(ctx context.Context, id string) (string, error) {
	ctx, c := track(ctx)
	vpcs, _, err := p.c.BareMetalServer.ListVPCInfo(ctx, id)
	if err != nil {
		return "", classify(c, "list VPCs of bare-metal "+id, err)
	}
	for _, v := range vpcs {
		if v.IPAddress != "" {
			return v.IPAddress, nil
		}
	}
	return "", nil
}

// Delete deletes a machine (DELETE, 204). A 404 is gone, success: the
// engine's contract (dstack raises it).
func (p *Provider) Delete(ctx context.Context, ref string) error {
	kind, id, ok := strings.Cut(ref, "/")
	if !ok || id == "" {
		return backends.Stalled(fmt.Errorf("vultr: %q is not a machine ref", ref))
	}
	ctx, c := track(ctx)
	var err error
	if kind == refBareMetal {
		err = classify(c, "delete bare-metal "+id, p.c.BareMetalServer.Delete(ctx, id))
	} else {
		err = classify(c, "delete instance "+id, p.c.Instance.Delete(ctx, id))
	}
	if notFound(err) {
		return nil
	}
	return err
}

// List returns hoist's instances and bare-metal servers carrying all of
// tags: the API filters by one tag (?tag=, hoist.installation=<id> when
// given), the rest is matched here, so a foreign instance (without hoist's
// tags) is never listed.
func (p *Provider) List(ctx context.Context, tags map[string]string) ([]vm.Machine, error) {
	filter := ""
	if v, ok := tags[backends.TagInstallation]; ok {
		filter = backends.TagInstallation + "=" + v
	} else if len(tags) > 0 {
		k := slices.Sorted(maps.Keys(tags))[0]
		filter = k + "=" + tags[k]
	}
	var out []vm.Machine
	for _, metal := range []bool{false, true} {
		ms, err := p.list(ctx, metal, filter)
		if err != nil {
			return nil, err
		}
		for _, m := range ms {
			if backends.MatchTags(m.Tags, tags) && vm.InRegions(m.Region, p.regions) {
				out = append(out, m)
			}
		}
	}
	return out, nil
}

// list lists the instances (or bare-metal servers) carrying tag, every
// page.
func (p *Provider) list(ctx context.Context, metal bool, tag string) ([]vm.Machine, error) {
	var out []vm.Machine
	opts := &govultr.ListOptions{PerPage: 500, Tag: tag}
	for {
		lctx, c := track(ctx)
		var meta *govultr.Meta
		if metal {
			bms, m, _, err := p.c.BareMetalServer.List(lctx, opts)
			if err != nil {
				return nil, classify(c, "list bare-metals", err)
			}
			for i := range bms {
				private, err := p.bareMetalVPCAddress(ctx, bms[i].ID)
				if err != nil && !notFound(err) {
					return nil, err
				}
				out = append(out, p.bareMetal(&bms[i], private))
			}
			meta = m
		} else {
			ins, m, _, err := p.c.Instance.List(lctx, opts)
			if err != nil {
				return nil, classify(c, "list instances", err)
			}
			for i := range ins {
				out = append(out, p.instance(&ins[i]))
			}
			meta = m
		}
		if meta == nil || meta.Links == nil || meta.Links.Next == "" {
			return out, nil
		}
		opts.Cursor = meta.Links.Next
	}
}

// state maps Vultr's status and power status
// (https://www.vultr.com/api/#operation/get-instance) onto the engine's.
func state(status, power string) string {
	switch {
	case status == "pending":
		return vm.StatePending
	case status == "active" && power == "running":
		return vm.StateRunning
	}
	return vm.StateStopping
}

// address is a usable IPv4 address: Vultr shows 0.0.0.0 until one is
// assigned.
func address(ip string) string {
	if ip == "0.0.0.0" {
		return ""
	}
	return ip
}

func created(s string) time.Time {
	t, _ := time.Parse(time.RFC3339, s)
	return t
}

func (p *Provider) instance(in *govultr.Instance) vm.Machine {
	return vm.Machine{
		Ref: refInstance + "/" + in.ID, State: state(in.Status, in.PowerStatus),
		Address: address(in.MainIP), PrivateAddress: address(in.InternalIP), Region: in.Region,
		InstanceType: in.Plan, Tags: decodeTags(in.Tags), CreatedAt: created(in.DateCreated),
	}
}

func (p *Provider) bareMetal(bm *govultr.BareMetalServer, private string) vm.Machine {
	return vm.Machine{
		Ref: refBareMetal + "/" + bm.ID, State: state(bm.Status, bm.PowerStatus),
		Address: address(bm.MainIP), PrivateAddress: private, Region: bm.Region,
		InstanceType: bm.Plan, Tags: decodeTags(bm.Tags), CreatedAt: created(bm.DateCreated),
	}
}
