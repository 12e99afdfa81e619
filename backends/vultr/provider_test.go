package vultr

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/vultr/govultr/v3"

	"hoist/backends"
	"hoist/backends/internal/drivertest"
	"hoist/backends/offers"
	"hoist/backends/vm"
	"hoist/e2e/cloudsim/sim"
	simvultr "hoist/e2e/cloudsim/vultr"
)

func launchReq(id, plan, region string) vm.LaunchRequest {
	return vm.LaunchRequest{
		ID: id, Name: "hoist-test-" + id, User: "root",
		Offer:    offers.Offer{Instance: plan, Region: region},
		UserData: "#cloud-config\nssh_authorized_keys:\n- ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGqf3mAbP8wmfIgq0G1DNi1XNpAG8LEWxD0n7RfS8Ukm test\n",
		Tags:     map[string]string{backends.TagInstallation: "inst-1", backends.TagInstance: id},
	}
}

func cleanup(t *testing.T, p *Provider, ref string) {
	t.Cleanup(func() { _ = p.Delete(context.Background(), ref) })
}

// TestErrors checks the error mapping: a bad API key stalls (at start and
// on calls), a sold-out plan is no capacity, a rate limit is transient, an
// unknown instance is not found and deleting it is success.
func TestErrors(t *testing.T) {
	env := startSim(t)
	_, err := Factory(env.config(t, func(o map[string]any) {
		o["creds"] = map[string]any{"type": "api_key", "api_key": "wrong"}
	}), drivertest.Deps(t, drivertest.Records(t)))
	if err == nil || !backends.IsStalled(err) || !strings.Contains(err.Error(), `backend "vultr"`) {
		t.Errorf("bad key at start: %v", err)
	}
	p := env.newTestProvider(t, nil)
	bad := env.newTestProvider(t, nil)
	bad.c = govultr.NewClient(&http.Client{Transport: &transport{key: "wrong", base: http.DefaultTransport}})
	_ = bad.c.SetBaseURL(env.cloud.Endpoints[simvultr.Name])
	if _, err := bad.List(t.Context(), nil); !backends.IsStalled(err) {
		t.Errorf("bad key on list: %v", err)
	}

	env.cloud.Faults(sim.Faults{Capacity: map[string]int{"vc2-1c-2gb": 0}})
	_, err = p.Launch(t.Context(), launchReq("cap", "vc2-1c-2gb", "ewr"))
	if !errors.Is(err, backends.ErrNoCapacity) {
		t.Errorf("sold out: %v", err)
	}
	env.cloud.Faults(sim.Faults{ErrorRate: 1})
	_, err = p.Get(t.Context(), "instance/x")
	if err == nil || backends.IsStalled(err) || errors.Is(err, backends.ErrNotFound) || !strings.Contains(err.Error(), "Rate limit") {
		t.Errorf("rate limited: %v", err)
	}
	env.cloud.Faults(sim.Faults{})
	if _, err := p.Get(t.Context(), "instance/none"); !errors.Is(err, backends.ErrNotFound) {
		t.Errorf("unknown instance: %v", err)
	}
	if err := p.Delete(t.Context(), "instance/none"); err != nil {
		t.Errorf("delete of an unknown instance: %v", err)
	}
	if _, err := p.Launch(t.Context(), launchReq("bad", "vc2-none", "ewr")); !backends.IsStalled(err) || errors.Is(err, backends.ErrNoCapacity) {
		t.Errorf("launch of an unknown plan: %v", err)
	}
	for _, bad := range []map[string]any{
		{"creds": map[string]any{"type": "password", "api_key": "k"}},
		{"regions": []string{"mars"}},
		{"project_id": "p"},
	} {
		_, err := Factory(env.config(t, func(o map[string]any) {
			for k, v := range bad {
				o[k] = v
			}
		}), drivertest.Deps(t, drivertest.Records(t)))
		if err == nil {
			t.Errorf("Factory accepted %v", bad)
		}
	}
}

