package runpod

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"hoist/backends"
)

// RunPod's answers that change what an error means. The out-of-stock
// messages and code are those dstack meets
// (src/dstack/_internal/core/backends/runpod/compute.py runs into them on
// podFindAndDeployOnDemand and podRentInterruptable); "pod not found to
// terminate" is podTerminate's answer for an unknown pod (compute.py,
// terminate_instance).
const (
	codeSupplyConstraint = "SUPPLY_CONSTRAINT"
	msgNoInstances       = "there are no longer any instances available"
	msgNoResources       = "does not have the resources to deploy your pod"
	msgNotFound          = "pod not found to terminate"
)

// noCapacity reports whether ge is RunPod's out-of-stock answer.
func noCapacity(ge GraphQLError) bool {
	m := strings.ToLower(ge.Message)
	return ge.Code() == codeSupplyConstraint || strings.Contains(m, msgNoInstances) || strings.Contains(m, msgNoResources)
}

// podNotFound reports whether err is podTerminate's "pod not found".
func podNotFound(err error) bool {
	var ae *APIError
	if !errors.As(err, &ae) {
		return false
	}
	for _, ge := range ae.Errors {
		if strings.EqualFold(strings.TrimSpace(ge.Message), msgNotFound) {
			return true
		}
	}
	return false
}

// classify classifies an API error: out of stock wraps ErrNoCapacity (the
// reconciler tries the next offer); 401/403 (a bad or revoked key) need the
// user; 429, 5xx, transport failures and GraphQL's INTERNAL_SERVER_ERROR
// are transient; any other GraphQL error (a request RunPod refuses) needs
// the user.
func classify(err error) error {
	if err == nil {
		return nil
	}
	var ae *APIError
	if !errors.As(err, &ae) {
		return backends.Transient(err)
	}
	for _, ge := range ae.Errors {
		if noCapacity(ge) {
			return fmt.Errorf("%w: %w", backends.ErrNoCapacity, err)
		}
	}
	switch {
	case ae.Status == http.StatusUnauthorized || ae.Status == http.StatusForbidden:
		return backends.Stalled(err)
	case ae.Status == http.StatusTooManyRequests || ae.Status >= 500:
		return backends.Transient(err)
	}
	for _, ge := range ae.Errors {
		if ge.Code() == "INTERNAL_SERVER_ERROR" {
			return backends.Transient(err)
		}
	}
	return backends.Stalled(err)
}
