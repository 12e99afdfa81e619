package gcp

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/protobuf/encoding/protojson"

	"hoist/backends"
	"hoist/backends/internal/drivertest"
	"hoist/backends/offers"
	"hoist/backends/vm"
	"hoist/e2e/cloudsim/sim"
)

func launchRequest(id string) vm.LaunchRequest {
	return vm.LaunchRequest{
		ID:        id,
		Name:      vm.ResourceName("fleet/test", id, 63),
		Offer:     offers.Offer{Instance: "e2-standard-2", Region: "us-central1", DiskGB: 20},
		User:      "root",
		PublicKey: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFakeKeyForTheSimulator hoist-" + id,
		Tags: map[string]string{
			backends.TagInstallation: "Inst-1", backends.TagProject: "main",
			backends.TagResource: "fleet/Gpu_Pool", backends.TagInstance: id,
		},
	}
}

// waitRunning polls Get until the VM runs.
func waitRunning(t *testing.T, p *Provider, ref string) vm.Machine {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		m, err := p.Get(t.Context(), ref)
		if err == nil && m.State == vm.StateRunning {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not running: %+v %v", ref, m, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestLaunchGetListDelete(t *testing.T) {
	env := startSim(t)
	p := env.newTestProvider(t, func(o map[string]any) { o["tags"] = map[string]string{"Team": "ML"} })
	ctx := t.Context()
	req := launchRequest("i-1")
	m, err := p.Launch(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if m.Ref != "us-central1-a/"+req.Name || m.State != vm.StatePending || m.Region != "us-central1" {
		t.Fatalf("launched %+v", m)
	}
	// Launching the same id again is the same instance (requestId).
	again, err := p.Launch(ctx, req)
	if err != nil || again.Ref != m.Ref {
		t.Fatalf("relaunch: %+v %v", again, err)
	}
	if n := len(env.sim.List("gcp", sim.KindInstance)); n != 1 {
		t.Fatalf("%d instances after two launches of one id", n)
	}
	// The SSH firewall rule, once per backend.
	if fws := env.sim.List("gcp", "firewall"); len(fws) != 1 || fws[0].Name != "hoist-ssh-in-default" ||
		env.cloud.Stats().Calls["gcp"]["firewalls.insert"] != 1 {
		t.Errorf("firewall rules %+v", fws)
	}
	got := waitRunning(t, p, m.Ref)
	r := env.sim.List("gcp", sim.KindInstance)[0]
	if got.Address != r.Address || len(got.HostKeys) != 1 || !strings.HasPrefix(r.HostKeys[0], got.HostKeys[0]) {
		t.Errorf("machine %+v, VM at %s with host keys %v", got, r.Address, r.HostKeys)
	}
	if r.User != "root" || len(r.AuthorizedKeys) == 0 || r.AuthorizedKeys[0] != req.PublicKey {
		t.Errorf("VM login %s %v", r.User, r.AuthorizedKeys)
	}
	// Labels follow GCP's rules and read back as the tags.
	if r.Tags["hoist_resource"] != "fleet_2f_47pu_5f_50ool" || r.Tags["team"] != "ml" {
		t.Errorf("labels %v", r.Tags)
	}
	for k, v := range req.Tags {
		if got.Tags[k] != v {
			t.Errorf("tag %s = %q, want %q", k, got.Tags[k], v)
		}
	}
	list, err := p.List(ctx, map[string]string{backends.TagInstallation: "Inst-1", backends.TagResource: "fleet/Gpu_Pool"})
	if err != nil || len(list) != 1 || list[0].Ref != m.Ref {
		t.Fatalf("list: %+v %v", list, err)
	}
	if list, err := p.List(ctx, map[string]string{backends.TagInstallation: "other"}); err != nil || len(list) != 0 {
		t.Fatalf("list of another installation: %+v %v", list, err)
	}
	if err := p.Delete(ctx, m.Ref); err != nil {
		t.Fatal(err)
	}
	if err := p.Delete(ctx, m.Ref); err != nil {
		t.Fatalf("second delete: %v", err)
	}
	if _, err := p.Get(ctx, m.Ref); !errors.Is(err, backends.ErrNotFound) {
		t.Fatalf("get after delete: %v", err)
	}
	if r, _ := env.sim.Get("gcp", r.ID); r.State != sim.StateTerminated {
		t.Errorf("sim state %s", r.State)
	}
}

func TestSpotPreemption(t *testing.T) {
	env := startSim(t)
	p := env.newTestProvider(t, nil)
	req := launchRequest("spot-1")
	req.Offer.Spot = true
	m, err := p.Launch(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	waitRunning(t, p, m.Ref)
	r := env.sim.List("gcp", sim.KindInstance)[0]
	if !r.Spot {
		t.Fatal("not launched as spot")
	}
	env.cloud.Interrupt(r.ID)
	got, err := p.Get(t.Context(), m.Ref)
	if err != nil || got.State != vm.StateGone || !got.Interrupted {
		t.Fatalf("after preemption: %+v %v", got, err)
	}
}

func TestNoCapacityInEveryZone(t *testing.T) {
	env := startSim(t)
	p := env.newTestProvider(t, nil)
	env.cloud.Faults(sim.Faults{Capacity: map[string]int{"e2-standard-2": 0}})
	_, err := p.Launch(t.Context(), launchRequest("full-1"))
	if !errors.Is(err, backends.ErrNoCapacity) || !strings.Contains(err.Error(), "ZONE_RESOURCE_POOL_EXHAUSTED") {
		t.Fatalf("launch without capacity: %v", err)
	}
	calls := env.cloud.Stats().Calls["gcp"]
	if calls["instances.insert"] != 4 {
		t.Errorf("inserts = %d, want one per zone of us-central1 (4)", calls["instances.insert"])
	}
	// One more instance may be had: the second zone gets it.
	env.cloud.Faults(sim.Faults{Capacity: map[string]int{"e2-standard-2": 1}})
	if _, err := p.Launch(t.Context(), launchRequest("full-2")); err != nil {
		t.Fatal(err)
	}
}

func TestPublicIPsOff(t *testing.T) {
	env := startSim(t)
	p := env.newTestProvider(t, func(o map[string]any) { o["public_ips"] = false })
	m, err := p.Launch(t.Context(), launchRequest("private-1"))
	if err != nil {
		t.Fatal(err)
	}
	got := waitRunning(t, p, m.Ref)
	if r := env.sim.List("gcp", sim.KindInstance)[0]; got.Address != r.Address {
		t.Errorf("address %q, VM's internal IP %q", got.Address, r.Address)
	}
}

func TestFactoryRefuses(t *testing.T) {
	env := startSim(t)
	for _, tc := range []struct {
		name string
		edit func(map[string]any)
		want string
	}{
		{"no project", func(o map[string]any) { delete(o, "project_id") }, "project_id is required"},
		{"shared vpc", func(o map[string]any) { o["vpc_project_id"] = "host" }, "vpc_project_id"},
		{"extra vpcs", func(o map[string]any) { o["extra_vpcs"] = []string{"a"} }, "extra_vpcs"},
		{"nat check", func(o map[string]any) { o["nat_check"] = false }, "nat_check"},
		{"unknown key", func(o map[string]any) { o["vpc_id"] = "x" }, `unknown field "vpc_id"`},
		{"no creds", func(o map[string]any) { delete(o, "creds") }, "creds is required"},
		{"creds type", func(o map[string]any) { o["creds"] = map[string]any{"type": "access_key"} }, `type "access_key"`},
		{"bad key", func(o map[string]any) {
			o["creds"] = map[string]any{"type": "service_account", "data": "{}"}
		}, "service account key"},
		{"users differ", func(o map[string]any) {
			o["os_images"] = map[string]any{"cpu": map[string]any{"name": "i", "user": "ubuntu"}, "nvidia": map[string]any{"name": "j", "user": "root"}}
		}, "differ"},
		{"other project", func(o map[string]any) { o["project_id"] = "not-mine" }, "checking credentials"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Factory(env.config(t, tc.edit), drivertest.Deps(t, drivertest.Records(t)))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Factory: %v, want an error with %q", err, tc.want)
			}
		})
	}
}

func TestLabels(t *testing.T) {
	for _, v := range []string{"", "main", "fleet/gpu-pool", "Inst_1", "a.b c", strings.Repeat("x", 63)} {
		l := labelValue(v)
		if len(l) > 63 || strings.ContainsFunc(l, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_')
		}) {
			t.Errorf("labelValue(%q) = %q: not a label value", v, l)
		}
		if got := tagValue(l); got != v {
			t.Errorf("tagValue(labelValue(%q)) = %q", v, got)
		}
	}
	long := strings.Repeat("Y", 40)
	if l := labelValue(long); len(l) > 63 || l != labelValue(long) || l == labelValue(long+"z") {
		t.Errorf("long value label %q", l)
	}
	for k, want := range map[string]string{"hoist.installation": "hoist_installation", "Team": "team", "cost.center": "cost_center", "1x": ""} {
		if got := labelKey(k); got != want {
			t.Errorf("labelKey(%q) = %q, want %q", k, got, want)
		}
	}
	if got := tagKey("hoist_instance"); got != backends.TagInstance {
		t.Errorf("tagKey = %q", got)
	}
}

