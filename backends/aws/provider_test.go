package aws

import (
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"net"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"hoist/backends"
	"hoist/backends/offers"
	"hoist/backends/vm"
)

// testSigner is the key the tests' launch requests authorize.
var testSigner, testKey = func() (ssh.Signer, string) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		panic(err)
	}
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		panic(err)
	}
	return s, strings.TrimSpace(string(ssh.MarshalAuthorizedKey(s.PublicKey())))
}()

func launchRequest(id string) vm.LaunchRequest {
	return vm.LaunchRequest{
		ID:        id,
		Name:      "hoist-test-" + id,
		Offer:     offers.Offer{Backend: "aws", Instance: "t3.micro", Region: "us-east-1", DiskGB: 20},
		User:      "root",
		PublicKey: testKey,
		UserData:  "#cloud-config\nssh_authorized_keys:\n  - " + testKey + "\n",
		Tags:      map[string]string{backends.TagInstallation: "test-inst", backends.TagInstance: id},
	}
}

func waitState(t *testing.T, p *Provider, ref, state string) vm.Machine {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		m, err := p.Get(t.Context(), ref)
		if err != nil {
			t.Fatalf("Get %s: %v", ref, err)
		}
		if m.State == state {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s stays %s, want %s", ref, m.State, state)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestProvider_launchGetListDelete(t *testing.T) {
	env := startSim(t)
	p := env.newTestProvider(t, nil)
	req := launchRequest("inst-1")
	m, err := p.Launch(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(m.Ref, "us-east-1/i-") || m.State != vm.StatePending || m.Region != "us-east-1" {
		t.Fatalf("Launch = %+v", m)
	}
	again, err := p.Launch(t.Context(), req)
	if err != nil || again.Ref != m.Ref {
		t.Fatalf("second Launch with the same ID = %+v, %v; want %s", again, err, m.Ref)
	}

	_, id, _ := parseRef(m.Ref)
	r, _ := env.sim.Get("aws", id)
	if r.User != "root" {
		t.Errorf("VM user = %q, want the sim image's root", r.User)
	}
	if r.Tags["Name"] != req.Name || r.Tags[backends.TagInstance] != "inst-1" || r.SizeGB != 20 || r.InstanceType != "t3.micro" {
		t.Errorf("VM = %+v", r)
	}
	if r.Price <= 0 {
		t.Errorf("VM price = %v, want the catalog's", r.Price)
	}

	// The host keys come from the console output once the VM runs.
	run := waitState(t, p, m.Ref, vm.StateRunning)
	r, _ = env.sim.Get("aws", id)
	if len(run.HostKeys) != 1 || len(r.HostKeys) != 1 || run.HostKeys[0] != r.HostKeys[0] {
		t.Errorf("HostKeys = %q, want the VM's %q", run.HostKeys, r.HostKeys)
	}
	if run.Address == "" || run.Address != r.Address || run.Tags[backends.TagInstance] != "inst-1" || run.Tags["Name"] != "" || run.InstanceType != "t3.micro" {
		t.Errorf("running machine = %+v", run)
	}
	// The VM lets the request's key in as root, and shows the host key
	// the console output gave.
	env.cloud.WaitRunning("aws", id, 10*time.Second)
	pinned, _, _, _, err := ssh.ParseAuthorizedKey([]byte(run.HostKeys[0]))
	if err != nil {
		t.Fatal(err)
	}
	conn, err := ssh.Dial("tcp", net.JoinHostPort(run.Address, "22"), &ssh.ClientConfig{
		User: "root", Auth: []ssh.AuthMethod{ssh.PublicKeys(testSigner)},
		HostKeyCallback: ssh.FixedHostKey(pinned), Timeout: 5 * time.Second,
	})
	if err != nil {
		t.Fatalf("ssh to the VM: %v", err)
	}
	conn.Close()

	list, err := p.List(t.Context(), map[string]string{backends.TagInstallation: "test-inst"})
	if err != nil || len(list) != 1 || list[0].Ref != m.Ref {
		t.Fatalf("List = %+v, %v", list, err)
	}
	if other, err := p.List(t.Context(), map[string]string{backends.TagInstallation: "other"}); err != nil || len(other) != 0 {
		t.Fatalf("List(other installation) = %+v, %v", other, err)
	}

	if err := p.Delete(t.Context(), m.Ref); err != nil {
		t.Fatal(err)
	}
	if g, err := p.Get(t.Context(), m.Ref); err != nil || g.State != vm.StateStopping {
		t.Errorf("Get right after Delete = %+v, %v; want stopping", g, err)
	}
	waitState(t, p, m.Ref, vm.StateGone)
	if err := p.Delete(t.Context(), m.Ref); err != nil {
		t.Errorf("Delete of a terminated instance = %v", err)
	}
	if list, err := p.List(t.Context(), map[string]string{backends.TagInstallation: "test-inst"}); err != nil || len(list) != 0 {
		t.Errorf("List after terminate = %+v, %v", list, err)
	}
}

func TestProvider_spotInterruption(t *testing.T) {
	env := startSim(t)
	p := env.newTestProvider(t, nil)
	req := launchRequest("spot-1")
	req.Offer.Spot = true
	m, err := p.Launch(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	_, id, _ := parseRef(m.Ref)
	if r, _ := env.sim.Get("aws", id); !r.Spot {
		t.Fatalf("VM is not spot: %+v", r)
	}
	if err := env.provider.Interrupt(env.sim, id); err != nil {
		t.Fatal(err)
	}
	gone := waitState(t, p, m.Ref, vm.StateGone)
	if !gone.Interrupted || !strings.Contains(gone.Message, "Spot") {
		t.Errorf("interrupted machine = %+v", gone)
	}
}

func TestProvider_placementGroup(t *testing.T) {
	env := startSim(t)
	p := env.newTestProvider(t, nil)
	tags := map[string]string{backends.TagInstallation: "test-inst"}
	pg, err := p.CreatePlacementGroup(t.Context(), "hoist-fleet-pg", "us-east-1", tags)
	if err != nil || pg != "us-east-1/hoist-fleet-pg" {
		t.Fatalf("CreatePlacementGroup = %q, %v", pg, err)
	}
	if again, err := p.CreatePlacementGroup(t.Context(), "hoist-fleet-pg", "us-east-1", tags); err != nil || again != pg {
		t.Fatalf("second CreatePlacementGroup = %q, %v", again, err)
	}
	req := launchRequest("pg-1")
	req.PlacementGroup = pg
	m, err := p.Launch(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	_, id, _ := parseRef(m.Ref)
	if r, _ := env.sim.Get("aws", id); r.Extra["placement_group"] != "hoist-fleet-pg" {
		t.Errorf("VM placement group = %q", r.Extra["placement_group"])
	}
	err = p.DeletePlacementGroup(t.Context(), pg)
	if !errors.Is(err, backends.ErrNotYetTerminated) || backends.KindOf(err) != backends.KindWait {
		t.Errorf("DeletePlacementGroup in use = %v (kind %s), want a wait on ErrNotYetTerminated", err, backends.KindOf(err))
	}
	if err := p.Delete(t.Context(), m.Ref); err != nil {
		t.Fatal(err)
	}
	waitState(t, p, m.Ref, vm.StateGone)
	if err := p.DeletePlacementGroup(t.Context(), pg); err != nil {
		t.Errorf("DeletePlacementGroup = %v", err)
	}
	if err := p.DeletePlacementGroup(t.Context(), pg); err != nil {
		t.Errorf("DeletePlacementGroup of a gone group = %v", err)
	}
}

func TestProvider_volumes(t *testing.T) {
	env := startSim(t)
	p := env.newTestProvider(t, nil)
	m, err := p.Launch(t.Context(), launchRequest("vol-host"))
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, p, m.Ref, vm.StateRunning)
	tags := map[string]string{backends.TagInstallation: "test-inst"}
	d, err := p.CreateVolume(t.Context(), vm.VolumeRequest{ID: "v1", Name: "hoist-data", Region: "us-east-1", SizeGB: 50, Tags: tags})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(d.Ref, "us-east-1/vol-") || d.Region != "us-east-1" || d.SizeGB != 50 || d.State != vm.DiskCreating {
		t.Fatalf("CreateVolume = %+v", d)
	}
	if again, err := p.CreateVolume(t.Context(), vm.VolumeRequest{ID: "v1", Name: "hoist-data", Region: "us-east-1", SizeGB: 50, Tags: tags}); err != nil || again.Ref != d.Ref {
		t.Fatalf("second CreateVolume = %+v, %v", again, err)
	}
	_, volID, _ := parseRef(d.Ref)
	// A registered volume is known by its bare id.
	if got, err := p.GetVolume(t.Context(), volID); err != nil || got.Ref != d.Ref || got.State != vm.DiskAvailable || got.Tags[backends.TagInstallation] != "test-inst" {
		t.Fatalf("GetVolume(%s) = %+v, %v", volID, got, err)
	}
	dev, err := p.AttachVolume(t.Context(), d.Ref, m.Ref)
	want := "/dev/disk/by-id/nvme-Amazon_Elastic_Block_Store_vol" + strings.TrimPrefix(volID, "vol-")
	if err != nil || dev != want {
		t.Fatalf("AttachVolume = %q, %v; want %q", dev, err, want)
	}
	// The simulated VM sees the volume where the shim looks: a link to a
	// loop device.
	if target, err := os.Readlink(dev); err != nil || !strings.HasPrefix(target, "/dev/loop") {
		t.Errorf("device path %s -> %q, %v; want a loop device", dev, target, err)
	}
	if again, err := p.AttachVolume(t.Context(), d.Ref, m.Ref); err != nil || again != want {
		t.Fatalf("second AttachVolume = %q, %v", again, err)
	}
	if got, _ := p.GetVolume(t.Context(), d.Ref); got.State != vm.DiskInUse || got.AttachedTo != m.Ref {
		t.Errorf("attached volume = %+v", got)
	}
	// A second volume takes the next device name.
	d2, err := p.CreateVolume(t.Context(), vm.VolumeRequest{ID: "v2", Name: "hoist-data2", Region: "us-east-1a", SizeGB: 10, Tags: tags})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.AttachVolume(t.Context(), d2.Ref, m.Ref); err != nil {
		t.Fatal(err)
	}
	_, vol2, _ := parseRef(d2.Ref)
	if r, _ := env.sim.Get("aws", vol2); r.Extra["attach_point"] != "/dev/sdg" {
		t.Errorf("second volume attached at %q, want /dev/sdg", r.Extra["attach_point"])
	}
	err = p.DeleteVolume(t.Context(), d.Ref)
	if !errors.Is(err, backends.ErrNotYetTerminated) || backends.KindOf(err) != backends.KindWait {
		t.Errorf("DeleteVolume while attached = %v", err)
	}
	err = p.DetachVolume(t.Context(), d.Ref, m.Ref, false)
	if !errors.Is(err, backends.ErrNotYetTerminated) || backends.KindOf(err) != backends.KindWait {
		t.Errorf("DetachVolume = %v, want a wait while detaching", err)
	}
	if err := p.DetachVolume(t.Context(), d.Ref, m.Ref, false); err != nil {
		t.Errorf("DetachVolume of a detached volume = %v", err)
	}
	if _, err := os.Lstat(dev); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("device path %s after detach: %v", dev, err)
	}
	if err := p.DeleteVolume(t.Context(), d.Ref); err != nil {
		t.Fatal(err)
	}
	if _, err := p.GetVolume(t.Context(), d.Ref); !errors.Is(err, backends.ErrNotFound) {
		t.Errorf("GetVolume of a deleted volume = %v, want ErrNotFound", err)
	}
	if err := p.DeleteVolume(t.Context(), d.Ref); err != nil {
		t.Errorf("DeleteVolume of a deleted volume = %v", err)
	}
	// Terminating the instance detaches its volumes.
	if err := p.Delete(t.Context(), m.Ref); err != nil {
		t.Fatal(err)
	}
	waitState(t, p, m.Ref, vm.StateGone)
	if got, err := p.GetVolume(t.Context(), d2.Ref); err != nil || got.State != vm.DiskAvailable || got.AttachedTo != "" {
		t.Errorf("volume of a terminated instance = %+v, %v", got, err)
	}
}

// TestProvider_configOptions: the entry's tags go on every resource (hoist's
// win), iam_instance_profile on the instance, and public_ips: false uses
// the private address.
func TestProvider_configOptions(t *testing.T) {
	env := startSim(t)
	p := env.newTestProvider(t, func(o map[string]any) {
		o["tags"] = map[string]string{"team": "ml", backends.TagInstance: "overridden?"}
		o["iam_instance_profile"] = "hoist-role"
		o["public_ips"] = false
	})
	m, err := p.Launch(t.Context(), launchRequest("opt-1"))
	if err != nil {
		t.Fatal(err)
	}
	_, id, _ := parseRef(m.Ref)
	r, _ := env.sim.Get("aws", id)
	if r.Tags["team"] != "ml" || r.Tags[backends.TagInstance] != "opt-1" {
		t.Errorf("tags = %v, want team=ml and hoist's own instance tag", r.Tags)
	}
	if r.Extra["iam_instance_profile"] != "hoist-role" {
		t.Errorf("instance profile = %q", r.Extra["iam_instance_profile"])
	}
	run := waitState(t, p, m.Ref, vm.StateRunning)
	if run.Address == "" {
		t.Errorf("no private address: %+v", run)
	}
	sgs := env.sim.List("aws", "security_group")
	if len(sgs) != 1 || sgs[0].Tags["team"] != "ml" || sgs[0].Tags[backends.TagInstallation] != "test-inst" || !strings.Contains(sgs[0].Extra["ingress"], "tcp:22:22:0.0.0.0/0") {
		t.Errorf("security groups = %+v", sgs)
	}
}

// TestProvider_gatewayOpensHTTPAndHTTPS checks that a gateway's instance
// gets, besides the installation's group, a security group letting TCP 80
// and 443 in from anywhere (dstack's gateway security group), and that
// another instance does not.
func TestProvider_gatewayOpensHTTPAndHTTPS(t *testing.T) {
	env := startSim(t)
	p := env.newTestProvider(t, nil)
	gwReq := launchRequest("gw-1")
	gwReq.Gateway = true
	gw, err := p.Launch(t.Context(), gwReq)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := p.Launch(t.Context(), launchRequest("plain-1"))
	if err != nil {
		t.Fatal(err)
	}
	// ingress returns the ingress rules of the instance's security groups
	// (the simulator's "proto:from:to:source").
	ingress := func(ref string) []string {
		t.Helper()
		_, id, _ := parseRef(ref)
		r, _ := env.sim.Get("aws", id)
		var out []string
		for _, sg := range strings.Split(r.Extra["security_groups"], ",") {
			g, ok := env.sim.Get("aws", sg)
			if !ok {
				t.Fatalf("instance %s: security group %q not found", id, sg)
			}
			if g.Extra["ingress"] != "" {
				out = append(out, strings.Split(g.Extra["ingress"], "\n")...)
			}
		}
		return out
	}
	for _, rule := range []string{"tcp:22:22:0.0.0.0/0", "tcp:80:80:0.0.0.0/0", "tcp:443:443:0.0.0.0/0"} {
		if !slices.Contains(ingress(gw.Ref), rule) {
			t.Errorf("gateway instance ingress %q lacks %s", ingress(gw.Ref), rule)
		}
	}
	for _, rule := range ingress(plain.Ref) {
		if strings.HasPrefix(rule, "tcp:80:") || strings.HasPrefix(rule, "tcp:443:") {
			t.Errorf("non-gateway instance ingress %q opens %s", ingress(plain.Ref), rule)
		}
	}
	// A second gateway reuses the group.
	gw2Req := launchRequest("gw-2")
	gw2Req.Gateway = true
	if _, err := p.Launch(t.Context(), gw2Req); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range env.sim.List("aws", "security_group") {
		if strings.HasPrefix(r.Name, "hoist-gateway") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d hoist-gateway security groups, want 1", n)
	}
}
