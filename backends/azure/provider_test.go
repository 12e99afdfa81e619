package azure

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"

	"hoist/backends"
	"hoist/backends/internal/drivertest"
	"hoist/backends/offers"
	"hoist/backends/vm"
	"hoist/e2e/cloudsim/arm"
	"hoist/e2e/cloudsim/sim"
	"hoist/e2e/testenv"
)

// simEnv is the cloud simulator with the simulated Azure, in-process,
// and an HTTP client trusting its CA that counts the SDK's requests.
type simEnv struct {
	cs    *testenv.CloudSim
	s     *sim.Sim
	prov  sim.Provider
	entry map[string]any
	http  *http.Client
	calls atomic.Int64 // HTTP requests the SDK sent (tokens included)
}

func startSim(t *testing.T) *simEnv {
	t.Helper()
	e := &simEnv{prov: arm.New()}
	e.cs = drivertest.StartSim(t, e.prov)
	e.s = e.cs.Sim()
	e.entry = e.cs.Backend("azure")
	pem, err := os.ReadFile(e.cs.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatalf("no certificate in %s", e.cs.CAFile)
	}
	base := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
	t.Cleanup(base.CloseIdleConnections)
	e.http = &http.Client{Transport: roundTripper(func(r *http.Request) (*http.Response, error) {
		e.calls.Add(1)
		return base.RoundTrip(r)
	})}
	return e
}

// client is the SDK's HTTP client.
func (e *simEnv) client() *http.Client { return e.http }