func TestVolumeAttachDetachAgain(t *testing.T) {
	env := startSim(t)
	p := env.newTestProvider(t, nil)
	ctx := t.Context()
	m, err := p.Launch(ctx, launchRequest("vol-1"))
	if err != nil {
		t.Fatal(err)
	}
	// A region: the disk goes to its first zone, where Launch tried first.
	d, err := p.CreateVolume(ctx, vm.VolumeRequest{ID: "v-1", Name: "hoist-data-1", Region: "us-central1", SizeGB: 1,
		Tags: map[string]string{backends.TagProject: "main"}})
	if err != nil || d.Ref != "us-central1-a/hoist-data-1" || d.State != vm.DiskAvailable || d.Tags[backends.TagProject] != "main" {
		t.Fatalf("created %+v %v", d, err)
	}
	waitRunning(t, p, m.Ref)
	for range 2 {
		dev, err := p.AttachVolume(ctx, d.Ref, m.Ref)
		if err != nil || dev != "/dev/disk/by-id/google-hoist-data-1" {
			t.Fatalf("attach: %q %v", dev, err)
		}
		if again, err := p.AttachVolume(ctx, d.Ref, m.Ref); err != nil || again != dev {
			t.Fatalf("attach again: %q %v", again, err)
		}
		if _, err := os.Lstat(dev); err != nil {
			t.Fatalf("device link: %v", err)
		}
		if got, err := p.GetVolume(ctx, "hoist-data-1"); err != nil || got.State != vm.DiskInUse || got.AttachedTo != m.Ref {
			t.Fatalf("attached disk by name: %+v %v", got, err)
		}
		if err := p.DetachVolume(ctx, d.Ref, m.Ref, false); err != nil {
			t.Fatal(err)
		}
		if err := p.DetachVolume(ctx, d.Ref, m.Ref, false); err != nil {
			t.Fatalf("detach again: %v", err)
		}
		if _, err := os.Lstat(dev); !os.IsNotExist(err) {
			t.Fatalf("device link after detach: %v", err)
		}
	}
	if err := p.DeleteVolume(ctx, d.Ref); err != nil {
		t.Fatal(err)
	}
	if _, err := p.GetVolume(ctx, d.Ref); !errors.Is(err, backends.ErrNotFound) {
		t.Fatalf("get after delete: %v", err)
	}
	if err := p.DeleteVolume(ctx, d.Ref); err != nil {
		t.Fatalf("delete again: %v", err)
	}
}

