package runpod

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"hoist/backends"
)

// Options are dstack's runpod backend entry
// (src/dstack/_internal/core/backends/runpod/models.py,
// RunpodBackendConfigWithCreds) plus endpoint_url.
type Options struct {
	// Creds are {type: api_key, api_key}; required.
	Creds *Creds `json:"creds"`
	// Regions are the secure cloud's datacenter ids (CA-MTL-1) and, with
	// CommunityCloud, the community cloud's country codes (CA); empty
	// means every listed datacenter (and every country).
	Regions []string `json:"regions"`
	// CommunityCloud allows community-cloud offers next to the secure
	// cloud's; false by default, as dstack.
	CommunityCloud bool `json:"community_cloud"`
	// EndpointURL overrides the GraphQL endpoint (the simulator).
	EndpointURL string `json:"endpoint_url"`
}

// Creds are dstack's RunPod credentials.
type Creds struct {
	// Type is api_key (the default).
	Type string `json:"type"`
	// APIKey is the RunPod API key.
	APIKey string `json:"api_key"`
}

// secureRegion reports whether region is a secure-cloud datacenter id:
// those carry a dash, community regions are country codes (dstack's
// compute.py, _is_secure_cloud).
func secureRegion(region string) bool { return strings.Contains(region, "-") }

// check validates o and returns its endpoint.
func (o Options) check() (string, error) {
	switch {
	case o.Creds == nil:
		return "", errors.New("creds is required (type api_key)")
	case o.Creds.Type != "" && o.Creds.Type != "api_key":
		return "", fmt.Errorf("creds.type: %q is not supported (api_key)", o.Creds.Type)
	case o.Creds.APIKey == "":
		return "", errors.New("creds.api_key is required")
	}
	if err := backends.CheckRegions(o.Regions, "datacenter id or country code"); err != nil {
		return "", err
	}
	for _, r := range o.Regions {
		if !secureRegion(r) && !o.CommunityCloud {
			return "", fmt.Errorf("regions: %q is a community-cloud country; set community_cloud: true to use it", r)
		}
	}
	if i := slices.IndexFunc(o.Regions, func(r string) bool { return r != strings.ToUpper(r) }); i >= 0 {
		return "", fmt.Errorf("regions: %q must be upper case, as RunPod spells it", o.Regions[i])
	}
	return backends.EndpointURL(o.EndpointURL, DefaultEndpoint)
}