// TestLaunch launches a cloud instance, a cloud GPU instance and a
// bare-metal server: each in hoist's VPC of its region (one VPC per
// region, found again by its description), with its VPC address as the
// private address; a second launch of an id returns the first instance
// (and attaches a bare-metal server a stopped launch left outside the
// VPC); List finds ours by tags and never a foreign instance.
func TestLaunch(t *testing.T) {
	env := startSim(t)
	p := env.newTestProvider(t, nil)
	ctx := t.Context()
	var refs []string
	for _, c := range []struct{ id, plan string }{{"a", "vc2-1c-2gb"}, {"g", "vcg-a16-6c-64g-16vram"}, {"m", "vbm-8c-132gb"}} {
		m, err := p.Launch(ctx, launchReq(c.id, c.plan, "ewr"))
		if err != nil {
			t.Fatalf("launch %s: %v", c.plan, err)
		}
		cleanup(t, p, m.Ref)
		again, err := p.Launch(ctx, launchReq(c.id, c.plan, "ewr"))
		if err != nil || again.Ref != m.Ref {
			t.Fatalf("second launch of %s: %v %v, first %s", c.id, again.Ref, err, m.Ref)
		}
		refs = append(refs, m.Ref)
	}
	vpcs := env.sim.List(simvultr.Name, "vpc")
	if len(vpcs) != 1 || vpcs[0].Name != "hoist-vpc-ewr" {
		t.Fatalf("VPCs %+v", vpcs)
	}
	images := map[string]string{}
	for _, r := range env.sim.List(simvultr.Name, sim.KindInstance) {
		images[r.InstanceType] = r.Extra["image_id"]
		if r.Extra["vpc"] != vpcs[0].ID {
			t.Errorf("%s not in hoist's VPC: %q", r.InstanceType, r.Extra["vpc"])
		}
		ud, _ := base64.StdEncoding.DecodeString(r.UserData)
		if !strings.HasPrefix(string(ud), "#cloud-config") || strings.Contains(string(ud), "docker.io") != strings.HasPrefix(r.InstanceType, "vcg-") {
			t.Errorf("%s user data %q", r.InstanceType, ud)
		}
	}
	if images["vc2-1c-2gb"] != "docker" || images["vbm-8c-132gb"] != "docker" || images["vcg-a16-6c-64g-16vram"] != "os:1743" {
		t.Errorf("images %v", images)
	}
	for _, ref := range refs {
		var m vm.Machine
		deadline := time.Now().Add(time.Minute)
		for {
			var err error
			if m, err = p.Get(ctx, ref); err != nil {
				t.Fatal(err)
			}
			if m.State == vm.StateRunning || time.Now().After(deadline) {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if m.State != vm.StateRunning || m.Address == "" || m.PrivateAddress != m.Address || m.Tags[backends.TagInstallation] != "inst-1" {
			t.Errorf("%s: %+v", ref, m)
		}
	}

	// A foreign instance: no hoist tags, or another installation's.
	vc := p.c
	for _, tags := range [][]string{nil, {"hoist.installation=other", "hoist.instance=a"}} {
		in, _, err := vc.Instance.Create(ctx, &govultr.InstanceCreateReq{Region: "ewr", Plan: "vc2-1c-2gb", ImageID: "docker", Tags: tags})
		if err != nil {
			t.Fatal(err)
		}
		cleanup(t, p, "instance/"+in.ID)
	}
	got, err := p.List(ctx, map[string]string{backends.TagInstallation: "inst-1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Errorf("listed %d, want our 3: %+v", len(got), got)
	}
	got, err = p.List(ctx, map[string]string{backends.TagInstance: "a"})
	if err != nil || len(got) != 2 {
		t.Errorf("by instance tag: %d %v (ours and the other installation's)", len(got), err)
	}
	got, err = p.List(ctx, map[string]string{backends.TagInstallation: "inst-1", backends.TagInstance: "a"})
	if err != nil || len(got) != 1 || got[0].Ref != refs[0] {
		t.Errorf("ours by instance: %+v %v", got, err)
	}

	// A bare-metal server whose Launch stopped between the create and the
	// VPC attach: the next Launch of its id attaches it.
	bm, _, err := vc.BareMetalServer.Create(ctx, &govultr.BareMetalCreate{Region: "ewr", Plan: "vbm-8c-132gb", ImageID: "docker",
		Tags: encodeTags(map[string]string{backends.TagInstallation: "inst-1", backends.TagInstance: "z"})})
	if err != nil {
		t.Fatal(err)
	}
	cleanup(t, p, "bare-metal/"+bm.ID)
	m, err := p.Launch(ctx, launchReq("z", "vbm-8c-132gb", "ewr"))
	if err != nil || m.Ref != "bare-metal/"+bm.ID {
		t.Fatalf("launch of the half-launched z: %+v %v", m, err)
	}
	if r, _ := env.sim.Get(simvultr.Name, bm.ID); r.Extra["vpc"] != vpcs[0].ID {
		t.Errorf("z not attached to hoist's VPC: %q", r.Extra["vpc"])
	}

	if err := p.Delete(ctx, refs[2]); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Get(ctx, refs[2]); !errors.Is(err, backends.ErrNotFound) {
		t.Errorf("bare metal after delete: %v", err)
	}
	if err := p.Delete(ctx, refs[2]); err != nil {
		t.Errorf("second delete: %v", err)
	}
}

// TestOffers checks the live offers: dstack's plans only (vdc is not),
// each in its locations among the configured regions, not a plan the
// region's availability says is sold out, GPUs read from the plans,
// cheapest first, and none for a query of another backend.
func TestOffers(t *testing.T) {
	env := startSim(t)
	b := env.open(t, drivertest.Records(t))
	// Sold out everywhere: the regions' availability leaves it out.
	env.cloud.Faults(sim.Faults{Capacity: map[string]int{"vhf-2c-4gb": 0}})
	all, err := b.Offers(t.Context(), offers.Query{})
	if err != nil {
		t.Fatal(err)
	}
	byKey := map[string]offers.Offer{}
	for i, o := range all {
		if i > 0 && o.Price < all[i-1].Price {
			t.Errorf("not cheapest first at %d", i)
		}
		if o.Region != "ewr" && o.Region != "ord" {
			t.Errorf("offer outside the configured regions: %+v", o)
		}
		if o.Backend != "vultr" || o.Spot {
			t.Errorf("offer %+v", o)
		}
		byKey[o.Instance+"/"+o.Region] = o
	}
	if _, ok := byKey["vdc-4c-16gb/ewr"]; ok {
		t.Error("vdc offered")
	}
	if _, ok := byKey["vhf-2c-4gb/ewr"]; ok {
		t.Error("the sold-out vhf-2c-4gb offered")
	}
	if o := byKey["vbm-112c-2048gb-8-h100-gpu/ewr"]; o.GPUCount != 8 || o.GPUName != "H100" || o.GPUMemoryGB != 80 || o.CPUs != 224 {
		t.Errorf("bare-metal GPU offer %+v", o)
	}
	if o := byKey["vcg-a100-12c-120g-80vram/ewr"]; o.GPUCount != 1 || o.GPUName != "A100" || o.GPUVendor != "nvidia" || o.GPUMemoryGB != 80 || o.MemoryGB != 120 {
		t.Errorf("cloud GPU offer %+v", o)
	}
	if o := byKey["vc2-1c-2gb/ord"]; o.Price != 0.0137 || o.CPUs != 1 || o.MemoryGB != 2 {
		t.Errorf("cpu offer %+v", o)
	}
	if _, ok := byKey["vbm-8c-132gb/ams"]; ok {
		t.Error("offer in ams, not configured")
	}
	gpu, err := b.Offers(t.Context(), offers.Query{GPUNames: []string{"H100"}})
	if err != nil || len(gpu) != 1 {
		t.Errorf("H100 offers: %v %v", gpu, err)
	}
	if o, _ := b.Offers(t.Context(), offers.Query{Backends: []string{"aws"}}); len(o) != 0 {
		t.Errorf("offers for aws: %v", o)
	}
}