// TestGatewayFirewallRule checks that a gateway's instance carries the
// gateway network tag and that the firewall rule opening TCP 80 and 443 from
// anywhere to that tag exists (dstack's gateway firewall rule), created once;
// another instance carries the runner tag only.
func TestGatewayFirewallRule(t *testing.T) {
	env := startSim(t)
	p := env.newTestProvider(t, nil)
	ctx := t.Context()
	if _, err := p.Launch(ctx, launchRequest("plain-1")); err != nil {
		t.Fatal(err)
	}
	if fws := env.sim.List("gcp", "firewall"); len(fws) != 1 {
		t.Errorf("firewall rules after a plain instance: %d, want the SSH rule only", len(fws))
	}
	for _, id := range []string{"gw-1", "gw-2"} {
		req := launchRequest(id)
		req.Gateway = true
		if _, err := p.Launch(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	var rule *computepb.Firewall
	for _, r := range env.sim.List("gcp", "firewall") {
		if r.Name == "hoist-gateway-in-default" {
			rule = &computepb.Firewall{}
			if err := protojson.Unmarshal([]byte(r.Extra["spec"]), rule); err != nil {
				t.Fatal(err)
			}
		}
	}
	if rule == nil {
		t.Fatalf("no hoist-gateway-in-default firewall rule")
	}
	if got := env.cloud.Stats().Calls["gcp"]["firewalls.insert"]; got != 2 {
		t.Errorf("firewalls.insert called %d times, want 2 (SSH, then gateways once)", got)
	}
	if rule.GetDirection() != "INGRESS" || !slices.Equal(rule.GetSourceRanges(), []string{"0.0.0.0/0"}) || !slices.Equal(rule.GetTargetTags(), []string{gatewayTag}) ||
		len(rule.GetAllowed()) != 1 || rule.GetAllowed()[0].GetIPProtocol() != "tcp" || !slices.Equal(rule.GetAllowed()[0].GetPorts(), []string{"80", "443"}) {
		t.Errorf("gateway firewall rule = %v", rule)
	}
	for _, r := range env.sim.List("gcp", sim.KindInstance) {
		in := &computepb.Instance{}
		if err := protojson.Unmarshal([]byte(r.Extra["spec"]), in); err != nil {
			t.Fatal(err)
		}
		want := []string{runnerTag}
		if strings.HasPrefix(r.Tags["hoist_instance"], "gw-") {
			want = []string{runnerTag, gatewayTag}
		}
		if got := in.GetTags().GetItems(); !slices.Equal(got, want) {
			t.Errorf("instance %s network tags %q, want %q", r.Name, got, want)
		}
	}
}