// waitRunning polls Get until the VM runs.
func waitRunning(t *testing.T, p *provider, ref string) vm.Machine {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		m, err := p.Get(context.Background(), ref)
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		if m.State == vm.StateRunning && m.Address != "" {
			return m
		}
		if m.State == vm.StateGone || time.Now().After(deadline) {
			t.Fatalf("VM %s not running: %+v", ref, m)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// config is the backend entry with changes (a nil value deletes the key),
// as the server passes it: without type and name.
func (e *simEnv) config(t *testing.T, changes map[string]any) backends.Config {
	t.Helper()
	return drivertest.Config(t, Type, e.entry, func(m map[string]any) {
		for k, v := range changes {
			if v == nil {
				delete(m, k)
			} else {
				m[k] = v
			}
		}
	})
}

// provider opens the driver's vm.Provider on the simulator.
func (e *simEnv) provider(t *testing.T, changes map[string]any) *provider {
	t.Helper()
	p, _, err := e.open(t, changes)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	p.poll = time.Second
	return p
}

func (e *simEnv) open(t *testing.T, changes map[string]any) (*provider, string, error) {
	t.Helper()
	var opts options
	if err := e.config(t, changes).Decode(&opts); err != nil {
		return nil, "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return newProvider(ctx, opts, nil, e.client())
}

func launchRequest(id string, offer offers.Offer) vm.LaunchRequest {
	return vm.LaunchRequest{
		ID: id, Name: "hoist-test-" + id, Offer: offer, User: "root",
		PublicKey: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHoistTestKeyOnlyForTheSimulator0000000000 hoist-" + id,
		UserData:  "#cloud-config\nssh_authorized_keys: []\n",
		Tags:      map[string]string{backends.TagInstallation: "test", backends.TagInstance: id},
	}
}

var d2s = offers.Offer{Backend: Type, Instance: "Standard_D2s_v3", Region: "eastus", CPUs: 2, MemoryGB: 8}

func simInstances(e *simEnv) []sim.Resource { return e.s.List("azure", sim.KindInstance) }

func TestProvider_lifecycle(t *testing.T) {
	e := startSim(t)
	p := e.provider(t, nil)
	ctx := context.Background()
	start := e.calls.Load()
	req := launchRequest("i-life", d2s)
	m, err := p.Launch(ctx, req)
	if err != nil {
		t.Fatalf("Launch: %v", err)
	}
	if m.State != vm.StatePending || m.Ref != "hoist-sim/"+req.Name || m.Region != "eastus" {
		t.Fatalf("Launch = %+v", m)
	}
	if _, err := p.Launch(ctx, req); err != nil {
		t.Fatalf("second Launch: %v", err)
	}
	vms := simInstances(e)
	if len(vms) != 1 {
		t.Fatalf("sim has %d VMs after two launches of one id, want 1", len(vms))
	}
	r := vms[0]
	if r.User != "root" || len(r.AuthorizedKeys) != 1 || r.AuthorizedKeys[0] != req.PublicKey ||
		r.UserData != req.UserData || r.Tags[backends.TagInstance] != "i-life" || r.Image != arm.Image || r.Price <= 0 {
		t.Fatalf("sim VM = %+v", r)
	}
	m = waitRunning(t, p, m.Ref)
	r, _ = e.s.Get("azure", r.ID)
	if m.State != vm.StateRunning || m.InstanceType != "Standard_D2s_v3" || m.Tags[backends.TagInstance] != "i-life" || m.Address != r.Address {
		t.Fatalf("Get = %+v (sim address %q)", m, r.Address)
	}
	t.Logf("launch+get: %d HTTP requests (token, resource group, network, VM)", e.calls.Load()-start)

	list, err := p.List(ctx, map[string]string{backends.TagInstallation: "test"})
	if err != nil || len(list) != 1 || list[0].Ref != m.Ref {
		t.Fatalf("List = %+v, %v", list, err)
	}
	if list, err := p.List(ctx, map[string]string{backends.TagInstallation: "other"}); err != nil || len(list) != 0 {
		t.Fatalf("List(other) = %+v, %v", list, err)
	}
	if err := p.Delete(ctx, m.Ref); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := p.Get(ctx, m.Ref); !errors.Is(err, backends.ErrNotFound) {
		t.Fatalf("Get after Delete: %v, want ErrNotFound", err)
	}
	if err := p.Delete(ctx, m.Ref); err != nil {
		t.Fatalf("second Delete: %v", err)
	}
	for _, r := range e.s.List("azure", "") {
		if (r.Kind == sim.KindInstance || r.Extra["type"] == "Microsoft.Network/networkInterfaces") && live(r) {
			t.Errorf("left after delete: %s %s %s", r.Kind, r.Name, r.State)
		}
	}
}

func live(r sim.Resource) bool { return r.State != sim.StateTerminated && r.State != sim.StateDeleted }

func TestProvider_spotEviction(t *testing.T) {
	e := startSim(t)
	p := e.provider(t, nil)
	ctx := context.Background()
	spot := d2s
	spot.Spot = true
	m, err := p.Launch(ctx, launchRequest("i-spot", spot))
	if err != nil {
		t.Fatalf("Launch: %v", err)
	}
	waitRunning(t, p, m.Ref)
	r := simInstances(e)[0]
	if !r.Spot {
		t.Fatalf("sim VM is not spot: %+v", r)
	}
	if err := e.prov.Interrupt(e.s, r.ID); err != nil {
		t.Fatalf("Interrupt: %v", err)
	}
	got, err := p.Get(ctx, m.Ref)
	if err != nil || got.State != vm.StateGone || !got.Interrupted {
		t.Fatalf("Get after eviction = %+v, %v; want gone and interrupted", got, err)
	}

	// A spot VM we deleted ourselves is not interrupted.
	m2, err := p.Launch(ctx, launchRequest("i-spot2", spot))
	if err != nil {
		t.Fatalf("Launch: %v", err)
	}
	if err := p.Delete(ctx, m2.Ref); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if got, err := p.Get(ctx, m2.Ref); !errors.Is(err, backends.ErrNotFound) {
		t.Fatalf("Get after Delete = %+v, %v; want ErrNotFound", got, err)
	}
}

// TestProvider_errors maps errors the simulator produces through the real
// SDK onto the engine's classes.
func TestProvider_errors(t *testing.T) {
	e := startSim(t)
	p := e.provider(t, nil)
	ctx := context.Background()

	unknown := d2s
	unknown.Instance = "Standard_Z99s_v9"
	_, err := p.Launch(ctx, launchRequest("i-sku", unknown))
	if !errors.Is(err, backends.ErrNoCapacity) || !strings.Contains(err.Error(), "SkuNotAvailable") {
		t.Errorf("Launch of a size the location lacks: %v, want ErrNoCapacity (SkuNotAvailable)", err)
	}
	elsewhere := d2s
	elsewhere.Region = "japaneast"
	if _, err := p.Launch(ctx, launchRequest("i-loc", elsewhere)); !errors.Is(err, backends.ErrNoCapacity) {
		t.Errorf("Launch in a location without the size: %v, want ErrNoCapacity", err)
	}
	if _, err := p.Get(ctx, "hoist-sim/nope"); !errors.Is(err, backends.ErrNotFound) || backends.IsStalled(err) {
		t.Errorf("Get of an unknown VM: %v, want ErrNotFound", err)
	}
	if _, err := p.Get(ctx, "no-such-group/nope"); !errors.Is(err, backends.ErrNotFound) {
		t.Errorf("Get in an unknown resource group: %v, want ErrNotFound", err)
	}
	if _, err := p.Get(ctx, "garbage"); !backends.IsStalled(err) {
		t.Errorf("Get of a bad ref: %v, want stalled", err)
	}

	creds := func(secret string) map[string]any {
		return map[string]any{"creds": map[string]any{"type": "client", "client_id": arm.ClientID, "client_secret": secret}}
	}
	for _, tt := range []struct {
		name    string
		changes map[string]any
	}{
		{"bad_secret", creds("wrong")},
		{"unknown_tenant", map[string]any{"tenant_id": "00000000-0000-0000-0000-000000000000"}},
		{"unknown_subscription", map[string]any{"subscription_id": "00000000-0000-0000-0000-000000000000"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := e.open(t, tt.changes)
			if !backends.IsStalled(err) {
				t.Fatalf("open: %v, want a stalled credential error", err)
			}
			t.Logf("%v", err)
		})
	}
}

func TestFactory_options(t *testing.T) {
	e := startSim(t)
	for _, tt := range []struct {
		name    string
		changes map[string]any
		want    string
	}{
		{"no_tenant", map[string]any{"tenant_id": nil}, "tenant_id"},
		{"no_subscription", map[string]any{"subscription_id": nil}, "subscription_id"},
		{"no_creds", map[string]any{"creds": nil}, "creds"},
		{"creds_type", map[string]any{"creds": map[string]any{"type": "certificate"}}, "creds: type"},
		{"vpc_ids", map[string]any{"vpc_ids": map[string]any{"eastus": "rg/net"}}, "vpc_ids"},
		{"subnet_ids", map[string]any{"subnet_ids": map[string]any{"eastus": "net/subnet"}}, "subnet_ids"},
		{"identity", map[string]any{"vm_managed_identity": "just-a-name"}, "vm_managed_identity"},
		{"http_endpoint", map[string]any{"endpoint_url": "http://127.0.0.1:1"}, "endpoint_url"},
		{"image", map[string]any{"os_images": map[string]any{"cpu": map[string]any{"name": "ubuntu", "user": "root"}, "nvidia": map[string]any{"name": arm.Image, "user": "root"}}}, "os_images.cpu.name"},
		{"users", map[string]any{"os_images": map[string]any{"cpu": map[string]any{"name": arm.Image, "user": "root"}}}, "os_images"},
		{"tag", map[string]any{"tags": map[string]any{"a/b": "c"}}, "tags"},
		{"unknown_key", map[string]any{"vpc_name": "x"}, "vpc_name"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := e.open(t, tt.changes)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("open: %v, want an error naming %s", err, tt.want)
			}
		})
	}
	if _, user, err := e.open(t, nil); err != nil || user != "root" {
		t.Fatalf("open of the simulator's entry: user %q, %v", user, err)
	}
}

func TestProvider_volumes(t *testing.T) {
	e := startSim(t)
	p := e.provider(t, nil)
	ctx := context.Background()
	m, err := p.Launch(ctx, launchRequest("i-vol", d2s))
	if err != nil {
		t.Fatalf("Launch: %v", err)
	}
	tags := map[string]string{backends.TagInstallation: "test"}
	d1, err := p.CreateVolume(ctx, vm.VolumeRequest{ID: "v1", Name: "hoist-data-1", Region: "eastus", SizeGB: 10, Tags: tags})
	if err != nil || (d1.State != vm.DiskCreating && d1.State != vm.DiskAvailable) || d1.SizeGB != 10 || d1.Ref != "hoist-sim/hoist-data-1" {
		t.Fatalf("CreateVolume = %+v, %v", d1, err)
	}
	if d1, err = p.GetVolume(ctx, d1.Ref); err != nil || d1.State != vm.DiskAvailable || d1.Region != "eastus" || d1.Tags[backends.TagInstallation] != "test" {
		t.Fatalf("GetVolume = %+v, %v", d1, err)
	}
	d2, err := p.CreateVolume(ctx, vm.VolumeRequest{ID: "v2", Name: "hoist-data-2", Region: "eastus", SizeGB: 20, Tags: tags})
	if err != nil {
		t.Fatalf("CreateVolume: %v", err)
	}
	path1, err := p.AttachVolume(ctx, d1.Ref, m.Ref)
	if err != nil || !strings.HasPrefix(path1, "/dev/disk/azure/scsi1/lun") {
		t.Fatalf("AttachVolume = %q, %v", path1, err)
	}
	again, err := p.AttachVolume(ctx, d1.Ref, m.Ref)
	if err != nil || again != path1 {
		t.Fatalf("AttachVolume again = %q, %v; want %q", again, err, path1)
	}
	path2, err := p.AttachVolume(ctx, d2.Ref, m.Ref)
	if err != nil || path2 == path1 {
		t.Fatalf("AttachVolume of a second disk = %q, %v (first %q)", path2, err, path1)
	}
	got, err := p.GetVolume(ctx, d1.Ref)
	if err != nil || got.State != vm.DiskInUse || got.AttachedTo != m.Ref {
		t.Fatalf("GetVolume = %+v, %v", got, err)
	}
	for _, r := range e.s.List("azure", sim.KindVolume) {
		if r.Name == "hoist-data-1" && r.Device != path1 {
			t.Fatalf("sim disk device %q, driver said %q", r.Device, path1)
		}
	}
	if target, err := os.Readlink(path1); err != nil || !strings.HasPrefix(target, "/dev/loop") {
		t.Fatalf("device link %s -> %q, %v; want a loop device", path1, target, err)
	}
	err = p.DeleteVolume(ctx, d1.Ref)
	if !errors.Is(err, backends.ErrNotYetTerminated) || backends.KindOf(err) != backends.KindWait {
		t.Fatalf("DeleteVolume of an attached disk: %v, want a wait", err)
	}
	if err := p.DetachVolume(ctx, d1.Ref, m.Ref, false); err != nil {
		t.Fatalf("DetachVolume: %v", err)
	}
	if err := p.DetachVolume(ctx, d1.Ref, m.Ref, true); err != nil {
		t.Fatalf("DetachVolume again: %v", err)
	}
	if got, err := p.GetVolume(ctx, d1.Ref); err != nil || got.State != vm.DiskAvailable || got.AttachedTo != "" {
		t.Fatalf("GetVolume after detach = %+v, %v", got, err)
	}
	if _, err := os.Lstat(path1); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("device link %s after detach: %v", path1, err)
	}
	if got, err := p.GetVolume(ctx, d2.Ref); err != nil || got.State != vm.DiskInUse {
		t.Fatalf("the other disk after detach = %+v, %v", got, err)
	}
	if err := p.DeleteVolume(ctx, d1.Ref); err != nil {
		t.Fatalf("DeleteVolume: %v", err)
	}
	if _, err := p.GetVolume(ctx, d1.Ref); !errors.Is(err, backends.ErrNotFound) {
		t.Fatalf("GetVolume after delete: %v, want ErrNotFound", err)
	}
	if err := p.DeleteVolume(ctx, d1.Ref); err != nil {
		t.Fatalf("DeleteVolume again: %v", err)
	}
	// Deleting the VM detaches its disks.
	if err := p.Delete(ctx, m.Ref); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if got, err := p.GetVolume(ctx, d2.Ref); err != nil || got.State != vm.DiskAvailable {
		t.Fatalf("disk of a deleted VM = %+v, %v", got, err)
	}
}

