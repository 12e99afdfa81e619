package gcp

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"cloud.google.com/go/auth"
	"cloud.google.com/go/auth/credentials"
	compute "cloud.google.com/go/compute/apiv1"
	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/api/option"

	"hoist/backends"
	"hoist/backends/vm"
)

// Options are dstack's GCP backend entry
// (src/dstack/_internal/core/backends/gcp/models.py, GCPBackendConfigWithCreds)
// plus endpoint_url and os_images.
type Options struct {
	// ProjectID is the project instances are created in; required.
	ProjectID string `json:"project_id"`
	// Creds are service_account {filename | data} (a key file) or default
	// (Application Default Credentials).
	Creds *Creds `json:"creds"`
	// Regions are the regions to offer and launch in; empty means every
	// region of the catalog.
	Regions []string `json:"regions"`
	// VPCName is the network instances attach to; empty means "default".
	// A custom-mode network must have a subnet in every region used.
	VPCName string `json:"vpc_name"`
	// PublicIPs says whether instances get an external IP that hoist
	// reaches them at (the default) or only an internal one.
	PublicIPs *bool `json:"public_ips"`
	// VMServiceAccount is the email of the service account instances run
	// as (scope cloud-platform); empty means none.
	VMServiceAccount string `json:"vm_service_account"`
	// Tags are added as labels to every resource hoist creates (sanitized
	// to GCP's label rules); hoist's ownership labels win over them.
	Tags map[string]string `json:"tags"`
	// OSImages override the boot images (name: an image path such as
	// projects/p/global/images/i or .../images/family/f) and their login
	// user.
	OSImages *vm.OSImages `json:"os_images"`
	// EndpointURL overrides the Compute endpoint (the simulator, private
	// endpoints).
	EndpointURL string `json:"endpoint_url"`

	// Keys of dstack's entry hoist does not honour; set, they are refused.
	VPCProjectID    string   `json:"vpc_project_id"`
	ExtraVPCs       []string `json:"extra_vpcs"`
	RoCEVPCs        []string `json:"roce_vpcs"`
	NATCheck        *bool    `json:"nat_check"`
	PreviewFeatures []string `json:"preview_features"`
}

// Creds are dstack's GCP credentials.
type Creds struct {
	// Type is service_account or default.
	Type string `json:"type"`
	// Filename is the path of a service-account key file.
	Filename string `json:"filename"`
	// Data is the content of a service-account key file.
	Data string `json:"data"`
}

// Default images are dstack's (src/dstack/_internal/core/backends/gcp/resources.py,
// get_image_id): its CPU and CUDA images, logged into as ubuntu.
var (
	defaultCPUImage    = vm.OSImage{Name: "projects/dstack/global/images/dstack-0-14", User: "ubuntu"}
	defaultNVIDIAImage = vm.OSImage{Name: "projects/dstack/global/images/dstack-cuda-0-14", User: "ubuntu"}
)

// checkTimeout bounds the credentials check at start.
const checkTimeout = 30 * time.Second

// Factory builds the GCP backend from its server-config entry: it checks
// the options, then the credentials (a token from the token endpoint and one
// regions.get of the first region, or zones.list without regions).
func Factory(cfg backends.Config, deps backends.Deps) (backends.Backend, error) {
	var o Options
	if err := cfg.Decode(&o); err != nil {
		return nil, err
	}
	name := cfg.BackendName()
	p, err := newProvider(context.Background(), name, o, deps)
	if err != nil {
		return nil, fmt.Errorf("backend %q (type gcp): %w", name, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), checkTimeout)
	defer cancel()
	if err := p.check(ctx); err != nil {
		p.Close()
		return nil, fmt.Errorf("backend %q (type gcp): checking credentials on project %s: %w", name, p.project, err)
	}
	b, err := vm.New(vm.Config{
		Name:       name,
		Type:       "gcp",
		Provider:   p,
		Regions:    p.regions,
		User:       p.cpuImage.User,
		Deps:       deps,
		MaxNameLen: 63, // RFC 1035 labels (https://cloud.google.com/compute/docs/naming-resources)
	})
	if err != nil {
		p.Close()
		return nil, fmt.Errorf("backend %q (type gcp): %w", name, err)
	}
	return b, nil
}

