package azure

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"

	"hoist/backends"
	"hoist/backends/vm"
)

// Type is the backend type and the catalog's backend name.
const Type = "azure"

// options is the backend entry, dstack's AzureBackendConfigWithCreds
// (src/dstack/_internal/core/backends/azure/models.py) plus hoist's
// endpoint_url, authority_url and os_images.
type options struct {
	TenantID          string            `json:"tenant_id"`
	SubscriptionID    string            `json:"subscription_id"`
	Creds             *creds            `json:"creds"`
	ResourceGroup     string            `json:"resource_group"`
	Regions           []string          `json:"regions"`
	VPCIDs            map[string]string `json:"vpc_ids"`
	SubnetIDs         map[string]string `json:"subnet_ids"`
	PublicIPs         *bool             `json:"public_ips"`
	VMManagedIdentity string            `json:"vm_managed_identity"`
	Tags              map[string]string `json:"tags"`
	// EndpointURL is the Resource Manager endpoint (and token audience);
	// empty means Azure's public cloud.
	EndpointURL string `json:"endpoint_url"`
	// AuthorityURL is the Microsoft Entra authority host; empty means the
	// public cloud's, or EndpointURL when that is set (the simulator serves
	// both on one address).
	AuthorityURL string `json:"authority_url"`
	// OSImages override the images (name: a Resource Manager image id
	// /subscriptions/..., a community or shared gallery image id
	// /CommunityGalleries/... or /SharedGalleries/..., or a marketplace URN
	// publisher:offer:sku:version) and their login user (Azure refuses root
	// as adminUsername; the simulator, whose VMs log in users of this host,
	// takes it). An owner is refused.
	OSImages *vm.OSImages `json:"os_images"`
}

// creds are dstack's AzureClientCreds / AzureDefaultCreds.
type creds struct {
	Type         string `json:"type"`
	ClientID     string `json:"client_id"`
	ClientSecret string `json:"client_secret"`
	TenantID     string `json:"tenant_id"`
}

// dstack's VM images: its public community gallery
// (src/dstack/_internal/core/backends/azure/compute.py, _get_image_ref),
// logged into as ubuntu.
const (
	defaultGallery = "/CommunityGalleries/dstack-ebac134d-04b9-4c2b-8b6c-ad3e73904aa7/Images/"
	defaultCPU     = defaultGallery + "dstack-0.14"
	defaultNVIDIA  = defaultGallery + "dstack-cuda-0.14"
	defaultUser    = "ubuntu"
)

// defaultResourceGroup is the resource group made when none is configured
// (dstack makes dstack-<project>; a hoist backend serves every project).
const defaultResourceGroup = "hoist"

// maxNameLen is the longest Azure Linux VM name
// (https://learn.microsoft.com/azure/azure-resource-manager/management/resource-name-rules#microsoftcompute).
const maxNameLen = 64

// checkTimeout bounds the credential check at start.
const checkTimeout = 60 * time.Second

// Factory builds an Azure backend from its server-config entry. It checks
// the credentials with a token and one GET of the resource group, which it
// creates when missing.
func Factory(cfg backends.Config, deps backends.Deps) (backends.Backend, error) {
	ctx, cancel := context.WithTimeout(context.Background(), checkTimeout)
	defer cancel()
	return open(ctx, cfg, deps, nil)
}

// open is Factory with an HTTP transport for the SDK; nil is Go's default
// client (which trusts SSL_CERT_FILE). Tests give the client of an
// in-process simulator.
func open(ctx context.Context, cfg backends.Config, deps backends.Deps, transport policy.Transporter) (backends.Backend, error) {
	var opts options
	if err := cfg.Decode(&opts); err != nil {
		return nil, err
	}
	p, user, err := newProvider(ctx, opts, deps.Logger, transport)
	if err != nil {
		return nil, err
	}
	return vm.New(vm.Config{
		Name: cfg.BackendName(), Type: Type, Provider: p, Regions: opts.Regions, User: user, Deps: deps, MaxNameLen: maxNameLen,
	})
}

// tagName is what Azure allows in a tag name: no < > % & \ ? /, at most 512
// characters (https://learn.microsoft.com/azure/azure-resource-manager/management/tag-resources#limitations).
var tagName = regexp.MustCompile(`^[^<>%&\\?/]{1,512}$`)

