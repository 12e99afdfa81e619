package azure

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"math"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"

	"hoist/backends"
	"hoist/backends/offers"
	"hoist/backends/vm"
)

// defaultDiskGB is the OS disk size when the offer does not say (dstack's
// disk_size=100 for Azure).
const defaultDiskGB = 100

// spotSuffix marks the Ref of a spot VM: a spot VM with evictionPolicy
// Delete is simply gone after an eviction, so the Ref remembers that a VM
// missing without our delete was reclaimed.
const spotSuffix = "#spot"

// ref is a VM's vm.Machine.Ref: resource-group/name, with spotSuffix for
// spot VMs.
func ref(rg, name string, spot bool) string {
	r := rg + "/" + name
	if spot {
		r += spotSuffix
	}
	return r
}

// parseRef splits a VM or disk Ref.
func parseRef(r string) (rg, name string, spot bool, err error) {
	base, spot := strings.CutSuffix(r, spotSuffix)
	rg, name, ok := strings.Cut(base, "/")
	if !ok || rg == "" || name == "" || strings.Contains(name, "/") {
		return "", "", false, backends.Stalled(fmt.Errorf("azure: bad ref %q: want resource-group/name", r))
	}
	return rg, name, spot, nil
}

// Launch creates the VM (PUT, named by the engine from the instance id, so
// a repeated Launch updates the same VM) and returns after the initial
// response; Get follows provisioningState. Like dstack's _launch_instance
// (src/dstack/_internal/core/backends/azure/compute.py): the key through
// osProfile.linuxConfiguration.ssh, userData, one network interface with a
// public IP (both deleted with the VM), Spot priority with evictionPolicy
// Delete. SkuNotAvailable, OperationNotAllowed (quota) and allocation
// failures wrap backends.ErrNoCapacity.
func (p *provider) Launch(ctx context.Context, req vm.LaunchRequest) (vm.Machine, error) {
	if req.PlacementGroup != "" {
		return vm.Machine{}, backends.Stalled(errors.New("azure: placement groups are not supported"))
	}
	loc := strings.ToLower(req.Offer.Region)
	if loc == "" || req.Offer.Instance == "" {
		return vm.Machine{}, backends.Stalled(errors.New("azure: the offer has no region or VM size"))
	}
	n, err := p.ensureNetwork(ctx, loc, req.Tags[backends.TagInstallation])
	if err != nil {
		return vm.Machine{}, err
	}
	nsg := n.nsg
	if req.Gateway {
		if nsg, err = p.gatewayNSG(ctx, loc, req.Tags[backends.TagInstallation]); err != nil {
			return vm.Machine{}, err
		}
	}
	gpu := req.Offer.GPUCount > 0 && (req.Offer.GPUVendor == "" || req.Offer.GPUVendor == offers.VendorNVIDIA)
	diskGB := int32(defaultDiskGB)
	if req.Offer.DiskGB > 0 {
		diskGB = int32(math.Ceil(req.Offer.DiskGB))
	}
	tags := maps.Clone(p.tags)
	if tags == nil {
		tags = map[string]string{}
	}
	// hoist's ownership tags win over configured ones. Azure tag names
	// may hold dots (only <>%&\?/ are out), so hoist.* keys go as they are.
	maps.Copy(tags, req.Tags)
	home := "/home/" + req.User
	if req.User == "root" {
		home = "/root"
	}
	ipCfg := &armcompute.VirtualMachineNetworkInterfaceIPConfiguration{
		Name: ptr("ip_config"),
		Properties: &armcompute.VirtualMachineNetworkInterfaceIPConfigurationProperties{
			Primary: ptr(true),
			Subnet:  &armcompute.SubResource{ID: &n.subnet},
		},
	}
	if p.publicIPs {
		ipCfg.Properties.PublicIPAddressConfiguration = &armcompute.VirtualMachinePublicIPAddressConfiguration{
			Name: ptr("public_ip_config"),
			Properties: &armcompute.VirtualMachinePublicIPAddressConfigurationProperties{
				DeleteOption: ptr(armcompute.DeleteOptionsDelete),
			},
		}
	}
	def := armcompute.VirtualMachine{
		Location: &loc,
		Tags:     ptrTags(tags),
		Identity: p.identity,
		Properties: &armcompute.VirtualMachineProperties{
			HardwareProfile: &armcompute.HardwareProfile{VMSize: ptr(armcompute.VirtualMachineSizeTypes(req.Offer.Instance))},
			StorageProfile: &armcompute.StorageProfile{
				ImageReference: p.images[gpu],
				OSDisk: &armcompute.OSDisk{
					CreateOption: ptr(armcompute.DiskCreateOptionTypesFromImage),
					ManagedDisk:  &armcompute.ManagedDiskParameters{StorageAccountType: ptr(armcompute.StorageAccountTypesStandardSSDLRS)},
					DiskSizeGB:   &diskGB,
					DeleteOption: ptr(armcompute.DiskDeleteOptionTypesDelete),
				},
			},
			OSProfile: &armcompute.OSProfile{
				ComputerName:  &req.Name,
				AdminUsername: &req.User,
				LinuxConfiguration: &armcompute.LinuxConfiguration{
					DisablePasswordAuthentication: ptr(true),
					SSH: &armcompute.SSHConfiguration{PublicKeys: []*armcompute.SSHPublicKey{{
						Path: ptr(home + "/.ssh/authorized_keys"), KeyData: ptr(strings.TrimSpace(req.PublicKey)),
					}}},
				},
			},
			NetworkProfile: &armcompute.NetworkProfile{
				NetworkAPIVersion: ptr(armcompute.NetworkAPIVersionTwoThousandTwenty1101),
				NetworkInterfaceConfigurations: []*armcompute.VirtualMachineNetworkInterfaceConfiguration{{
					Name: ptr("nic_config"),
					Properties: &armcompute.VirtualMachineNetworkInterfaceConfigurationProperties{
						Primary:              ptr(true),
						DeleteOption:         ptr(armcompute.DeleteOptionsDelete),
						NetworkSecurityGroup: &armcompute.SubResource{ID: &nsg},
						IPConfigurations:     []*armcompute.VirtualMachineNetworkInterfaceIPConfiguration{ipCfg},
					},
				}},
			},
			Priority: ptr(armcompute.VirtualMachinePriorityTypesRegular),
		},
	}
	if req.UserData != "" {
		def.Properties.UserData = ptr(base64.StdEncoding.EncodeToString([]byte(req.UserData)))
	}
	if req.Offer.Spot {
		def.Properties.Priority = ptr(armcompute.VirtualMachinePriorityTypesSpot)
		def.Properties.EvictionPolicy = ptr(armcompute.VirtualMachineEvictionPolicyTypesDelete)
		// -1: pay up to the on-demand price, never evicted for price.
		def.Properties.BillingProfile = &armcompute.BillingProfile{MaxPrice: ptr(-1.0)}
	}
	if _, err := p.vms.BeginCreateOrUpdate(ctx, p.rg, req.Name, def, nil); err != nil {
		var re *azcore.ResponseError
		if errors.As(err, &re) && capacityCodes[re.ErrorCode] {
			return vm.Machine{}, fmt.Errorf("azure: create virtual machine %s (%s in %s): %w: %w", req.Name, req.Offer.Instance, loc, backends.ErrNoCapacity, err)
		}
		return vm.Machine{}, classify("create virtual machine "+req.Name, err)
	}
	return vm.Machine{
		Ref: ref(p.rg, req.Name, req.Offer.Spot), State: vm.StatePending, Region: loc,
		InstanceType: req.Offer.Instance, Tags: tags,
	}, nil
}