func TestPickLUN(t *testing.T) {
	used := map[int]bool{}
	for i := range maxLUNs {
		lun, ok := pickLUN("/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/disks/d", used)
		if !ok || used[lun] {
			t.Fatalf("pick %d: %d, %v", i, lun, ok)
		}
		used[lun] = true
	}
	if _, ok := pickLUN("x", used); ok {
		t.Fatal("a VM with 64 disks has a free LUN")
	}
}

// TestProvider_network: without public IPs the address is the network
// interface's private one; a configured subnet that does not exist makes
// the launch fail for good.
func TestProvider_network(t *testing.T) {
	e := startSim(t)
	ctx := context.Background()
	p := e.provider(t, map[string]any{"public_ips": false})
	m, err := p.Launch(ctx, launchRequest("i-private", d2s))
	if err != nil {
		t.Fatalf("Launch: %v", err)
	}
	m = waitRunning(t, p, m.Ref)
	r := simInstances(e)[0]
	if m.Address != r.Address {
		t.Fatalf("address %q, want the sim VM's %q", m.Address, r.Address)
	}
	for _, n := range e.s.List("azure", "network") {
		if n.Extra["type"] == "Microsoft.Network/publicIPAddresses" {
			t.Fatalf("a VM without public IPs has public IP %s", n.Name)
		}
	}

	p = e.provider(t, map[string]any{"subnet_ids": map[string]any{"eastus": "other-rg/net/subnet"}})
	_, err = p.Launch(ctx, launchRequest("i-subnet", d2s))
	if !backends.IsStalled(err) || !strings.Contains(err.Error(), "InvalidResourceReference") {
		t.Fatalf("Launch on a missing subnet: %v, want stalled InvalidResourceReference", err)
	}
}