// newProvider validates opts, builds the SDK clients and checks the
// credentials. It returns the login user of the images.
func newProvider(ctx context.Context, opts options, log *slog.Logger, transport policy.Transporter) (*provider, string, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	switch {
	case opts.TenantID == "":
		return nil, "", errors.New("tenant_id is required")
	case opts.SubscriptionID == "":
		return nil, "", errors.New("subscription_id is required")
	case opts.Creds == nil:
		return nil, "", errors.New("creds is required ({type: client, client_id, client_secret} or {type: default})")
	case len(opts.VPCIDs) > 0:
		return nil, "", errors.New("vpc_ids is not supported: name the subnet per location with subnet_ids (location: resource-group/network/subnet)")
	}
	for k, v := range opts.Tags {
		if !tagName.MatchString(k) || len(v) > 256 {
			return nil, "", fmt.Errorf("tags: %q: Azure tag names are 1-512 characters without <>%%&\\?/ and values at most 256", k)
		}
	}
	subnets := map[string]string{}
	for loc, s := range opts.SubnetIDs {
		parts := strings.Split(s, "/")
		if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
			return nil, "", fmt.Errorf("subnet_ids: %s: %q is not resource-group/network/subnet", loc, s)
		}
		subnets[strings.ToLower(loc)] = fmt.Sprintf("/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Network/virtualNetworks/%s/subnets/%s",
			opts.SubscriptionID, parts[0], parts[1], parts[2])
	}
	cpu, nvidia, err := opts.OSImages.Resolve(vm.OSImage{Name: defaultCPU, User: defaultUser}, vm.OSImage{Name: defaultNVIDIA, User: defaultUser}, false)
	if err != nil {
		return nil, "", err
	}
	cpuRef, err := imageReference(cpu.Name)
	if err != nil {
		return nil, "", fmt.Errorf("os_images.cpu.name: %w", err)
	}
	nvidiaRef, err := imageReference(nvidia.Name)
	if err != nil {
		return nil, "", fmt.Errorf("os_images.nvidia.name: %w", err)
	}

	cloudCfg := cloud.AzurePublic
	if opts.EndpointURL != "" || opts.AuthorityURL != "" {
		if opts.EndpointURL == "" {
			return nil, "", errors.New("authority_url needs endpoint_url")
		}
		authority := opts.AuthorityURL
		if authority == "" {
			authority = opts.EndpointURL
		}
		for _, kv := range [][2]string{{"endpoint_url", opts.EndpointURL}, {"authority_url", authority}} {
			if u, err := url.Parse(kv[1]); err != nil || u.Scheme != "https" || u.Host == "" {
				return nil, "", fmt.Errorf("%s: %q is not an https URL (Azure sends credentials over https only)", kv[0], kv[1])
			}
		}
		endpoint := strings.TrimSuffix(opts.EndpointURL, "/")
		cloudCfg = cloud.Configuration{
			ActiveDirectoryAuthorityHost: strings.TrimSuffix(authority, "/") + "/",
			Services: map[cloud.ServiceName]cloud.ServiceConfiguration{
				cloud.ResourceManager: {Endpoint: endpoint, Audience: endpoint},
			},
		}
	}
	clientOpts := azcore.ClientOptions{Cloud: cloudCfg, Transport: transport}
	// Instance discovery asks login.microsoftonline.com whether the
	// authority is known; a configured authority is trusted as given.
	customAuthority := opts.EndpointURL != ""
	cred, err := credential(opts, clientOpts, customAuthority)
	if err != nil {
		return nil, "", err
	}
	armOpts := &arm.ClientOptions{ClientOptions: clientOpts}
	p := &provider{
		sub: opts.SubscriptionID, rg: opts.ResourceGroup, regions: opts.Regions, subnets: subnets,
		publicIPs: opts.PublicIPs == nil || *opts.PublicIPs, tags: opts.Tags, log: log,
		images: map[bool]*armcompute.ImageReference{false: cpuRef, true: nvidiaRef},
		nets:   map[string]*network{}, gwNSGs: map[string]string{}, addrs: map[string]vmAddrs{}, deleted: map[string]bool{},
		poll: 2 * time.Second,
	}
	if p.rg == "" {
		p.rg = defaultResourceGroup
	}
	if opts.VMManagedIdentity != "" {
		rg, nm, ok := strings.Cut(opts.VMManagedIdentity, "/")
		if !ok || rg == "" || nm == "" || strings.Contains(nm, "/") {
			return nil, "", fmt.Errorf("vm_managed_identity: %q is not resource-group/name", opts.VMManagedIdentity)
		}
		id := fmt.Sprintf("/subscriptions/%s/resourceGroups/%s/providers/Microsoft.ManagedIdentity/userAssignedIdentities/%s", p.sub, rg, nm)
		p.identity = &armcompute.VirtualMachineIdentity{
			Type:                   ptr(armcompute.ResourceIdentityTypeUserAssigned),
			UserAssignedIdentities: map[string]*armcompute.UserAssignedIdentitiesValue{id: {}},
		}
	}
	if p.arm, err = arm.NewClient("hoist/backends/azure", "v1.0.0", cred, armOpts); err != nil {
		return nil, "", err
	}
	if p.vms, err = armcompute.NewVirtualMachinesClient(p.sub, cred, armOpts); err != nil {
		return nil, "", err
	}
	if p.disks, err = armcompute.NewDisksClient(p.sub, cred, armOpts); err != nil {
		return nil, "", err
	}
	if p.nics, err = armnetwork.NewInterfacesClient(p.sub, cred, armOpts); err != nil {
		return nil, "", err
	}
	if p.pips, err = armnetwork.NewPublicIPAddressesClient(p.sub, cred, armOpts); err != nil {
		return nil, "", err
	}
	if p.vnets, err = armnetwork.NewVirtualNetworksClient(p.sub, cred, armOpts); err != nil {
		return nil, "", err
	}
	if p.nsgs, err = armnetwork.NewSecurityGroupsClient(p.sub, cred, armOpts); err != nil {
		return nil, "", err
	}
	if err := p.ensureResourceGroup(ctx); err != nil {
		return nil, "", fmt.Errorf("checking credentials: %w", err)
	}
	return p, cpu.User, nil
}

