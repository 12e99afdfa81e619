package azure

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"

	"hoist/backends"
)

// resourceGroupsAPI is the api-version of the resource group calls
// (https://learn.microsoft.com/rest/api/resources/resource-groups).
const resourceGroupsAPI = "2021-04-01"

// ensureResourceGroup GETs the resource group, the credential check at
// start, and creates it (in the first configured region) when missing.
// The calls go through azcore's Resource Manager pipeline (token, retries)
// as armresources would send them.
func (p *provider) ensureResourceGroup(ctx context.Context) error {
	path := runtime.JoinPaths(p.arm.Endpoint(), "/subscriptions/"+p.sub+"/resourcegroups/"+p.rg)
	do := func(method string, body any) (*http.Response, error) {
		req, err := runtime.NewRequest(ctx, method, path)
		if err != nil {
			return nil, err
		}
		q := req.Raw().URL.Query()
		q.Set("api-version", resourceGroupsAPI)
		req.Raw().URL.RawQuery = q.Encode()
		req.Raw().Header.Set("Accept", "application/json")
		if body != nil {
			if err := runtime.MarshalAsJSON(req, body); err != nil {
				return nil, err
			}
		}
		return p.arm.Pipeline().Do(req)
	}
	resp, err := do(http.MethodGet, nil)
	if err != nil {
		return classify("get resource group "+p.rg, err)
	}
	switch {
	case runtime.HasStatusCode(resp, http.StatusOK):
		return nil
	case !runtime.HasStatusCode(resp, http.StatusNotFound):
		return classify("get resource group "+p.rg, runtime.NewResponseError(resp))
	}
	loc := "eastus"
	if len(p.regions) > 0 {
		loc = p.regions[0]
	}
	resp, err = do(http.MethodPut, map[string]any{"location": loc, "tags": p.tags})
	if err != nil {
		return classify("create resource group "+p.rg, err)
	}
	if !runtime.HasStatusCode(resp, http.StatusOK, http.StatusCreated) {
		return classify("create resource group "+p.rg, runtime.NewResponseError(resp))
	}
	p.log.Info("azure_resource_group_created", "resource_group", p.rg, "location", loc)
	return nil
}

// A network is what VMs of one location are attached to.
type network struct {
	subnet string // subnet id
	nsg    string // network security group id
}

// ensureNetwork returns the network of a location, making it on first use
// as dstack's configurator does (src/dstack/_internal/core/backends/azure/resources.py):
// a network security group <rg>-<location>-default-security-group letting
// SSH in, and, unless subnet_ids names a subnet for the location, a virtual
// network <rg>-<location>-default-network (10.0.0.0/16) with subnet
// <rg>-<location>-default-subnet (10.0.0.0/20). Both PUTs are idempotent.
// Both carry the configured tags and the installation's ownership tag
// (hoist.installation): they are shared by the installation's VMs of the
// location, so the leak audit never deletes them (nor does dstack).
func (p *provider) ensureNetwork(ctx context.Context, loc, installation string) (*network, error) {
	loc = strings.ToLower(loc)
	p.mu.Lock()
	n, ok := p.nets[loc]
	p.mu.Unlock()
	if ok {
		return n, nil
	}
	prefix := p.rg + "-" + loc
	own := maps.Clone(p.tags)
	if installation != "" {
		if own == nil {
			own = map[string]string{}
		}
		own[backends.TagInstallation] = installation
	}
	nsgID, err := p.putNSG(ctx, loc, prefix+"-default-security-group", own, []*armnetwork.SecurityRule{
		nsgRule("runner_ssh", 100, "22"),
	})
	if err != nil {
		return nil, err
	}
	n = &network{nsg: nsgID, subnet: p.subnets[loc]}
	if n.subnet == "" {
		vnetName, subnetName := prefix+"-default-network", prefix+"-default-subnet"
		vnet, err := p.vnets.BeginCreateOrUpdate(ctx, p.rg, vnetName, armnetwork.VirtualNetwork{
			Location: &loc,
			Tags:     ptrTags(own),
			Properties: &armnetwork.VirtualNetworkPropertiesFormat{
				AddressSpace: &armnetwork.AddressSpace{AddressPrefixes: []*string{ptr("10.0.0.0/16")}},
				Subnets: []*armnetwork.Subnet{{
					Name:       &subnetName,
					Properties: &armnetwork.SubnetPropertiesFormat{AddressPrefix: ptr("10.0.0.0/20")},
				}},
			},
		}, nil)
		if err != nil {
			return nil, classify("create virtual network "+vnetName, err)
		}
		res, err := vnet.PollUntilDone(ctx, &runtime.PollUntilDoneOptions{Frequency: p.poll})
		if err != nil {
			return nil, classify("create virtual network "+vnetName, err)
		}
		for _, s := range res.Properties.Subnets {
			if s != nil && deref(s.Name) == subnetName {
				n.subnet = deref(s.ID)
			}
		}
		if n.subnet == "" {
			return nil, fmt.Errorf("azure: virtual network %s has no subnet %s", vnetName, subnetName)
		}
		p.log.Info("azure_network_ready", "location", loc, "network", vnetName)
	}
	p.mu.Lock()
	p.nets[loc] = n
	p.mu.Unlock()
	return n, nil
}

