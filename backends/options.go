package backends

import (
	"fmt"
	"net/url"
	"strings"
)

// CheckRegions rejects a configured region that no provider could name
// (the drivers' config checks):
// empty, or holding a slash or a space. noun is what the provider calls a
// region ("region name", "location code", ...), for the message.
func CheckRegions(regions []string, noun string) error {
	for _, r := range regions {
		if r == "" || strings.ContainsAny(r, "/ ") {
			return fmt.Errorf("regions: %q is not a %s", r, noun)
		}
	}
	return nil
}

// EndpointURL returns a driver's API base URL: the configured
// endpoint_url, else def, once it is an absolute http(s) URL.
func EndpointURL(configured, def string) (string, error) {
	endpoint := configured
	if endpoint == "" {
		endpoint = def
	}
	if u, err := url.Parse(endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("endpoint_url: %q is not an http(s) URL", endpoint)
	}
	return endpoint, nil
}