// Get observes a VM with its instance view (one GET) and, once it runs,
// its address through its network interface and public IP (two GETs,
// once per VM: the address stays). A spot VM gone without our delete was
// evicted: Interrupted.
func (p *provider) Get(ctx context.Context, r string) (vm.Machine, error) {
	rg, name, spot, err := parseRef(r)
	if err != nil {
		return vm.Machine{}, err
	}
	res, err := p.vms.Get(ctx, rg, name, &armcompute.VirtualMachinesClientGetOptions{Expand: ptr(armcompute.InstanceViewTypesInstanceView)})
	if err != nil {
		err = classify("get virtual machine "+name, err)
		if errors.Is(err, backends.ErrNotFound) && spot && !p.wasDeleted(r) {
			return vm.Machine{
				Ref: r, State: vm.StateGone, Interrupted: true,
				Message: "Azure evicted the spot VM (evictionPolicy Delete)",
			}, nil
		}
		return vm.Machine{}, err
	}
	m := machine(r, &res.VirtualMachine)
	if m.State == vm.StateRunning {
		a, err := p.address(ctx, r, &res.VirtualMachine)
		if err != nil {
			return vm.Machine{}, err
		}
		m.Address, m.PrivateAddress = a.ssh, a.private
	}
	return m, nil
}

