package aws

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"hoist/backends"
	"hoist/backends/vm"
)

// Options are dstack's AWS backend entry
// (src/dstack/_internal/core/backends/aws/models.py, AWSBackendConfigWithCreds)
// plus endpoint_url.
type Options struct {
	// Creds are access_key {access_key, secret_key} or default (the SDK's
	// default chain: environment, shared config, instance role).
	Creds *Creds `json:"creds"`
	// Regions are the regions to offer and launch in; empty means dstack's
	// default regions.
	Regions []string `json:"regions"`
	// VPCName names the VPC (its Name tag) to launch into in every
	// region; VPCIDs gives it by region instead. Regions without either
	// use their default VPC, unless DefaultVPCs is false.
	VPCName     string            `json:"vpc_name"`
	VPCIDs      map[string]string `json:"vpc_ids"`
	DefaultVPCs *bool             `json:"default_vpcs"`
	// PublicIPs says whether hoist reaches instances at their public IP
	// (the default) or their private one.
	PublicIPs *bool `json:"public_ips"`
	// IAMInstanceProfile is the instance profile name given to instances.
	IAMInstanceProfile string `json:"iam_instance_profile"`
	// Tags are added to every resource hoist creates; hoist's ownership
	// tags win over them.
	Tags map[string]string `json:"tags"`
	// OSImages override the AMIs (found by name and owner) and their login
	// user.
	OSImages *vm.OSImages `json:"os_images"`
	// EndpointURL overrides the EC2 endpoint (the simulator, sovereign
	// partitions).
	EndpointURL string `json:"endpoint_url"`
}

// Creds are dstack's AWS credentials.
type Creds struct {
	// Type is access_key or default.
	Type      string `json:"type"`
	AccessKey string `json:"access_key"`
	SecretKey string `json:"secret_key"`
}

// defaultRegions are dstack's default AWS regions
// (src/dstack/_internal/core/backends/aws/configurator.py, REGIONS).
var defaultRegions = []string{
	"us-east-1", "us-east-2", "us-west-1", "us-west-2", "ap-southeast-1", "ca-central-1",
	"eu-central-1", "eu-west-1", "eu-west-2", "eu-west-3", "eu-north-1",
}

// Default images are dstack's (src/dstack/_internal/core/backends/aws/resources.py,
// get_image_id_and_username): its own CPU image and AWS's Deep Learning
// Base AMI for NVIDIA GPUs, both logged into as ubuntu.
var (
	defaultCPUImage    = vm.OSImage{Name: "dstack-0.14", Owner: "142421590066", User: "ubuntu"}
	defaultNVIDIAImage = vm.OSImage{Name: "Deep Learning Base OSS Nvidia Driver GPU AMI (Ubuntu 22.04) *", Owner: "898082745236", User: "ubuntu"}
)

// attemptTimeout bounds one attempt of an EC2 call, from the request to the
// end of the answer. EC2's calls answer in seconds; RunInstances returns
// before the instance runs.
const attemptTimeout = 60 * time.Second

// checkTimeout bounds the credentials check at start.
const checkTimeout = 30 * time.Second

// Factory builds the AWS backend from its server-config entry: it checks the
// options, then the credentials with one DescribeAvailabilityZones call in
// the first region.
func Factory(cfg backends.Config, deps backends.Deps) (backends.Backend, error) {
	var o Options
	if err := cfg.Decode(&o); err != nil {
		return nil, err
	}
	name := cfg.BackendName()
	p, err := newProvider(o, deps)
	if err != nil {
		return nil, fmt.Errorf("backend %q (type aws): %w", name, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), checkTimeout)
	defer cancel()
	if err := p.check(ctx); err != nil {
		return nil, fmt.Errorf("backend %q (type aws): checking credentials in %s: %w", name, p.regions[0], err)
	}
	return vm.New(vm.Config{
		Name:       name,
		Type:       "aws",
		Provider:   p,
		Regions:    p.regions,
		User:       p.cpuImage.User,
		Deps:       deps,
		MaxNameLen: 255, // EC2 tag values (the Name tag)
	})
}