// newProvider validates o and builds the Compute clients.
func newProvider(ctx context.Context, name string, o Options, deps backends.Deps) (*Provider, error) {
	switch {
	case o.VPCProjectID != "":
		return nil, errors.New("vpc_project_id is not supported: hoist does not use shared VPCs yet")
	case len(o.ExtraVPCs) > 0:
		return nil, errors.New("extra_vpcs is not supported: hoist attaches one network interface")
	case len(o.RoCEVPCs) > 0:
		return nil, errors.New("roce_vpcs is not supported: hoist attaches one network interface")
	case o.NATCheck != nil:
		return nil, errors.New("nat_check is not supported: hoist does not check Cloud NAT")
	case len(o.PreviewFeatures) > 0:
		return nil, errors.New("preview_features is not supported")
	case o.ProjectID == "":
		return nil, errors.New("project_id is required")
	}
	creds, err := loadCreds(o.Creds)
	if err != nil {
		return nil, err
	}
	regions := slices.Clone(o.Regions)
	if err := backends.CheckRegions(regions, "region name"); err != nil {
		return nil, err
	}
	cpu, nvidia, err := o.OSImages.Resolve(defaultCPUImage, defaultNVIDIAImage, false)
	if err != nil {
		return nil, err
	}
	network := o.VPCName
	if network == "" {
		network = "default"
	}
	if !nameRE.MatchString(network) {
		return nil, fmt.Errorf("vpc_name: %q is not a network name", network)
	}
	labels := map[string]string{}
	for k, v := range o.Tags {
		lk, lv := labelKey(k), plainLabelValue(v)
		if lk == "" {
			return nil, fmt.Errorf("tags: key %q cannot be a GCP label key", k)
		}
		labels[lk] = lv
	}
	opts := []option.ClientOption{option.WithAuthCredentials(creds)}
	if o.EndpointURL != "" {
		opts = append(opts, option.WithEndpoint(strings.TrimSuffix(o.EndpointURL, "/")))
	}
	p := &Provider{
		backend:        name,
		project:        o.ProjectID,
		regions:        regions,
		network:        network,
		publicIPs:      o.PublicIPs == nil || *o.PublicIPs,
		serviceAccount: o.VMServiceAccount,
		labels:         labels,
		cpuImage:       cpu,
		gpuImage:       nvidia,
		logger:         deps.Logger,
		now:            deps.Now,
		zones:          map[string][]string{},
		firewall:       map[string]bool{},
	}
	if p.now == nil {
		p.now = time.Now
	}
	if p.instances, err = compute.NewInstancesRESTClient(ctx, opts...); err != nil {
		return nil, fmt.Errorf("compute client: %w", err)
	}
	if p.disks, err = compute.NewDisksRESTClient(ctx, opts...); err != nil {
		p.Close()
		return nil, fmt.Errorf("compute client: %w", err)
	}
	if p.policies, err = compute.NewResourcePoliciesRESTClient(ctx, opts...); err != nil {
		p.Close()
		return nil, fmt.Errorf("compute client: %w", err)
	}
	if p.regionsClient, err = compute.NewRegionsRESTClient(ctx, opts...); err != nil {
		p.Close()
		return nil, fmt.Errorf("compute client: %w", err)
	}
	if p.zonesClient, err = compute.NewZonesRESTClient(ctx, opts...); err != nil {
		p.Close()
		return nil, fmt.Errorf("compute client: %w", err)
	}
	if p.firewalls, err = compute.NewFirewallsRESTClient(ctx, opts...); err != nil {
		p.Close()
		return nil, fmt.Errorf("compute client: %w", err)
	}
	return p, nil
}

// loadCreds loads dstack's creds: a service-account key (file or data) or
// Application Default Credentials, scoped for Compute Engine.
func loadCreds(c *Creds) (*auth.Credentials, error) {
	if c == nil {
		return nil, errors.New("creds is required (type service_account or default)")
	}
	detect := &credentials.DetectOptions{Scopes: compute.DefaultAuthScopes()}
	switch c.Type {
	case "service_account":
		data := []byte(c.Data)
		switch {
		case c.Filename != "" && c.Data != "":
			return nil, errors.New("creds: filename and data are exclusive")
		case c.Filename != "":
			b, err := os.ReadFile(c.Filename)
			if err != nil {
				return nil, fmt.Errorf("creds: %w", err)
			}
			data = b
		case c.Data == "":
			return nil, errors.New("creds: filename or data is required for type service_account")
		}
		creds, err := credentials.NewCredentialsFromJSON(credentials.ServiceAccount, data, detect)
		if err != nil {
			return nil, fmt.Errorf("creds: service account key: %w", err)
		}
		return creds, nil
	case "default":
		if c.Filename != "" || c.Data != "" {
			return nil, errors.New("creds: type default takes no filename or data")
		}
		creds, err := credentials.DetectDefault(detect)
		if err != nil {
			return nil, fmt.Errorf("creds: application default credentials: %w", err)
		}
		return creds, nil
	}
	return nil, fmt.Errorf("creds: type %q is not supported (service_account or default)", c.Type)
}

// check makes one cheap authenticated call (after the token exchange) to
// verify the credentials and the project.
func (p *Provider) check(ctx context.Context) error {
	if len(p.regions) > 0 {
		_, err := p.regionZones(ctx, p.regions[0])
		return err
	}
	it := p.zonesClient.List(ctx, &computepb.ListZonesRequest{Project: p.project, MaxResults: ptr(uint32(1))})
	_, err := it.Next()
	if err != nil && !isDone(err) {
		return classify(err)
	}
	return nil
}

// Close releases the Compute clients.
func (p *Provider) Close() {
	if p.instances != nil {
		_ = p.instances.Close()
	}
	if p.disks != nil {
		_ = p.disks.Close()
	}
	if p.policies != nil {
		_ = p.policies.Close()
	}
	if p.regionsClient != nil {
		_ = p.regionsClient.Close()
	}
	if p.zonesClient != nil {
		_ = p.zonesClient.Close()
	}
	if p.firewalls != nil {
		_ = p.firewalls.Close()
	}
}

func ptr[T any](v T) *T { return &v }
