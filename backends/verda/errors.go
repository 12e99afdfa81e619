package verda

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"hoist/backends"
)

// classify classifies an API error outside launches: 404 wraps
// ErrNotFound; 429, 5xx and network errors are transient; 401, 402
// (insufficient_funds), 403 and other client errors need the user
// (stalled).
func classify(err error) error {
	if err == nil {
		return nil
	}
	var ae *APIError
	if !errors.As(err, &ae) {
		return backends.Transient(err)
	}
	switch {
	case ae.Status == http.StatusNotFound:
		return fmt.Errorf("%w: %w", backends.ErrNotFound, err)
	case ae.Status == http.StatusTooManyRequests || ae.Status >= 500:
		return backends.Transient(err)
	}
	return backends.Stalled(err)
}

// classifyLaunch classifies a POST /instances error. dstack treats every
// error of the call as no capacity
// (src/dstack/_internal/core/backends/verda/compute.py); hoist keeps bad
// credentials, missing funds and forbidden actions as stalled and rate
// limits as transient, and takes the rest (service_unavailable "no
// capacity", invalid_request for a type not deployable in the location)
// as no capacity so that the next offer is tried.
func classifyLaunch(err error) error {
	var ae *APIError
	if !errors.As(err, &ae) {
		return backends.Transient(err)
	}
	switch {
	case ae.Status == http.StatusUnauthorized, ae.Status == http.StatusPaymentRequired, ae.Status == http.StatusForbidden:
		return backends.Stalled(err)
	case ae.Status == http.StatusTooManyRequests:
		return backends.Transient(err)
	case ae.Status == http.StatusServiceUnavailable, ae.Status == http.StatusBadRequest, ae.Status == http.StatusNotFound,
		strings.Contains(strings.ToLower(ae.Message), "capacity"):
		return fmt.Errorf("%w: %w", backends.ErrNoCapacity, err)
	}
	return classify(err)
}

// isProvisioning says whether a delete was refused because the instance
// still provisions (dstack's "Can't discontinue a provisioning instance").
func isProvisioning(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && strings.Contains(ae.Message, "provisioning instance")
}

// isGone says whether an error says the instance is already gone (dstack's
// "Invalid instance id" and "Can't discontinue a discontinued instance").
func isGone(err error) bool {
	var ae *APIError
	if !errors.As(err, &ae) {
		return false
	}
	return ae.Status == http.StatusNotFound || strings.Contains(ae.Message, "Invalid instance id") ||
		strings.Contains(ae.Message, "discontinued instance")
}