// credential builds the configured credential: a service principal's
// secret, or azidentity's default chain (environment, workload identity,
// managed identity, Azure CLI).
func credential(opts options, clientOpts azcore.ClientOptions, customAuthority bool) (azcore.TokenCredential, error) {
	c := opts.Creds
	tenant := opts.TenantID
	if c.TenantID != "" {
		tenant = c.TenantID
	}
	switch c.Type {
	case "client":
		if c.ClientID == "" || c.ClientSecret == "" {
			return nil, errors.New("creds: type client needs client_id and client_secret")
		}
		return azidentity.NewClientSecretCredential(tenant, c.ClientID, c.ClientSecret, &azidentity.ClientSecretCredentialOptions{
			ClientOptions: clientOpts, DisableInstanceDiscovery: customAuthority,
		})
	case "default":
		if c.ClientID != "" || c.ClientSecret != "" || c.TenantID != "" {
			return nil, errors.New("creds: type default takes no client_id, client_secret or tenant_id")
		}
		return azidentity.NewDefaultAzureCredential(&azidentity.DefaultAzureCredentialOptions{
			ClientOptions: clientOpts, DisableInstanceDiscovery: customAuthority, TenantID: tenant,
		})
	}
	return nil, fmt.Errorf("creds: type %q: want client or default", c.Type)
}

// imageReference parses an os_images name.
func imageReference(name string) (*armcompute.ImageReference, error) {
	lower := strings.ToLower(name)
	switch {
	case strings.HasPrefix(lower, "/communitygalleries/"):
		return &armcompute.ImageReference{CommunityGalleryImageID: &name}, nil
	case strings.HasPrefix(lower, "/sharedgalleries/"):
		return &armcompute.ImageReference{SharedGalleryImageID: &name}, nil
	case strings.HasPrefix(lower, "/subscriptions/"):
		return &armcompute.ImageReference{ID: &name}, nil
	}
	parts := strings.Split(name, ":")
	if len(parts) != 4 || slicesContainEmpty(parts) {
		return nil, fmt.Errorf("%q is neither an image id (/subscriptions/..., /CommunityGalleries/..., /SharedGalleries/...) nor publisher:offer:sku:version", name)
	}
	return &armcompute.ImageReference{Publisher: &parts[0], Offer: &parts[1], SKU: &parts[2], Version: &parts[3]}, nil
}

func slicesContainEmpty(s []string) bool {
	for _, v := range s {
		if v == "" {
			return true
		}
	}
	return false
}

func ptr[T any](v T) *T { return &v }

// provider is the Azure vm.Provider (and vm.VolumeProvider).
type provider struct {
	sub, rg   string
	regions   []string
	subnets   map[string]string // location → configured subnet id (subnet_ids)
	publicIPs bool
	tags      map[string]string
	identity  *armcompute.VirtualMachineIdentity
	images    map[bool]*armcompute.ImageReference // by "has NVIDIA GPUs"
	log       *slog.Logger
	poll      time.Duration // poll interval of awaited long-running operations

	arm   *arm.Client
	vms   *armcompute.VirtualMachinesClient
	disks *armcompute.DisksClient
	nics  *armnetwork.InterfacesClient
	pips  *armnetwork.PublicIPAddressesClient
	vnets *armnetwork.VirtualNetworksClient
	nsgs  *armnetwork.SecurityGroupsClient

	mu      sync.Mutex
	nets    map[string]*network // by location, once made
	gwNSGs  map[string]string   // gateways' network security group id by location, once made
	addrs   map[string]vmAddrs  // VM ref → addresses, once known (they do not change)
	deleted map[string]bool     // VM refs this process deleted (not spot evictions)
}

var (
	_ vm.Provider       = (*provider)(nil)
	_ vm.VolumeProvider = (*provider)(nil)
)