// TestMachine_states maps provisioning and power states (as Azure reports
// them, https://learn.microsoft.com/azure/virtual-machines/states-billing)
// onto the engine's.
func TestMachine_states(t *testing.T) {
	status := func(codes ...string) *armcompute.VirtualMachineInstanceView {
		iv := &armcompute.VirtualMachineInstanceView{}
		for _, c := range codes {
			iv.Statuses = append(iv.Statuses, &armcompute.InstanceViewStatus{Code: ptr(c), Message: ptr("msg")})
		}
		return iv
	}
	for _, tt := range []struct {
		name, provisioning string
		view               *armcompute.VirtualMachineInstanceView
		want, message      string
	}{
		{"creating", "Creating", status("ProvisioningState/creating", "PowerState/starting"), vm.StatePending, ""},
		{"running", "Succeeded", status("ProvisioningState/succeeded", "PowerState/running"), vm.StateRunning, ""},
		{"updating_running", "Updating", status("ProvisioningState/updating", "PowerState/running"), vm.StateRunning, ""},
		{"allocation_failed", "Failed", status("ProvisioningState/failed/AllocationFailed"), vm.StateGone, "AllocationFailed: msg"},
		{"deleting", "Deleting", status("ProvisioningState/deleting", "PowerState/running"), vm.StateStopping, ""},
		{"deallocating", "Succeeded", status("ProvisioningState/succeeded", "PowerState/deallocating"), vm.StateStopping, "deallocating"},
		{"deallocated", "Succeeded", status("ProvisioningState/succeeded", "PowerState/deallocated"), vm.StateGone, "deallocated"},
		{"list_without_view", "Succeeded", nil, vm.StateRunning, ""},
		{"list_creating", "Creating", nil, vm.StatePending, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v := &armcompute.VirtualMachine{Location: ptr("eastus"), Properties: &armcompute.VirtualMachineProperties{
				ProvisioningState: ptr(tt.provisioning), InstanceView: tt.view,
			}}
			m := machine("rg/vm", v)
			if m.State != tt.want || !strings.Contains(m.Message, tt.message) {
				t.Fatalf("machine = %s %q, want %s with %q", m.State, m.Message, tt.want, tt.message)
			}
		})
	}
}

