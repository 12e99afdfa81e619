package lambda

import (
	"errors"
	"fmt"
	"net/http"

	"hoist/backends"
)

// Lambda's error codes that change what a response means
// (https://docs.lambda.ai/api/cloud, "Errors").
const (
	codeInsufficientCapacity = "instance-operations/launch/insufficient-capacity"
	codeNotFound             = "global/object-does-not-exist"
)

// classify classifies an API error: 404 and global/object-does-not-exist
// wrap ErrNotFound; an out-of-capacity launch wraps ErrNoCapacity (so that
// the reconciler tries the next offer); 429, 5xx and transport failures are
// transient; 401/403 (global/invalid-api-key, global/account-inactive),
// global/quota-exceeded and other client errors need the user (stalled).
func classify(err error) error {
	if err == nil {
		return nil
	}
	var ae *APIError
	if !errors.As(err, &ae) {
		return backends.Transient(err)
	}
	switch {
	case ae.Code == codeInsufficientCapacity:
		return fmt.Errorf("%w: %w", backends.ErrNoCapacity, err)
	case ae.Status == http.StatusNotFound || ae.Code == codeNotFound:
		return fmt.Errorf("%w: %w", backends.ErrNotFound, err)
	case ae.Status == http.StatusTooManyRequests || ae.Status >= 500:
		return backends.Transient(err)
	}
	return backends.Stalled(err)
}

// notFound reports whether err is Lambda's "no such object".
func notFound(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && (ae.Status == http.StatusNotFound || ae.Code == codeNotFound)
}
