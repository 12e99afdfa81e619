package verda

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"strings"
	"sync"
	"time"

	"hoist/backends"
	"hoist/backends/offers"
	"hoist/backends/vm"
)

// Images are dstack's (src/dstack/_internal/core/backends/verda/compute.py):
// Ubuntu 22.04 with CUDA 12.0 for the V100 and A6000 types, Ubuntu 24.04
// with CUDA 13.0 for every other type.
const (
	imageOlderGPUs = "2088da25-bb0d-41cc-a191-dccae45d96fd"
	imageDefault   = "2404f580-1300-1111-82b3-f199fb9b701b"
)

// minDiskGB is the smallest OS volume Verda creates; defaultDiskGB is the
// OS volume of an offer without a disk size (dstack's default disk).
const (
	minDiskGB     = 50
	defaultDiskGB = 100
)

// descriptionPrefix starts the description of every instance hoist creates;
// the ownership tags follow, query-encoded.
const descriptionPrefix = "hoist "

// Provider is the vm.Provider of Verda. Safe for concurrent use.
type Provider struct {
	backend string
	regions []string
	api     *client
	now     func() time.Time
}

var _ vm.Provider = (*Provider)(nil)

// launches serializes the launches of one instance id in this process, so
// that the look-up of an existing instance and the create do not race
// (Verda has no idempotency token).
var launches sync.Map // id → *sync.Mutex

func lockLaunch(id string) func() {
	m, _ := launches.LoadOrStore(id, &sync.Mutex{})
	mu := m.(*sync.Mutex)
	mu.Lock()
	return mu.Unlock
}

// description encodes tags as an instance description.
func description(tags map[string]string) string {
	v := url.Values{}
	for k, val := range tags {
		v.Set(k, val)
	}
	return descriptionPrefix + v.Encode()
}

// parseDescription returns the tags of a description hoist wrote; false for
// any other description (a foreign instance).
func parseDescription(d string) (map[string]string, bool) {
	rest, ok := strings.CutPrefix(d, descriptionPrefix)
	if !ok {
		return nil, false
	}
	v, err := url.ParseQuery(rest)
	if err != nil || v.Get(backends.TagInstallation) == "" {
		return nil, false
	}
	tags := map[string]string{}
	for k := range v {
		tags[k] = v.Get(k)
	}
	return tags, true
}

// image returns the image for an offer, by its GPU as dstack chooses.
func image(o offers.Offer) string {
	if o.GPUName == "V100" || o.GPUName == "A6000" {
		return imageOlderGPUs
	}
	return imageDefault
}

// startupScript authorizes key for root, as the image's own key injection
// does, for images without it.
func startupScript(name, key string) string {
	q := "'" + strings.ReplaceAll(key, "'", `'\''`) + "'"
	return "#!/bin/sh\n" +
		"# hoist: " + name + "\n" +
		"mkdir -p /root/.ssh && chmod 700 /root/.ssh\n" +
		"grep -qxF " + q + " /root/.ssh/authorized_keys 2>/dev/null || echo " + q + " >> /root/.ssh/authorized_keys\n"
}

// Launch creates the instance's SSH key and startup script, then the
// instance; both are deleted again when the instance cannot be created. An
// instance of req.ID that exists already is returned instead.
func (p *Provider) Launch(ctx context.Context, req vm.LaunchRequest) (vm.Machine, error) {
	unlock := lockLaunch(req.ID)
	defer unlock()
	tags := maps.Clone(req.Tags)
	if tags == nil {
		tags = map[string]string{}
	}
	tags[backends.TagInstance] = req.ID
	if tags[backends.TagInstallation] == "" {
		return vm.Machine{}, backends.Stalled(errors.New("verda: launch: the hoist.installation tag is required"))
	}
	existing, err := p.List(ctx, map[string]string{backends.TagInstance: req.ID, backends.TagInstallation: tags[backends.TagInstallation]})
	if err != nil {
		return vm.Machine{}, err
	}
	for _, m := range existing {
		if m.State != vm.StateGone {
			return m, nil
		}
	}
	o := req.Offer
	var keyID, scriptID string
	if _, err := p.api.do(ctx, "POST", "/ssh-keys", map[string]string{"name": req.Name + "-0.key", "key": req.PublicKey}, &keyID); err != nil {
		return vm.Machine{}, classify(err)
	}
	cleanup := func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		p.deleteKeysAndScript(ctx, []string{keyID}, scriptID)
	}
	if _, err := p.api.do(ctx, "POST", "/scripts", map[string]string{"name": req.Name + ".sh", "script": startupScript(req.Name, req.PublicKey)}, &scriptID); err != nil {
		cleanup()
		return vm.Machine{}, classify(err)
	}
	disk := int(o.DiskGB)
	if disk == 0 {
		disk = defaultDiskGB
	}
	disk = max(disk, minDiskGB)
	body := createInstance{
		InstanceType: o.Instance, Image: image(o), SSHKeyIDs: []string{keyID},
		Hostname: req.Name, Description: description(tags), StartupScriptID: scriptID,
		Pricing: "FIXED_PRICE", IsSpot: o.Spot, LocationCode: o.Region,
		OSVolume: &osVolume{Name: "OS volume", Size: disk},
	}
	var id string
	if _, err := p.api.do(ctx, "POST", "/instances", body, &id); err != nil {
		cleanup()
		return vm.Machine{}, classifyLaunch(err)
	}
	if id == "" {
		cleanup()
		return vm.Machine{}, backends.Transient(errors.New("verda: POST /instances answered no instance id"))
	}
	return vm.Machine{Ref: id, State: vm.StatePending, Region: o.Region, InstanceType: o.Instance, Tags: tags, CreatedAt: p.now().UTC()}, nil
}

