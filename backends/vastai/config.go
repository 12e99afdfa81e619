package vastai

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/cache"

	"hoist/backends"
)

// Options are dstack's vastai backend entry
// (src/dstack/_internal/core/backends/vastai/models.py,
// VastAIBackendConfigWithCreds) plus endpoint_url.
type Options struct {
	// Creds are {type: api_key, api_key}; required.
	Creds *Creds `json:"creds"`
	// Regions are the host locations to offer and rent in, matched
	// case-insensitively against an ask's geolocation ("Quebec, CA") or
	// one of its comma-separated parts ("CA"); empty means everywhere.
	Regions []string `json:"regions"`
	// CommunityCloud admits hosts that are not in a datacenter; nil means
	// true, dstack's default for vastai.
	CommunityCloud *bool `json:"community_cloud"`
	// EndpointURL overrides the API base URL (the simulator).
	EndpointURL string `json:"endpoint_url"`
}

// Creds are dstack's Vast.ai credentials.
type Creds struct {
	// Type is api_key (the default).
	Type string `json:"type"`
	// APIKey is the account's API key.
	APIKey string `json:"api_key"`
}

// backendType is hoist's backend type and the default backend name.
const backendType = "vastai"

// NewProvider validates opts and returns the driver's Provider, calling
// the API through httpClient (a client with dstack's 30 s timeout when
// nil) and logging to log (slog.Default when nil).
func NewProvider(opts Options, httpClient *http.Client, log *slog.Logger) (*Provider, error) {
	switch {
	case opts.Creds == nil:
		return nil, errors.New("creds is required (type api_key)")
	case opts.Creds.Type != "" && opts.Creds.Type != "api_key": // dstack defaults it to api_key
		return nil, fmt.Errorf("creds.type: %q is not supported (api_key)", opts.Creds.Type)
	case opts.Creds.APIKey == "":
		return nil, errors.New("creds.api_key is required")
	}
	endpoint, err := backends.EndpointURL(opts.EndpointURL, DefaultEndpoint)
	if err != nil {
		return nil, err
	}
	regions := slices.Clone(opts.Regions)
	for _, r := range regions {
		if strings.TrimSpace(r) == "" {
			return nil, errors.New("regions: an empty location")
		}
	}
	if log == nil {
		log = slog.Default()
	}
	return &Provider{
		backend:   backendType,
		api:       newClient(endpoint, opts.Creds.APIKey, httpClient),
		regions:   regions,
		community: opts.CommunityCloud == nil || *opts.CommunityCloud,
		log:       log,
		cache:     cache.NewLRUExpireCache(offersCacheSize),
	}, nil
}