// gatewayNSG returns the network security group of gateways' VMs in a
// location, making it on first use as dstack's configurator does:
// <rg>-<location>-gateway-security-group letting SSH, HTTP and HTTPS in
// from the Internet (rule gateway_all, priority 101); a VM's network
// interface has one group, so a gateway's VM gets this one instead of the
// default one. Its PUT is idempotent; it carries the same tags.
func (p *provider) gatewayNSG(ctx context.Context, loc, installation string) (string, error) {
	loc = strings.ToLower(loc)
	p.mu.Lock()
	id, ok := p.gwNSGs[loc]
	p.mu.Unlock()
	if ok {
		return id, nil
	}
	own := maps.Clone(p.tags)
	if installation != "" {
		if own == nil {
			own = map[string]string{}
		}
		own[backends.TagInstallation] = installation
	}
	id, err := p.putNSG(ctx, loc, p.rg+"-"+loc+"-gateway-security-group", own, []*armnetwork.SecurityRule{
		nsgRule("gateway_all", 101, "22", "80", "443"),
	})
	if err != nil {
		return "", err
	}
	p.mu.Lock()
	p.gwNSGs[loc] = id
	p.mu.Unlock()
	return id, nil
}

// putNSG creates or updates network security group name in loc with rules
// and returns its id.
func (p *provider) putNSG(ctx context.Context, loc, name string, tags map[string]string, rules []*armnetwork.SecurityRule) (string, error) {
	poller, err := p.nsgs.BeginCreateOrUpdate(ctx, p.rg, name, armnetwork.SecurityGroup{
		Location:   &loc,
		Tags:       ptrTags(tags),
		Properties: &armnetwork.SecurityGroupPropertiesFormat{SecurityRules: rules},
	}, nil)
	if err != nil {
		return "", classify("create network security group "+name, err)
	}
	res, err := poller.PollUntilDone(ctx, &runtime.PollUntilDoneOptions{Frequency: p.poll})
	if err != nil {
		return "", classify("create network security group "+name, err)
	}
	return deref(res.ID), nil
}

// nsgRule is an inbound rule allowing TCP to ports from the Internet.
func nsgRule(name string, priority int32, ports ...string) *armnetwork.SecurityRule {
	props := &armnetwork.SecurityRulePropertiesFormat{
		Protocol:                 ptr(armnetwork.SecurityRuleProtocolTCP),
		SourceAddressPrefix:      ptr("Internet"),
		SourcePortRange:          ptr("*"),
		DestinationAddressPrefix: ptr("*"),
		Access:                   ptr(armnetwork.SecurityRuleAccessAllow),
		Priority:                 &priority,
		Direction:                ptr(armnetwork.SecurityRuleDirectionInbound),
	}
	if len(ports) == 1 {
		props.DestinationPortRange = &ports[0]
	} else {
		for _, port := range ports {
			props.DestinationPortRanges = append(props.DestinationPortRanges, ptr(port))
		}
	}
	return &armnetwork.SecurityRule{Name: &name, Properties: props}
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// ptrTags converts tags to the SDK's map of pointers.
func ptrTags(tags map[string]string) map[string]*string {
	if len(tags) == 0 {
		return nil
	}
	out := make(map[string]*string, len(tags))
	for k, v := range tags {
		out[k] = ptr(v)
	}
	return out
}

// unptrTags converts the SDK's tags back.
func unptrTags(tags map[string]*string) map[string]string {
	out := make(map[string]string, len(tags))
	for k, v := range tags {
		if v != nil {
			out[k] = *v
		}
	}
	return out
}