// machine maps an instance onto the engine's view.
func machine(in instance, tags map[string]string) vm.Machine {
	m := vm.Machine{Ref: in.ID, Region: in.Location, InstanceType: in.InstanceType, Tags: tags}
	if in.IP != nil {
		m.Address = *in.IP
	}
	if t, err := time.Parse(time.RFC3339Nano, in.CreatedAt); err == nil {
		m.CreatedAt = t
	}
	switch in.Status {
	case "running":
		m.State = vm.StateRunning
		if m.Address == "" {
			m.State = vm.StatePending
		}
	case "new", "ordered", "provisioning", "validating":
		m.State = vm.StatePending
	case "offline", "deleting":
		m.State = vm.StateStopping
	case "discontinued", "notfound", "no_capacity", "error":
		m.State = vm.StateGone
		m.Message = "Verda reports the instance " + in.Status
		if in.Status == "discontinued" && in.IsSpot {
			// A spot instance discontinued by Verda (hoist's deletes make it
			// disappear).
			m.Interrupted = true
			m.Message = "Verda reclaimed the spot instance"
		}
	default:
		m.State = vm.StatePending
		m.Message = "Verda reports the instance " + in.Status
	}
	return m
}

// Get is GET /instances/{id}.
func (p *Provider) Get(ctx context.Context, ref string) (vm.Machine, error) {
	in, err := p.get(ctx, ref)
	if err != nil {
		return vm.Machine{}, err
	}
	tags, _ := parseDescription(in.Description)
	return machine(in, tags), nil
}

func (p *Provider) get(ctx context.Context, ref string) (instance, error) {
	if ref == "" || strings.ContainsAny(ref, "/?#") {
		return instance{}, fmt.Errorf("%w: verda: %q is not an instance id", backends.ErrNotFound, ref)
	}
	var in instance
	if _, err := p.api.do(ctx, "GET", "/instances/"+ref, nil, &in); err != nil {
		if isGone(err) {
			return instance{}, fmt.Errorf("%w: %w", backends.ErrNotFound, err)
		}
		return instance{}, classify(err)
	}
	return in, nil
}

// Delete deletes the instance's SSH keys and startup script, then the
// instance itself (PUT /instances action delete, delete_permanently, which
// removes its OS volume too). One still provisioning cannot be deleted yet:
// that is an error wrapping ErrNotYetTerminated.
func (p *Provider) Delete(ctx context.Context, ref string) error {
	in, err := p.get(ctx, ref)
	if errors.Is(err, backends.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	script := ""
	if in.StartupScriptID != nil {
		script = *in.StartupScriptID
	}
	if err := p.deleteKeysAndScript(ctx, in.SSHKeyIDs, script); err != nil {
		return err
	}
	body := map[string]any{"action": "delete", "id": []string{ref}, "delete_permanently": true}
	if _, err := p.api.do(ctx, "PUT", "/instances", body, nil); err != nil {
		switch {
		case isGone(err):
			return nil
		case isProvisioning(err):
			return backends.Wait(fmt.Errorf("verda: instance %s: %w: %w", ref, backends.ErrNotYetTerminated, err), 5*time.Second)
		}
		return classify(err)
	}
	return nil
}

// deleteKeysAndScript deletes SSH keys and a startup script; those already
// gone are fine.
func (p *Provider) deleteKeysAndScript(ctx context.Context, keys []string, script string) error {
	var errs []error
	for _, k := range keys {
		if k == "" {
			continue
		}
		if _, err := p.api.do(ctx, "DELETE", "/ssh-keys", map[string][]string{"keys": {k}}, nil); err != nil && !errors.Is(classify(err), backends.ErrNotFound) {
			errs = append(errs, classify(err))
		}
	}
	if script != "" {
		if _, err := p.api.do(ctx, "DELETE", "/scripts/"+url.PathEscape(script), nil, nil); err != nil && !errors.Is(classify(err), backends.ErrNotFound) {
			errs = append(errs, classify(err))
		}
	}
	return errors.Join(errs...)
}

// List returns hoist's instances whose tags (read from the description)
// carry all of tags, in the configured locations. Instances with any other
// description are never listed.
func (p *Provider) List(ctx context.Context, tags map[string]string) ([]vm.Machine, error) {
	var all []instance
	if _, err := p.api.do(ctx, "GET", "/instances", nil, &all); err != nil {
		return nil, classify(err)
	}
	var out []vm.Machine
	for _, in := range all {
		got, ok := parseDescription(in.Description)
		if !ok || !vm.InRegions(in.Location, p.regions) {
			continue
		}
		match := true
		for k, v := range tags {
			if got[k] != v {
				match = false
				break
			}
		}
		if match {
			out = append(out, machine(in, got))
		}
	}
	return out, nil
}