// machine maps a VM onto vm.Machine: provisioningState and, with the
// instance view, the power state
// (https://learn.microsoft.com/azure/virtual-machines/states-billing).
func machine(r string, v *armcompute.VirtualMachine) vm.Machine {
	m := vm.Machine{Ref: r, Region: deref(v.Location), Tags: unptrTags(v.Tags), State: vm.StatePending}
	props := v.Properties
	if props == nil {
		return m
	}
	if props.HardwareProfile != nil && props.HardwareProfile.VMSize != nil {
		m.InstanceType = string(*props.HardwareProfile.VMSize)
	}
	if props.TimeCreated != nil {
		m.CreatedAt = *props.TimeCreated
	}
	power, failure, hasView := "", "", props.InstanceView != nil
	if hasView {
		for _, s := range props.InstanceView.Statuses {
			code := deref(s.Code)
			if after, ok := strings.CutPrefix(code, "PowerState/"); ok {
				power = after
			}
			if after, ok := strings.CutPrefix(code, "ProvisioningState/failed/"); ok {
				failure = after + ": " + deref(s.Message)
			}
		}
	}
	state := strings.ToLower(deref(props.ProvisioningState))
	switch {
	case state == "failed":
		m.State, m.Message = vm.StateGone, "provisioning failed"
		if failure != "" {
			m.Message += ": " + failure
		}
	case state == "deleting":
		m.State = vm.StateStopping
	case power == "running" || (!hasView && state == "succeeded"):
		m.State = vm.StateRunning
	case power == "stopping" || power == "deallocating":
		m.State, m.Message = vm.StateStopping, "VM "+power
	case power == "stopped" || power == "deallocated":
		m.State, m.Message = vm.StateGone, "VM "+power
	}
	return m
}

// vmAddrs are a VM's addresses: the one to SSH to and its private IP.
type vmAddrs struct{ ssh, private string }

// address returns the addresses of the VM's primary network interface:
// to SSH to, its public IP, or its private IP without public IPs; and its
// private IP.
func (p *provider) address(ctx context.Context, r string, v *armcompute.VirtualMachine) (vmAddrs, error) {
	p.mu.Lock()
	a, ok := p.addrs[r]
	p.mu.Unlock()
	if ok {
		return a, nil
	}
	var nicID string
	if np := v.Properties.NetworkProfile; np != nil && len(np.NetworkInterfaces) > 0 && np.NetworkInterfaces[0] != nil {
		nicID = deref(np.NetworkInterfaces[0].ID)
	}
	nicRes, err := arm.ParseResourceID(nicID)
	if err != nil {
		return vmAddrs{}, fmt.Errorf("azure: virtual machine %s: network interface %q: %w", deref(v.Name), nicID, err)
	}
	nic, err := p.nics.Get(ctx, nicRes.ResourceGroupName, nicRes.Name, nil)
	if err != nil {
		return vmAddrs{}, classify("get network interface "+nicRes.Name, err)
	}
	if nic.Properties == nil || len(nic.Properties.IPConfigurations) == 0 || nic.Properties.IPConfigurations[0].Properties == nil {
		return vmAddrs{}, nil
	}
	ip := nic.Properties.IPConfigurations[0].Properties
	a.private = deref(ip.PrivateIPAddress)
	if !p.publicIPs {
		a.ssh = a.private
	} else if ip.PublicIPAddress != nil {
		pipRes, err := arm.ParseResourceID(deref(ip.PublicIPAddress.ID))
		if err != nil {
			return vmAddrs{}, fmt.Errorf("azure: network interface %s: public IP %q: %w", nicRes.Name, deref(ip.PublicIPAddress.ID), err)
		}
		pip, err := p.pips.Get(ctx, pipRes.ResourceGroupName, pipRes.Name, nil)
		if err != nil {
			return vmAddrs{}, classify("get public IP address "+pipRes.Name, err)
		}
		if pip.Properties != nil {
			a.ssh = deref(pip.Properties.IPAddress)
		}
	}
	if a.ssh != "" {
		p.mu.Lock()
		p.addrs[r] = a
		p.mu.Unlock()
	}
	return a, nil
}

func (p *provider) wasDeleted(r string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.deleted[r]
}

// Delete asks Azure to delete the VM (its OS disk, network interface and
// public IP go with it: deleteOption Delete) and does not wait, as dstack's
// terminate_instance. Gone is success.
func (p *provider) Delete(ctx context.Context, r string) error {
	rg, name, _, err := parseRef(r)
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.deleted[r] = true
	delete(p.addrs, r)
	p.mu.Unlock()
	if _, err := p.vms.BeginDelete(ctx, rg, name, nil); err != nil {
		err = classify("delete virtual machine "+name, err)
		if errors.Is(err, backends.ErrNotFound) {
			return nil
		}
		return err
	}
	p.log.Info("azure_vm_delete_requested", "ref", r)
	return nil
}

// List returns the VMs of the resource group carrying all of tags (one
// paged list; the state is provisioningState's, without power state).
func (p *provider) List(ctx context.Context, tags map[string]string) ([]vm.Machine, error) {
	var out []vm.Machine
	pager := p.vms.NewListPager(p.rg, nil)
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			err = classify("list virtual machines", err)
			if errors.Is(err, backends.ErrNotFound) {
				return nil, nil
			}
			return nil, err
		}
		for _, v := range page.Value {
			if v == nil || !backends.MatchTags(unptrTags(v.Tags), tags) {
				continue
			}
			spot := v.Properties != nil && v.Properties.Priority != nil && *v.Properties.Priority == armcompute.VirtualMachinePriorityTypesSpot
			out = append(out, machine(ref(p.rg, deref(v.Name), spot), v))
		}
	}
	return out, nil
}