// newProvider validates o and builds the provider's SDK configuration.
func newProvider(o Options, deps backends.Deps) (*Provider, error) {
	if o.VPCName != "" && len(o.VPCIDs) > 0 {
		return nil, errors.New("vpc_name and vpc_ids: set one of them, not both")
	}
	if o.Creds == nil {
		return nil, errors.New("creds is required (type access_key or default)")
	}
	var loadOpts []func(*config.LoadOptions) error
	switch o.Creds.Type {
	case "access_key":
		if o.Creds.AccessKey == "" || o.Creds.SecretKey == "" {
			return nil, errors.New("creds: access_key and secret_key are required for type access_key")
		}
		loadOpts = append(loadOpts, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(o.Creds.AccessKey, o.Creds.SecretKey, "")))
	case "default":
		if o.Creds.AccessKey != "" || o.Creds.SecretKey != "" {
			return nil, errors.New("creds: type default takes no access_key or secret_key")
		}
	default:
		return nil, fmt.Errorf("creds: type %q is not supported (access_key or default)", o.Creds.Type)
	}
	regions := slices.Clone(o.Regions)
	if len(regions) == 0 {
		regions = slices.Clone(defaultRegions)
	}
	for _, r := range regions {
		if r == "" {
			return nil, errors.New("regions: empty region name")
		}
	}
	defaultVPCs := o.DefaultVPCs == nil || *o.DefaultVPCs
	if !defaultVPCs && o.VPCName == "" {
		// Without default VPCs, only the regions vpc_ids names can launch
		// (dstack's default_vpcs: false).
		regions = slices.DeleteFunc(regions, func(r string) bool { return o.VPCIDs[r] == "" })
		if len(regions) == 0 {
			return nil, errors.New("default_vpcs: false, and vpc_ids names none of the regions: nowhere to launch")
		}
	}
	cpu, nvidia, err := o.OSImages.Resolve(defaultCPUImage, defaultNVIDIAImage, true)
	if err != nil {
		return nil, err
	}
	// Every attempt is bounded: without a timeout, a call whose answer
	// never comes holds its worker for good. The SDK retries an attempt
	// that timed out (a RunInstances with the same client token, so a
	// create that went through is found, not made twice).
	loadOpts = append(loadOpts, config.WithRegion(regions[0]),
		config.WithHTTPClient(awshttp.NewBuildableClient().WithTimeout(attemptTimeout)))
	awsCfg, err := config.LoadDefaultConfig(context.Background(), loadOpts...)
	if err != nil {
		return nil, fmt.Errorf("creds: %w", err)
	}
	p := &Provider{
		cfg:       awsCfg,
		endpoint:  o.EndpointURL,
		regions:   regions,
		publicIPs: o.PublicIPs == nil || *o.PublicIPs,
		vpcName:   o.VPCName,
		vpcIDs:    o.VPCIDs,
		nets:      map[string]network{},
		profile:   o.IAMInstanceProfile,
		tags:      o.Tags,
		cpuImage:  cpu,
		gpuImage:  nvidia,
		now:       deps.Now,
		clients:   map[string]*ec2.Client{},
		images:    map[string]image{},
		groups:    map[string]string{},
		launched:  map[string]time.Time{},
		zones:     map[string]string{},
	}
	if p.now == nil {
		p.now = time.Now
	}
	return p, nil
}

// client returns the EC2 client of region.
func (p *Provider) client(region string) *ec2.Client {
	p.mu.Lock()
	defer p.mu.Unlock()
	c, ok := p.clients[region]
	if !ok {
		c = ec2.NewFromConfig(p.cfg, func(o *ec2.Options) {
			o.Region = region
			if p.endpoint != "" {
				o.BaseEndpoint = awssdk.String(p.endpoint)
			}
		})
		p.clients[region] = c
	}
	return c
}

// check makes one cheap authenticated call to verify the credentials.
func (p *Provider) check(ctx context.Context) error {
	_, err := p.client(p.regions[0]).DescribeAvailabilityZones(ctx, &ec2.DescribeAvailabilityZonesInput{})
	return classify(err)
}