// TestProvider_gatewayNSG checks that a gateway's VM gets the location's
// gateway network security group (dstack's <rg>-<location>-gateway-security-group:
// TCP 22, 80 and 443 from the Internet, priority 101) on its network
// interface, and another VM the default group, which opens SSH only.
func TestProvider_gatewayNSG(t *testing.T) {
	e := startSim(t)
	p := e.provider(t, nil)
	ctx := context.Background()
	gw := launchRequest("i-gw", d2s)
	gw.Gateway = true
	for _, req := range []vm.LaunchRequest{gw, launchRequest("i-plain", d2s)} {
		if _, err := p.Launch(ctx, req); err != nil {
			t.Fatalf("Launch %s: %v", req.ID, err)
		}
	}
	type rule struct {
		Name       string `json:"name"`
		Properties struct {
			Protocol              string   `json:"protocol"`
			SourceAddressPrefix   string   `json:"sourceAddressPrefix"`
			DestinationPortRange  string   `json:"destinationPortRange"`
			DestinationPortRanges []string `json:"destinationPortRanges"`
			Access                string   `json:"access"`
			Direction             string   `json:"direction"`
			Priority              int      `json:"priority"`
		} `json:"properties"`
	}
	type body struct {
		Name       string `json:"name"`
		Properties struct {
			SecurityRules        []rule `json:"securityRules"`
			NetworkSecurityGroup *struct {
				ID string `json:"id"`
			} `json:"networkSecurityGroup"`
		} `json:"properties"`
	}
	nsgs := map[string]body{} // by lower-case id
	nics := map[string]body{} // by name
	for _, r := range e.s.List("azure", "") {
		var b body
		if err := json.Unmarshal([]byte(r.Extra["body"]), &b); err != nil {
			continue
		}
		switch r.Extra["type"] {
		case "Microsoft.Network/networkSecurityGroups":
			nsgs[strings.ToLower(r.Extra["id"])] = b
		case "Microsoft.Network/networkInterfaces":
			nics[b.Name] = b
		}
	}
	nsgOf := func(vmName string) body {
		t.Helper()
		for name, nic := range nics {
			if strings.HasPrefix(name, vmName+"-") && nic.Properties.NetworkSecurityGroup != nil {
				g, ok := nsgs[strings.ToLower(nic.Properties.NetworkSecurityGroup.ID)]
				if !ok {
					t.Fatalf("network interface %s: security group %s not found", name, nic.Properties.NetworkSecurityGroup.ID)
				}
				return g
			}
		}
		t.Fatalf("no network interface with a security group for %s (interfaces %v)", vmName, slices.Collect(maps.Keys(nics)))
		return body{}
	}
	g := nsgOf(gw.Name)
	if !strings.HasSuffix(g.Name, "-eastus-gateway-security-group") || len(g.Properties.SecurityRules) != 1 {
		t.Fatalf("gateway VM's security group = %+v", g)
	}
	r := g.Properties.SecurityRules[0]
	if r.Name != "gateway_all" || r.Properties.Protocol != "Tcp" || r.Properties.SourceAddressPrefix != "Internet" || r.Properties.Access != "Allow" ||
		r.Properties.Direction != "Inbound" || r.Properties.Priority != 101 || !slices.Equal(r.Properties.DestinationPortRanges, []string{"22", "80", "443"}) {
		t.Errorf("gateway rule = %+v", r)
	}
	d := nsgOf("hoist-test-i-plain")
	if !strings.HasSuffix(d.Name, "-eastus-default-security-group") || len(d.Properties.SecurityRules) != 1 || d.Properties.SecurityRules[0].Properties.DestinationPortRange != "22" {
		t.Errorf("plain VM's security group = %+v; want the default one, SSH only", d)
	}
}
