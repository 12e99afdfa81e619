package lambda

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"hoist/backends"
	"hoist/backends/vm"
)

// Options are dstack's lambda backend entry
// (src/dstack/_internal/core/backends/lambdalabs/models.py,
// LambdaBackendConfigWithCreds) plus endpoint_url and os_images.
type Options struct {
	// Creds are {type: api_key, api_key}; required.
	Creds *Creds `json:"creds"`
	// Regions are the regions to offer and launch in; empty means every
	// region of the catalog.
	Regions []string `json:"regions"`
	// OSImages override the image family launched (Lambda's launch
	// image.family) and its login user; without them Lambda's default
	// image, logged into as ubuntu.
	OSImages *vm.OSImages `json:"os_images"`
	// EndpointURL overrides the API base URL (the simulator).
	EndpointURL string `json:"endpoint_url"`
}

// Creds are dstack's Lambda credentials.
type Creds struct {
	// Type is api_key (the default).
	Type string `json:"type"`
	// APIKey is the Cloud API key.
	APIKey string `json:"api_key"`
}

// Default images: Lambda's default (Lambda Stack, no image in the launch),
// logged into as ubuntu, as dstack's lambdalabs compute.py does.
var (
	defaultCPUImage    = vm.OSImage{User: "ubuntu"}
	defaultNVIDIAImage = vm.OSImage{User: "ubuntu"}
)

// maxNameLen is Lambda's instance name limit (64) less the installation
// marker ("-" and 6 hex digits) the driver appends.
const maxNameLen = 64 - 1 - markerLen

// checkTimeout bounds the credentials check at start.
const checkTimeout = 30 * time.Second

// Factory builds the Lambda backend from its server-config entry: it checks
// the options, then the API key (GET /instance-types).
func Factory(cfg backends.Config, deps backends.Deps) (backends.Backend, error) {
	var o Options
	if err := cfg.Decode(&o); err != nil {
		return nil, err
	}
	name := cfg.BackendName()
	p, err := newProvider(name, o, deps)
	if err != nil {
		return nil, fmt.Errorf("backend %q (type lambda): %w", name, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), checkTimeout)
	defer cancel()
	if err := p.check(ctx); err != nil {
		return nil, fmt.Errorf("backend %q (type lambda): checking the API key: %w", name, err)
	}
	inner, err := vm.New(vm.Config{
		Name:       name,
		Type:       "lambda",
		Provider:   p,
		Regions:    p.regions,
		User:       p.cpuImage.User,
		Deps:       deps,
		MaxNameLen: maxNameLen,
	})
	if err != nil {
		return nil, fmt.Errorf("backend %q (type lambda): %w", name, err)
	}
	vb, ok := inner.(*vm.Backend)
	if !ok {
		return nil, fmt.Errorf("backend %q (type lambda): the vm engine returned %T", name, inner)
	}
	return &Backend{Backend: vb, prov: p}, nil
}

// newProvider validates o and builds the API client.
func newProvider(name string, o Options, deps backends.Deps) (*Provider, error) {
	switch {
	case o.Creds == nil:
		return nil, errors.New("creds is required (type api_key)")
	case o.Creds.Type != "" && o.Creds.Type != "api_key": // dstack defaults it to api_key
		return nil, fmt.Errorf("creds.type: %q is not supported (api_key)", o.Creds.Type)
	case o.Creds.APIKey == "":
		return nil, errors.New("creds.api_key is required")
	case deps.Records == nil:
		return nil, errors.New("records are required")
	}
	endpoint, err := backends.EndpointURL(o.EndpointURL, DefaultEndpoint)
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
	now := deps.Now
	if now == nil {
		now = time.Now
	}
	return &Provider{
		backend:  name,
		api:      newClient(endpoint, o.Creds.APIKey),
		regions:  regions,
		cpuImage: cpu,
		gpuImage: nvidia,
		recs:     deps.Records,
		recName:  name + ".names",
		now:      now,
	}, nil
}

// check calls GET /instance-types, which fails on a bad key.
func (p *Provider) check(ctx context.Context) error {
	_, err := p.api.instanceTypes(ctx)
	return classify(err)
}
